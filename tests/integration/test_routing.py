"""A three-region cluster of real processes, and bots that measure their way to a seat."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from typing import Any

import aiohttp
import pytest

from client_sim.geography import NoCapacity
from client_sim.latency import LinkProfile
from client_sim.routing import route_bots, routing_figures
from launch.cluster import Cluster, ClusterSpec, parse_regions, start_cluster
from shared.geo import rtt_ms

pytestmark = pytest.mark.integration


async def regions(cluster: Cluster) -> dict[str, Any]:
    async with aiohttp.ClientSession() as session:
        async with session.get(cluster.directory_url + "/regions") as response:
            body = await response.json()
    return {r["region"]: r for r in body["regions"]}


async def primary_of(cluster: Cluster, region: str) -> str | None:
    entry = (await regions(cluster)).get(region) or {}
    return (entry.get("primary") or {}).get("node_id")


async def seat(cluster: Cluster, population: str, count: int, seed: int = 3) -> dict[str, Any]:
    _, routes = await route_bots(
        directory=cluster.directory_url,
        population=population,
        count=count,
        seed=seed,
        profile=LinkProfile(),
    )
    return {"routes": routes, **routing_figures(routes)}


def spec(**overrides: Any) -> ClusterSpec:
    fields: dict[str, Any] = {
        "regions": parse_regions("na,eu,asia"),
        "standbys": 0,
        "max_players": 40,
        "heartbeat_timeout": 1.0,
    }
    return ClusterSpec(**{**fields, **overrides})


async def test_a_skewed_population_lands_on_its_nearest_regions_with_no_regret() -> None:
    with start_cluster(spec()) as cluster:
        seated = await seat(cluster, "na:0.6,eu:0.3,asia:0.1", 30)
    assert len(seated["routes"]) == 30
    assert seated["regret_ms"] == 0.0
    assert seated["players_by_region"]["na"] > seated["players_by_region"]["eu"]
    assert sum(seated["players_by_region"].values()) == 30
    assert seated["overflowed"] == 0


async def test_when_the_best_region_is_full_players_overflow_to_the_next_best() -> None:
    with start_cluster(spec(max_players=5, overflow_slack_ms=1000.0)) as cluster:
        seated = await seat(cluster, "na:1.0", 9)
    by_region = seated["players_by_region"]
    assert by_region["na"] == 5
    # na's next-best region in the latency matrix takes the rest.
    next_best = min(("eu", "asia"), key=lambda region: rtt_ms("na", region))
    assert by_region[next_best] == 4
    assert seated["overflowed"] == 4
    assert seated["regret_ms"] > 0


async def test_without_slack_a_full_region_means_no_capacity() -> None:
    with start_cluster(spec(max_players=2, overflow_slack_ms=0.0)) as cluster:
        await seat(cluster, "na:1.0", 2)
        with pytest.raises(NoCapacity) as refused:
            await asyncio.wait_for(seat(cluster, "na:1.0", 1, seed=9), timeout=30)
    assert refused.value.code == "no_capacity"
    assert "is full" in str(refused.value)


async def test_a_dead_node_leaves_routing_within_its_heartbeat_timeout() -> None:
    with start_cluster(spec()) as cluster:
        assert "eu" in await regions(cluster)
        os.kill(cluster.regions["eu"].primary.pid, signal.SIGKILL)
        killed = time.monotonic()
        async with asyncio.timeout(10):
            while "eu" in await regions(cluster):
                await asyncio.sleep(0.05)
        gone_after = time.monotonic() - killed
        seated = await seat(cluster, "eu:1.0", 4)
    # The 1 s timeout, plus a heartbeat and a poll, with room for a busy machine's slow
    # answers; a directory that never expired nodes would not get here within 10 s.
    assert gone_after < 1.0 + 2.0
    assert "eu" not in seated["players_by_region"]


async def test_after_a_failover_the_directory_sends_new_players_to_the_new_primary() -> None:
    with start_cluster(spec(standbys=1)) as cluster:
        na = cluster.regions["na"]
        os.kill(na.primary.pid, signal.SIGKILL)
        standby = na.standbys[0]
        async with asyncio.timeout(10):
            while await primary_of(cluster, "na") != standby.node_id:
                await asyncio.sleep(0.05)
        seated = await seat(cluster, "na:1.0", 3)
    assert {route.node_id for route in seated["routes"]} == {standby.node_id}
    assert all(route.url == standby.ws_url for route in seated["routes"])
