"""deploy/compose.yaml brings a region up (etcd, two directories sharing it, a primary and
its standby, Prometheus with the alert rules) on free loopback ports; bots seated through
the directories play on its primary; Prometheus scrapes every node and directory; ``down``
removes it.

Runs Debian's podman-compose (1.0.3) through deploy/image/podman-hostnet, as the compose
file documents. Needs podman and podman-compose (skipped without them, failed in CI).
Grafana (the ``grafana`` profile) needs a registry and is not started.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from launch.health import node_health
from tests.deploy.conftest import ROOT, podman, podman_logs
from tests.tools import required_tool

pytestmark = pytest.mark.integration

COMPOSE = ROOT / "deploy" / "compose.yaml"
SHIM = ROOT / "deploy" / "image" / "podman-hostnet"
SERVICES = ("etcd", "directory", "directory-b", "primary", "standby", "prometheus")
REGION = "eu"
#: Every service from a built image starts in seconds; room for a busy 2-core machine.
UP_S = 120.0


def podman_compose() -> str:
    return required_tool("podman-compose", "podman-compose")


@pytest.fixture(scope="session")
def region_images(arena_image: str) -> str:
    """The etcd and Prometheus images (Debian's packages on the same base); the node's."""
    done = subprocess.run(
        [str(ROOT / "deploy" / "image" / "build.sh"), "etcd", "prometheus"],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "ARENA_ENGINE": "podman"},
    )
    if done.returncode != 0:
        pytest.fail(f"building the region's images failed:\n{(done.stdout + done.stderr)[-3000:]}")
    return arena_image


class Region:
    """One ``podman-compose`` project of deploy/compose.yaml on ports of its own."""

    def __init__(self, image: str, ports: list[int]) -> None:
        self.project = f"arena-test-{uuid.uuid4().hex[:8]}"
        names = ("PRIMARY", "STANDBY", "DIRECTORY", "DIRECTORY_B", "ETCD", "ETCD_PEER",
                 "PROMETHEUS", "PRIMARY_ADMIN", "STANDBY_ADMIN")  # fmt: skip
        self.ports = dict(zip(names, ports, strict=True))
        self.env = {
            **os.environ,
            "ARENA_IMAGE": image,
            "ARENA_REGION": REGION,
            "ARENA_CLUSTER_SECRET": secrets.token_hex(16),
            **{f"ARENA_{name}_PORT": str(port) for name, port in self.ports.items()},
        }

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.ports[name]}"

    def compose(self, *args: str, timeout: float = 180.0) -> str:
        command = [podman_compose(), "--podman-path", str(SHIM), "-p", self.project]
        done = subprocess.run(
            [*command, "-f", str(COMPOSE), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=self.env,
        )
        output = done.stdout + done.stderr
        assert done.returncode == 0, f"podman-compose {args[0]} exited {done.returncode}:\n{output}"
        return output

    def containers(self) -> list[str]:
        label = f"label=io.podman.compose.project={self.project}"
        listed = podman("ps", "-a", "--filter", label, "--format", "{{.Names}}", check=False)
        return listed.split()

    def container(self, service: str) -> str:
        return f"{self.project}_{service}_1"  # podman-compose 1.0.3's naming

    def remove(self) -> None:
        """``down`` (SIGTERM, 10 s), then whatever is left, and the project's network
        (podman-compose 1.0.3's ``down`` leaves it); logs printed for a failed test."""
        for name in self.containers():
            print(f"--- {name} (last lines)\n{podman_logs(name, tail=15)}")
        try:
            self.compose("down", "-t", "10", timeout=120)
        finally:
            left = self.containers()
            if left:
                podman("rm", "--force", "--time", "0", *left, check=False, timeout=120)
            podman("network", "rm", "--force", f"{self.project}_default", check=False)


@pytest.fixture
def region(region_images: str, free_ports: Callable[[int], list[int]]) -> Iterator[Region]:
    podman_compose()
    started = Region(region_images, free_ports(9))
    try:
        yield started
    finally:
        started.remove()


async def get_json(url: str) -> Any:
    async with aiohttp.ClientSession() as session:
        async with session.get(url, timeout=aiohttp.ClientTimeout(total=3)) as response:
            return await response.json(content_type=None)


async def until(what: str, check: Callable[[], Any], within: float = UP_S) -> Any:
    """Poll ``check`` (a coroutine function) until it returns something true."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            result = await check()
        except (aiohttp.ClientError, TimeoutError, ValueError):
            result = None
        if result:
            return result
        await asyncio.sleep(0.2)
    pytest.fail(f"{what} not within {within:g} s")


async def test_the_compose_region_seats_bots_through_its_directory(
    region: Region, tmp_path: Path
) -> None:
    began = time.monotonic()
    region.compose("up", "-d", *SERVICES)
    assert sorted(region.containers()) == sorted(region.container(s) for s in SERVICES)

    async def region_listed() -> bool:
        """Both directories list the region alike: they share one registry in etcd."""
        for directory in ("DIRECTORY", "DIRECTORY_B"):
            listed = await get_json(region.url(directory) + "/regions")
            entry = {r["region"]: r for r in listed["regions"]}.get(REGION) or {}
            primary = (entry.get("primary") or {}).get("node_id")
            if primary != "primary" or [s["node_id"] for s in entry["standbys"]] != ["standby"]:
                return False
        return True

    async def standby_in_sync() -> bool:
        health = await node_health(region.url("PRIMARY_ADMIN"), within=1.0)
        return health is not None and any(s["state"] == "in_sync" for s in health["standbys"])

    await until("the directory listing the region's primary and standby", region_listed)
    await until("the primary's standby in sync", standby_in_sync)
    print(f"region up, registered, standby in sync {time.monotonic() - began:.1f} s after `up`")

    report = tmp_path / "bots.json"
    bots = [
        str(Path(sys.executable).with_name("arena-bots")),
        *("--directory", f"{region.url('DIRECTORY')},{region.url('DIRECTORY_B')}"),
        *("--population", f"{REGION}:1.0"),
        *("--count", "10", "--duration", "5", "--json", str(report), "--quiet"),
    ]
    played = await asyncio.to_thread(
        subprocess.run, bots, capture_output=True, text=True, timeout=120
    )
    assert played.returncode == 0, played.stdout + played.stderr
    figures = json.loads(report.read_text())
    assert figures["bots"]["connected"] == 10
    assert figures["routing"]["players_by_region"] == {REGION: 10}
    assert figures["routing"]["players_by_node"] == {"primary": 10}
    assert not figures["errors"]
    assert figures["inputs"]["acked_ratio"] >= 0.9
    assert figures["snapshots"]["per_bot_per_s"] > 20  # 30 Hz snapshots, most of them

    # Prometheus scrapes both nodes and both directories, and loaded the alert rules.
    prometheus = region.url("PROMETHEUS")

    async def targets_up() -> list[tuple[str, str]] | None:
        body = await get_json(prometheus + "/api/v1/targets")
        active = body["data"]["activeTargets"]
        up = sorted((t["labels"]["job"], t["scrapeUrl"]) for t in active if t["health"] == "up")
        return up if len(up) == len(active) == 4 else None

    up = await until("Prometheus scraping every target", targets_up, within=60.0)
    assert up == sorted(
        [
            ("arena", region.url("PRIMARY_ADMIN") + "/metrics"),
            ("arena", region.url("STANDBY_ADMIN") + "/metrics"),
            ("arena-directory", region.url("DIRECTORY") + "/metrics"),
            ("arena-directory", region.url("DIRECTORY_B") + "/metrics"),
        ]
    )
    rules = await get_json(prometheus + "/api/v1/rules")
    assert sum(len(group["rules"]) for group in rules["data"]["groups"]) > 0

    # Every service's health check (the image's, the compose file's) passes: podman exits
    # non-zero on an unhealthy one.
    for service in SERVICES:
        await asyncio.to_thread(podman, "healthcheck", "run", region.container(service))
