"""Hostile clients beside honest bots, one attack class at a time, as JSON.

A node starts, 20 honest bots play on it in this process (``client_sim.swarm.Swarm``, 40 ms
RTT), and each attack class of :mod:`launch.adversary` runs in a worker process for a
window, right after a baseline window of the same length with no attack (its own: a run
drifts, so each class is judged against the minutes it ran in), with a settle between
pairs. Per window: the honest bots' snapshots per bot per second (and as a fraction of the
baseline), the node's CPU in cores over the window (from its process's user and system
time in ``/proc``), the node's tick p50/p99 over the window (from the deltas of its
``arena_tick_duration_seconds`` histogram between the window's start and end, interpolated
within its buckets as Prometheus' ``histogram_quantile`` does; the buckets are 0.25-0.5 ms
wide around a quiet node's p99), honest bots lost (a connection lost,
a seat lost, or not playing at the window's end), the bots' own tick rate, the node's
counters that moved (drops, refusals, offences, kicks) and what the attacker achieved
(the attack's own result). Then the targets, each with its verdict.

The node runs ``--seat-grace-s 0`` by default (a closed attacker's seats are freed at once,
so they never count against the next window's address limit; the honest bots never
disconnect); then a speed hack's resume finds no seat and takes a new one. To measure the
resumes themselves, run the speed hacks alone with ``--seat-grace-s 20`` (above the longest
hold-off of a seat closed for offences, so every resume meets it; the fuzzer's thousands of
seats would fill the address limit while held),
``--max-seats-per-address`` twice the bots (every client here is 127.0.0.1: the honest
bots' seats and the squatter's share one address), ``--idle-kick-s`` half a window (at most
5 s) and ``--handshake-timeout-s 2``.

A run is refused (exit 2, ``"valid": false`` with ``invalid_reasons``) when it did not
measure what it claims: not every honest bot connected in the baseline, or the bots' own
tick rate fell below 57 Hz in a window (then the bots, not the node, set the pace of
inputs and snapshots read). Exit 1 when a target is missed; 0 when all are met. The node
runs alone on the first core the bench may use, the bots and the attacker on the others
(on a 1-core machine they share it): the node's ticks show the work an attack makes it do,
not CPU the attacker's own process takes. Compare within one run.

    python bench/adversary.py [--window 10] [--settle 3] [--bots 20] [--attacks a,b,...]
                              [--fuzz-frames 100000] [--seat-grace-s 0] [--quick]
                              [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import math
import multiprocessing
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.report import Start, add_json_option, emit, targets_status
from client_sim.cli import check_writable
from client_sim.latency import LinkProfile, draw_bot, parse_distribution
from client_sim.swarm import Swarm, SwarmConfig
from launch import adversary
from launch.health import base_url, node_health
from launch.nodes import running_node
from shared.commandline import OneLineParser
from shared.movement import MovementParams
from shared.weapons import RIFLE

TICK_RATE_HZ = 60
BOT_TICKS_PER_S_FLOOR = 0.95 * TICK_RATE_HZ  # as bench/server_load.py judges its bots
HANDSHAKE_TIMEOUT_S = 2.0
TOLERANCE = 1.02  # speed and fire rate: within 2 % of the rules
SNAPSHOT_RATE_MIN = 0.95  # of the baseline
TICK_P99_MAX = 1.2  # times the baseline
TICK_HISTOGRAM = "arena_tick_duration_seconds"
#: The node's counters a window reports when they moved (every label of each).
COUNTERS = (
    "arena_inputs_dropped_total",
    "arena_pings_dropped_total",
    "arena_inputs_rejected_total",
    "arena_protocol_errors_total",
    "arena_joins_refused_total",
    "arena_idle_kicks_total",
    "arena_snapshots_dropped_total",
    "arena_ticks_skipped_total",
    "arena_tick_overruns_total",
)


def log(line: str) -> None:
    print(f"bench/adversary: {line}", file=sys.stderr, flush=True)


# -- what each attack class is, and how its gain is judged ---------------------------------


#: Targets by name: (the value measured, its limit, whether it is met).
Verdicts = dict[str, tuple[Any, Any, bool]]


@dataclass(frozen=True)
class Attack:
    """One attack class: which :mod:`launch.adversary` attack with which options, the
    targets of what the attacker gained (name -> (value, limit, met)), and, where the class
    has one, the most CPU it may cost the node above its baseline window (cores)."""

    name: str
    attack: str
    options: Callable[[argparse.Namespace], dict[str, Any]]
    gains: Callable[[dict[str, Any], argparse.Namespace], Verdicts]
    max_extra_cores: float | None = None


def _speed(result: dict[str, Any], args: argparse.Namespace) -> Verdicts:
    limit = MovementParams().max_speed * TOLERANCE
    return {"speed_mps": (result["speed_mps"], round(limit, 3), result["speed_mps"] <= limit)}


def _fire(result: dict[str, Any], args: argparse.Namespace) -> Verdicts:
    # One shot of slack per seat: a window of t seconds holds up to t * rate + 1 shots.
    allowed = result["span_s"] * TOLERANCE / RIFLE.fire_interval + result["seats_shooting"]
    rate_limit = round(TOLERANCE / RIFLE.fire_interval, 3)
    return {
        "shots": (result["shots"], round(allowed, 1), result["shots"] <= allowed),
        "shots_per_s": (result["shots_per_s"], rate_limit, result["shots"] <= allowed),
    }


def _rewind(result: dict[str, Any], args: argparse.Namespace) -> Verdicts:
    return {
        "rewind_ms_max": (result["rewind_ms_max"], result["bound_ms_min"], result["within_bound"]),
        "shots_judged": (result["shots"], "> 0", result["shots"] > 0),
    }


def _squat(result: dict[str, Any], args: argparse.Namespace) -> Verdicts:
    held = result["seats_held_at_end"]
    return {"seats_squatted_after_idle_limit": (held, 0, held == 0)}


def _slowloris(result: dict[str, Any], args: argparse.Namespace) -> Verdicts:
    outlived = result["outlived_limit"]
    return {"connections_open_past_handshake_timeout": (outlived, 0, outlived == 0)}


def _first_frame(result: dict[str, Any], args: argparse.Namespace) -> Verdicts:
    cases = result["cases"]
    text, unmasked, seq = cases["text"], cases["unmasked"], cases["seq_2_31"]
    consistent = all(n == 1 for n in result["distinct_answers"].values())
    return {
        "text_first_frame": (
            [text.get("errors"), text.get("close")],
            [["malformed_frame"], 1008],
            text.get("errors") == ["malformed_frame"] and text.get("close") == 1008,
        ),
        "unmasked_first_frame": (
            [unmasked.get("errors"), unmasked.get("close")],
            [[], 1002],
            unmasked.get("errors") == [] and unmasked.get("close") == 1002,
        ),
        "first_seq_2_31": (
            [seq.get("errors"), seq.get("acked_after")],
            [["invalid_field"], ">= 0"],
            seq.get("errors") == ["invalid_field"] and seq.get("acked_after", -1) >= 0,
        ),
        "same_answer_every_round": (result["distinct_answers"], 1, consistent),
    }


def _fuzz(result: dict[str, Any], args: argparse.Namespace) -> Verdicts:
    sent = result["frames_sent"]
    answered = not result["unanswered"]
    expected = not result["unexpected_errors"] and not result["unexpected_closes"]
    return {
        "fuzzed_frames": (sent, args.fuzz_frames, sent >= args.fuzz_frames),
        "node_up": (result["node_up"], True, result["node_up"]),
        "every_connection_answered": (result["unanswered"], {}, answered),
        "documented_answers_only": (
            [result["unexpected_errors"], result["unexpected_closes"]],
            [{}, {}],
            expected,
        ),
    }


def _flood(result: dict[str, Any], args: argparse.Namespace) -> Verdicts:
    closed = result["closed_with"]
    return {"flooder_closed_with": (closed, 1008, closed == 1008)}


def _compact(result: dict[str, Any], args: argparse.Namespace) -> Verdicts:
    return {
        "compact_client_stayed_seated": (result["closes"], {"None": 1}, result["stayed_seated"]),
        "compact_client_errors": (result["errors"], {}, not result["errors"]),
    }


#: A flooding client that reconnects as fast as it can may cost the node this much CPU
#: above its baseline window, in cores.
FLOOD_EXTRA_CORES_MAX = 0.05

ATTACKS = (
    Attack("input_flood", "input_flood", lambda a: {"per_tick": 200}, _flood),
    Attack(
        "input_flood_reconnecting",
        "input_flood",
        lambda a: {"reconnecting": True},
        _flood,
        max_extra_cores=FLOOD_EXTRA_CORES_MAX,
    ),
    Attack("compact_honest", "compact_honest", lambda a: {}, _compact),
    Attack("speed_hack_x3", "speed_hack", lambda a: {"per_tick": 3}, _speed),
    Attack("speed_hack_x10", "speed_hack", lambda a: {"per_tick": 10}, _speed),
    Attack("fire_rate_hack", "fire_rate_hack", lambda a: {"per_tick": 4}, _fire),
    Attack("rewind_abuse", "rewind_abuse", lambda a: {}, _rewind),
    Attack("seat_squat", "seat_squat", lambda a: {"connections": 2 * a.bots}, _squat),
    Attack(
        "slowloris",
        "slowloris",
        lambda a: {"connections": 200, "limit_s": HANDSHAKE_TIMEOUT_S, "reopen": True},
        _slowloris,
    ),
    Attack("first_frame", "first_frame", lambda a: {}, _first_frame),
    Attack(
        "fuzz",
        "fuzz",
        lambda a: {"frames": a.fuzz_frames, "burst": 2000, "parallel": 2, "spread": True},
        _fuzz,
    ),
)
BY_NAME = {attack.name: attack for attack in ATTACKS}


# -- measuring a window ----------------------------------------------------------------------


#: A reading of a node's /metrics: per (sample name, sorted labels), the value.
Metrics = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@dataclass(frozen=True)
class Sample:
    """What the bench reads at a window's edge: the bots' counters and the node's metrics."""

    at: float  # the loop clock
    snapshots: tuple[int, ...]
    failovers: tuple[int, ...]
    seats_lost: tuple[int, ...]
    playing: tuple[bool, ...]
    bot_ticks: int
    metrics: Metrics
    node_cpu_s: float  # the node process's user + system time so far


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds process ``pid`` has used (all its threads), from /proc."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def node_metrics(url: str) -> Metrics:
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10.0)) as session,
        session.get(base_url(url) + "/metrics") as response,
    ):
        text = await response.text()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


async def sample(swarm: Swarm, url: str, node_pid: int) -> Sample:
    metrics = await node_metrics(url)
    bots = swarm.bots
    return Sample(
        node_cpu_s=process_cpu_s(node_pid),
        at=asyncio.get_running_loop().time(),
        snapshots=tuple(bot.snapshot_count for bot in bots),
        failovers=tuple(len(bot.failovers) for bot in bots),
        seats_lost=tuple(bot.seats_lost for bot in bots),
        playing=tuple(bot.playing for bot in bots),
        bot_ticks=swarm.ticks_run,
        metrics=metrics,
    )


def tick_quantile(q: float, start: Metrics, end: Metrics) -> float | None:
    """The q-quantile of the ticks run between two readings of a node's /metrics, in ms,
    from the histogram's bucket deltas with linear interpolation inside a bucket (None: no
    tick)."""
    buckets = []
    for (name, labels), value in end.items():
        if name == TICK_HISTOGRAM + "_bucket":
            le = float(dict(labels)["le"])
            buckets.append((le, value - start.get((name, labels), 0.0)))
    buckets.sort()
    if not buckets or buckets[-1][1] <= 0:
        return None
    rank = q * buckets[-1][1]
    lower, below = 0.0, 0.0
    for le, count in buckets:
        if count >= rank:
            if math.isinf(le):
                return lower * 1000  # beyond the highest bound: that bound, as Prometheus
            share = (rank - below) / (count - below) if count > below else 1.0
            return (lower + (le - lower) * share) * 1000
        lower, below = le, count
    return None


def counter_deltas(start: Sample, end: Sample) -> dict[str, float]:
    moved = {}
    for (name, labels), value in sorted(end.metrics.items()):
        if name in COUNTERS:
            delta = value - start.metrics.get((name, labels), 0.0)
            if delta:
                label = ",".join(f"{k}={v}" for k, v in labels)
                moved[f"{name}{{{label}}}" if label else name] = delta
    return moved


def window_figures(start: Sample, end: Sample) -> dict[str, Any]:
    seconds = end.at - start.at
    bots = len(start.snapshots)
    got = [b - a for a, b in zip(start.snapshots, end.snapshots, strict=True)]
    lost = [
        i
        for i in range(bots)
        if end.failovers[i] > start.failovers[i]
        or end.seats_lost[i] > start.seats_lost[i]
        or not end.playing[i]
    ]
    p50 = tick_quantile(0.50, start.metrics, end.metrics)
    p99 = tick_quantile(0.99, start.metrics, end.metrics)
    ticks = end.metrics.get(("arena_ticks_total", ()), 0.0) - start.metrics.get(
        ("arena_ticks_total", ()), 0.0
    )
    return {
        "seconds": round(seconds, 3),
        "honest_playing_at_start": sum(start.playing),
        "honest_lost": len(lost),
        "snapshots_per_bot_per_s": round(sum(got) / bots / seconds, 3),
        "snapshots_per_s_min_bot": round(min(got) / seconds, 3),
        "node_cores": round((end.node_cpu_s - start.node_cpu_s) / seconds, 4),
        "bot_ticks_per_s": round((end.bot_ticks - start.bot_ticks) / seconds, 2),
        "node_ticks": int(ticks),
        "tick_ms_p50": None if p50 is None else round(p50, 3),
        "tick_ms_p99": None if p99 is None else round(p99, 3),
        "node_counters": counter_deltas(start, end),
    }


# -- the run -----------------------------------------------------------------------------------


def node_flags(args: argparse.Namespace) -> list[str]:
    idle = min(5.0, args.window / 2)
    return [
        "--node-id", "adversary", "--log-level", "warning", "--tick-rate", str(TICK_RATE_HZ),
        "--seat-grace-s", f"{args.seat_grace_s:g}", "--idle-kick-s", f"{idle:g}",
        "--max-seats-per-address", str(2 * args.bots),
        "--handshake-timeout-s", f"{HANDSHAKE_TIMEOUT_S:g}",
    ]  # fmt: skip


async def until_seated(admin_url: str, players: int, within: float) -> bool:
    """Whether the node's full /health (on its admin port) counts ``players`` seated in time."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        health = await node_health(admin_url, within=2.0)
        if health is not None and health["players"] >= players:
            return True
        await asyncio.sleep(0.25)
    return False


async def run(args: argparse.Namespace) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    chosen = [BY_NAME[name] for name in args.attacks]
    flags = node_flags(args)
    report: dict[str, Any] = {
        "bench": "adversary",
        "tick_rate_hz": TICK_RATE_HZ,
        "bots": args.bots,
        "window_s": args.window,
        "settle_s": args.settle,
        "node_flags": flags,
        "machine": {
            "cpus": os.cpu_count(),
            "python": sys.version.split()[0],
            "loadavg_1m_at_start": os.getloadavg()[0],
        },
    }
    cores = sorted(os.sched_getaffinity(0))
    node_core, client_cores = (cores[:1], cores[1:]) if len(cores) > 1 else (cores, cores)
    report["machine"]["node_cores"], report["machine"]["client_cores"] = node_core, client_cores
    # The node alone on one core, the bots and the attacker on the others (as a deployment
    # keeps them on other machines): the node's ticks then show what the attack makes it
    # do, not the attacker's own CPU taken from it.
    os.sched_setaffinity(0, client_cores)
    spawn = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=spawn) as pool:
        await loop.run_in_executor(pool, os.getpid)  # the worker starts outside every window
        log(f"starting a node ({' '.join(flags)}) on core {node_core[0]}")
        async with running_node(*flags) as node:
            for thread in os.listdir(f"/proc/{node.process.pid}/task"):  # (every thread)
                os.sched_setaffinity(int(thread), node_core)
            url = node.url
            rtt = parse_distribution("40ms")
            bots = tuple(
                draw_bot(i, seed=args.seed, rtt=rtt, profile=LinkProfile(jitter_ms=1.0))
                for i in range(args.bots)
            )
            planned = 30 + (len(chosen) + 1) * (args.window + args.settle + 15)
            swarm = Swarm(SwarmConfig(url=url, bots=bots, duration=planned, seed=args.seed))
            playing = asyncio.create_task(swarm.run())
            try:
                report.update(
                    await measure(args, chosen, swarm, url, pool, node.process.pid, node.admin_url)
                )
            finally:
                playing.cancel()
                await asyncio.gather(playing, return_exceptions=True)
    report["machine"]["loadavg_1m_at_end"] = os.getloadavg()[0]
    return report


async def measure(
    args: argparse.Namespace,
    chosen: list[Attack],
    swarm: Swarm,
    url: str,
    pool: concurrent.futures.Executor,
    node_pid: int,
    admin: str,
) -> dict[str, Any]:
    """``url``: where the bots and the attacks go; ``admin``: the node's admin URL, where
    its full /health and /metrics are read."""
    loop = asyncio.get_running_loop()
    invalid: list[str] = []
    log(f"{args.bots} honest bots joining")
    if not await until_seated(admin, args.bots, 60.0):
        invalid.append(f"not all {args.bots} honest bots were seated within 60 s")
    await asyncio.sleep(args.settle)
    log(f"baseline: {args.window:g} s without an attack")
    start = await sample(swarm, admin, node_pid)
    await asyncio.sleep(args.window)
    baseline = window_figures(start, await sample(swarm, admin, node_pid))
    log(f"baseline: {summary(baseline)}")
    if baseline["honest_playing_at_start"] < args.bots or baseline["honest_lost"]:
        invalid.append(f"{baseline['honest_playing_at_start']} of {args.bots} honest bots "
                       f"playing in the baseline, {baseline['honest_lost']} lost")  # fmt: skip
    results: dict[str, Any] = {}
    for attack in chosen:
        await asyncio.sleep(args.settle)
        if not await until_seated(admin, args.bots, 30.0):
            log(f"{attack.name}: fewer than {args.bots} honest bots seated before it")
        # Its own baseline, just before it: the machine drifts over a run (ticks grow with
        # the match's history and events), so each class is judged against the minutes it
        # ran in, not the first ones.
        start = await sample(swarm, admin, node_pid)
        await asyncio.sleep(args.window)
        before = window_figures(start, await sample(swarm, admin, node_pid))
        options = attack.options(args)
        log(f"{attack.name}: {args.window:g} s of {attack.attack} {options or ''}".rstrip())
        start = await sample(swarm, admin, node_pid)
        gained = await loop.run_in_executor(
            pool, adversary.run_attack, attack.attack, url, args.window, options
        )
        # An attack that ended early (every squatter kicked) leaves the rest of its window
        # measured too: every class is judged over a window as long as the baseline's.
        await asyncio.sleep(max(0.0, start.at + args.window - loop.time()))
        figures = window_figures(start, await sample(swarm, admin, node_pid))
        targets = judge(attack, figures, before, gained, args)
        missed = [name for name, verdict in targets.items() if not verdict["met"]]
        verdict = "MISSED: " + ", ".join(missed) if missed else "targets met"
        log(f"{attack.name}: before it {summary(before)}")
        log(f"{attack.name}: {summary(figures)}; {verdict}")
        results[attack.name] = {
            **figures,
            "baseline": before,
            "attacker": gained,
            "targets": targets,
        }
    for name, record in {"baseline": baseline, **results}.items():
        if record["bot_ticks_per_s"] < BOT_TICKS_PER_S_FLOOR:
            invalid.append(
                f"{name}: the bots kept {record['bot_ticks_per_s']:.1f} Hz "
                f"(< {BOT_TICKS_PER_S_FLOOR:.1f})"
            )
    missed = [f"{name}.{target}" for name, record in results.items()
              for target, verdict in record["targets"].items() if not verdict["met"]]  # fmt: skip
    return {
        "valid": not invalid,
        "invalid_reasons": invalid,
        "targets_met": not missed,
        "missed": missed,
        "baseline": baseline,
        "attacks": results,
    }


def judge(
    attack: Attack,
    figures: dict[str, Any],
    baseline: dict[str, Any],
    gained: dict[str, Any],
    args: argparse.Namespace,
) -> dict[str, dict[str, Any]]:
    """The targets for one window: the honest bots' and the node's, then the
    attacker's gains."""
    rate = figures["snapshots_per_bot_per_s"] / baseline["snapshots_per_bot_per_s"]
    p99, base_p99 = figures["tick_ms_p99"], baseline["tick_ms_p99"]
    p99_ratio = p99 / base_p99 if p99 is not None and base_p99 else math.inf
    verdicts: Verdicts = {
        "honest_bots_lost": (figures["honest_lost"], 0, figures["honest_lost"] == 0),
        "snapshot_rate_of_baseline": (round(rate, 4), SNAPSHOT_RATE_MIN, rate >= SNAPSHOT_RATE_MIN),
        "tick_p99_of_baseline": (round(p99_ratio, 3), TICK_P99_MAX, p99_ratio <= TICK_P99_MAX),
        **attack.gains(gained, args),
    }
    if attack.max_extra_cores is not None:
        extra = figures["node_cores"] - baseline["node_cores"]
        verdicts["node_cores_above_baseline"] = (
            round(extra, 4),
            attack.max_extra_cores,
            extra <= attack.max_extra_cores,
        )
    return {
        name: {"value": value, "limit": limit, "met": bool(met)}
        for name, (value, limit, met) in verdicts.items()
    }


def summary(figures: dict[str, Any]) -> str:
    return (
        f"{figures['snapshots_per_bot_per_s']} snapshots/bot/s, node {figures['node_cores']} "
        f"cores, tick p99 "
        f"{figures['tick_ms_p99']} ms, {figures['honest_lost']} honest lost, bots "
        f"{figures['bot_ticks_per_s']} Hz"
    )


def build_parser() -> OneLineParser:
    parser = OneLineParser(
        prog="bench/adversary.py",
        description="Hostile clients beside honest bots, one attack class at a time: what "
        "each costs the honest players and the node, and what the attacker gains, against "
        "their targets, as JSON on stdout.",
    )
    parser.add_argument("--window", type=float, default=10.0, help="seconds per window (10)")
    parser.add_argument("--settle", type=float, default=3.0, help="seconds between windows (3)")
    parser.add_argument("--bots", type=int, default=20, help="honest bots (20)")
    parser.add_argument(
        "--attacks",
        default=",".join(BY_NAME),
        help=f"comma-separated attack classes, in order (all: {','.join(BY_NAME)})",
    )
    parser.add_argument(
        "--fuzz-frames", type=int, default=100_000, help="fuzzed frames to send (100000)"
    )
    parser.add_argument("--seed", type=int, default=15, help="the bots' seed (15)")
    parser.add_argument(
        "--seat-grace-s",
        type=float,
        default=0.0,
        help="the node's seat grace (0: a closed attacker's seat is freed at once; 20: a "
        "speed hack's resumes meet the seat hold-off)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a smoke run: 4 s windows, 1 s settles, 8 bots, 5000 fuzzed frames",
    )
    add_json_option(parser, "adversary")
    return parser


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.quick:
        args.window, args.settle, args.bots, args.fuzz_frames = 4.0, 1.0, 8, 5000
    args.attacks = [name.strip() for name in args.attacks.split(",") if name.strip()]
    unknown = [name for name in args.attacks if name not in BY_NAME]
    if unknown:
        parser.error(f"--attacks: unknown {', '.join(unknown)} (known: {', '.join(BY_NAME)})")
    if not args.attacks:
        parser.error("--attacks: name at least one attack class")
    if args.window < 2.0:
        parser.error("--window: at least 2 seconds")
    if args.settle < 0:
        parser.error("--settle: not negative")
    if args.bots < 1:
        parser.error("--bots: at least 1")
    if args.fuzz_frames < 1:
        parser.error("--fuzz-frames: at least 1")
    try:
        check_writable(args.json, "--json")
    except ValueError as error:
        parser.error(str(error))
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    start = Start.now("adversary", "bench/adversary.py", argv)
    report = asyncio.run(run(args))
    emit(report, args.json, start)
    return targets_status(report, log)


if __name__ == "__main__":
    sys.exit(main())
