"""Serving an aiohttp app from a command until it is told to stop: the edge that the
directory and ``arena-replay --serve`` share (the node's own, with its admin port, TLS and
readiness, is :mod:`server.net.cli`'s)."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import AsyncIterator

from aiohttp import web

__all__ = ["serving", "stop_on_signals"]


def stop_on_signals() -> asyncio.Event:
    """An event that the first SIGTERM or SIGINT sets, handled from now on (call it before
    announcing an address, so that a signal sent at once still stops cleanly)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    return stop


@contextlib.asynccontextmanager
async def serving(
    app: web.Application, host: str, port: int, *, shutdown_timeout: float
) -> AsyncIterator[str]:
    """Serve ``app`` on ``host:port`` while the block runs, yielding its base URL (with the
    port bound when ``port`` is 0)."""
    runner = web.AppRunner(
        app, handle_signals=False, shutdown_timeout=shutdown_timeout, access_log=None
    )
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
        bound = runner.addresses[0][1] if runner.addresses else port
        shown = f"[{host}]" if ":" in host else host
        yield f"http://{shown}:{bound}"
    finally:
        await runner.cleanup()
