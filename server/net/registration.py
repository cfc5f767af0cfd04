"""The node's side of the directory: signed heartbeats out, seat reservations checked on join.

A node started with ``--directory URL`` runs :func:`heartbeat_loop` beside its role loop:
every ``interval`` seconds it asks ``describe()`` what it is (region, endpoint, probe, role,
epoch, load) and POSTs that, signed with the cluster secret, to ``/nodes/heartbeat``. The
directory is advisory to a running match, so the loop never lets a network problem reach the
node: an unreachable or refusing directory is logged (once per outage or per new error, then
at most every :data:`REPEAT_LOG_S`) and the next beat simply tries again. Only cancellation
ends it.

A joining player presents the reservation the directory gave it; :func:`check_reservation`
checks it locally with the same secret (no call back to the directory) and returns the
refusal code, or ``None`` to admit. A :class:`ClaimLedger` shared by the two reports the ids
of the admitted reservations in the next heartbeat's ``claimed`` field, so the directory's
seat accounting is exact instead of inferred from the rise in ``players``
(``docs/routing.md``, "Reservations").
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import aiohttp

from server.directory import Heartbeat, ReservationError, verify

__all__ = [
    "MAX_CLAIMED",
    "REPEAT_LOG_S",
    "ClaimLedger",
    "DirectoryAck",
    "check_reservation",
    "heartbeat_loop",
]

log = logging.getLogger("arena.server")

#: A problem that persists is logged again at most this often (the first time at once).
REPEAT_LOG_S = 10.0
#: The directory takes at most this many ids in one heartbeat's ``claimed``.
MAX_CLAIMED = 4096


@dataclass(frozen=True, slots=True)
class DirectoryAck:
    """The directory's answer to an accepted heartbeat.

    ``status``: ``routable`` (a current primary), ``standby``, or ``fenced`` (a primary below
    its group's epoch ``group_epoch``: it gets no players and should stop serving).
    ``reserved``: seats handed out on this node that its heartbeats do not show yet.
    """

    status: str
    group_epoch: int
    reserved: int

    @classmethod
    def parse(cls, body: object) -> DirectoryAck:
        """From the JSON body of a 200 answer; ValueError when it is not one."""
        if not isinstance(body, dict):
            raise ValueError("not a JSON object")
        status, epoch, reserved = body.get("status"), body.get("group_epoch"), body.get("reserved")
        if not isinstance(status, str) or type(epoch) is not int or type(reserved) is not int:
            raise ValueError("missing status, group_epoch or reserved")
        return cls(status, epoch, reserved)


class ClaimLedger:
    """Ids of the reservations this node admitted that the directory has not yet heard of.

    :func:`check_reservation` adds to it; :func:`heartbeat_loop` sends the pending ids in
    ``claimed`` and forgets them only once the directory answered 200, so a lost heartbeat
    loses no claim (the directory settles an id twice harmlessly).
    """

    __slots__ = ("_pending",)

    def __init__(self) -> None:
        self._pending: dict[str, None] = {}  # insertion-ordered set: oldest first

    def add(self, reservation_id: str) -> None:
        self._pending[reservation_id] = None

    def pending(self) -> tuple[str, ...]:
        """The oldest :data:`MAX_CLAIMED` pending ids (the rest go in later beats)."""
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

    Codes are :class:`~server.directory.ReservationError`'s (``malformed``,
    ``bad_signature``, ``wrong_node``, ``expired``) plus ``wrong_player`` when ``player`` is
    given and the reservation names someone else: a reservation is one player's seat, and a
    token passed around must not let a second player in. On success the reservation's id is
    recorded in ``claims`` (for the next heartbeat). The reason stays with the node: the
    code is all a client needs to learn (ask the directory again).
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


class _Throttle:
    """Log a persisting condition when it appears, changes, and every REPEAT_LOG_S."""

    def __init__(self) -> None:
        self.key: str | None = None
        self.logged_at = -math.inf

    def due(self, key: str, now: float) -> bool:
        if key != self.key or now - self.logged_at >= REPEAT_LOG_S:
            self.key, self.logged_at = key, now
            return True
        return False

    def clear(self) -> bool:
        """Forget the condition; True when there was one (it is over now)."""
        had = self.key is not None
        self.key, self.logged_at = None, -math.inf
        return had


def _context(beat: Heartbeat) -> str:
    return f"region={beat.region} node={beat.node_id} role={beat.role} epoch={beat.epoch}"


async def heartbeat_loop(
    *,
    directory_url: str,
    secret: bytes,
    describe: Callable[[], Heartbeat | None],
    interval: float = 0.5,
    claims: ClaimLedger | None = None,
    on_ack: Callable[[DirectoryAck], None] | None = None,
    request_timeout: float | None = None,
) -> None:
    """Heartbeat to the directory at ``directory_url`` every ``interval`` s until cancelled.

    ``describe()`` is called for every beat, so the node's current role, epoch and load go
    out; it may return ``None`` while the node has nothing to report yet (still starting).
    A ``describe()`` that raises ``ValueError`` (an invalid field, e.g. a region name the
    directory would refuse) is logged and retried on the next beat, like a network error:
    the node keeps serving its players either way. With ``claims``, every beat carries the
    pending admitted reservation ids. ``on_ack`` sees each accepted beat's answer (e.g. to
    step down when ``status == "fenced"``); ``request_timeout`` caps one request (default
    ``max(1, 2 * interval)`` s). Beats keep a fixed rate: a slow answer delays the next beat,
    it does not add up.
    """
    if not math.isfinite(interval) or interval <= 0:
        raise ValueError(f"heartbeat interval must be a positive number, got {interval!r}")
    url = directory_url.rstrip("/") + "/nodes/heartbeat"
    limit = aiohttp.ClientTimeout(
        total=request_timeout if request_timeout is not None else max(1.0, 2 * interval)
    )
    loop = asyncio.get_running_loop()
    trouble, invalid = _Throttle(), _Throttle()
    status: str | None = None
    async with aiohttp.ClientSession(timeout=limit) as session:
        next_beat = loop.time()
        while True:
            await asyncio.sleep(max(0.0, next_beat - loop.time()))
            next_beat = max(next_beat + interval, loop.time())
            try:
                beat = describe()
                if beat is not None and claims is not None:
                    beat = dataclasses.replace(beat, claimed=claims.pending())
            except ValueError as error:
                if invalid.due(str(error), loop.time()):
                    log.error("event=heartbeat_invalid error=%r directory=%s", str(error), url)
                continue
            invalid.clear()
            if beat is None:
                continue
            body, headers = beat.signed(secret)
            try:
                async with session.post(url, data=body, headers=headers) as response:
                    code = response.status
                    raw = await response.read()
            except (aiohttp.ClientError, OSError, TimeoutError) as error:
                reason = type(error).__name__
                if trouble.due("unreachable", loop.time()):
                    log.warning(
                        "event=directory_unreachable directory=%s error=%s %s",
                        url,
                        reason,
                        _context(beat),
                    )
                continue
            answer: Any = None
            with contextlib.suppress(ValueError, RecursionError):
                answer = json.loads(raw)
            if code != 200:
                error_code = answer.get("error") if isinstance(answer, dict) else None
                refusal = str(error_code or "unexpected")[:64]
                if trouble.due(f"refused:{code}:{refusal}", loop.time()):
                    log.warning(
                        "event=heartbeat_refused directory=%s status=%d error=%s %s",
                        url,
                        code,
                        refusal,
                        _context(beat),
                    )
                continue
            try:
                ack = DirectoryAck.parse(answer)
            except ValueError:
                if trouble.due("bad_answer", loop.time()):
                    log.warning("event=directory_bad_answer directory=%s %s", url, _context(beat))
                continue
            if trouble.clear():
                log.info("event=directory_reachable directory=%s %s", url, _context(beat))
            if claims is not None and beat.claimed:
                claims.settle(beat.claimed)
            if ack.status != status:
                level = logging.WARNING if ack.status == "fenced" else logging.INFO
                log.log(
                    level,
                    "event=directory_status status=%s group_epoch=%d directory=%s %s",
                    ack.status,
                    ack.group_epoch,
                    url,
                    _context(beat),
                )
                status = ack.status
            if on_ack is not None:
                try:
                    on_ack(ack)
                except Exception:  # the node's bug, but it must not end the heartbeats
                    log.exception("event=heartbeat_callback_failed %s", _context(beat))
