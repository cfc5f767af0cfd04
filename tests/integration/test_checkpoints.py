"""Every node of a region killed: a node started with the checkpoint folder resumes the
match at a new epoch, and every bot comes back to its own seat with its token."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from launch.chaos import node_health
from launch.nodes import running_node
from tests.integration.test_failover import (
    COMMON,
    region,
    secret_env,  # noqa: F401  (the fixture)
    swarm,
    until_live_standby,
)

pytestmark = pytest.mark.integration


async def test_every_node_killed_the_match_resumes_from_its_checkpoint(
    secret_env: dict[str, str],  # noqa: F811
    tmp_path: Path,
) -> None:
    folder = tmp_path / "checkpoints"
    keep = ("--checkpoint-dir", str(folder), "--checkpoint-interval", "0.25")
    with region(secret_env, *keep) as (a, b):
        await until_live_standby(a)
        port = str(urlsplit(a.base_url).port)
        bots = swarm(a.url, 6, duration=14.0)
        seen: dict[str, Any] = {}

        async def kill_both_then_restart_one() -> None:
            await asyncio.sleep(3.0)
            seen["before"] = await node_health(a.admin_url)
            for node in (b, a):
                os.kill(node.process.pid, signal.SIGKILL)
            await asyncio.sleep(1.0)  # the region is gone; the bots keep trying
            async with running_node(
                *COMMON, "--node-id", "a", "--port", port, *keep, env=secret_env
            ) as again:
                await asyncio.sleep(6.0)
                seen["after"] = await node_health(again.admin_url)
                seen["files"] = sorted(os.listdir(folder))
                await asyncio.sleep(5.0)  # the bots play on to the end of their run

        result, _ = await asyncio.gather(bots.run(), kill_both_then_restart_one())
    before, after = seen["before"], seen["after"]
    resumed = after["failover"]["resumed_from"]
    assert after["role"] == "primary" and after["epoch"] > before["epoch"]
    assert resumed["epoch"] == before["epoch"]
    assert 0 < resumed["tick"] <= before["tick"] + 60  # a checkpoint from the last quarter s
    # Server time went on: the first tick after the outage is past every tick shown before.
    assert after["failover"]["first_tick"] > before["tick"]
    assert after["players"] == 6
    # Every bot came back to its own seat: its token was still good, its seat still kept.
    assert result.connected == 6
    assert result.seats_lost == 0
    assert all(event.resumed for event in result.failovers), result.failovers
    assert len(result.failovers) == 6
    assert 1 <= len(seen["files"]) <= 3
