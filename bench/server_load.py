"""Server CPU per player-tick and tick percentiles under 60, 150 and 300 bots, as JSON.

For each population a fresh node starts (so its tick statistics cover this run only) and
``arena-bots`` runs in another process. While every bot is connected the bench samples the
node's CPU time (from /proc) and its tick counter (from /health) at two moments; the ratio
is the server's CPU seconds per player per tick. The bot process reports its own CPU per
bot-tick and the tick rate it kept. Figures vary with the machine: compare within one run.

    python bench/server_load.py [--players 60,150,300] [--duration 20] [--repeat 1]
                                [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

from client_sim.demo import start_node

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU of one process, from /proc (the node runs as a child)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


async def health(url: str) -> dict[str, Any]:
    http = url.replace("ws://", "http://").removesuffix("/ws") + "/health"
    async with aiohttp.ClientSession() as session, session.get(http) as response:
        return await response.json()


async def measure(players: int, duration: float, warmup: float) -> dict[str, Any]:
    with start_node("--max-players", str(max(players, 300)), "--log-level", "warning") as node:
        with tempfile.TemporaryDirectory() as folder:
            report_path = Path(folder) / "bots.json"
            bots = await asyncio.create_subprocess_exec(
                *[
                    sys.executable,
                    "-m",
                    "client_sim.cli",
                    "--server",
                    node.url,
                    "--count",
                    str(players),
                    "--duration",
                    str(duration),
                    "--latency",
                    "40ms",
                    "--quiet",
                    "--json",
                    str(report_path),
                ],
                stdout=asyncio.subprocess.DEVNULL,
            )
            try:
                began = time.monotonic()
                while True:  # wait for every bot to be seated, then let things settle
                    await asyncio.sleep(0.25)
                    if (await health(node.url))["players"] >= players:
                        break
                    if time.monotonic() - began > duration / 2:
                        raise RuntimeError(f"only some of {players} bots joined in time")
                await asyncio.sleep(warmup)
                first, cpu0 = await health(node.url), process_cpu_seconds(node.process.pid)
                window = max(1.0, duration - (time.monotonic() - began) - 2.0)
                await asyncio.sleep(window)
                last, cpu1 = await health(node.url), process_cpu_seconds(node.process.pid)
                async with asyncio.timeout(duration + 60):
                    await bots.wait()
                if bots.returncode != 0:
                    raise RuntimeError(f"arena-bots exited with {bots.returncode}")
                bot_report = json.loads(report_path.read_text())
            finally:
                if bots.returncode is None:
                    bots.kill()
                    await bots.wait()
    ticks = last["tick"] - first["tick"]
    seated = min(first["players"], last["players"])
    return {
        "players": players,
        "connected": bot_report["bots"]["connected"],
        "window_s": round(window, 2),
        "ticks": ticks,
        "server_cpu_us_per_player_tick": round((cpu1 - cpu0) / (seated * ticks) * 1e6, 2),
        "server_cpu_share": round((cpu1 - cpu0) / window, 3),
        "tick_p50_ms": last["tick_ms_p50"],
        "tick_p99_ms": last["tick_ms_p99"],
        "tick_budget_ms": round(1000 / last["tick_rate"], 2),
        "tick_overruns": last["tick_overruns"],
        "bot_cpu_us_per_bot_tick": bot_report["bot_process"]["cpu_us_per_bot_tick"],
        "bot_ticks_per_s": bot_report["bot_process"]["ticks_per_s"],
        "bot_snapshots_per_s": bot_report["snapshots"]["per_bot_per_s"],
        "prediction_error_p99_m": bot_report["prediction"]["error_p99_m"],
        "rtt_p50_ms": bot_report["latency_ms"]["rtt_p50"],
    }


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the median server CPU (the higher middle one of an even count), whole,
    so every figure in the record comes from one run; with the CPU figure of each run."""
    ordered = sorted(runs, key=lambda run: run["server_cpu_us_per_player_tick"])
    record = dict(ordered[len(ordered) // 2])
    if len(runs) > 1:
        record["repeats"] = len(runs)
        record["server_cpu_us_per_player_tick_runs"] = [
            run["server_cpu_us_per_player_tick"] for run in runs
        ]
    return record


async def run(
    populations: list[int], duration: float, warmup: float, repeat: int = 1
) -> dict[str, Any]:
    results = []
    for players in populations:
        runs = []
        for attempt in range(1, repeat + 1):
            of = f" (run {attempt} of {repeat})" if repeat > 1 else ""
            print(
                f"server_load: {players} bots for {duration:g} s{of} ...",
                file=sys.stderr,
                flush=True,
            )
            runs.append(await measure(players, duration, warmup))
            print(f"server_load: {json.dumps(runs[-1])}", file=sys.stderr, flush=True)
        results.append(median_run(runs))
    return {
        "bench": "server_load",
        "tick_rate_hz": 60,
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
        "targets": {
            "server_cpu_us_per_player_tick_max": 25.0,
            "tick_p99_ms_max_at_300": 16.7,
            "bot_ticks_per_s_min_at_300": 60.0 * 0.95,
        },
        "results": results,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--players", default="60,150,300", help="comma-separated populations")
    parser.add_argument("--duration", type=float, default=20.0, help="seconds per population")
    parser.add_argument("--warmup", type=float, default=2.0, help="seconds after all joined")
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="runs per population, each on a fresh node; the record is the median run's, "
        "with every run's server CPU beside it (on a shared machine the figure moves "
        "from run to run)",
    )
    parser.add_argument("--json", metavar="PATH", help="also write the JSON here")
    args = parser.parse_args()
    try:
        populations = [int(p) for p in args.players.split(",") if p.strip()]
    except ValueError:
        parser.error(f"--players: expected comma-separated counts, got {args.players!r}")
    if not populations or min(populations) < 1:
        parser.error("--players: every population must be at least 1")
    if args.repeat < 1:
        parser.error("--repeat: at least 1")
    report = asyncio.run(run(populations, args.duration, args.warmup, args.repeat))
    text = json.dumps(report, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
