"""Connecting, as netcode.io does (its STANDARD.md): a node gives nothing away to an address
that has not proved it receives what is sent to it.

::

    client                                           node
    REQUEST  (REQUEST_SIZE bytes, private token) ──▶ opens the token, checks it names this node
             ◀── CHALLENGE (smaller than the request; a challenge token sealed under the
                 node's own key, bound to the client's address)
    RESPONSE (the challenge token, sealed) ──────────▶ opens it: the address is proved; only
                                                       now a Channel exists
             ◀── PAYLOAD (a keep-alive or data): the client is connected

Before the response, the node sends an address only challenges, each smaller than the
request that asked for it, and keeps only a bounded table of pending addresses. Every
failed check is a refusal by cause (:data:`shared.datagram.constants.CAUSES`), never
answered. A token id is accepted once per node; after a failover the same token connects
to a standby, whose connection keys differ because they are derived from a fresh
connection id (:func:`shared.datagram.sealing.derive_key`).
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.datagram.channel import Channel, Lane
from shared.datagram.constants import (
    KEY_BYTES,
    PROTOCOL_ID,
    PROTOCOL_VERSION,
    REDUNDANCY,
    REQUEST_SIZE,
    RESEND_INTERVAL_S,
    Refused,
)
from shared.datagram.layout import CHALLENGE_TOKEN_FIELDS, CHALLENGE_TOKEN_PLAIN_FIELDS, packed
from shared.datagram.packets import (
    CHALLENGE_SIZE,
    CHALLENGE_TOKEN_BYTES,
    CONNECTION_ID_BYTES,
    REQUEST_HEADER,
    RESPONSE_SIZE,
    Kind,
    encode_address,
)
from shared.datagram.sealing import PacketKey, derive_key, random_bytes, xopen, xseal
from shared.datagram.tokens import (
    PRIVATE_TOKEN_SIZE,
    ConnectToken,
    PrivateToken,
    open_private_token,
)

__all__ = [
    "CONNECTION_KEY_CONTEXT",
    "ClientHandshake",
    "Established",
    "HandshakeStep",
    "ServerHandshake",
    "connection_keys",
    "seal_challenge",
    "seal_response",
]

Address = tuple[str, int]

_CHALLENGE_PLAIN = packed(CHALLENGE_TOKEN_PLAIN_FIELDS)
_SEQUENCE = packed(CHALLENGE_TOKEN_FIELDS[:1])
_CHALLENGE_AD = bytes([Kind.CHALLENGE])
_RESPONSE_AD = bytes([Kind.RESPONSE])
#: The personalisation of every connection key's derivation.
CONNECTION_KEY_CONTEXT = b"arena-connection"


def connection_keys(
    token: PrivateToken | ConnectToken, connection_id: bytes
) -> tuple[bytes, bytes]:
    """(client-to-server, server-to-client) keys of one connection: fresh for every
    connection id, so a token used again (a failover) never reuses a nonce under a key."""
    return (
        derive_key(token.client_to_server_key, CONNECTION_KEY_CONTEXT, connection_id),
        derive_key(token.server_to_client_key, CONNECTION_KEY_CONTEXT, connection_id),
    )


def seal_challenge(
    server_to_client_key: bytes,
    connection_id: bytes,
    challenge_token: bytes,
    *,
    nonce: bytes | None = None,
) -> bytes:
    """A CHALLENGE datagram (``nonce``: fixed for test vectors only)."""
    sealed = xseal(
        server_to_client_key, connection_id + challenge_token, _CHALLENGE_AD, nonce=nonce
    )
    return bytes([Kind.CHALLENGE]) + sealed


def seal_response(
    client_to_server_key: bytes, challenge_token: bytes, *, nonce: bytes | None = None
) -> bytes:
    """A RESPONSE datagram (``nonce``: fixed for test vectors only)."""
    return bytes([Kind.RESPONSE]) + xseal(
        client_to_server_key, challenge_token, _RESPONSE_AD, nonce=nonce
    )


@dataclass(frozen=True, slots=True)
class Established:
    """A client that answered its challenge: its address, its token, and its channel."""

    address: Address
    token: PrivateToken
    channel: Channel


@dataclass(frozen=True, slots=True)
class HandshakeStep:
    """What one datagram did: ``reply`` to send back to its address (or ``None``), a new
    connection, or the cause it was refused for (at most one of the last two)."""

    reply: bytes | None = None
    established: Established | None = None
    refused: str | None = None


@dataclass(slots=True)
class _Pending:
    token: PrivateToken
    connection_id: bytes
    deadline: float


class ServerHandshake:
    """A node's side of connecting. ``own_addresses``: the addresses this node is known by in
    tokens (one must be listed in a token for it to be accepted here)."""

    def __init__(
        self,
        region_key: bytes,
        own_addresses: list[tuple[str, int]],
        *,
        max_pending: int = 1024,
        redundancy: int = REDUNDANCY,
    ) -> None:
        if len(region_key) != KEY_BYTES:
            raise ValueError(f"the region key is {KEY_BYTES} bytes")
        self._region_key = bytes(region_key)
        self._own = {(str(host), int(port)) for host, port in own_addresses}
        self.max_pending = max_pending
        self.redundancy = redundancy
        # Seals challenge tokens; never leaves this node, so only it can open them.
        self._challenge_key = PacketKey(random_bytes(KEY_BYTES))
        self._challenge_sequence = 0
        self._pending: dict[Address, _Pending] = {}
        self._used: dict[bytes, float] = {}  # token id -> its expiry
        self._used_prune_at = 1024
        self.refused: dict[str, int] = {}

    @property
    def pending(self) -> int:
        """Addresses that were challenged and have not answered yet."""
        return len(self._pending)

    def on_datagram(self, data: bytes, address: Address, now: float) -> HandshakeStep:
        """Handle a datagram from an address that has no connection yet."""
        try:
            if not data:
                raise Refused("bad_size")
            kind = data[0]
            if kind == Kind.REQUEST:
                return HandshakeStep(reply=self._on_request(data, address, now))
            if kind == Kind.RESPONSE:
                return self._on_response(data, address, now)
            if kind == Kind.PAYLOAD or kind == Kind.DISCONNECT:
                raise Refused("unknown_address")
            raise Refused("bad_packet")
        except Refused as refusal:
            self.refused[refusal.cause] = self.refused.get(refusal.cause, 0) + 1
            return HandshakeStep(refused=refusal.cause)

    def _on_request(self, data: bytes, address: Address, now: float) -> bytes:
        if len(data) != REQUEST_SIZE:
            raise Refused("bad_size")
        _, version, protocol = REQUEST_HEADER.unpack_from(data, 0)
        if version != PROTOCOL_VERSION or protocol != PROTOCOL_ID:
            raise Refused("bad_version")
        start = REQUEST_HEADER.size
        end = start + PRIVATE_TOKEN_SIZE
        if any(data[end:]):
            # The padding is not sealed: holding it to zeros leaves nothing of a request
            # that can be altered and still be answered.
            raise Refused("bad_packet")
        token = open_private_token(self._region_key, data[start:end], now)
        if self._own.isdisjoint(token.addresses):
            raise Refused("not_listed")
        if token.token_id in self._used:
            raise Refused("replayed")
        pending = self._pending.get(address)
        if pending is None or pending.token.token_id != token.token_id or pending.deadline <= now:
            if pending is None and len(self._pending) >= self.max_pending:
                self._forget_expired(now)
                if len(self._pending) >= self.max_pending:
                    raise Refused("pending_full")
            pending = _Pending(token, random_bytes(CONNECTION_ID_BYTES), now + token.timeout_s)
            self._pending[address] = pending
        sequence = self._challenge_sequence
        self._challenge_sequence += 1
        challenge_token = _SEQUENCE.pack(sequence) + self._challenge_key.encrypt(
            sequence,
            _CHALLENGE_PLAIN.pack(token.token_id, pending.connection_id, pending.deadline),
            encode_address(address),
        )
        reply = seal_challenge(token.server_to_client_key, pending.connection_id, challenge_token)
        assert len(reply) == CHALLENGE_SIZE < REQUEST_SIZE
        return reply

    def _on_response(self, data: bytes, address: Address, now: float) -> HandshakeStep:
        if len(data) != RESPONSE_SIZE:
            raise Refused("bad_size")
        pending = self._pending.get(address)
        if pending is None:
            raise Refused("unknown_address")
        if pending.deadline <= now:
            del self._pending[address]
            raise Refused("expired")
        token = pending.token
        challenge_token = xopen(token.client_to_server_key, data[1:], _RESPONSE_AD)
        if challenge_token is None:
            raise Refused("bad_packet")
        (sequence,) = _SEQUENCE.unpack_from(challenge_token, 0)
        plain = self._challenge_key.decrypt(
            sequence, challenge_token[_SEQUENCE.size :], encode_address(address)
        )
        if plain is None:
            raise Refused("bad_challenge")
        token_id, connection_id, deadline = _CHALLENGE_PLAIN.unpack(plain)
        if token_id != token.token_id or connection_id != pending.connection_id:
            raise Refused("bad_challenge")
        if deadline <= now:
            raise Refused("expired")
        if token_id in self._used:
            raise Refused("replayed")
        del self._pending[address]
        self._remember_used(token, now)
        client_to_server, server_to_client = connection_keys(token, connection_id)
        channel = Channel(
            server_to_client,
            client_to_server,
            now,
            timeout_s=token.timeout_s,
            redundancy=self.redundancy,
        )
        first = channel.datagrams(now)  # a keep-alive: tells the client it is connected
        return HandshakeStep(reply=first[0], established=Established(address, token, channel))

    def _forget_expired(self, now: float) -> None:
        for address in [a for a, p in self._pending.items() if p.deadline <= now]:
            del self._pending[address]

    def _remember_used(self, token: PrivateToken, now: float) -> None:
        self._used[token.token_id] = token.expires_at
        if len(self._used) > self._used_prune_at:
            # An expired token is refused before this check, so its id need not be kept.
            self._used = {tid: exp for tid, exp in self._used.items() if exp > now}
            self._used_prune_at = max(1024, 2 * len(self._used))


class ClientHandshake:
    """A client's side of connecting to ``address`` (one of the token's addresses).

    ``state``: ``connecting`` → ``connected`` (``channel`` is ready), or ``refused`` (the
    token expired before a challenge came, the address is not in the token, or the node
    disconnected at once: ``refusal`` says which), or ``timed_out`` (no answer for the
    token's ``timeout_s``). Nodes never answer a refused request, so silence is a time-out.
    """

    def __init__(
        self, token: ConnectToken, address: Address, now: float, *, redundancy: int = REDUNDANCY
    ) -> None:
        self.token = token
        self.address = (str(address[0]), int(address[1]))
        self.redundancy = redundancy
        self.state = "connecting"
        self.refusal: str | None = None
        self.channel: Channel | None = None
        self.refused: dict[str, int] = {}
        self._request = REQUEST_HEADER.pack(Kind.REQUEST, PROTOCOL_VERSION, PROTOCOL_ID)
        self._request += token.private
        self._request += bytes(REQUEST_SIZE - len(self._request))
        self._response: bytes | None = None
        self._connection_id: bytes | None = None
        self._candidate: Channel | None = None
        self._last_sent = float("-inf")
        self._last_heard = now
        if self.address not in token.addresses:
            self._end("refused", "not_listed")

    def _end(self, state: str, refusal: str | None = None) -> None:
        self.state = state
        self.refusal = refusal

    def _check_time(self, now: float) -> None:
        if self.state != "connecting":
            return
        if self._response is None and now >= self.token.expires_at:
            self._end("refused", "expired")
        elif now - self._last_heard > self.token.timeout_s:
            self._end("timed_out")

    def datagrams(self, now: float) -> list[bytes]:
        """The request (before a challenge) or the response (after), every
        ``RESEND_INTERVAL_S`` while connecting; nothing otherwise (once connected, the
        channel's :meth:`Channel.datagrams` takes over)."""
        self._check_time(now)
        if self.state != "connecting" or now - self._last_sent < RESEND_INTERVAL_S:
            return []
        self._last_sent = now
        return [self._response if self._response is not None else self._request]

    def on_datagram(self, data: bytes, now: float) -> list[tuple[Lane, bytes]]:
        """Handle a datagram from the node; returns the payloads it delivered (the first
        channel datagram may already carry some)."""
        if self.state == "connected":
            assert self.channel is not None
            return self.channel.receive(data, now)
        self._check_time(now)
        if self.state != "connecting" or not data:
            return []
        kind = data[0]
        if kind == Kind.CHALLENGE and len(data) == CHALLENGE_SIZE:
            plain = xopen(self.token.server_to_client_key, data[1:], _CHALLENGE_AD)
            if plain is None:
                self._count("bad_packet")
                return []
            connection_id = plain[:CONNECTION_ID_BYTES]
            challenge_token = plain[CONNECTION_ID_BYTES:]
            assert len(challenge_token) == CHALLENGE_TOKEN_BYTES
            if connection_id != self._connection_id:
                self._connection_id = connection_id
                client_to_server, server_to_client = connection_keys(self.token, connection_id)
                self._candidate = Channel(
                    client_to_server,
                    server_to_client,
                    now,
                    timeout_s=self.token.timeout_s,
                    redundancy=self.redundancy,
                )
            self._response = seal_response(self.token.client_to_server_key, challenge_token)
            self._last_heard = now
            self._last_sent = float("-inf")  # answer at the next datagrams()
            return []
        if (kind == Kind.PAYLOAD or kind == Kind.DISCONNECT) and self._candidate is not None:
            channel = self._candidate
            received = channel.stats["received"]
            delivered = channel.receive(data, now)
            if channel.stats["received"] == received:
                self._count("bad_packet")
                return []
            if channel.closed:
                self._end("refused", "disconnected")
                return []
            self.channel = channel
            self._end("connected")
            return delivered
        self._count("bad_packet")
        return []

    def _count(self, cause: str) -> None:
        self.refused[cause] = self.refused.get(cause, 0) + 1
