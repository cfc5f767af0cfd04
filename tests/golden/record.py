"""Record the golden matches again: ``make golden`` (or ``python -m tests.golden.record``).

Each golden match is a real node (two, for the failover) with ``--record``, played by a few
bots for a few seconds; its log files replace ``tests/data/golden/NAME/``. Re-record after a
change that is meant to alter what the simulation or the verdicts do (and say so in the
commit): ``tests/server/record/test_golden.py`` then replays the new ones.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import shutil
import sys
import tempfile
from pathlib import Path

from client_sim.latency import LinkProfile, draw_bot, parse_distribution
from client_sim.swarm import Swarm, SwarmConfig
from launch.chaos import kill_primary, node_health
from launch.nodes import running_node

GOLDEN = Path(__file__).resolve().parent.parent / "data" / "golden"
COMMON = ("--log-level", "warning", "--tick-rate", "60", "--max-players", "16")


def _swarm(url: str, count: int, duration: float) -> Swarm:
    rtt = parse_distribution("lognormal(median=40ms,sigma=0.4)")
    bots = tuple(
        draw_bot(i, seed=5, rtt=rtt, profile=LinkProfile(jitter_ms=2.0)) for i in range(count)
    )
    return Swarm(SwarmConfig(url=url, bots=bots, duration=duration, seed=5))


async def _one_node(folder: Path) -> None:
    """Six bots, three seconds, one node."""
    async with running_node(*COMMON, "--node-id", "a", "--record", str(folder)) as node:
        await _swarm(node.url, 6, 3.0).run()


async def _failover(folder: Path) -> None:
    """Six bots on a primary and its standby, both recording into ``folder``; the primary
    is SIGKILLed halfway and the standby takes over: one match, read as one log."""
    env = {"ARENA_CLUSTER_SECRET": secrets.token_hex(16)}
    record = ("--record", str(folder))
    async with (
        running_node(*COMMON, "--node-id", "a", *record, env=env) as primary,
        running_node(
            *COMMON, "--node-id", "b", "--role", "standby", "--primary", primary.base_url,
            *record, env=env,
        ) as standby,
    ):  # fmt: skip
        async with asyncio.timeout(60):
            while not any(
                s["state"] == "in_sync" for s in (await node_health(primary.admin_url) or {}).get(
                    "standbys", [])
            ):  # fmt: skip
                await asyncio.sleep(0.05)

        async def kill_midway() -> None:
            await asyncio.sleep(2.0)
            await kill_primary(primary.admin_url, [standby.admin_url])

        await asyncio.gather(_swarm(primary.url, 6, 4.0).run(), kill_midway())


MATCHES = {"one-node": _one_node, "failover": _failover}


async def record(names: list[str]) -> None:
    for name in names:
        with tempfile.TemporaryDirectory() as scratch:
            folder = Path(scratch) / name
            await MATCHES[name](folder)
            target = GOLDEN / name
            with contextlib.suppress(FileNotFoundError):
                shutil.rmtree(target)
            target.mkdir(parents=True)
            for path in sorted(folder.glob("*.arenalog")):
                shutil.copy(path, target / path.name)
            size = sum(p.stat().st_size for p in target.iterdir())
            print(f"{name}: {len(list(target.iterdir()))} files, {size} bytes in {target}")


def main() -> int:
    names = sys.argv[1:] or list(MATCHES)
    unknown = [name for name in names if name not in MATCHES]
    if unknown:
        print(f"unknown golden match {unknown[0]!r}: one of {', '.join(MATCHES)}", file=sys.stderr)
        return 2
    asyncio.run(record(names))
    return 0


if __name__ == "__main__":
    sys.exit(main())
