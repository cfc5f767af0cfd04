"""Signed, short-lived seat reservations, and the cluster's request signatures.

The directory hands a player a *reservation* for one node; the player shows it when it
joins, and the node checks it with :func:`verify` (no call back to the directory: both
hold the cluster secret). A token is::

    base64url(payload) "." base64url(HMAC-SHA256(secret, DOMAIN + base64url(payload)))

without padding, where ``payload`` is compact JSON with sorted keys, so the same inputs
always give the same token (RFC 7515's JWS compact form, minus the header: there is one
algorithm and no negotiation). ``DOMAIN`` keeps a reservation signature from ever being
mistaken for a heartbeat signature made with the same secret. Tokens stay under 512
characters, the ``token`` limit of the join message.

Heartbeats are authenticated by :func:`sign`: the hex HMAC-SHA256 of the raw request body,
sent in the ``X-Arena-Signature`` header. Comparisons are constant-time
(:func:`hmac.compare_digest`).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import math
from dataclasses import dataclass

__all__ = [
    "DEV_SECRET",
    "SIGNATURE_HEADER",
    "TOKEN_MAX_CHARS",
    "Reservation",
    "ReservationError",
    "check_signature",
    "issue",
    "reservation_id",
    "sign",
    "verify",
]

SIGNATURE_HEADER = "X-Arena-Signature"
# The fixed, published secret ``arena-directory --insecure-dev-secret`` uses: for a laptop
# and tests only. Anyone can forge heartbeats and reservations with it.
DEV_SECRET = "arena-insecure-development-secret-do-not-deploy"
TOKEN_MAX_CHARS = 512
_DOMAIN = b"arena-reservation-v1."
_VERSION = 1
_SIG_CHARS = 43  # 32 bytes in unpadded base64url


class ReservationError(Exception):
    """A token the node must refuse. ``code`` says why, for the player and the metrics.

    ``malformed`` (not a token of ours), ``bad_signature`` (not signed with the cluster
    secret, or altered), ``wrong_node`` (issued for another node), ``expired``.
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True)
class Reservation:
    """What a valid token says: ``player`` may take a seat on ``node_id`` until ``expires_at``
    (unix seconds). ``id`` names the reservation (a node reports it back in ``claimed``)."""

    id: str
    player: str
    node_id: str
    region: str
    expires_at: float


def _key(secret: bytes | str) -> bytes:
    key = secret.encode() if isinstance(secret, str) else bytes(secret)
    if not key:
        raise ValueError("the cluster secret must not be empty")
    return key


_B64_ALPHABET = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    if not text or any(c not in _B64_ALPHABET for c in text):
        raise ValueError("not base64url")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _mac(key: bytes, payload_b64: str) -> bytes:
    return hmac.new(key, _DOMAIN + payload_b64.encode("ascii"), hashlib.sha256).digest()


def issue(
    secret: bytes | str, player: str, node_id: str, region: str, now: float, ttl: float
) -> str:
    """A token letting ``player`` join ``node_id`` (in ``region``) until ``now + ttl``.

    ``now`` is unix seconds; the expiry is kept to the millisecond. Deterministic: the
    same arguments give the same token.
    """
    if not (math.isfinite(now) and math.isfinite(ttl)) or ttl <= 0:
        raise ValueError("now must be finite and ttl positive")
    for name, value in (("player", player), ("node_id", node_id), ("region", region)):
        if not isinstance(value, str):
            raise ValueError(f"{name} must be a string")
    body = {"exp": round(now + ttl, 3), "n": node_id, "p": player, "r": region, "v": _VERSION}
    payload = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    payload_b64 = _b64(payload.encode("utf-8"))
    token = f"{payload_b64}.{_b64(_mac(_key(secret), payload_b64))}"
    if len(token) > TOKEN_MAX_CHARS:
        raise ValueError(f"reservation token longer than {TOKEN_MAX_CHARS} characters")
    return token


def verify(secret: bytes | str, token: str, node_id: str, now: float) -> Reservation:
    """The reservation in ``token`` if it is ours, for ``node_id`` and not expired at ``now``.

    Checks in this order and raises :class:`ReservationError` with the first failure:
    ``malformed``, ``bad_signature``, ``wrong_node``, ``expired`` (at ``now >= expires_at``).
    The payload is only parsed after its signature checked out.
    """
    key = _key(secret)
    if not isinstance(token, str) or len(token) > TOKEN_MAX_CHARS or token.count(".") != 1:
        raise ReservationError("malformed", "not a reservation token")
    payload_b64, signature_b64 = token.split(".")
    if not payload_b64 or any(c not in _B64_ALPHABET for c in payload_b64):
        raise ReservationError("malformed", "not a reservation token")
    try:
        signature = _unb64(signature_b64)
    except (ValueError, binascii.Error):
        raise ReservationError("malformed", "not a reservation token") from None
    if len(signature_b64) != _SIG_CHARS or _b64(signature) != signature_b64:
        raise ReservationError("malformed", "not a reservation token")
    expected = _mac(key, payload_b64)
    if not hmac.compare_digest(expected, signature):
        raise ReservationError("bad_signature", "the reservation's signature does not match")
    try:
        body = json.loads(_unb64(payload_b64).decode("utf-8"))
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise ReservationError("malformed", "the reservation's payload is unreadable") from None
    if not isinstance(body, dict) or body.get("v") != _VERSION:
        raise ReservationError("malformed", "unknown reservation version")
    exp, player, node, region = body.get("exp"), body.get("p"), body.get("n"), body.get("r")
    if (
        not isinstance(exp, int | float)
        or isinstance(exp, bool)
        or not all(isinstance(v, str) for v in (player, node, region))
    ):
        raise ReservationError("malformed", "the reservation's payload lacks a field")
    assert isinstance(player, str) and isinstance(node, str) and isinstance(region, str)
    if not hmac.compare_digest(node.encode(), node_id.encode()):
        raise ReservationError("wrong_node", "the reservation is for another node")
    if now >= exp:
        raise ReservationError("expired", "the reservation has expired; ask the directory again")
    return Reservation(
        id=signature.hex()[:16], player=player, node_id=node, region=region, expires_at=float(exp)
    )


def reservation_id(token: str) -> str:
    """The id :func:`verify` would report for ``token`` (no checks; for the directory)."""
    return _unb64(token.rpartition(".")[2]).hex()[:16]


def sign(secret: bytes | str, body: bytes) -> str:
    """Hex HMAC-SHA256 of a request body: the value of the ``X-Arena-Signature`` header."""
    return hmac.new(_key(secret), body, hashlib.sha256).hexdigest()


def check_signature(secret: bytes | str, body: bytes, signature: str | None) -> bool:
    """True when ``signature`` is :func:`sign` of ``body``; constant-time."""
    if not signature:
        return False
    expected = sign(secret, body)
    return hmac.compare_digest(expected.encode(), signature.strip().lower().encode())
