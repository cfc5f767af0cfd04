"""The cluster's request signatures: how a node proves a heartbeat is its own.

A heartbeat's ``X-Arena-Signature`` header is the lowercase hex HMAC-SHA256 of the raw body
bytes with the cluster secret (``docs/routing.md``); the directory checks it, in constant
time, before it parses the body. The MAC itself is :mod:`server.signing`'s
(``Purpose.REQUEST_BODY``: no prefix, so ``openssl dgst -hmac`` gives the same value).
"""

from __future__ import annotations

from server import signing
from shared.directory import Heartbeat

__all__ = ["DEV_SECRET", "SIGNATURE_HEADER", "check_signature", "sign", "signed_heartbeat"]

SIGNATURE_HEADER = "X-Arena-Signature"
# The fixed, published secret ``arena-directory --insecure-dev-secret`` uses: for a laptop
# and tests only. Anyone can forge heartbeats and reservations with it.
DEV_SECRET = "arena-insecure-development-secret-do-not-deploy"


def sign(secret: bytes | str, body: bytes) -> str:
    """Hex HMAC-SHA256 of a request body: the value of the ``X-Arena-Signature`` header."""
    return signing.mac(secret, signing.Purpose.REQUEST_BODY, body).hex()


def check_signature(secret: bytes | str, body: bytes, signature: str | None) -> bool:
    """True when ``signature`` is :func:`sign` of ``body`` (either case); constant-time."""
    if not signature:
        return False
    return signing.matches(sign(secret, body), signature.strip().lower())


def signed_heartbeat(secret: bytes | str, beat: Heartbeat) -> tuple[bytes, dict[str, str]]:
    """``(body, headers)`` for ``POST /nodes/heartbeat``, signed with the cluster secret."""
    body = beat.encode()
    headers = {"Content-Type": "application/json", SIGNATURE_HEADER: sign(secret, body)}
    return body, headers
