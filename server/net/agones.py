"""The node's Agones SDK client (``arena-server --agones``): the asyncio edge.

:class:`~server.lifecycle.AgonesLifecycle` decides which of the SDK server's REST
calls are due; this module makes them over one aiohttp session, a poll every
:data:`POLL_S`, and feeds each outcome back. The SDK server is a sidecar on localhost: a
call it does not answer is logged (one line, throttled) and tried again after a backoff,
never an error of the node; a node without its sidecar goes on serving its players (and
Agones, which hears no health pings, replaces it).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
from aiohttp import web

from server.lifecycle import (
    HEALTH_INTERVAL_S,
    Action,
    AgonesLifecycle,
    NodeView,
    Outcome,
    SdkCall,
)
from server.logs import EventLogger, Throttle
from server.net.node import Node

__all__ = [
    "CALL_TIMEOUT_S",
    "POLL_S",
    "AgonesSdk",
    "Reporter",
    "drive",
    "exchange",
    "lifecycle_context",
]

log = EventLogger("arena.server")

#: Seconds between two looks at the node: how late a label or Ready can be.
POLL_S = 0.25
#: The longest one call may take (the sidecar is on localhost: it answers in milliseconds
#: or is not there).
CALL_TIMEOUT_S = 2.0


class AgonesSdk:
    """The SDK server's REST gateway at ``url`` (``http://localhost:9358``)."""

    def __init__(self, url: str, session: aiohttp.ClientSession) -> None:
        self.url = url.rstrip("/")
        self.session = session

    async def call(self, call: SdkCall) -> tuple[Outcome, str]:
        """Make ``call``: how it went, and the answer's body (or what went wrong)."""
        action = call.action
        try:
            async with self.session.request(
                action.method,
                self.url + action.path,
                json=call.body,
                timeout=aiohttp.ClientTimeout(total=CALL_TIMEOUT_S),
            ) as answer:
                text = await answer.text()
                status = answer.status
        except (aiohttp.ClientError, TimeoutError, OSError) as error:
            return Outcome.UNANSWERED, f"{type(error).__name__}: {error}".rstrip(": ")
        if 200 <= status < 300:
            return Outcome.OK, text
        detail = f"{status} {text.strip()[:200]}"
        return (Outcome.REFUSED if 400 <= status < 500 else Outcome.UNANSWERED), detail


class Reporter:
    """The log lines of the exchanges (failures throttled: a missing sidecar is retried
    for as long as the node runs)."""

    def __init__(self, fields: Callable[[], dict[str, object]]) -> None:
        self.fields = fields
        self.unanswered = Throttle(30.0)
        self.stalled = False

    def outcome(self, call: SdkCall, outcome: Outcome, detail: str, retry_in: float) -> None:
        action = call.action
        what = f"{action.method} {action.path}"
        if outcome is Outcome.UNANSWERED:
            held = self.unanswered.allow(what)
            if held is not None:
                log.warning(
                    "agones_sdk_unanswered",
                    call=what,
                    error=detail,
                    retry_in_s=round(retry_in, 2),
                    repeats=held,
                    **self.fields(),
                )
        elif outcome is Outcome.REFUSED:
            log.error("agones_sdk_refused", call=what, answer=detail, **self.fields())
        elif action is Action.GAMESERVER:
            log.info("agones_gameserver", **_describe(detail), **self.fields())
        elif action in (Action.LABEL, Action.ANNOTATION):
            log.info(f"agones_{action.name.lower()}", key=call.key, value=call.value,
                     **self.fields())  # fmt: skip
        elif action is not Action.HEALTH:
            why = {"reason": call.reason} if call.reason else {}
            log.info(f"agones_{action.name.lower()}", **why, **self.fields())

    def pulse(self, stalled: bool) -> None:
        """Log the moves in and out of withholding health pings."""
        if stalled == self.stalled:
            return
        self.stalled = stalled
        if stalled:
            log.warning(
                "agones_health_withheld",
                reason="tick_loop_stalled",
                hint="no tick ran since the last health ping: Agones will mark this "
                "GameServer Unhealthy if it stays so",
                **self.fields(),
            )
        else:
            log.info("agones_health_resumed", **self.fields())


def _describe(answer: str) -> dict[str, object]:
    """The GameServer's name and state from ``GET /gameserver`` (for the log)."""
    try:
        found: Any = json.loads(answer)
        return {
            "gameserver": found["object_meta"]["name"],
            "state": found.get("status", {}).get("state", "-"),
        }
    except (ValueError, KeyError, TypeError, AttributeError):
        return {"gameserver": "-", "answer": answer[:200]}


async def exchange(
    lifecycle: AgonesLifecycle,
    sdk: AgonesSdk,
    calls: list[SdkCall],
    clock: Callable[[], float],
    report: Reporter,
) -> None:
    """Make ``calls`` in order, each outcome fed back; stop at the first one the sidecar
    did not answer (the rest wait for the retry)."""
    for call in calls:
        outcome, detail = await sdk.call(call)
        now = clock()
        lifecycle.answered(call, outcome, now)
        report.outcome(call, outcome, detail, lifecycle.retry_at - now)
        if outcome is Outcome.UNANSWERED:
            return


async def drive(
    lifecycle: AgonesLifecycle,
    sdk: AgonesSdk,
    view: Callable[[], NodeView],
    clock: Callable[[], float],
    report: Reporter,
    poll: float = POLL_S,
) -> None:
    """Poll the node and make the calls due, until cancelled."""
    while True:
        try:
            await exchange(lifecycle, sdk, lifecycle.poll(clock(), view()), clock, report)
            report.pulse(lifecycle.pulse.stalled)
        except Exception:  # a bug here must not end the pings quietly, nor the node
            log.exception("agones_client_failed", **report.fields())
        await asyncio.sleep(poll)


def lifecycle_context(
    node: Node,
    clock: Callable[[], float] = time.monotonic,
    poll: float = POLL_S,
    health_interval: float = HEALTH_INTERVAL_S,
) -> Callable[[web.Application], AsyncIterator[None]]:
    """An app ``cleanup_ctx`` that speaks the SDK for ``node`` (``config.agones_url``)
    while the app runs, and says ``Shutdown`` as it stops."""
    config = node.config

    async def agones(app: web.Application) -> AsyncIterator[None]:
        lifecycle = AgonesLifecycle(config.region, config.public_url, health_interval)
        report = Reporter(lambda: node.log_fields)
        async with aiohttp.ClientSession() as session:
            sdk = AgonesSdk(config.agones_url, session)
            log.info("agones_sdk", url=sdk.url, **node.log_fields)
            task = asyncio.create_task(
                drive(lifecycle, sdk, node.platform_view, clock, report, poll), name="agones"
            )
            try:
                yield
            finally:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
                await exchange(lifecycle, sdk, lifecycle.farewell(), clock, report)

    return agones
