"""Failover under load: 20 SIGKILLs of the primary under 100 bots, per coordinator, as JSON.

Two nodes on fixed loopback ports (picked free at start) take turns: the primary is killed,
the standby takes over, the killed node comes back on its port as the new standby, and once
it is live the next kill follows. The bots play throughout and reconnect on their own.
Reported per coordinator: time to promotion (kill -> first tick published by the new
primary), the bots' stalls (last snapshot before -> first after), bots lost, acknowledged
ticks and inputs lost. Targets: stall p99 under 300 ms (static) and 1 s (etcd), nothing
acknowledged lost.

    python bench/failover.py [--kills 20] [--bots 100] [--coordinators static,etcd] [--json P]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import shutil
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from client_sim.latency import LinkProfile, draw_bot, parse_distribution
from client_sim.report import failover_figures
from client_sim.swarm import Swarm, SwarmConfig
from launch.chaos import kill_primary, node_health
from launch.demo import NodeProcess, start_node
from launch.supervisor import READY_WITHIN_S

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from launch.etcd_local import running_etcd


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def log(line: str) -> None:
    print(f"bench/failover: {line}", file=sys.stderr, flush=True)


class Region:
    """Two nodes on fixed ports that take turns being primary."""

    def __init__(self, coordinator: str, env: dict[str, str]) -> None:
        self.coordinator = coordinator
        self.env = env
        self.ports = [free_port(), free_port()]
        self.stack = contextlib.ExitStack()
        self.nodes: dict[int, NodeProcess] = {}

    def url(self, i: int) -> str:
        return f"http://127.0.0.1:{self.ports[i]}"

    def start(self, i: int, primary: int | None) -> None:
        args = [
            "--port",
            str(self.ports[i]),
            "--node-id",
            f"n{i}",
            "--log-level",
            "warning",
            "--coordinator",
            self.coordinator,
            "--peer",
            self.url(1 - i),
        ]
        if primary is not None:
            args += ["--role", "standby", "--primary", self.url(primary)]
        self.nodes[i] = self.stack.enter_context(start_node(*args, env=self.env))

    async def until_live_standby(self, primary: int) -> None:
        async with asyncio.timeout(READY_WITHIN_S):
            while True:
                health = await node_health(self.url(primary))
                if health and any(s["state"] == "in_sync" for s in health["standbys"]):
                    return
                await asyncio.sleep(0.05)

    def close(self) -> None:
        self.stack.close()


async def run_one(coordinator: str, kills: int, bots: int) -> dict[str, Any]:
    env = {"ARENA_CLUSTER_SECRET": secrets.token_hex(16)}
    region = Region(coordinator, env)
    try:
        region.start(0, None)
        region.start(1, 0)
        await region.until_live_standby(0)
        rtt = parse_distribution(
            "mix(0.6*lognormal(median=40ms,sigma=0.4), 0.4*lognormal(median=140ms,sigma=0.3))"
        )
        population = tuple(
            draw_bot(i, seed=5, rtt=rtt, profile=LinkProfile(jitter_ms=2.0)) for i in range(bots)
        )
        swarm = Swarm(
            SwarmConfig(
                url=region.url(0).replace("http", "ws") + "/ws",
                bots=population,
                duration=3600.0,
                seed=5,
            )
        )
        play = asyncio.create_task(swarm.run())
        outcomes: list[dict[str, Any]] = []
        primary = 0
        await asyncio.sleep(3.0)
        for k in range(kills):
            standby = 1 - primary
            outcome = await kill_primary(region.url(primary), [region.url(standby)])
            if outcome["epoch"] is None:
                raise RuntimeError(f"kill {k + 1}: no standby took over")
            outcomes.append(outcome)
            promoted = (outcome["failover"]["first_tick_at"] - outcome["killed_at"]) * 1000
            log(
                f"{coordinator}: kill {k + 1}/{kills}: epoch {outcome['epoch']}, "
                f"promoted in {promoted:.1f} ms"
            )
            region.nodes[primary].stop()
            # The killed node returns as the new standby (started off the loop: the bots
            # run on it and must not freeze while a node boots).
            await asyncio.to_thread(region.start, primary, standby)
            await region.until_live_standby(standby)
            await asyncio.sleep(1.0)  # let every bot settle on the new primary
            primary = standby
        await asyncio.sleep(1.0)
        play.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await play
        events = [event for bot in swarm.bots for event in bot.failovers]
    finally:
        region.close()
    figures = failover_figures(events, outcomes)
    promoted_ms = [(o["failover"]["first_tick_at"] - o["killed_at"]) * 1000 for o in outcomes]
    detected_ms = [(o["failover"]["detected_at"] - o["killed_at"]) * 1000 for o in outcomes]
    return {
        "coordinator": coordinator.split(":")[0],
        "kills": len(outcomes),
        "bots": bots,
        "promoted_ms_p50": round(float(np.percentile(promoted_ms, 50)), 2),
        "promoted_ms_max": round(max(promoted_ms), 2),
        "detected_ms_p50": round(float(np.percentile(detected_ms, 50)), 2),
        "stall_ms_p50": figures["stall_ms_p50"],
        "stall_ms_p99": figures["stall_ms_p99"],
        "stall_ms_max": figures["stall_ms_max"],
        "bot_failover_events": figures["events"],
        "bots_lost": figures["bots_lost"],
        "acked_ticks_lost": figures["acked_ticks_lost"],
        "inputs_lost": figures["inputs_lost"],
    }


@contextlib.contextmanager
def coordinator_spec(name: str) -> Iterator[str | None]:
    if name == "static":
        yield "static"
    elif shutil.which("etcd") is None:
        log("etcd is not installed (apt-get install etcd-server): skipping the etcd run")
        yield None
    else:
        with running_etcd() as etcd:
            yield "etcd://" + etcd.url.split("://", 1)[1]


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    results = []
    for name in args.coordinators.split(","):
        with coordinator_spec(name) as spec:
            if spec is None:
                continue
            log(f"{name}: {args.kills} kills under {args.bots} bots")
            began = time.monotonic()
            results.append(await run_one(spec, args.kills, args.bots))
            results[-1]["wall_s"] = round(time.monotonic() - began, 1)
            log(json.dumps(results[-1]))
    return {
        "bench": "failover",
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
        "targets": {"stall_ms_p99_static": 300, "stall_ms_p99_etcd": 1000, "acked_ticks_lost": 0},
        "results": results,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--bots", type=int, default=100)
    parser.add_argument("--coordinators", default="static,etcd")
    parser.add_argument("--json", metavar="PATH", help="also write the JSON here")
    args = parser.parse_args()
    report = asyncio.run(main_async(args))
    text = json.dumps(report, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
