"""Session tokens: a player's proof that a seat is theirs, signed with the cluster secret.

Every node of a region shares the secret, so a standby that becomes primary can check a
token the old primary issued, and nobody else can forge one. A token names the region, the
match and seat (slot), the seat's incarnation (a later player in the same slot, even under
the same name, is another seat), the player's name, a random nonce and its expiry: wall-clock
seconds, since the nodes that check it share only the clock (roughly synced, as for seat
reservations). The primary renews a connected player's token well before it expires, so
only a token that left with its player (and outlived the seat grace) runs out. Sans-I/O:
the caller says what time it is.
"""

from __future__ import annotations

import base64
import json
import secrets
from dataclasses import KW_ONLY, dataclass

from server import signing

__all__ = ["SessionToken", "TokenError", "TokenExpired", "issue_token", "verify_token"]


class TokenError(ValueError):
    """A token that this region did not issue, that names another region, or has run out."""


class TokenExpired(TokenError):
    """A token this region issued, past its expiry: a session token still, but no proof."""


@dataclass(frozen=True, slots=True)
class SessionToken:
    region: str
    slot: int
    name: str
    match: int = 0
    _: KW_ONLY
    seat_id: int  # which seating of the slot (PlayerSeat.seat_id)
    expires_at: float  # unix seconds


def _mac(secret: bytes, payload: bytes) -> str:
    digest = signing.mac(secret, signing.Purpose.SESSION_TOKEN, payload)
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def issue_token(
    secret: bytes,
    region: str,
    slot: int,
    name: str,
    match: int = 0,
    *,
    seat_id: int,
    expires_at: float,
) -> str:
    payload = json.dumps(
        {
            "r": region,
            "m": match,
            "s": slot,
            "i": seat_id,
            "n": name,
            "e": expires_at,
            "x": secrets.token_hex(8),
        },
        separators=(",", ":"),
        ensure_ascii=False,  # a name as UTF-8, not escaped: 4 bytes a character at most
    ).encode()
    body = base64.urlsafe_b64encode(payload).decode().rstrip("=")
    return f"{body}.{_mac(secret, payload)}"


def verify_token(secret: bytes, token: str, region: str, now: float) -> SessionToken:
    """The seat a token stands for at unix time ``now``; raises :class:`TokenError` (the
    reason stays local), :class:`TokenExpired` for one of ours that has run out."""
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
            str(fields["r"]),
            int(fields["s"]),
            str(fields["n"]),
            int(fields["m"]),
            seat_id=int(fields["i"]),
            expires_at=float(fields["e"]),
        )
    except (ValueError, KeyError, TypeError):
        raise TokenError("malformed token") from None
    if claim.region != region:
        raise TokenError("token of another region")
    if now >= claim.expires_at:
        raise TokenExpired("expired token")
    return claim
