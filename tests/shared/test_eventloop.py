"""The node's and the bots' event loop: uvloop where installed, asyncio's API either way."""

from __future__ import annotations

import asyncio

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
