"""Bad datagrams for a node's UDP port: random bytes, mutated and cut genuine datagrams,
valid-looking channel headers under a bad MAC, oversized packets, exact replays, requests
carrying expired or foreign tokens or non-zero padding, and responses to a challenge with a
forged challenge token. Each is made from genuine traffic (:class:`Material`) with one
thing spoiled, so that none is valid by accident; a node must refuse every one by cause and
answer none. Pure functions of a seeded :class:`random.Random` and the clock passed in.

Where a kind must come from matters: a bad MAC or a replayed sequence only meets a
channel's checks from the address that channel is connected to, and a forged response
only meets a challenge's from the address that was challenged (:data:`SOURCE_OF`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from shared.datagram import ConnectToken, issue_connect_token
from shared.datagram.constants import (
    KEY_BYTES,
    MAX_PAYLOAD,
    PROTOCOL_ID,
    PROTOCOL_VERSION,
    REQUEST_SIZE,
)
from shared.datagram.packets import CHALLENGE_TOKEN_BYTES, CHANNEL_HEADER, REQUEST_HEADER, Kind
from shared.datagram.sealing import TAG_BYTES, xseal

__all__ = [
    "ANY",
    "CHALLENGED",
    "CONNECTED",
    "FUZZ_KINDS",
    "SOURCE_OF",
    "Material",
    "forged_response",
    "fuzz_datagram",
    "mutate",
    "request_datagram",
]

Address = tuple[str, int]

#: Where a kind is sent from: any address, the address of a connected channel, or an
#: address with a challenge pending.
ANY, CONNECTED, CHALLENGED = "any", "connected", "challenged"

SOURCE_OF = {
    "random": ANY,
    "mutated": ANY,
    "truncated": ANY,
    "oversized": ANY,
    "bad_mac": CONNECTED,
    "replayed": CONNECTED,
    "expired_token": ANY,
    "foreign_token": ANY,
    "nonzero_padding": ANY,
    "forged_challenge": CHALLENGED,
}
FUZZ_KINDS = tuple(SOURCE_OF)

#: The largest UDP payload sent: past MAX_PAYLOAD, within a loopback's and Ethernet's MTU.
LARGEST_SENT = 1472


@dataclass(frozen=True, slots=True)
class Material:
    """Genuine traffic the bad datagrams are made from.

    ``genuine``: datagrams a real client sent (to mutate and cut); ``replays``: those that
    were already used, so that an exact copy must be refused (a request whose token was
    accepted, channel packets already received); ``request``: a genuine request (for its
    padding); ``challenged``: the token of an address with a challenge pending (forged
    responses are sealed under its key, so they pass the first check); ``node``: the
    address tokens made here list; ``region_key``: the region's key when known (expired
    tokens are then sealed under it, refused for their age alone)."""

    genuine: tuple[bytes, ...]
    replays: tuple[bytes, ...]
    request: bytes
    challenged: ConnectToken | None
    node: Address
    region_key: bytes | None = None


def request_datagram(private: bytes, version: int = PROTOCOL_VERSION, padding: int = 0) -> bytes:
    """A REQUEST for a private token: its header, the token, zeros (``padding`` set as the
    last byte) up to ``REQUEST_SIZE``."""
    head = REQUEST_HEADER.pack(Kind.REQUEST, version, PROTOCOL_ID) + private
    return head + bytes(REQUEST_SIZE - len(head) - 1) + bytes([padding])


def forged_response(client_to_server_key: bytes, rng: random.Random) -> bytes:
    """A RESPONSE sealed under the token's key (it authenticates) around a challenge token
    the node never sealed."""
    challenge = rng.randbytes(CHALLENGE_TOKEN_BYTES)
    nonce = rng.randbytes(24)
    return bytes([Kind.RESPONSE]) + xseal(
        client_to_server_key, challenge, bytes([Kind.RESPONSE]), nonce=nonce
    )


def mutate(rng: random.Random, datagram: bytes) -> bytes:
    """A changed copy: bit flips, a truncation, an insertion or a new kind byte (never the
    same bytes: an exact copy is a replay, tried on its own)."""
    data = bytearray(datagram)
    how = rng.randrange(4)
    if how == 0 or len(data) < 2:
        for index in rng.sample(range(len(data)), min(len(data), rng.randrange(1, 4))):
            data[index] ^= 1 << rng.randrange(8)
        if not data:
            data.append(rng.randrange(256))
    elif how == 1:
        del data[rng.randrange(len(data)) :]
    elif how == 2:
        data.insert(rng.randrange(len(data)), rng.randrange(256))
    else:
        data[0] = (data[0] + rng.randrange(1, 256)) % 256
    return bytes(data)


def _random(rng: random.Random, material: Material, now: float) -> bytes:
    size = rng.choice([0, 1, 9, 40, 105, 121, REQUEST_SIZE, MAX_PAYLOAD, rng.randrange(1300)])
    return rng.randbytes(size)


def _mutated(rng: random.Random, material: Material, now: float) -> bytes:
    return mutate(rng, rng.choice(material.genuine))


def _truncated(rng: random.Random, material: Material, now: float) -> bytes:
    whole = rng.choice(material.genuine)
    return whole[: rng.randrange(len(whole))]


def _oversized(rng: random.Random, material: Material, now: float) -> bytes:
    whole = rng.choice(material.genuine)
    size = rng.randint(max(len(whole), MAX_PAYLOAD) + 1, LARGEST_SENT)
    return whole + rng.randbytes(size - len(whole))


def _bad_mac(rng: random.Random, material: Material, now: float) -> bytes:
    # A sequence far ahead of any sent (not a replay), a body of a possible size.
    header = CHANNEL_HEADER.pack(Kind.PAYLOAD, rng.randrange(1 << 40, 1 << 62))
    body = rng.randint(TAG_BYTES + 16, MAX_PAYLOAD - CHANNEL_HEADER.size)
    return header + rng.randbytes(body)


def _replayed(rng: random.Random, material: Material, now: float) -> bytes:
    return rng.choice(material.replays)


def _expired_token(rng: random.Random, material: Material, now: float) -> bytes:
    key = material.region_key or rng.randbytes(KEY_BYTES)
    token = issue_connect_token(
        key, user_data=b"fuzz", addresses=[material.node], now=now - 100.0, expires_in_s=1.0
    )
    return request_datagram(token.private)


def _foreign_token(rng: random.Random, material: Material, now: float) -> bytes:
    token = issue_connect_token(
        rng.randbytes(KEY_BYTES), user_data=b"fuzz", addresses=[material.node], now=now
    )
    return request_datagram(token.private)


def _nonzero_padding(rng: random.Random, material: Material, now: float) -> bytes:
    data = bytearray(material.request)
    data[rng.randrange(REQUEST_SIZE - 8, REQUEST_SIZE)] = rng.randrange(1, 256)
    return bytes(data)


def _forged_challenge(rng: random.Random, material: Material, now: float) -> bytes:
    key = (
        material.challenged.client_to_server_key
        if material.challenged is not None
        else rng.randbytes(KEY_BYTES)
    )
    return forged_response(key, rng)


_MAKERS = {
    "random": _random,
    "mutated": _mutated,
    "truncated": _truncated,
    "oversized": _oversized,
    "bad_mac": _bad_mac,
    "replayed": _replayed,
    "expired_token": _expired_token,
    "foreign_token": _foreign_token,
    "nonzero_padding": _nonzero_padding,
    "forged_challenge": _forged_challenge,
}
assert tuple(_MAKERS) == FUZZ_KINDS


def fuzz_datagram(kind: str, rng: random.Random, material: Material, now: float) -> bytes:
    """One bad datagram of ``kind`` (one of :data:`FUZZ_KINDS`), to be sent from the source
    :data:`SOURCE_OF` names. ``now``: unix seconds (expired tokens are made before it)."""
    return _MAKERS[kind](rng, material, now)
