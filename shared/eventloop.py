"""The event loop that the node and the bot processes run on.

Both are I/O-bound loops over hundreds of sockets, where the loop's own per-event work
(epoll, reads, callbacks) is a fair share of the CPU. uvloop, libuv under the asyncio API,
does that work in C; it is the usual loop for asyncio servers. Where it is not installed
(it does not support Windows), the standard asyncio loop runs the same code.

Code that takes a socket's transport over must not check ``isinstance(transport,
asyncio.Transport)``: uvloop's transports implement that interface without deriving
from it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["LOOP_NAME", "run", "sleep"]

T = TypeVar("T")

try:
    import uvloop
except ImportError:  # pragma: no cover - uvloop is a dependency wherever it installs
    uvloop = None  # type: ignore[assignment]

#: The loop :func:`run` uses: "uvloop" or "asyncio".
LOOP_NAME = "asyncio" if uvloop is None else "uvloop"


def run(main: Coroutine[Any, Any, T]) -> T:
    """Like :func:`asyncio.run`, on uvloop's loop when it is installed."""
    if uvloop is None:  # pragma: no cover
        return asyncio.run(main)
    return uvloop.run(main)


async def sleep(seconds: float) -> None:
    """:func:`asyncio.sleep` that does not end early: a tick that starts early misses the
    inputs about to arrive for it. uvloop keeps time in whole milliseconds and ends a sleep
    up to one early, so it sleeps one more; asyncio's loop rounds its timeouts up."""
    if uvloop is not None and isinstance(asyncio.get_running_loop(), uvloop.Loop):
        seconds += 0.001
    await asyncio.sleep(seconds)
