"""Real primary and standby processes, real bots: kill or pause the primary, the match goes on."""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
from collections.abc import AsyncIterator, Iterator
from typing import Any

import aiohttp
import pytest

from client_sim.latency import LinkProfile, draw_bot, parse_distribution
from client_sim.report import failover_figures
from client_sim.swarm import Swarm, SwarmConfig, SwarmResult
from launch.chaos import kill_primary, node_health, wait_for_new_primary
from launch.nodes import NodeProcess, running_node, start_node
from launch.supervisor import READY_WITHIN_S
from shared import protocol
from tests.integration.etcd import etcd_url  # noqa: F401  (the fixture, for the etcd variant)

pytestmark = pytest.mark.integration

COMMON = ("--log-level", "warning", "--tick-rate", "60")
#: How long a standby may take to be live: a node that starts on a cold kernel cache on a
#: busy 2-core machine needs tens of seconds.
READY_S = float(READY_WITHIN_S)


@pytest.fixture
def secret_env() -> dict[str, str]:
    return {"ARENA_CLUSTER_SECRET": secrets.token_hex(16)}


@contextlib.contextmanager
def region(env: dict[str, str], *extra: str) -> Iterator[tuple[NodeProcess, NodeProcess]]:
    with (
        start_node(*COMMON, "--node-id", "a", *extra, env=env) as primary,
        start_node(
            *COMMON,
            "--node-id",
            "b",
            "--role",
            "standby",
            "--primary",
            primary.base_url,
            *extra,
            env=env,
        ) as standby,
    ):
        yield primary, standby


async def until_live_standby(primary: NodeProcess) -> None:
    async with asyncio.timeout(READY_S):
        while True:
            health = await node_health(primary.admin_url)
            if health and any(s["state"] == "in_sync" for s in health["standbys"]):
                return
            await asyncio.sleep(0.05)


def swarm(url: str, count: int, duration: float) -> Swarm:
    rtt = parse_distribution("30ms")
    bots = tuple(
        draw_bot(i, seed=11, rtt=rtt, profile=LinkProfile(jitter_ms=1.0)) for i in range(count)
    )
    return Swarm(SwarmConfig(url=url, bots=bots, duration=duration, seed=11))


def assert_nothing_acknowledged_lost(result: SwarmResult, kills: list[dict[str, Any]]) -> None:
    figures = failover_figures(result.failovers, kills)
    assert figures["events"] == result.connected * len(kills), figures
    assert figures["bots_lost"] == 0, figures
    assert figures["acked_ticks_lost"] == 0, figures
    assert figures["inputs_lost"] == 0, figures


async def test_sigkill_of_the_primary_every_bot_resumes_and_nothing_is_lost(
    secret_env: dict[str, str],
) -> None:
    with region(secret_env) as (primary, standby):
        await until_live_standby(primary)
        bots = swarm(primary.url, 10, duration=6.0)

        async def kill_midway() -> dict[str, Any]:
            await asyncio.sleep(2.5)
            return await kill_primary(primary.admin_url, [standby.admin_url])

        result, kill = await asyncio.gather(bots.run(), kill_midway())
        health = await node_health(standby.admin_url)
    assert_one_failover_lost_nothing(result, kill, health, bots=10)


def assert_one_failover_lost_nothing(
    result: SwarmResult, kill: dict[str, Any], health: dict[str, Any], bots: int
) -> None:
    """One kill of the primary: every bot played on and nothing acknowledged was lost."""
    assert result.connected == bots
    assert kill["epoch"] == kill["old_epoch"] + 1
    assert_nothing_acknowledged_lost(result, [kill])
    failover = health["failover"]
    # The standby's state at promotion is the primary's at the last tick it sent.
    assert failover["primary_hash"] == failover["promoted_hash"]
    assert failover["resyncs"] == 0
    assert health["role"] == "primary"
    # The match went on: the bots kept being acknowledged after the takeover.
    assert sum(result.inputs_acked) >= 0.9 * sum(result.inputs_sent)


async def test_repeated_kills_each_new_standby_takes_over_in_turn(
    secret_env: dict[str, str],
) -> None:
    with region(secret_env) as (a, b):
        await until_live_standby(a)
        bots = swarm(a.url, 6, duration=9.0)
        kills: list[dict[str, Any]] = []
        played = asyncio.Event()

        async def play() -> SwarmResult:
            try:
                return await bots.run()
            finally:
                played.set()

        async def chaos() -> None:
            await asyncio.sleep(2.0)
            kills.append(await kill_primary(a.admin_url, [b.admin_url]))
            async with running_node(  # (off the loop: the bots play on it meanwhile)
                *COMMON,
                "--node-id",
                "c",
                "--role",
                "standby",
                "--primary",
                b.base_url,
                env=secret_env,
            ) as c:
                await until_live_standby(b)
                await asyncio.sleep(1.0)
                kills.append(await kill_primary(b.admin_url, [c.admin_url]))
                await played.wait()  # c serves the bots to the end

        result, _ = await asyncio.gather(play(), chaos())
    assert [k["epoch"] for k in kills] == [2, 3]
    assert result.connected == 6
    assert_nothing_acknowledged_lost(result, kills)


async def watch_player(url: str, seen: list[tuple[int, int]]) -> None:
    """A raw player on one node: records (epoch, tick) of every snapshot it is shown."""
    async with aiohttp.ClientSession() as session, session.ws_connect(url) as ws:
        await ws.send_bytes(
            protocol.encode(protocol.JoinMessage(protocol.PROTOCOL_VERSION, "watcher"))
        )
        async for message in ws:
            if message.type is not aiohttp.WSMsgType.BINARY:
                break
            decoded = protocol.decode_server(message.data)
            if isinstance(decoded, protocol.SnapshotMessage):
                seen.append((decoded.epoch, decoded.tick))


@contextlib.asynccontextmanager
async def watching(url: str) -> AsyncIterator[list[tuple[int, int]]]:
    seen: list[tuple[int, int]] = []
    task = asyncio.create_task(watch_player(url, seen))
    try:
        yield seen
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, aiohttp.ClientError):
            await task


async def split_brain(env: dict[str, str], *extra: str) -> None:
    with region(env, *extra) as (primary, standby):
        await until_live_standby(primary)
        before = await node_health(primary.admin_url)
        assert before is not None
        epoch = before["epoch"]  # 1 with the static coordinator, an etcd revision with etcd
        async with watching(primary.url) as shown:
            await asyncio.sleep(0.5)
            os.kill(primary.process.pid, signal.SIGSTOP)
            try:
                successor = await wait_for_new_primary([standby.admin_url], epoch, within=10.0)
            finally:
                os.kill(primary.process.pid, signal.SIGCONT)
            assert successor is not None, "the standby never took over"
            first_new_tick = successor["failover"]["first_tick"]
            async with asyncio.timeout(10):  # the old primary learns the higher epoch
                while True:
                    old = await node_health(primary.admin_url)
                    if old and old["role"] == "standby" and old["epoch"] > epoch:
                        break
                    await asyncio.sleep(0.05)
            await asyncio.sleep(0.5)
        assert shown, "the watcher saw no snapshot before the pause"
        assert all(seen_epoch == epoch for seen_epoch, _ in shown)
        assert max(tick for _, tick in shown) < first_new_tick
        # The new primary counts its promotion as spurious: the old one was alive after all.
        async with aiohttp.ClientSession() as session:
            async with session.get(standby.admin_url + "/metrics") as response:
                metrics = await response.text()
        assert "arena_promotions_spurious_total 1.0" in metrics


async def test_a_paused_primary_steps_down_and_never_publishes_the_new_range(
    secret_env: dict[str, str],
) -> None:
    await split_brain(secret_env)


async def test_split_brain_with_the_etcd_coordinator(
    secret_env: dict[str, str],
    etcd_url: str,  # noqa: F811
) -> None:
    await split_brain(secret_env, "--coordinator", "etcd://" + etcd_url.split("://", 1)[1])
