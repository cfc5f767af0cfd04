"""The node's image (deploy/Containerfile), built from this checkout and run: a container is
ready in seconds on the kernels compiled into the image, stops gracefully on ``podman
stop``, and a primary and a standby in containers fail over under bots with the same
outcomes as the failover test of processes (tests/integration/test_failover.py).

Needs podman (skipped without it, failed in CI); the image is built once per session and
mostly comes from podman's layer cache (see tests/deploy/conftest.py).
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from collections.abc import Callable
from typing import Any

import aiohttp
import pytest

from client_sim.report import failover_figures
from launch.chaos import kill_primary, wait_for_new_primary
from launch.health import node_health
from shared import protocol
from tests.deploy.conftest import Containers, podman
from tests.integration.test_failover import (
    COMMON,
    assert_one_failover_lost_nothing,
    swarm,
    until_live_standby,
)

pytestmark = pytest.mark.integration

#: The image's cache holds every kernel: a container is ready in a second or two; the
#: bound is for a busy 2-core machine (a node that had to compile would take a minute).
READY_S = 60.0
#: podman stop's grace before SIGKILL; the node exits within about two seconds.
STOP_TIMEOUT_S = 10


class ContainerNode:
    """A node in a container, reached on a loopback port of the host."""

    def __init__(self, name: str, port: int, admin_port: int) -> None:
        self.name = name
        self.base_url = f"http://127.0.0.1:{port}"
        self.url = f"ws://127.0.0.1:{port}/ws"
        self.admin_url = f"http://127.0.0.1:{admin_port}"  # the full /health, /metrics


async def wait_ready(containers: Containers, node: ContainerNode) -> dict[str, Any]:
    """The node's /health once it says ready; fails with its log if it exits or is not
    ready within READY_S."""
    deadline = time.monotonic() + READY_S
    while time.monotonic() < deadline:
        health = await node_health(node.admin_url, within=1.0)
        if health is not None and health.get("ready"):
            return health
        running = podman("inspect", "--format", "{{.State.Running}}", node.name, check=False)
        if running.strip() != "true":
            pytest.fail(f"{node.name} exited:\n{containers.logs(node.name)[-2000:]}")
    pytest.fail(f"{node.name} not ready within {READY_S:g} s:\n"
                f"{containers.logs(node.name)[-2000:]}")  # fmt: skip


async def kill_container_primary(primary: ContainerNode, watch: list[str]) -> dict[str, Any]:
    """What :func:`launch.chaos.kill_primary` does to a process, to the primary's container
    (``podman kill``: SIGKILL to the node, PID 1 there); the same outcome dict."""
    health = await node_health(primary.admin_url)
    assert health is not None and health["role"] == "primary", health
    # arena-chaos signals the pid /health names: a container's is another process's here.
    with pytest.raises(RuntimeError, match="another pid namespace"):
        await kill_primary(primary.admin_url, watch)
    killed_at = time.time()
    await asyncio.to_thread(podman, "kill", "--signal", "KILL", primary.name)
    successor = await wait_for_new_primary(watch, int(health["epoch"]), within=10.0)
    return {
        "killed": primary.base_url,
        "killed_at": killed_at,
        "old_epoch": int(health["epoch"]),
        "epoch": None if successor is None else int(successor["epoch"]),
        "new_primary": None if successor is None else successor["url"],
        "failover": {} if successor is None else successor["failover"],
    }


async def test_a_container_is_ready_in_seconds_and_stops_gracefully_on_podman_stop(
    containers: Containers, free_ports: Callable[[int], list[int]]
) -> None:
    # The image as shipped: its entrypoint's --host 0.0.0.0 --port 7777, published on
    # loopback, and its HEALTHCHECK's URL; an admin port published on loopback too.
    port, admin = free_ports(2)
    began = time.monotonic()
    publish = ("--publish", f"127.0.0.1:{port}:7777", "--publish", f"127.0.0.1:{admin}:9777")
    name = containers.run("node", "--admin-host", "0.0.0.0", "--admin-port", "9777",
                          options=publish)  # fmt: skip
    node = ContainerNode(name, port, admin)
    health = await wait_ready(containers, node)
    ready_s = time.monotonic() - began
    print(json.dumps({"ready_s": round(ready_s, 2), "warm_up": health["warm_up"]}))
    # The kernels came from the image's cache, valid for its user and installed paths.
    assert health["warm_up"]["cold"] is False, health["warm_up"]
    assert health["warm_up"]["compile_events"] == 0
    assert health["warm_up"]["cache_dir"] == "/var/cache/arena/numba"
    # The image's HEALTHCHECK passes (podman exits non-zero on an unhealthy container).
    await asyncio.to_thread(podman, "healthcheck", "run", node.name)

    async with aiohttp.ClientSession() as session, session.ws_connect(node.url) as ws:
        await ws.send_bytes(protocol.encode(protocol.JoinMessage(protocol.PROTOCOL_VERSION, "p")))
        welcome = protocol.decode_server((await ws.receive()).data)
        assert isinstance(welcome, protocol.WelcomeMessage)
        stopping = asyncio.create_task(
            asyncio.to_thread(podman, "stop", "--time", str(STOP_TIMEOUT_S), node.name)
        )
        errors = []
        async with asyncio.timeout(STOP_TIMEOUT_S + 30):  # podman kills it after the timeout
            async for message in ws:
                reply = protocol.decode_server(message.data)
                if isinstance(reply, protocol.ErrorMessage):
                    errors.append(reply.code)
            await stopping
        # The player was told, and the socket closed as "going away".
        assert errors[-1:] == ["shutdown"]
        assert ws.close_code == aiohttp.WSCloseCode.GOING_AWAY
    # SIGTERM (the image's STOPSIGNAL) stopped it: 0, not podman's SIGKILL after the timeout.
    assert containers.exit_code(node.name) == 0
    assert "event=stopping" in containers.logs(node.name)


async def test_primary_and_standby_in_containers_fail_over_with_nothing_lost(
    containers: Containers, free_ports: Callable[[int], list[int]]
) -> None:
    env = {"ARENA_CLUSTER_SECRET": secrets.token_hex(16)}
    port_a, port_b, admin_a, admin_b = free_ports(4)
    # The host's network: both nodes, and the bots, on 127.0.0.1 (one address for
    # players and peers alike, as in the process test).
    host = ("--network", "host")

    def node_args(port: int, admin: int, node_id: str) -> tuple[str, ...]:
        return (*COMMON, "--host", "127.0.0.1", "--port", str(port), "--node-id", node_id,
                "--admin-port", str(admin))  # fmt: skip

    def health_url(port: int) -> tuple[str, ...]:  # what the image's HEALTHCHECK asks
        return ("--env", f"ARENA_HEALTH_URL=http://127.0.0.1:{port}/health")

    name = containers.run("a", *node_args(port_a, admin_a, "a"),
                          options=(*host, *health_url(port_a)), env=env)  # fmt: skip
    primary = ContainerNode(name, port_a, admin_a)
    await wait_ready(containers, primary)
    name = containers.run(
        "b",
        *node_args(port_b, admin_b, "b"),
        *("--role", "standby", "--primary", primary.base_url),
        options=(*host, *health_url(port_b)),
        env=env,
    )
    standby = ContainerNode(name, port_b, admin_b)
    await until_live_standby(primary)  # type: ignore[arg-type]  # (it reads .admin_url only)
    bots = swarm(primary.url, 10, duration=6.0)

    async def kill_midway() -> dict[str, Any]:
        await asyncio.sleep(2.5)
        return await kill_container_primary(primary, [standby.admin_url])

    result, kill = await asyncio.gather(bots.run(), kill_midway())
    health = await node_health(standby.admin_url)
    assert health is not None
    print(json.dumps({"connected": result.connected, **failover_figures(result.failovers, [kill])}))
    # The failover test's outcomes, with the nodes in containers.
    assert_one_failover_lost_nothing(result, kill, health, bots=10)
    # podman kill: SIGKILL, nothing graceful about it.
    assert containers.exit_code(primary.name) == 137
