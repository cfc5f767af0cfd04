"""Every MAC the cluster secret makes, made here: HMAC-SHA256 with a purpose per use.

A region's nodes and its directory share one secret and sign five kinds of thing with it:
replication hellos, players' session tokens, seat reservations, heartbeats and HTTP request
bodies.
Each kind prefixes its message with its own purpose (domain separation), so a MAC made
for one kind is never accepted as another. Request bodies carry no prefix: their
``X-Arena-Signature`` header is the plain HMAC of the body, as ``docs/routing.md`` says.
Comparisons are constant-time.
"""

from __future__ import annotations

import enum
import hashlib
import hmac

__all__ = ["SECRET_ENV", "Purpose", "mac", "matches", "secret_bytes"]

SECRET_ENV = "ARENA_CLUSTER_SECRET"  # where every node and directory reads the secret by default


class Purpose(enum.Enum):
    """What a MAC is for: the prefix its message gets."""

    #: A standby's answer to the primary's challenge (v2: every field and the nonce;
    #: v1's hellos, timestamped and without a nonce, never verify as one).
    REPLICATION_HELLO = b"arena-replication-hello-v2\x00"
    SESSION_TOKEN = b"arena-session-token\x00"
    RESERVATION = b"arena-reservation-v1."
    #: A heartbeat: its node, time and sequence, then its body (replays are told apart).
    HEARTBEAT = b"arena-heartbeat-v2\x00"
    REQUEST_BODY = b""


def secret_bytes(secret: bytes | str) -> bytes:
    """The secret as bytes (text is UTF-8); ValueError when it is empty."""
    key = secret.encode("utf-8") if isinstance(secret, str) else bytes(secret)
    if not key:
        raise ValueError("the cluster secret must not be empty")
    return key


def mac(secret: bytes | str, purpose: Purpose, message: bytes) -> bytes:
    """HMAC-SHA256 of ``message`` for ``purpose``."""
    return hmac.new(secret_bytes(secret), purpose.value + message, hashlib.sha256).digest()


def matches(expected: bytes | str, given: bytes | str) -> bool:
    """Constant-time equality of two MACs (or their text forms)."""
    if isinstance(expected, str):
        expected = expected.encode()
    if isinstance(given, str):
        given = given.encode()
    return hmac.compare_digest(expected, given)
