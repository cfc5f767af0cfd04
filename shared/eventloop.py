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
import signal
from collections.abc import Coroutine, Sequence
from typing import Any, TypeVar

__all__ = ["LOOP_NAME", "run", "sleep"]

T = TypeVar("T")

try:
    import uvloop
except ImportError:  # pragma: no cover - uvloop is a dependency wherever it installs
    uvloop = None  # type: ignore[assignment]

#: The loop :func:`run` uses: "uvloop" or "asyncio".
LOOP_NAME = "asyncio" if uvloop is None else "uvloop"


def run(main: Coroutine[Any, Any, T], cancel_on: Sequence[signal.Signals] = ()) -> T:
    """Like :func:`asyncio.run`, on uvloop's loop when it is installed.

    ``cancel_on``: signals that cancel ``main`` while the loop runs (its clean-up runs, and
    :class:`asyncio.CancelledError` comes out of this call); the handlers the process had
    for them before are put back when the loop ends. asyncio does this for SIGINT only,
    and only when the process did not start with SIGINT ignored (a background job does).
    """

    async def cancellable() -> T:
        loop, task = asyncio.get_running_loop(), asyncio.current_task()
        assert task is not None
        before = {sig: signal.getsignal(sig) for sig in cancel_on}
        for sig in cancel_on:
            loop.add_signal_handler(sig, task.cancel)
        try:
            return await main
        finally:
            for sig, handler in before.items():
                loop.remove_signal_handler(sig)
                signal.signal(sig, signal.SIG_DFL if handler is None else handler)

    if uvloop is None:  # pragma: no cover
        return asyncio.run(cancellable())
    return uvloop.run(cancellable())


async def sleep(seconds: float) -> None:
    """:func:`asyncio.sleep` that does not end early: a tick that starts early misses the
    inputs about to arrive for it. uvloop keeps time in whole milliseconds and ends a sleep
    up to one early, so it sleeps one more; asyncio's loop rounds its timeouts up."""
    if uvloop is not None and isinstance(asyncio.get_running_loop(), uvloop.Loop):
        seconds += 0.001
    await asyncio.sleep(seconds)
