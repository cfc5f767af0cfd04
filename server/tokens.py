"""Session tokens: a player's proof that a seat is theirs, signed with the cluster secret.

Every node of a region shares the secret, so a standby that becomes primary can check a
token the old primary issued, and nobody else can forge one. A token names the region, the
match and seat (slot), the player's name and a random nonce; it does not expire on its own,
because a seat lives exactly as long as the match keeps it.
"""

from __future__ import annotations

import base64
import json
import secrets
from dataclasses import dataclass

from server import signing

__all__ = ["SessionToken", "TokenError", "issue_token", "verify_token"]


class TokenError(ValueError):
    """A token that this region did not issue, or that names another region."""


@dataclass(frozen=True, slots=True)
class SessionToken:
    region: str
    slot: int
    name: str
    match: int = 0


def _mac(secret: bytes, payload: bytes) -> str:
    digest = signing.mac(secret, signing.Purpose.SESSION_TOKEN, payload)
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def issue_token(secret: bytes, region: str, slot: int, name: str, match: int = 0) -> str:
    payload = json.dumps(
        {"r": region, "m": match, "s": slot, "n": name, "x": secrets.token_hex(8)},
        separators=(",", ":"),
    ).encode()
    body = base64.urlsafe_b64encode(payload).decode().rstrip("=")
    return f"{body}.{_mac(secret, payload)}"


def verify_token(secret: bytes, token: str, region: str) -> SessionToken:
    """The seat a token stands for; raises :class:`TokenError` (the reason stays local)."""
    try:
        body, mac = token.split(".", 1)
        payload = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
    except ValueError:
        raise TokenError("malformed token") from None
    if not mac.isascii() or not signing.matches(_mac(secret, payload), mac):
        raise TokenError("bad signature")
    try:
        fields = json.loads(payload)
        claim = SessionToken(
            str(fields["r"]), int(fields["s"]), str(fields["n"]), int(fields.get("m", 0))
        )
    except (ValueError, KeyError, TypeError):
        raise TokenError("malformed token") from None
    if claim.region != region:
        raise TokenError("token of another region")
    return claim
