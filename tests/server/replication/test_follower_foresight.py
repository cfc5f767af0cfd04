"""A standby warns its coordinator before the primary's silence counts, and only then.

The primary here is a fake on 127.0.0.1 that answers the hello, says the standby is in
sync (or not) and then falls silent, as a paused process does.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from server.replication import messages
from server.replication.net.follower import Follower
from server.sim.hitreg import make_validator
from server.sim.match import MatchConfig
from server.sim.matchset import MatchSet
from shared.arena_map import default_map

SILENCE_S = 0.3
FORESIGHT_S = 0.1
WAIT_S = 10.0


async def silent_primary(in_sync: bool) -> TestServer:
    """A primary that challenges, reads the hello, maybe admits the standby, then says
    nothing more (it keeps the link open)."""

    async def replicate(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        await ws.send_bytes(messages.encode(messages.Challenge("0" * messages.NONCE_CHARS)))
        await ws.receive()  # the hello
        if in_sync:
            await ws.send_bytes(messages.encode(messages.InSync(1)))
        async for _ in ws:  # silent until the standby hangs up
            pass
        return ws

    app = web.Application()
    app.router.add_get("/replicate", replicate)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    return server


@pytest.fixture
async def follower() -> AsyncIterator[Follower]:
    matches = MatchSet(MatchConfig(arena=default_map(), max_players=2), 1, make_validator())
    follower = Follower(matches, "standby", b"s" * 32, SILENCE_S, time.monotonic, dict)
    yield follower
    await follower.close()


@pytest.mark.parametrize("in_sync", [True, False])
async def test_an_eligible_standby_foresees_the_silence_once(
    follower: Follower, in_sync: bool
) -> None:
    warned: list[float] = []
    follower.foresee = lambda: warned.append(time.monotonic())
    follower.foresight = FORESIGHT_S
    primary = await silent_primary(in_sync)
    try:
        async with asyncio.timeout(WAIT_S):
            outcome = await follower.follow(str(primary.make_url("")))
        counted_at = time.monotonic()
    finally:
        await follower.close()
        await primary.close()
    assert outcome.reason == "silent"
    assert follower.eligible is in_sync
    if not in_sync:
        assert warned == []  # a standby that may not campaign has nothing to prepare
        return
    assert len(warned) == 1
    assert warned[0] < counted_at  # before the silence counted, not after
