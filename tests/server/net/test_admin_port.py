"""Operators apart from players: what a node serves on its player port and on its admin port.

A player who could open ``/view`` would see every other player through walls, and the full
``/health`` names the process, its folders, its coordinator and its standbys. The player
port keeps what players, probes and peers need; the rest is on ``--admin-port`` only.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import aiohttp
import pytest

from launch.nodes import NodeProcess, start_node
from tests.server.replication.test_replication_link import bind, cluster

PUBLIC_HEALTH = {"ready", "status", "role", "epoch"}
OPERATOR_PATHS = ("/metrics", "/view", "/view/feed")


async def get(session: aiohttp.ClientSession, url: str) -> tuple[int, str]:
    async with session.get(url) as answer:
        return answer.status, await answer.text()


@pytest.fixture(scope="module")
def plain_node() -> Iterator[NodeProcess]:
    """arena-server with its defaults: no admin port."""
    with start_node("--node-id", "plain", "--admin-port", "off", "--log-level", "warning") as node:
        yield node


async def test_by_default_the_player_port_serves_no_view_no_metrics_and_a_minimal_health(
    plain_node: NodeProcess,
) -> None:
    assert plain_node.admin_url == ""  # nothing announced: there is none
    base = plain_node.base_url
    async with aiohttp.ClientSession() as session:
        for path in OPERATOR_PATHS:
            assert (await get(session, base + path))[0] == 404, path
        async with session.get(base + "/health") as answer:
            assert answer.status == 200
            health = await answer.json()
        async with session.get(base + "/live") as answer:
            live = await answer.json()
        async with session.get(base + "/peer") as answer:
            peer = await answer.json()
        assert (await get(session, base + "/probe"))[0] == 204
    assert set(health) == PUBLIC_HEALTH
    assert (health["ready"], health["status"], health["role"]) == (True, "ready", "primary")
    assert "pid" not in live
    # What the region's other nodes need to agree on a primary, and nothing else.
    assert set(peer) == PUBLIC_HEALTH | {"node", "replicated_tick", "eligible"}


async def test_with_an_admin_port_the_operators_surfaces_are_served_there_only() -> None:
    with start_node("--node-id", "admin", "--log-level", "warning") as node:  # --admin-port 0
        assert node.admin_url.startswith("http://127.0.0.1:")
        assert node.admin_url != node.base_url
        async with aiohttp.ClientSession() as session:
            status, metrics = await get(session, node.admin_url + "/metrics")
            assert status == 200 and "arena_tick_duration_seconds" in metrics
            status, page = await get(session, node.admin_url + "/view")
            assert status == 200 and "<html" in page.lower()
            async with session.get(node.admin_url + "/health") as answer:
                full = await answer.json()
            assert full["node"] == "admin" and full["pid"] == node.process.pid
            for path in OPERATOR_PATHS:
                assert (await get(session, node.base_url + path))[0] == 404, path
            async with session.get(node.base_url + "/health") as answer:
                assert set(await answer.json()) == PUBLIC_HEALTH
            # The game is not on the admin port.
            assert (await get(session, node.admin_url + "/ws"))[0] == 404


async def test_in_process_the_admin_app_serves_what_the_player_app_does_not() -> None:
    async with cluster() as (nodes, session):
        node = await nodes.start(bind(), node_id="alpha", role="primary")
        assert (await get(session, node.url + "/metrics"))[0] == 404
        assert (await get(session, node.admin_url + "/metrics"))[0] == 200
        async with session.get(node.admin_url + "/health") as answer:
            assert {"standbys", "coordinator", "checkpoint", "pid"} <= set(await answer.json())


@pytest.mark.parametrize("value", ["nope", "70000", "-1"])
def test_a_bad_admin_port_is_one_line(value: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "server.net.cli", "--admin-port", value],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "--admin-port" in done.stderr, done.stderr
