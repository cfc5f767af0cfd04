"""systemd's notify protocol (``Type=notify``): a datagram to ``$NOTIFY_SOCKET``.

What sd_notify(3) does, in the few lines the node needs (no libsystemd): ``READY=1`` once
the node can serve (its kernels loaded and its role decided: ``systemctl start`` returns
then, and units ordered after it start then), ``STATUS=`` lines for ``systemctl status``,
``STOPPING=1`` on SIGTERM, and ``WATCHDOG=1`` when the unit sets ``WatchdogSec=``, sent by
:class:`~server.lifecycle.Pulse`: a primary whose tick loop stalled stops pinging,
and systemd kills and restarts it (as a standby, deploy/arena-server@.service). Without
``$NOTIFY_SOCKET`` (not started by systemd) every call does nothing.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import AsyncIterator, Callable, Mapping

from aiohttp import web

from server.lifecycle import NodeView, Pulse, systemd_status
from server.logs import EventLogger, Throttle

__all__ = ["notify", "status_context", "watchdog_interval"]

log = EventLogger("arena.server")

_failures = Throttle(60.0)


def _address(environ: Mapping[str, str]) -> str | None:
    """The notify socket's address: a path, or an abstract name (``@``), else None."""
    path = environ.get("NOTIFY_SOCKET", "")
    if path.startswith("@"):
        return "\0" + path[1:]
    return path if path.startswith("/") else None


def notify(*assignments: str, environ: Mapping[str, str] = os.environ) -> bool:
    """Send ``assignments`` (``"READY=1"``, ``"STATUS=..."``) in one datagram; whether
    it was sent. Never blocks: a full queue drops it (and says so, in a line)."""
    address = _address(environ)
    if address is None:
        return False
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.setblocking(False)
            sock.connect(address)
            sock.send("\n".join(assignments).encode())
    except OSError as error:
        held = _failures.allow("notify")
        if held is not None:
            log.warning("sd_notify_failed", error=str(error), repeats=held)
        return False
    return True


def watchdog_interval(environ: Mapping[str, str] = os.environ) -> float | None:
    """Seconds between two ``WATCHDOG=1`` pings: half of ``WatchdogSec=``, as
    sd_watchdog_enabled(3) advises; None when the watchdog is off or not ours."""
    usec = environ.get("WATCHDOG_USEC", "")
    pid = environ.get("WATCHDOG_PID", "")
    if not usec.isdigit() or int(usec) == 0 or (pid and pid != str(os.getpid())):
        return None
    return int(usec) / 2e6


def status_context(
    view: Callable[[], NodeView],
    fields: Callable[[], dict[str, object]],
    environ: Mapping[str, str] = os.environ,
    clock: Callable[[], float] = time.monotonic,
) -> Callable[[web.Application], AsyncIterator[None]] | None:
    """An app ``cleanup_ctx`` that keeps systemd's ``STATUS=`` current and pings the
    watchdog; None when not started by systemd."""
    if _address(environ) is None:
        return None
    interval = watchdog_interval(environ)
    pulse = Pulse(interval) if interval is not None else None
    poll = 1.0 if interval is None else min(1.0, interval / 4)

    async def report() -> None:
        shown, stalled = "", False
        while True:
            now, seen = clock(), view()
            if (status := systemd_status(seen)) != shown:
                shown = status
                notify(f"STATUS={status}", environ=environ)
            if pulse is not None and pulse.due(now, seen):
                pulse.sent(now, seen)
                notify("WATCHDOG=1", environ=environ)
            if pulse is not None and pulse.stalled != stalled:
                stalled = pulse.stalled
                if stalled:
                    log.warning("watchdog_withheld", reason="tick_loop_stalled", **fields())
                else:
                    log.info("watchdog_resumed", **fields())
            await asyncio.sleep(poll)

    async def systemd(app: web.Application) -> AsyncIterator[None]:
        task = asyncio.create_task(report(), name="systemd-status")
        yield
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    return systemd
