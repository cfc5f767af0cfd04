"""Connect tokens, as netcode.io's: what a client gets over HTTPS before it may send a
datagram to a node.

A token has a public part the client reads (its session keys, the nodes to try, when it
expires) and a private part it cannot read or alter: sealed under the region's key, which
only the region's nodes hold, so any of them (the primary and its standbys) can open it and
learn the same session keys. The private part's expiry is also in clear in front of it and
bound into its associated data, so a node refuses an expired token before any decryption.

Private part: expires_at f64 (clear) | xseal(region key, plaintext, ad: version u8 |
protocol id u64 | expires_at f64), the plaintext padded with zeros to ``PRIVATE_PLAIN_SIZE``:
token id [16] | expires_at f64 | timeout_s f64 | client-to-server key [32] |
server-to-client key [32] | address count u8 | (host length u8 | host | port u16)… |
user data length u16 | user data.
"""

from __future__ import annotations

import base64
import binascii
import struct
from dataclasses import dataclass
from typing import Any

from shared.datagram.constants import (
    KEY_BYTES,
    PROTOCOL_ID,
    PROTOCOL_VERSION,
    TIMEOUT_S,
    TOKEN_EXPIRES_IN_S,
    Refused,
)
from shared.datagram.layout import (
    TOKEN_ADDRESS_FIELDS,
    TOKEN_ASSOCIATED_FIELDS,
    TOKEN_CLEAR_FIELDS,
    TOKEN_PLAIN_FIELDS,
    TOKEN_USER_DATA_FIELDS,
    packed,
)
from shared.datagram.sealing import TAG_BYTES, XNONCE_BYTES, random_bytes, xopen, xseal

__all__ = [
    "MAX_ADDRESSES",
    "MAX_HOST_BYTES",
    "MAX_USER_DATA",
    "PRIVATE_TOKEN_SIZE",
    "TOKEN_ID_BYTES",
    "ConnectToken",
    "PrivateToken",
    "Refused",
    "issue_connect_token",
    "open_private_token",
]

TOKEN_ID_BYTES = TOKEN_PLAIN_FIELDS[0].size
MAX_USER_DATA = 256
MAX_ADDRESSES = 8
MAX_HOST_BYTES = 63

_FIXED = packed(TOKEN_PLAIN_FIELDS)
_EXPIRY = packed(TOKEN_CLEAR_FIELDS)
_ASSOCIATED = packed(TOKEN_ASSOCIATED_FIELDS)
_ADDRESS_BYTES = packed(TOKEN_ADDRESS_FIELDS).size + MAX_HOST_BYTES
_USER_DATA_HEAD = packed(TOKEN_USER_DATA_FIELDS).size
#: The sealed plaintext's size: room for every address at its longest and the user data.
PRIVATE_PLAIN_SIZE = _FIXED.size + MAX_ADDRESSES * _ADDRESS_BYTES + _USER_DATA_HEAD + MAX_USER_DATA
#: The private token's size on the wire (every one is padded to it).
PRIVATE_TOKEN_SIZE = _EXPIRY.size + XNONCE_BYTES + PRIVATE_PLAIN_SIZE + TAG_BYTES

Address = tuple[str, int]


@dataclass(frozen=True, slots=True)
class PrivateToken:
    """What a node learns from a token it opened."""

    token_id: bytes
    expires_at: float
    timeout_s: float
    client_to_server_key: bytes
    server_to_client_key: bytes
    addresses: tuple[Address, ...]
    user_data: bytes


@dataclass(frozen=True, slots=True)
class ConnectToken:
    """What the client holds: its keys, where to connect, and the private part to present."""

    private: bytes
    client_to_server_key: bytes
    server_to_client_key: bytes
    addresses: tuple[Address, ...]
    expires_at: float
    timeout_s: float

    def to_json(self) -> dict[str, Any]:
        """JSON-ready: bytes as standard base64, addresses as ``[host, port]`` pairs."""
        return {
            "private": _b64(self.private),
            "client_to_server_key": _b64(self.client_to_server_key),
            "server_to_client_key": _b64(self.server_to_client_key),
            "addresses": [[host, port] for host, port in self.addresses],
            "expires_at": self.expires_at,
            "timeout_s": self.timeout_s,
        }

    @classmethod
    def from_json(cls, data: Any) -> ConnectToken:
        """The token :meth:`to_json` gave; one ``ValueError`` naming what is wrong otherwise."""
        try:
            if not isinstance(data, dict):
                raise ValueError("a connect token is a JSON object")
            private = _unb64(data["private"], "private", PRIVATE_TOKEN_SIZE)
            c2s = _unb64(data["client_to_server_key"], "client_to_server_key", KEY_BYTES)
            s2c = _unb64(data["server_to_client_key"], "server_to_client_key", KEY_BYTES)
            addresses = _addresses(data["addresses"])
            expires_at = data["expires_at"]
            timeout_s = data["timeout_s"]
            for name, value in (("expires_at", expires_at), ("timeout_s", timeout_s)):
                if isinstance(value, bool) or not isinstance(value, int | float):
                    raise ValueError(f"connect token: {name} is not a number")
            if not timeout_s > 0:
                raise ValueError("connect token: timeout_s must be positive")
        except KeyError as missing:
            raise ValueError(f"connect token: missing field {missing.args[0]!r}") from None
        return cls(private, c2s, s2c, addresses, float(expires_at), float(timeout_s))


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: Any, name: str, size: int) -> bytes:
    if not isinstance(text, str):
        raise ValueError(f"connect token: {name} is not a base64 string")
    try:
        data = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"connect token: {name} is not valid base64") from None
    if len(data) != size:
        raise ValueError(f"connect token: {name} must be {size} bytes, not {len(data)}")
    return data


def _addresses(value: Any) -> tuple[Address, ...]:
    if not isinstance(value, list | tuple) or not 1 <= len(value) <= MAX_ADDRESSES:
        raise ValueError(f"connect token: addresses must list 1 to {MAX_ADDRESSES} addresses")
    addresses = []
    for item in value:
        if (
            not isinstance(item, list | tuple)
            or len(item) != 2
            or not isinstance(item[0], str)
            or isinstance(item[1], bool)
            or not isinstance(item[1], int)
        ):
            raise ValueError("connect token: an address is a [host, port] pair")
        host, port = item
        if not 0 < len(host.encode()) <= MAX_HOST_BYTES or not 0 < port < 65536:
            raise ValueError(f"connect token: address {host!r}:{port} is out of range")
        addresses.append((host, port))
    return tuple(addresses)


def _associated(expiry: bytes) -> bytes:
    return _ASSOCIATED.pack(PROTOCOL_VERSION, PROTOCOL_ID, _EXPIRY.unpack(expiry)[0])


def issue_connect_token(
    region_key: bytes,
    *,
    user_data: bytes,
    addresses: list[tuple[str, int]],
    now: float,
    expires_in_s: float = TOKEN_EXPIRES_IN_S,
    timeout_s: float = TIMEOUT_S,
) -> ConnectToken:
    """A token for one session: fresh session keys and token id, sealed for the region.
    ``ValueError`` for user data over ``MAX_USER_DATA`` bytes or bad addresses."""
    if len(user_data) > MAX_USER_DATA:
        raise ValueError(f"user data is at most {MAX_USER_DATA} bytes")
    if not expires_in_s > 0 or not timeout_s > 0:
        raise ValueError("expires_in_s and timeout_s must be positive")
    listed = _addresses(list(addresses))
    expires_at = float(now + expires_in_s)
    c2s, s2c = random_bytes(KEY_BYTES), random_bytes(KEY_BYTES)
    parts = [
        _FIXED.pack(random_bytes(TOKEN_ID_BYTES), expires_at, timeout_s, c2s, s2c, len(listed))
    ]
    for host, port in listed:
        encoded = host.encode()
        parts.append(bytes([len(encoded)]) + encoded + port.to_bytes(2, "little"))
    parts.append(len(user_data).to_bytes(2, "little") + bytes(user_data))
    plain = b"".join(parts)
    plain += bytes(PRIVATE_PLAIN_SIZE - len(plain))
    expiry = _EXPIRY.pack(expires_at)
    private = expiry + xseal(region_key, plain, _associated(expiry))
    return ConnectToken(private, c2s, s2c, listed, expires_at, float(timeout_s))


def open_private_token(region_key: bytes, private: bytes, now: float) -> PrivateToken:
    """The private part's contents; ``Refused("bad_size")``, ``Refused("expired")`` (checked
    before any decryption) or ``Refused("bad_token")`` (forged, altered, another region)."""
    if len(private) != PRIVATE_TOKEN_SIZE:
        raise Refused("bad_size")
    expiry = bytes(private[: _EXPIRY.size])
    (clear_expiry,) = _EXPIRY.unpack(expiry)
    if not clear_expiry > now:  # also refuses NaN
        raise Refused("expired")
    plain = xopen(region_key, bytes(private[_EXPIRY.size :]), _associated(expiry))
    if plain is None:
        raise Refused("bad_token")
    try:
        token_id, expires_at, timeout_s, c2s, s2c, count = _FIXED.unpack_from(plain, 0)
        if expires_at != clear_expiry or count > MAX_ADDRESSES:
            raise ValueError("inconsistent")
        offset = _FIXED.size
        addresses = []
        for _ in range(count):
            length = plain[offset]
            host = plain[offset + 1 : offset + 1 + length].decode()
            offset += 1 + length
            addresses.append((host, int.from_bytes(plain[offset : offset + 2], "little")))
            offset += 2
        length = int.from_bytes(plain[offset : offset + 2], "little")
        if length > MAX_USER_DATA:
            raise ValueError("user data too long")
        user_data = plain[offset + 2 : offset + 2 + length]
    except (ValueError, IndexError, struct.error):
        # Sealed by a holder of the region key, yet malformed: a bug there, refused the same.
        raise Refused("bad_token") from None
    return PrivateToken(token_id, expires_at, timeout_s, c2s, s2c, tuple(addresses), user_data)
