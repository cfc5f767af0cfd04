"""A primary and its standby both record one match: their logs agree tick by tick, and a
doctored copy is caught at the tick it was changed."""

from __future__ import annotations

import asyncio
import secrets
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from client_sim.latency import LinkProfile, draw_bot, parse_distribution
from client_sim.swarm import Swarm, SwarmConfig
from launch.chaos import node_health
from launch.nodes import running_node
from server.record import cli
from tests.server.net.test_metrics import samples
from tests.server.record.scenes import rewrite_log

pytestmark = pytest.mark.integration

COMMON = ("--log-level", "warning", "--tick-rate", "60", "--max-players", "16")


async def _record_region(primary_dir: Path, standby_dir: Path) -> None:
    env = {"ARENA_CLUSTER_SECRET": secrets.token_hex(16)}
    async with running_node(
        *COMMON, "--node-id", "a", "--record", str(primary_dir), env=env
    ) as primary:
        async with running_node(
            *COMMON, "--node-id", "b", "--role", "standby", "--primary", primary.base_url,
            "--record", str(standby_dir), env=env,
        ) as standby:  # fmt: skip
            async with asyncio.timeout(60):
                while True:
                    health = await node_health(primary.admin_url) or {}
                    if any(s["state"] == "in_sync" for s in health.get("standbys", [])):
                        break
                    await asyncio.sleep(0.05)
            bots = tuple(
                draw_bot(i, seed=3, rtt=parse_distribution("30ms"), profile=LinkProfile())
                for i in range(4)
            )
            await Swarm(SwarmConfig(url=primary.url, bots=bots, duration=2.5, seed=3)).run()
            await asyncio.sleep(1.2)  # (a block is written every second of ticks)
            for node in (primary, standby):
                _assert_recording_counted(await _scrape(node.admin_url))


async def _scrape(admin_url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    async with aiohttp.ClientSession() as session:
        async with session.get(f"{admin_url}/metrics", timeout=aiohttp.ClientTimeout(10)) as r:
            return samples(await r.text())


def _assert_recording_counted(found: dict[tuple[str, tuple[tuple[str, str], ...]], float]) -> None:
    """What the node's own metrics say the log cost it: some CPU on each thread, blocks
    and bytes written, and less than the process's CPU."""
    tick = found["arena_record_cpu_seconds_total", (("part", "tick"),)]
    writer = found["arena_record_cpu_seconds_total", (("part", "writer"),)]
    assert tick > 0 and writer > 0
    assert found["arena_record_blocks_total", ()] >= 2
    assert found["arena_record_bytes_total", ()] > 1000
    assert tick + writer < found["process_cpu_seconds_total", ()]


async def test_a_primarys_and_its_standbys_logs_agree_and_a_doctored_one_does_not(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    primary_dir, standby_dir = tmp_path / "a", tmp_path / "b"
    await _record_region(primary_dir, standby_dir)
    assert cli.main([str(primary_dir), "--backend", "reference"]) == 0
    assert cli.main(["--compare", str(primary_dir), str(standby_dir)]) == 0
    out = capsys.readouterr().out
    compared = int(out.split("arena-replay: ")[-1].split(" ticks in both")[0])
    assert compared > 100, out

    doctored_dir = tmp_path / "doctored"
    doctored_dir.mkdir()
    target = 0
    for path in sorted(standby_dir.glob("*.arenalog")):
        data = path.read_bytes()

        def change(entry: dict[str, Any]) -> None:
            nonlocal target
            if entry["k"] == "tick" and entry["src"] == "s" and entry["t"] % 97 == 0:
                target = target or entry["t"]
                if entry["t"] == target:
                    entry["h"] = "0" * 32

        (doctored_dir / path.name).write_bytes(rewrite_log(data, change))
    assert target
    assert cli.main(["--compare", str(primary_dir), str(doctored_dir)]) == 1
    assert f"differ first at tick {target}: hash differs" in capsys.readouterr().out
