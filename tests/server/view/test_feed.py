"""The live view's feed on a real in-process node: the hello, the frames, the viewers."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp

from server.view.net.feed import MAX_VIEWERS, _Viewer
from tests.server.replication.test_replication_link import (
    WAIT_S,
    Player,
    bind,
    cluster,
    primary_and_standby,
)


async def next_json(ws: aiohttp.ClientWebSocketResponse) -> dict[str, Any]:
    async with asyncio.timeout(WAIT_S):
        message = await ws.receive()
    assert message.type is aiohttp.WSMsgType.TEXT, message
    return json.loads(message.data)


async def frame_with(ws: aiohttp.ClientWebSocketResponse, players: int) -> dict[str, Any]:
    """The first frame that shows ``players`` players."""
    async with asyncio.timeout(WAIT_S):
        while True:
            frame = await next_json(ws)
            if len(frame["players"]) == players:
                return frame


def test_a_slow_viewer_gets_the_newest_frame_and_a_count_of_those_it_missed() -> None:
    viewer = _Viewer()
    viewer.offer('{"type":"frame","n":1')
    viewer.offer('{"type":"frame","n":2')
    viewer.offer('{"type":"frame","n":3')
    assert json.loads(viewer.take()) == {"type": "frame", "n": 3, "missed": 2}
    assert not viewer.ready.is_set()
    viewer.offer('{"type":"frame","n":4')
    assert json.loads(viewer.take())["missed"] == 2  # a running count


async def test_a_viewer_sees_the_players_and_tracing_stops_when_it_leaves() -> None:
    async with cluster() as (nodes, session):
        node = await nodes.start(bind(), node_id="alpha", role="primary")
        player = Player(session)
        welcome = await player.join(node.url)
        async with session.ws_connect(node.admin_url + "/view/feed") as ws:
            hello = await next_json(ws)
            assert hello["type"] == "hello" and hello["tick_rate"] == 60
            assert hello["map"]["boxes"] and hello["max_rewind_ms"] == 200.0
            frame = await frame_with(ws, 1)
            assert (frame["role"], frame["epoch"], frame["node"]) == ("primary", 1, "alpha")
            assert frame["players"][0]["id"] == welcome.player_id
            assert frame["budget_ms"] == round(1000 / 60, 3) and frame["tick_ms"]
            assert node.node.view.watching
            assert node.node.matches[0].combat.traces is not None
        async with asyncio.timeout(WAIT_S):
            while node.node.view.watching:
                await asyncio.sleep(0.02)
        assert node.node.matches[0].combat.traces is None


async def test_a_standby_shows_the_replicated_players_and_its_role() -> None:
    async with cluster() as (nodes, session):
        primary, standby = await primary_and_standby(nodes)
        await Player(session).join(primary.url)
        async with session.ws_connect(standby.admin_url + "/view/feed") as ws:
            await next_json(ws)
            frame = await frame_with(ws, 1)
            assert frame["role"] == "standby"


async def test_viewers_beyond_the_limit_are_refused_and_no_view_rate_means_no_view() -> None:
    async with cluster() as (nodes, session):
        node = await nodes.start(bind(), node_id="alpha", role="primary")
        viewers = [
            await session.ws_connect(node.admin_url + "/view/feed") for _ in range(MAX_VIEWERS)
        ]
        try:
            async with session.get(node.admin_url + "/view/feed") as answer:
                assert answer.status == 503
            async with session.get(node.admin_url + "/view") as page:
                assert page.status == 200 and "Arena live view" in await page.text()
        finally:
            for ws in viewers:
                await ws.close()
        quiet = await nodes.start(bind(), node_id="beta", role="primary", view_rate=0.0)
        async with session.get(quiet.admin_url + "/view") as answer:
            assert answer.status == 404
