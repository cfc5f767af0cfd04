"""The node's heartbeat loop, against an in-process directory on a loopback port (the
reservation check and the claim ledger alone: ``tests/server/directory/test_reservations.py``)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from server.directory.net.app import create_app
from server.directory.service import DirectoryConfig
from server.net.registration import ClaimLedger, check_reservation, heartbeat_loop
from shared.directory import Heartbeat, HeartbeatAck
from tests.server.net.conftest import LogLines
from tests.shared import heartbeats

SECRET = b"registration-test-secret-0123456789"
INTERVAL = 0.05


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.asynccontextmanager
async def directory_at(port: int) -> AsyncIterator[str]:
    """An in-process directory listening on 127.0.0.1:port until the block ends."""
    runner = web.AppRunner(create_app(DirectoryConfig(secret=SECRET, heartbeat_timeout=5.0)))
    await runner.setup()
    try:
        await web.TCPSite(runner, "127.0.0.1", port).start()
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


@pytest.fixture
async def directory() -> AsyncIterator[str]:
    async with directory_at(free_port()) as url:
        yield url


def beat(**changes: Any) -> Heartbeat:
    """A heartbeat whose probe the test reads back from the directory's listing."""
    return heartbeats.beat(
        **{"endpoint": "ws://127.0.0.1:9/ws", "probe": "http://127.0.0.1:9/probe", **changes}
    )


@contextlib.asynccontextmanager
async def running(**kwargs: Any) -> AsyncIterator[asyncio.Task[None]]:
    """The heartbeat loop as a task, cancelled and awaited at the end (it must still run)."""
    kwargs.setdefault("secret", SECRET)
    kwargs.setdefault("interval", INTERVAL)
    task = asyncio.create_task(heartbeat_loop(**kwargs))
    try:
        yield task
        assert not task.done(), "the heartbeat loop ended on its own"
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def regions(url: str) -> dict[str, Any]:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"{url}/regions", timeout=aiohttp.ClientTimeout(total=2)) as response,
    ):
        assert response.status == 200
        body: dict[str, Any] = await response.json()
        return {r["region"]: r for r in body["regions"]}


async def until(predicate: Any, within: float = 5.0) -> None:
    """Poll ``predicate`` (state in another task or process: no event to wait on)."""
    async with asyncio.timeout(within):
        while not await predicate():
            await asyncio.sleep(INTERVAL / 2)


# -- heartbeats --------------------------------------------------------------------------


async def test_heartbeats_register_the_node_and_follow_its_state(directory: str) -> None:
    state = {"players": 0}
    acks: list[HeartbeatAck] = []

    def describe() -> Heartbeat:
        return beat(players=state["players"])

    async with running(directory_url=directory, describe=describe, on_ack=acks.append):

        async def registered() -> bool:
            eu = (await regions(directory)).get("eu")
            return eu is not None and eu["primary"] is not None

        await until(registered)
        eu = (await regions(directory))["eu"]
        assert eu["primary"]["node_id"] == "eu-1"
        assert eu["probe"] == "http://127.0.0.1:9/probe"
        state["players"] = 4  # the next beat reports the node's current load

        async def four_players() -> bool:
            return bool((await regions(directory))["eu"]["players"] == 4)

        await until(four_players)
    assert acks and acks[-1] == HeartbeatAck(
        node_id="eu-1", status="routable", group_epoch=1, reserved=0, heartbeat_timeout_s=5.0
    )


async def test_a_stopped_directory_does_not_end_the_loop_and_a_restarted_one_hears_it(
    logs: LogLines,
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"

    async def registered() -> bool:
        return "eu" in await regions(url)

    async def back() -> bool:
        return bool(logs.events("directory_reachable"))

    async with running(directory_url=url, describe=beat):
        async with directory_at(port):
            await until(registered)
        logs.lines.clear()
        # The directory is gone: several beats fail, one line says so, the loop goes on.
        await asyncio.sleep(8 * INTERVAL)
        unreachable = logs.events("directory_unreachable")
        assert len(unreachable) == 1, logs.lines
        assert "region=eu node=eu-1 role=primary epoch=1" in unreachable[0]
        async with directory_at(port):
            await until(registered)
            await until(back)


async def test_a_directory_that_refuses_is_logged_once_and_retried(
    directory: str, logs: LogLines
) -> None:
    async with running(directory_url=directory, describe=beat, secret=b"not-the-cluster-secret"):
        await asyncio.sleep(8 * INTERVAL)
    refused = logs.events("heartbeat_refused")
    assert len(refused) == 1, logs.lines
    assert "status=401 error=bad_signature" in refused[0]
    assert await regions(directory) == {}


async def test_nothing_to_report_and_invalid_descriptions_do_not_end_the_loop(
    directory: str, logs: LogLines
) -> None:
    calls = {"n": 0}

    def describe() -> Heartbeat | None:
        calls["n"] += 1
        if calls["n"] <= 2:
            return None  # still starting
        if calls["n"] <= 5:
            return beat(region="Not A Region")  # raises MessageError (a ValueError)
        return beat()

    async with running(directory_url=directory, describe=describe):

        async def registered() -> bool:
            return "eu" in await regions(directory)

        await until(registered)
    assert len(logs.events("heartbeat_invalid")) == 1, logs.lines


async def test_the_loop_refuses_a_nonsense_interval() -> None:
    with pytest.raises(ValueError, match="interval"):
        await heartbeat_loop(
            directory_url="http://127.0.0.1:9", secret=SECRET, describe=beat, interval=0
        )


# -- claims ------------------------------------------------------------------------------


async def test_claimed_reservations_settle_the_directorys_accounting(directory: str) -> None:
    """Seat -> reservation -> node admits it -> next heartbeat claims it -> reserved is 0."""
    claims = ClaimLedger()
    async with running(directory_url=directory, describe=beat, claims=claims):

        async def registered() -> bool:
            return "eu" in await regions(directory)

        await until(registered)
        async with (
            aiohttp.ClientSession() as session,
            session.post(f"{directory}/seat", json={"player": "alice", "rtt_ms": {"eu": 30}}) as r,
        ):
            seat = await r.json()
        assert seat["node_id"] == "eu-1"
        assert (await regions(directory))["eu"]["reserved"] == 1
        code = check_reservation(
            SECRET, seat["reservation"], "eu-1", time.time(), player="alice", claims=claims
        )
        assert code is None

        async def settled() -> bool:
            return bool((await regions(directory))["eu"]["reserved"] == 0)

        await until(settled)
        assert len(claims) == 0
