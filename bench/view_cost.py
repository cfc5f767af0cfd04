"""What watching a node costs its tick: windows with and without live-view viewers, as JSON.

A node starts alone on the first core the bench may use; 40 bots (``client_sim.swarm``,
40 ms RTT) play on it from this process on the other core, and in alternate windows
viewers watch ``/view/feed``: two that read every frame and one that reads its hello and
then nothing more (its socket fills and its frames are dropped: the slow viewer a feed
must survive). Per window, from the deltas of the node's ``arena_tick_duration_seconds``
histogram (``bench/adversary.py``'s window figures): tick p50/p99, the bots' snapshots per
second and their own tick rate; with viewers also the frames a second each reader got and
their size. The figures: the medians over the pairs of the viewers' tick p50/p99 as a
ratio of the windows without (the target is no change beyond the noise: a p99 ratio
within 1.2), and the readers' frame rate against ``--view-rate``.

A run is refused (exit 2, ``"valid": false``) when the bots fell below 57 Hz in a window or
lost their seats; exit 1 when a target is missed. Compare within one run.

    python bench/view_cost.py [--pairs 3] [--window 10] [--bots 40] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from adversary import BOT_TICKS_PER_S_FLOOR, Sample, sample, until_seated, window_figures

from bench.report import Start, add_json_option, emit
from client_sim.cli import check_writable
from client_sim.latency import LinkProfile, draw_bot, parse_distribution
from client_sim.swarm import Swarm, SwarmConfig
from launch import wire
from launch.health import base_url
from launch.nodes import running_node
from shared.commandline import OneLineParser

TICK_P99_RATIO_MAX = 1.2
FRAME_RATE_MIN = 0.9  # of --view-rate, for the viewers that read


def log(line: str) -> None:
    print(f"bench/view_cost: {line}", file=sys.stderr, flush=True)


class Reader:
    """A viewer that reads every frame, counting them and their bytes."""

    def __init__(self) -> None:
        self.frames = 0
        self.bytes = 0
        self.missed = 0

    async def read(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        async for message in ws:
            if message.type is not aiohttp.WSMsgType.TEXT:
                break
            frame = json.loads(message.data)
            if frame["type"] == "frame":
                self.frames += 1
                self.bytes += len(message.data)
                self.missed = frame["missed"]


@contextlib.asynccontextmanager
async def viewers(url: str, readers: int) -> AsyncIterator[list[Reader]]:
    """``readers`` viewers that read, and one that stops reading after the upgrade: a raw
    socket with a 4 KiB receive buffer, so the node's writes to it back up within seconds."""
    feed = base_url(url) + "/view/feed"
    _, writer = await wire.upgrade(base_url(url), "/view/feed", receive_buffer=4096)
    async with aiohttp.ClientSession() as session:
        sockets = [await session.ws_connect(feed, max_msg_size=0) for _ in range(readers)]
        counted = [Reader() for _ in range(readers)]
        tasks = [asyncio.create_task(r.read(ws)) for r, ws in zip(counted, sockets, strict=True)]
        try:
            yield counted
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for ws in sockets:
                await ws.close()
            writer.close()


def view_counters(start: Sample, end: Sample) -> dict[str, float]:
    """The node's live-view counters' deltas over a window."""
    return {
        name: end.metrics.get((name, ()), 0.0) - start.metrics.get((name, ()), 0.0)
        for name in ("arena_view_frames_sent_total", "arena_view_frames_missed_total")
    }


async def window(swarm: Swarm, url: str, seconds: float) -> dict[str, Any]:
    start = await sample(swarm, url)
    await asyncio.sleep(seconds)
    end = await sample(swarm, url)
    return {**window_figures(start, end), "view": view_counters(start, end)}


async def run(args: argparse.Namespace) -> dict[str, Any]:
    flags = ["--node-id", "view-cost", "--log-level", "warning", "--view-rate",
             f"{args.view_rate:g}"]  # fmt: skip
    report: dict[str, Any] = {
        "bench": "view_cost",
        "bots": args.bots,
        "window_s": args.window,
        "pairs": args.pairs,
        "view_rate_hz": args.view_rate,
        "readers": args.readers,
        "stalled_viewers": 1,
        "machine": {"cpus": os.cpu_count(), "loadavg_1m_at_start": os.getloadavg()[0]},
    }
    cores = sorted(os.sched_getaffinity(0))
    node_core, client_cores = (cores[:1], cores[1:]) if len(cores) > 1 else (cores, cores)
    os.sched_setaffinity(0, client_cores)
    async with running_node(*flags) as node:
        for thread in os.listdir(f"/proc/{node.process.pid}/task"):
            os.sched_setaffinity(int(thread), node_core)
        rtt = parse_distribution("40ms")
        bots = tuple(
            draw_bot(i, seed=1, rtt=rtt, profile=LinkProfile(jitter_ms=1.0))
            for i in range(args.bots)
        )
        planned = 40 + args.pairs * (2 * args.window + 4)
        swarm = Swarm(SwarmConfig(url=node.url, bots=bots, duration=planned, seed=1))
        playing = asyncio.create_task(swarm.run())
        try:
            report.update(await measure(args, swarm, node.admin_url))
        finally:
            playing.cancel()
            await asyncio.gather(playing, return_exceptions=True)
    report["machine"]["loadavg_1m_at_end"] = os.getloadavg()[0]
    return report


async def measure(args: argparse.Namespace, swarm: Swarm, url: str) -> dict[str, Any]:
    """``url``: the node's admin URL (its full /health, /metrics and /view)."""
    invalid: list[str] = []
    if not await until_seated(url, args.bots, 60.0):
        invalid.append(f"not all {args.bots} bots were seated within 60 s")
    await asyncio.sleep(3.0)
    pairs = []
    for pair in range(args.pairs):
        without = await window(swarm, url, args.window)
        async with viewers(url, args.readers) as readers:
            began = time.monotonic()
            watched = await window(swarm, url, args.window)
            seconds = time.monotonic() - began
            watched["viewer_frames_per_s"] = [round(r.frames / seconds, 2) for r in readers]
            watched["viewer_frame_bytes_mean"] = round(
                sum(r.bytes for r in readers) / max(1, sum(r.frames for r in readers))
            )
            watched["viewer_frames_missed"] = [r.missed for r in readers]
        log(
            f"pair {pair + 1}: tick p99 {without['tick_ms_p99']} ms without viewers, "
            f"{watched['tick_ms_p99']} ms with; frames/s {watched['viewer_frames_per_s']}"
        )
        pairs.append({"without": without, "with": watched})
        for name, record in (("without", without), ("with", watched)):
            if record["bot_ticks_per_s"] < BOT_TICKS_PER_S_FLOOR:
                invalid.append(f"pair {pair + 1} {name}: the bots kept "
                               f"{record['bot_ticks_per_s']:.1f} Hz")  # fmt: skip
            if record["honest_lost"]:
                invalid.append(f"pair {pair + 1} {name}: {record['honest_lost']} bots lost")

    def ratio(key: str) -> float:
        return round(statistics.median(p["with"][key] / p["without"][key] for p in pairs), 3)

    p99_ratio = ratio("tick_ms_p99")
    frame_rate = statistics.median(rate for p in pairs for rate in p["with"]["viewer_frames_per_s"])
    targets = {
        "tick_p99_ratio": {"value": p99_ratio, "limit": TICK_P99_RATIO_MAX,
                           "met": p99_ratio <= TICK_P99_RATIO_MAX},
        "viewer_frames_per_s": {"value": frame_rate, "limit": FRAME_RATE_MIN * args.view_rate,
                                "met": frame_rate >= FRAME_RATE_MIN * args.view_rate},
    }  # fmt: skip
    # Every frame the readers did not miss was sent to them: what is left was the stalled
    # viewer's, whose writes backed up (else it did not test a slow viewer at all).
    stalled_missed = [p["with"]["view"]["arena_view_frames_missed_total"] for p in pairs]
    if not any(stalled_missed):
        invalid.append("the stalled viewer never backed up: no frame was missed")
    return {
        "valid": not invalid,
        "invalid_reasons": invalid,
        "frames_missed_per_window": stalled_missed,
        "tick_p50_ratio_median": ratio("tick_ms_p50"),
        "tick_p99_ratio_median": p99_ratio,
        "viewer_frames_per_s_median": frame_rate,
        "targets": targets,
        "targets_met": all(t["met"] for t in targets.values()),
        "pairs": pairs,
    }


def build_parser() -> OneLineParser:
    parser = OneLineParser(
        prog="bench/view_cost.py",
        description="Tick time with and without live-view viewers (two readers and one "
        "stalled), in alternate windows; JSON on stdout.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--pairs", type=int, default=3, help="window pairs")
    parser.add_argument("--window", type=float, default=10.0, help="seconds a window")
    parser.add_argument("--bots", type=int, default=40, help="bots playing")
    parser.add_argument("--readers", type=int, default=2, help="viewers that read")
    parser.add_argument("--view-rate", type=float, default=10.0, help="the node's --view-rate")
    add_json_option(parser, "view_cost")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    start = Start.now("view_cost", "bench/view_cost.py", argv)
    if args.pairs < 1 or args.window <= 0 or args.bots < 2 or args.readers < 1:
        parser.error("need --pairs >= 1, --window > 0, --bots >= 2 and --readers >= 1")
    check_writable(args.json, "--json")
    report = asyncio.run(run(args))
    emit(report, args.json, start)
    if not report["valid"]:
        log("not valid: " + "; ".join(report["invalid_reasons"]))
        return 2
    return 0 if report["targets_met"] else 1


if __name__ == "__main__":
    sys.exit(main())
