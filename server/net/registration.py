"""The node's heartbeat loop to the directory: signed heartbeats out, acknowledgements in.

A node started with ``--directory URL[,URL...]`` runs :func:`heartbeat_loop` beside its role
loop: every ``interval`` seconds it asks ``describe()`` what it is (region, endpoint, probe,
role, epoch, load) and POSTs that, signed with the cluster secret, to ``/nodes/heartbeat``.
Several URLs name directories sharing one registry (``arena-directory --registry etcd://``):
the beats go to one of them, and when it cannot answer (unreachable, or a 5xx such as 503
``unavailable``) the same beat goes to the next one at once, which then keeps the beats. The
directory is advisory to a running match, so the loop never lets a network problem reach the
node: an unreachable or refusing directory is logged (once per outage or per new error, then
at most every 10 s) and the next beat simply tries again. Only cancellation ends it.

The sans-I/O half (checking a joining player's reservation, the ledger of admitted ones that
the next heartbeat claims) is :mod:`server.directory.reservations`; ``ClaimLedger`` and
``check_reservation`` are re-exported here for the node.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import math
import time
from collections.abc import Callable
from typing import Any

import aiohttp

from server.directory.auth import HeartbeatSequence, signed_heartbeat
from server.directory.reservations import ClaimLedger, check_reservation
from server.logs import EventLogger
from shared.directory import Heartbeat, HeartbeatAck, directory_urls

__all__ = ["ClaimLedger", "check_reservation", "heartbeat_loop"]

log = EventLogger("arena.server")

#: A problem that persists is logged again at most this often (the first time at once).
_REPEAT_LOG_S = 10.0


class _Throttle:
    """Log a persisting condition when it appears, changes, and every ``_REPEAT_LOG_S``."""

    def __init__(self) -> None:
        self.key: str | None = None
        self.logged_at = -math.inf

    def due(self, key: str, now: float) -> bool:
        if key != self.key or now - self.logged_at >= _REPEAT_LOG_S:
            self.key, self.logged_at = key, now
            return True
        return False

    def clear(self) -> bool:
        """Forget the condition; True when there was one (it is over now)."""
        had = self.key is not None
        self.key, self.logged_at = None, -math.inf
        return had


async def _post(
    session: aiohttp.ClientSession, url: str, body: bytes, headers: dict[str, str]
) -> tuple[int, bytes] | str:
    """``(status, body)`` of the answer, or why there is none (the error's name)."""
    try:
        async with session.post(url, data=body, headers=headers) as response:
            return response.status, await response.read()
    except (aiohttp.ClientError, OSError, TimeoutError) as error:
        return type(error).__name__


def _context(beat: Heartbeat) -> dict[str, object]:
    return {"region": beat.region, "node": beat.node_id, "role": beat.role, "epoch": beat.epoch}


async def heartbeat_loop(
    *,
    directory_url: str,
    secret: bytes,
    describe: Callable[[], Heartbeat | None],
    interval: float = 0.5,
    claims: ClaimLedger | None = None,
    on_ack: Callable[[HeartbeatAck], None] | None = None,
    request_timeout: float | None = None,
    wall: Callable[[], float] = time.time,
) -> None:
    """Heartbeat to the directory at ``directory_url`` every ``interval`` s until cancelled.

    ``directory_url`` may name several directories, comma-separated (:func:`directory_urls`):
    a beat that one cannot answer goes on to the next at once.

    ``describe()`` is called for every beat, so the node's current role, epoch and load go
    out; it may return ``None`` while the node has nothing to report yet (still starting).
    A ``describe()`` that raises ``ValueError`` (an invalid field, e.g. a region name the
    directory would refuse) is logged and retried on the next beat, like a network error:
    the node keeps serving its players either way. With ``claims``, every beat carries the
    pending admitted reservation ids. ``on_ack`` sees each accepted beat's answer (e.g. to
    step down when ``status == "fenced"``); ``request_timeout`` caps one request (default
    ``max(1, 2 * interval)`` s); ``wall`` is the unix clock each beat is signed with (its
    sequence starts from it too, so that a restarted node's beats are accepted as new). Beats
    keep a fixed rate: a slow answer delays the next beat, it does not add up.
    """
    if not math.isfinite(interval) or interval <= 0:
        raise ValueError(f"heartbeat interval must be a positive number, got {interval!r}")
    urls = [base + "/nodes/heartbeat" for base in directory_urls(directory_url)]
    current = 0  # the directory the beats go to, until it fails
    answered_by: str | None = None
    limit = aiohttp.ClientTimeout(
        total=request_timeout if request_timeout is not None else max(1.0, 2 * interval)
    )
    loop = asyncio.get_running_loop()
    trouble, invalid = _Throttle(), _Throttle()
    status: str | None = None
    sequence = HeartbeatSequence(wall())
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
                    log.error("heartbeat_invalid", error=str(error), directory=urls[current])
                continue
            invalid.clear()
            if beat is None:
                continue
            body, headers = signed_heartbeat(secret, beat, now=wall(), sequence=sequence.next())
            for _ in urls:  # each directory at most once per beat
                url = urls[current]
                answered = await _post(session, url, body, headers)
                if not isinstance(answered, str) and answered[0] < 500:
                    break
                if trouble.due("unreachable", loop.time()):
                    reason = answered if isinstance(answered, str) else f"HTTP {answered[0]}"
                    log.warning(
                        "directory_unreachable", directory=url, error=reason, **_context(beat)
                    )
                current = (current + 1) % len(urls)
            if isinstance(answered, str) or answered[0] >= 500:
                continue
            if answered_by not in (None, url):
                log.info(
                    "directory_switched", directory=url, previous=answered_by, **_context(beat)
                )
            answered_by = url
            code, raw = answered
            answer: Any = None
            with contextlib.suppress(ValueError, RecursionError):
                answer = json.loads(raw)
            if code != 200:
                error_code = answer.get("error") if isinstance(answer, dict) else None
                refusal = str(error_code or "unexpected")[:64]
                if trouble.due(f"refused:{code}:{refusal}", loop.time()):
                    log.warning(
                        "heartbeat_refused",
                        directory=url,
                        status=code,
                        error=refusal,
                        **_context(beat),
                    )
                continue
            try:
                ack = HeartbeatAck.parse(answer)
            except ValueError:
                if trouble.due("bad_answer", loop.time()):
                    log.warning("directory_bad_answer", directory=url, **_context(beat))
                continue
            if trouble.clear():
                log.info("directory_reachable", directory=url, **_context(beat))
            if claims is not None and beat.claimed:
                claims.settle(beat.claimed)
            if ack.status != status:
                level = logging.WARNING if ack.status == "fenced" else logging.INFO
                log.log(
                    level,
                    "directory_status",
                    status=ack.status,
                    group_epoch=ack.group_epoch,
                    directory=url,
                    **_context(beat),
                )
                status = ack.status
            if on_ack is not None:
                try:
                    on_ack(ack)
                except Exception:  # the node's bug, but it must not end the heartbeats
                    log.exception("heartbeat_callback_failed", **_context(beat))
