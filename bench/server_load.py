"""Server CPU per player-tick and tick percentiles under 60, 150 and 300 bots, as JSON.

For each population a fresh node starts and ``arena-bots`` runs in another process. While
every bot is connected the bench samples the node's CPU time (from /proc), its tick counter
(from /health) and its tick-time histogram (from /metrics) at two moments; the ratio is the
server's CPU seconds per player per tick, and the tick percentiles, overruns and skipped
ticks are the window's alone (not the bots' joining before it). The bot process reports its
own CPU per bot-tick and the tick rate it kept. Figures vary with the machine: compare
within one run.

At most ``--full-bots`` (40) of a population are full bots, the measuring ones (prediction,
interpolation, sight lines for the fog's pop-ins: 120 to 200 µs of their process's CPU a tick
each on the 2-core development machine, so 300 of them need more than its two cores); the
rest are light players, who send the same inputs at the same rate and are served the same
snapshots (``docs/load-testing.md``).

A run is refused (``"valid": false`` with ``invalid_reasons``) when it did not measure the
server under every requested bot at the field's pace: the bot process kept under 95 % of the
tick rate (fewer inputs per second make each tick lighter), a bot reconnected (the bench kills
nothing, so that is churn: seats come and go inside the window), or fewer bots than requested
were seated or connected. The median is taken over valid runs only; when a population has
none, its record is marked invalid and the script exits 1 after printing the JSON.

    python bench/server_load.py [--players 60,150,300] [--duration 20] [--repeat 1]
                                [--bot-workers 1] [--full-bots 40] [--interest on|off]
                                [--fog on|off] [--hitreg-backend auto|cpu|cuda|reference]
                                [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, get_args

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.adversary import Metrics, node_metrics, tick_quantile
from bench.report import Start, add_json_option, emit
from launch.nodes import start_node
from launch.supervisor import Child
from server.sim.hitreg import BackendName

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
TICK_RATE_HZ = 60
#: Under this the bot process, not the node, sets the pace of inputs and acks.
BOT_TICKS_PER_S_FLOOR = 0.95 * TICK_RATE_HZ


def process_cpu_times(pid: int) -> tuple[float, float]:
    """User and system (kernel) CPU seconds of one process, from /proc.

    The system part is mostly the socket reads and writes: the share no Python can save.
    """
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) / CLOCK_TICKS, int(fields[12]) / CLOCK_TICKS


@contextlib.contextmanager
def pinned(node_pid: int, pin: bool) -> Iterator[None]:
    """With ``pin`` (and two cores or more): every thread of the node on the first core
    (threads it starts later inherit it), this process and the children it starts (the
    bots) on the others, until the block ends."""
    mine = sorted(os.sched_getaffinity(0))
    if not pin or len(mine) < 2:
        yield
        return
    for thread in os.listdir(f"/proc/{node_pid}/task"):
        os.sched_setaffinity(int(thread), mine[:1])
    os.sched_setaffinity(0, mine[1:])
    try:
        yield
    finally:
        os.sched_setaffinity(0, mine)


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU of one process (the node runs as a child)."""
    return sum(process_cpu_times(pid))


#: Full bots at most per population (the rest light players: the docstring says why).
FULL_BOTS = 40


async def health(admin_url: str) -> dict[str, Any]:
    """The node's full /health, from its admin port."""
    http = admin_url + "/health"
    async with aiohttp.ClientSession() as session, session.get(http) as response:
        return await response.json()


def counted(start: Metrics, end: Metrics, name: str) -> int:
    """How far one of the node's unlabelled counters moved between two readings."""
    return int(end.get((name, ()), 0.0) - start.get((name, ()), 0.0))


def recording_cpu_s(start: Metrics, end: Metrics) -> float | None:
    """The match log's CPU between two readings, as the node counts it on its tick's thread
    and its writer's (``arena_record_cpu_seconds_total``); None for a node not recording."""
    parts = [(("part", "tick"),), (("part", "writer"),)]
    key = "arena_record_cpu_seconds_total"
    if any((key, part) not in end for part in parts):
        return None
    return sum(end[key, part] - start.get((key, part), 0.0) for part in parts)


def window_ticks(start: Metrics, end: Metrics) -> dict[str, Any]:
    """The tick times of the window alone (the node's histogram between two readings): its
    /health percentiles cover its last 3,600 ticks, which in a short run take in the bots'
    joining as well."""
    p50, p99 = tick_quantile(0.50, start, end), tick_quantile(0.99, start, end)
    return {
        "tick_p50_ms": None if p50 is None else round(p50, 3),
        "tick_p99_ms": None if p99 is None else round(p99, 3),
        "tick_overruns": counted(start, end, "arena_tick_overruns_total"),
        "ticks_skipped": counted(start, end, "arena_ticks_skipped_total"),
    }


def start_bots(
    url: str, full: int, light: int, duration: float, report_path: Path,
    transport: str = "ws", workers: int = 1,
) -> Child:  # fmt: skip
    """``arena-bots`` against ``url`` at 40 ms, its report to ``report_path``: a child like
    the node (launch.supervisor), in the bench's process group, and stopped (SIGTERM, then
    SIGKILL) and reaped whenever the measurement ends."""
    return Child(
        "arena-bots",
        [
            sys.executable, "-m", "client_sim.cli", "--server", url,
            "--count", str(full), "--light", str(light), "--transport", transport,
            "--duration", str(duration), "--latency", "40ms", "--workers", str(workers),
            "--quiet",
            "--allow-invalid",  # the bench judges the run's validity itself
            "--json", str(report_path),
        ],
        inherit_stderr=True,
    )  # fmt: skip


async def wait_seated(admin_url: str, players: int, limit: float) -> None:
    """Until the node seats ``players``; RuntimeError after ``limit`` seconds."""
    began = time.monotonic()
    while True:
        await asyncio.sleep(0.25)
        if (await health(admin_url))["players"] >= players:
            return
        if time.monotonic() - began > limit:
            raise RuntimeError(f"only some of {players} bots joined in time")


async def measure(
    players: int,
    duration: float,
    warmup: float,
    bot_workers: int = 1,
    interest: str = "on",
    hitreg_backend: str | None = None,
    fog: str = "on",
    light: int = 0,
    transport: str = "ws",
    node_args: Sequence[str] = (),
    pin: bool = False,
) -> dict[str, Any]:
    """One node under ``players`` bots, ``light`` of them light players (the rest full
    bots, the measuring ones), over ``transport``; ``node_args`` go to the node as they are
    (an A/B of a node flag, e.g. ``--record DIR``). ``pin``: the node alone on the first
    core, the bots on the others (an A/B then compares the node's CPU without the bots'
    share of its core moving between runs)."""
    backend = ("--hitreg-backend", hitreg_backend) if hitreg_backend else ()
    with start_node(
        "--max-players", str(max(players, 300)), "--log-level", "warning",
        "--interest", interest, "--fog", fog, *backend, *node_args,
    ) as node, pinned(node.process.pid, pin):  # fmt: skip
        with tempfile.TemporaryDirectory() as folder:
            report_path = Path(folder) / "bots.json"
            bots = start_bots(
                node.url, players - light, light, duration, report_path, transport, bot_workers
            )
            try:
                began = time.monotonic()
                await wait_seated(node.admin_url, players, duration / 2)
                await asyncio.sleep(warmup)
                loadavg_1m = os.getloadavg()[0]
                first, cpu0 = await health(node.admin_url), process_cpu_times(node.process.pid)
                metrics0 = await node_metrics(node.admin_url)
                window = max(1.0, duration - (time.monotonic() - began) - 2.0)
                await asyncio.sleep(window)
                last, cpu1 = await health(node.admin_url), process_cpu_times(node.process.pid)
                metrics1 = await node_metrics(node.admin_url)
                returncode = await asyncio.to_thread(bots.wait, duration + 60)
                if returncode != 0:
                    raise RuntimeError(f"arena-bots exited with {returncode}")
                bot_report = json.loads(report_path.read_text())
            finally:
                bots.stop(5.0)
    ticks = last["tick"] - first["tick"]
    # The seats held at both samples: the requested count when the run is valid; otherwise
    # the figure is still computed, so that a refused run can be shown.
    seated = min(first["players"], last["players"])
    player_ticks = seated * ticks
    cpu, system = sum(cpu1) - sum(cpu0), cpu1[1] - cpu0[1]
    recorded = recording_cpu_s(metrics0, metrics1)
    record: dict[str, Any] = {
        "players": players,
        "light": light,
        "transport": transport,
        "connected": bot_report["bots"]["connected"] + bot_report["bots"]["light"]["connected"],
        "seated_at_start": first["players"],
        "seated_at_end": last["players"],
        "bot_reconnects": bot_report["failover"]["events"],
        "loadavg_1m": loadavg_1m,
        "window_s": round(window, 2),
        "ticks": ticks,
        "server_cpu_us_per_player_tick": (
            round(cpu / player_ticks * 1e6, 2) if player_ticks > 0 else None
        ),
        # The kernel's part (socket reads and writes, mostly): a floor under any node code.
        "server_sys_us_per_player_tick": (
            round(system / player_ticks * 1e6, 2) if player_ticks > 0 else None
        ),
        "server_cpu_share": round(cpu / window, 3),
        # A node with --record: what the node counts its match log took of that CPU.
        "record_cpu_us_per_player_tick": (
            round(recorded / player_ticks * 1e6, 3)
            if recorded is not None and player_ticks > 0
            else None
        ),
        **window_ticks(metrics0, metrics1),
        # /health's p99, over the node's last 3,600 ticks: in a short run, the joins too.
        "tick_p99_ms_last_3600_ticks": last["tick_ms_p99"],
        "tick_budget_ms": round(1000 / last["tick_rate"], 2),
        "hitreg_backend": last.get("hitreg_backend"),
        "bot_cpu_us_per_bot_tick": bot_report["bot_process"]["cpu_us_per_bot_tick"],
        "bot_cpu_us_per_light_bot_tick": bot_report["bot_process"].get("cpu_us_per_light_bot_tick"),
        "bot_ticks_per_s": bot_report["bot_process"]["ticks_per_s"],
        "bot_snapshots_per_s": bot_report["snapshots"]["per_bot_per_s"],
        "prediction_error_p99_m": bot_report["prediction"]["error_p99_m"],
        "rtt_p50_ms": bot_report["latency_ms"]["rtt_p50"],
        # What the players were sent (interest management and deltas).
        "down_kbps_per_bot": bot_report["bandwidth"]["down_kbps_per_bot"],
        **players_sent(first.get("snapshots", {}), last.get("snapshots", {})),
        "fair_agreement": bot_report["shots"].get("fair_agreement"),
    }
    reasons = invalid_reasons(record)
    return {**record, "valid": not reasons, "invalid_reasons": reasons}


def players_sent(first: dict[str, int], last: dict[str, int]) -> dict[str, float | None]:
    """Per client snapshot in the window, from the node's tallies (``/health`` snapshots):
    the players it was sent and the bytes of their records, and the share of full ones."""
    coded = last.get("coded", 0) - first.get("coded", 0)
    if coded <= 0:
        return {"players_per_snapshot": None, "entity_bytes_per_snapshot": None}
    sent = {k: last.get(k, 0) - first.get(k, 0) for k in ("records_delta", "records_full")}
    records = sent["records_delta"] + sent["records_full"]
    return {
        "players_per_snapshot": round(records / coded, 2),
        "entity_bytes_per_snapshot": round((last["bytes"] - first["bytes"]) / coded, 1),
        "full_record_share": round(sent["records_full"] / records, 4) if records else None,
    }


def invalid_reasons(run: dict[str, Any]) -> list[str]:
    """Why a run did not measure the server under ``players`` bots at the field's pace (empty
    when it did): each reason makes the per-player figure one of a lighter or churning load."""
    players = run["players"]
    reasons = []
    kept = run["bot_ticks_per_s"]
    if kept is None:
        reasons.append("bot process reported no tick rate")
    elif kept < BOT_TICKS_PER_S_FLOOR:
        reasons.append(f"bot process kept {kept:.1f} Hz (< {BOT_TICKS_PER_S_FLOOR:.1f})")
    if (reconnects := run["bot_reconnects"]) > 0:
        plural = "s" if reconnects != 1 else ""
        reasons.append(f"{reconnects} bot reconnect{plural} without a failover")
    for moment in ("start", "end"):
        if (seated := run[f"seated_at_{moment}"]) < players:
            reasons.append(f"{seated} of {players} bots seated at the window's {moment}")
    if run["connected"] < players:
        reasons.append(f"{run['connected']} of {players} bots connected")
    if run["ticks"] < 1:
        reasons.append("the node served no tick in the window")
    return reasons


def server_cpu(run: dict[str, Any]) -> float:
    """The run's server CPU figure for ordering; a run with none (no seat or no tick, so
    invalid) sorts last."""
    figure = run["server_cpu_us_per_player_tick"]
    return math.inf if figure is None else figure


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The valid run with the median server CPU (the higher middle one of an even count),
    whole, so every figure in the record comes from one run; with the CPU figure of each run
    and why each refused run was refused. With no valid run the median of all is reported,
    still marked invalid, so that it can be shown but never taken for a measurement."""
    valid = [run for run in runs if run["valid"]]
    ordered = sorted(valid or runs, key=server_cpu)
    record = dict(ordered[len(ordered) // 2])
    if len(runs) > 1:
        record["repeats"] = len(runs)
        record["server_cpu_us_per_player_tick_runs"] = [
            run["server_cpu_us_per_player_tick"] for run in runs
        ]
        record["runs_valid"] = len(valid)
        record["invalid_runs"] = [
            {
                "server_cpu_us_per_player_tick": run["server_cpu_us_per_player_tick"],
                "invalid_reasons": run["invalid_reasons"],
            }
            for run in runs
            if not run["valid"]
        ]
    return record


def run_summary(run: dict[str, Any]) -> str:
    """One human line: the figure, what it depends on, and whether it counts."""
    verdict = "valid" if run["valid"] else "INVALID: " + "; ".join(run["invalid_reasons"])
    return (
        f"server_load: {run['players']} bots: {run['server_cpu_us_per_player_tick']} us "
        f"server CPU per player-tick, tick p99 {run['tick_p99_ms']} ms, "
        f"bots {run['bot_ticks_per_s']} Hz, load {run['loadavg_1m']:.2f}: {verdict}"
    )


async def run(
    populations: list[int],
    duration: float,
    warmup: float,
    repeat: int = 1,
    bot_workers: int = 1,
    interest: str = "on",
    hitreg_backend: str | None = None,
    fog: str = "on",
    full_bots: int = FULL_BOTS,
) -> dict[str, Any]:
    loadavg_1m_at_start = os.getloadavg()[0]
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
            runs.append(
                await measure(
                    players,
                    duration,
                    warmup,
                    bot_workers,
                    interest,
                    hitreg_backend,
                    fog,
                    light=max(0, players - full_bots),
                )
            )
            print(f"server_load: {json.dumps(runs[-1])}", file=sys.stderr, flush=True)
            print(run_summary(runs[-1]), file=sys.stderr, flush=True)
        results.append(median_run(runs))
    return {
        "bench": "server_load",
        "tick_rate_hz": TICK_RATE_HZ,
        "bot_workers": bot_workers,
        "full_bots_max": full_bots,
        "interest": interest,
        "fog": fog,
        "valid": all(result["valid"] for result in results),
        "machine": {
            "cpus": os.cpu_count(),
            "python": sys.version.split()[0],
            "loadavg_1m_at_start": loadavg_1m_at_start,
            "loadavg_1m_at_end": os.getloadavg()[0],
        },
        "targets": {
            "server_cpu_us_per_player_tick_max": 25.0,
            "tick_p99_ms_max_at_300": 16.7,
            "bot_ticks_per_s_min_at_300": BOT_TICKS_PER_S_FLOOR,
        },
        "results": results,
        "how": f"the node and its bots share the machine's cores; at most {full_bots} full "
        "bots, the rest light players. The figures move with the machine: one commit's code "
        "measured 2.7 times dearer for node and bots alike on the 2-core development machine "
        "on a slow day than on a quick one, so compare within one run (bench/peers measures "
        "the node on a core of its own)",
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
        help="runs per population, each on a fresh node; the record is the median valid "
        "run's, with every run's server CPU beside it (on a shared machine the figure moves "
        "from run to run)",
    )
    parser.add_argument(
        "--bot-workers", type=int, default=1, help="arena-bots --workers (processes)"
    )
    parser.add_argument(
        "--full-bots", type=int, default=FULL_BOTS,
        help="at most this many full (measuring) bots; the rest of each population are "
        f"light players (default {FULL_BOTS})",
    )  # fmt: skip
    parser.add_argument(
        "--interest", choices=("on", "off"), default="on", help="the node's --interest"
    )
    parser.add_argument("--fog", choices=("on", "off"), default="on", help="the node's --fog")
    parser.add_argument(
        "--hitreg-backend",
        choices=get_args(BackendName),
        help="the node's --hitreg-backend (default: the node's own default)",
    )
    add_json_option(parser, "server_load")
    args = parser.parse_args()
    start = Start.now("server_load", "bench/server_load.py", None)
    try:
        populations = [int(p) for p in args.players.split(",") if p.strip()]
    except ValueError:
        parser.error(f"--players: expected comma-separated counts, got {args.players!r}")
    if not populations or min(populations) < 1:
        parser.error("--players: every population must be at least 1")
    if args.repeat < 1:
        parser.error("--repeat: at least 1")
    if args.bot_workers < 1:
        parser.error("--bot-workers: at least 1")
    if args.full_bots < 1:
        parser.error("--full-bots: at least 1")
    report = asyncio.run(
        run(
            populations,
            args.duration,
            args.warmup,
            args.repeat,
            args.bot_workers,
            args.interest,
            args.hitreg_backend,
            args.fog,
            args.full_bots,
        )
    )
    emit(report, args.json, start)
    refused = [result for result in report["results"] if not result["valid"]]
    for result in refused:
        print(
            f"server_load: WARNING: no valid run of {result['players']} bots "
            f"({'; '.join(result['invalid_reasons'])}): its figures are not a measurement",
            file=sys.stderr,
        )
    return 1 if refused else 0


if __name__ == "__main__":
    sys.exit(main())
