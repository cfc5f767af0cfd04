"""Signed, short-lived seat reservations: issued by the directory, checked by the node.

The directory hands a player a *reservation* for one node; the player shows it when it
joins, and the node checks it with :func:`check_reservation` (:func:`verify` underneath; no
call back to the directory: both hold the cluster secret). A token is::

    base64url(payload) "." base64url(HMAC-SHA256(secret, DOMAIN + base64url(payload)))

without padding, where ``payload`` is compact JSON with sorted keys, so the same inputs
always give the same token (RFC 7515's JWS compact form, minus the header: there is one
algorithm and no negotiation). ``DOMAIN`` (``signing.Purpose.RESERVATION``,
``arena-reservation-v1.``) keeps a reservation signature from ever being mistaken for a
heartbeat signature made with the same secret. Tokens stay under 512 characters, the
``token`` limit of the join message. Comparisons are constant-time (:mod:`server.signing`).

A :class:`ClaimLedger` remembers the reservations a node admitted until its next heartbeat
has reported them in ``claimed``, so the directory's seat accounting is exact instead of
inferred from the rise in ``players`` (``docs/routing.md``, "Reservations").
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from dataclasses import dataclass

from server import signing
from shared.directory import MAX_CLAIMED

__all__ = [
    "ClaimLedger",
    "Reservation",
    "ReservationError",
    "check_reservation",
    "issue",
    "reservation_id",
    "verify",
]

_TOKEN_MAX_CHARS = 512
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


_B64_ALPHABET = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    if not text or any(c not in _B64_ALPHABET for c in text):
        raise ValueError("not base64url")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _mac(key: bytes, payload_b64: str) -> bytes:
    return signing.mac(key, signing.Purpose.RESERVATION, payload_b64.encode("ascii"))


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
    token = f"{payload_b64}.{_b64(_mac(signing.secret_bytes(secret), payload_b64))}"
    if len(token) > _TOKEN_MAX_CHARS:
        raise ValueError(f"reservation token longer than {_TOKEN_MAX_CHARS} characters")
    return token


def verify(secret: bytes | str, token: str, node_id: str, now: float) -> Reservation:
    """The reservation in ``token`` if it is ours, for ``node_id`` and not expired at ``now``.

    Checks in this order and raises :class:`ReservationError` with the first failure:
    ``malformed``, ``bad_signature``, ``wrong_node``, ``expired`` (at ``now >= expires_at``).
    The payload is only parsed after its signature checked out.
    """
    key = signing.secret_bytes(secret)
    if not isinstance(token, str) or len(token) > _TOKEN_MAX_CHARS or token.count(".") != 1:
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
    if not signing.matches(expected, signature):
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
    if not signing.matches(node, node_id):
        raise ReservationError("wrong_node", "the reservation is for another node")
    if now >= exp:
        raise ReservationError("expired", "the reservation has expired; ask the directory again")
    return Reservation(
        id=signature.hex()[:16], player=player, node_id=node, region=region, expires_at=float(exp)
    )


def reservation_id(token: str) -> str:
    """The id :func:`verify` would report for ``token`` (no checks; for the directory)."""
    return _unb64(token.rpartition(".")[2]).hex()[:16]


class ClaimLedger:
    """Ids of the reservations this node admitted that the directory has not yet heard of.

    :func:`check_reservation` adds to it; the node's heartbeat loop sends the pending ids
    in ``claimed`` and forgets them only once the directory answered 200, so a lost
    heartbeat loses no claim (the directory settles an id twice harmlessly).
    """

    __slots__ = ("_pending",)

    def __init__(self) -> None:
        self._pending: dict[str, None] = {}  # insertion-ordered set: oldest first

    def add(self, reservation_id: str) -> None:
        self._pending[reservation_id] = None

    def pending(self) -> tuple[str, ...]:
        """The oldest :data:`~shared.directory.MAX_CLAIMED` pending ids (the rest go in
        later beats)."""
        return tuple(rid for rid, _ in zip(self._pending, range(MAX_CLAIMED), strict=False))

    def settle(self, sent: tuple[str, ...]) -> None:
        """The directory has these now."""
        for rid in sent:
            self._pending.pop(rid, None)

    def __len__(self) -> int:
        return len(self._pending)


def check_reservation(
    secret: bytes,
    token: str,
    node_id: str,
    now: float,
    *,
    player: str | None = None,
    claims: ClaimLedger | None = None,
) -> str | None:
    """``None`` when ``token`` is a valid reservation for this node at ``now`` (unix seconds),
    else the code to refuse the join with.

    Codes are :class:`ReservationError`'s (``malformed``, ``bad_signature``, ``wrong_node``,
    ``expired``) plus ``wrong_player`` when ``player`` is given and the reservation names
    someone else: a reservation is one player's seat, and a token passed around must not
    let a second player in. On success the reservation's id is recorded in ``claims`` (for
    the next heartbeat). The reason stays with the node: the code is all a client needs to
    learn (ask the directory again).
    """
    try:
        reservation = verify(secret, token, node_id, now)
    except ReservationError as error:
        return error.code
    if player is not None and reservation.player != player:
        return "wrong_player"
    if claims is not None:
        claims.add(reservation.id)
    return None
