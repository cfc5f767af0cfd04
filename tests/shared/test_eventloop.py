"""The node's and the bots' event loop: uvloop where installed, asyncio's API either way."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

from shared import eventloop


def test_run_returns_the_coroutine_s_result_on_the_named_loop() -> None:
    async def which_loop() -> str:
        await asyncio.sleep(0)
        return type(asyncio.get_running_loop()).__module__

    module = eventloop.run(which_loop())
    assert module.startswith("uvloop") == (eventloop.LOOP_NAME == "uvloop")


def test_uvloop_is_what_a_linux_install_runs() -> None:
    # uvloop is a dependency on every platform it supports; CI and the demo run Linux.
    assert eventloop.LOOP_NAME == "uvloop"


def test_a_sleep_on_uvloop_asks_for_a_millisecond_more(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # uvloop keeps time in whole milliseconds and may end a sleep up to one early; a tick
    # must not start before it is due. asyncio's own loop rounds up, so it gets no more.
    asked: list[float] = []
    real_sleep = asyncio.sleep

    async def recording(seconds: float) -> None:
        asked.append(seconds)
        await real_sleep(0)

    monkeypatch.setattr(asyncio, "sleep", recording)
    eventloop.run(eventloop.sleep(0.010))
    asyncio.run(eventloop.sleep(0.010))
    assert asked == [0.011, 0.010]


def test_a_cancel_on_signal_cancels_the_main_task_and_its_cleanup_runs() -> None:
    cleaned_up = []

    async def main() -> None:
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            await asyncio.sleep(5)
        finally:
            cleaned_up.append(True)

    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(asyncio.CancelledError):
        eventloop.run(main(), cancel_on=(signal.SIGTERM,))
    assert cleaned_up == [True]
    assert signal.getsignal(signal.SIGTERM) == before
