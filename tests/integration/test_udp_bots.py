"""Real node processes, real bots over UDP: they connect, play, and survive a SIGKILL of
the primary by resuming their seats on the promoted standby with the same connect token."""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import pytest

from client_sim.latency import LinkProfile, draw_bot, parse_distribution
from client_sim.swarm import Swarm, SwarmConfig
from launch.chaos import kill_primary, node_health
from launch.nodes import start_node
from tests.integration.test_failover import (
    COMMON,
    assert_nothing_acknowledged_lost,
    region,
    secret_env,  # noqa: F401  (the fixture)
    until_live_standby,
)

pytestmark = pytest.mark.integration


def udp_swarm(url: str, count: int, duration: float, loss: float = 0.0) -> Swarm:
    rtt = parse_distribution("40ms")
    profile = LinkProfile(jitter_ms=1.0, loss=loss)
    bots = tuple(draw_bot(i, seed=23, rtt=rtt, profile=profile) for i in range(count))
    return Swarm(SwarmConfig(url=url, bots=bots, duration=duration, seed=23, transport="udp"))


async def metrics(base_url: str) -> dict[str, float]:
    async with aiohttp.ClientSession() as session:
        async with session.get(base_url + "/metrics") as response:
            text = await response.text()
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            values[name] = float(value)
    return values


async def test_udp_bots_connect_play_and_their_inputs_are_applied(
    secret_env: dict[str, str],  # noqa: F811
) -> None:
    with start_node(*COMMON, "--node-id", "u", env=secret_env) as node:
        bots = udp_swarm(node.url, 10, duration=4.0, loss=0.02)
        async with asyncio.timeout(60):
            result = await bots.run()
        counters = await metrics(node.admin_url)
    assert result.connected == 10
    assert not result.errors, result.errors
    assert result.transports == {"udp": 10}
    assert sum(result.inputs_acked) >= 0.95 * sum(result.inputs_sent)
    # Every input reached the node once and in order: none refused as already received.
    assert counters.get('arena_inputs_rejected_total{reason="stale"}', 0.0) == 0.0
    assert min(result.snapshots) >= 3.0 * 30 * 0.8  # most of ~4 s of 30 Hz snapshots
    # 2 % of datagrams lost, nothing retransmitted: once a path has lost one, its player
    # gets each snapshot twice; no gap is long.
    assert counters.get("arena_udp_snapshot_repeats_total", 0.0) > 0
    assert max(result.longest_gaps) < 0.2
    assert result.inputs_recovered > 0 and result.inputs_resent > 0


async def test_udp_bots_resume_their_seats_on_the_standby_after_a_sigkill(
    secret_env: dict[str, str],  # noqa: F811
) -> None:
    with region(secret_env) as (primary, standby):
        await until_live_standby(primary)
        bots = udp_swarm(primary.url, 10, duration=7.0)

        async def kill_midway() -> dict[str, Any]:
            await asyncio.sleep(2.5)
            return await kill_primary(primary.admin_url, [standby.admin_url])

        async with asyncio.timeout(90):
            result, kill = await asyncio.gather(bots.run(), kill_midway())
        health = await node_health(standby.url)
    assert result.connected == 10
    assert kill["epoch"] == kill["old_epoch"] + 1
    assert_nothing_acknowledged_lost(result, [kill])
    assert all(event.resumed for event in result.failovers)  # their own seats, not new ones
    assert health is not None and health["role"] == "primary"
    # All on the survivor (its URL as the welcome's standby list spells it).
    assert [urlsplit(url).netloc for url in result.node_urls] == [urlsplit(standby.url).netloc]
    assert sum(result.node_urls.values()) == 10
    assert sum(result.inputs_acked) >= 0.9 * sum(result.inputs_sent)
