"""What one arriving frame costs a bot process, replayed without the network, as JSON.

A live run's per-bot CPU moves by 15 % from run to run on a shared machine, and a bot
process that falls behind changes what it is sent (older baselines, bigger deltas), so a
change of a few microseconds a frame cannot be seen there. This bench takes the frames out
of the loop instead:

1. **Record** (or ``--load`` a recording): a node starts on the first core the bench may use
   and ``--bots`` bots (``client_sim.swarm``, 40 ms RTT) play on it from this process for
   ``--seconds`` after all are seated; every frame a bot is handed
   (``Swarm.deliver``) is kept with its bot, in order.
2. **Replay**, ``--repeats`` times: a fresh swarm of the same bots, no sockets, is handed
   the same frames in the same order. The first half seats the bots and fills their
   baselines; the second half is timed (``time.process_time``). The figure is the median
   CPU per frame, and per snapshot.

``--save PATH`` keeps the recording (msgpack) so that two trees can replay the same frames:
``python bench/bot_receive.py --load PATH`` from each checkout. The figure covers decoding,
baselines, prediction's bookkeeping, the interpolation buffer and shot pairing: everything
a frame does once the socket and the link model have handed it over.

    python bench/bot_receive.py [--bots 300] [--seconds 6] [--repeats 5] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import msgpack

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from adversary import until_seated

from bench.report import Start, add_json_option, emit
from client_sim.bot import Bot
from client_sim.cli import check_writable
from client_sim.latency import LinkProfile, draw_bot, parse_distribution
from client_sim.pump import DeliveryPump
from client_sim.swarm import Swarm, SwarmConfig, warm_up_kernels
from launch.nodes import running_node
from shared.commandline import OneLineParser

#: A recording's format, checked on --load.
FORMAT = "arena-bot-receive/1"


def log(line: str) -> None:
    print(f"bench/bot_receive: {line}", file=sys.stderr, flush=True)


def swarm_config(url: str, bots: int, duration: float) -> SwarmConfig:
    rtt = parse_distribution("40ms")
    params = tuple(
        draw_bot(i, seed=1, rtt=rtt, profile=LinkProfile(jitter_ms=1.0)) for i in range(bots)
    )
    return SwarmConfig(url=url, bots=params, duration=duration, seed=1)


async def record(bots: int, seconds: float) -> list[tuple[int, bytes]]:
    """Every frame ``bots`` live bots are handed, from their first to ``seconds`` after all
    were seated."""
    cores = sorted(os.sched_getaffinity(0))
    node_core, bot_cores = (cores[:1], cores[1:]) if len(cores) > 1 else (cores, cores)
    os.sched_setaffinity(0, bot_cores)
    frames: list[tuple[int, bytes]] = []
    async with running_node("--max-players", str(max(bots, 300))) as node:
        for thread in os.listdir(f"/proc/{node.process.pid}/task"):
            os.sched_setaffinity(int(thread), node_core)
        swarm = Swarm(swarm_config(node.url, bots, 60.0 + seconds))
        deliver = swarm.deliver

        def kept(bot: Bot, data: bytes) -> None:
            frames.append((bot.index, data))
            deliver(bot, data)

        swarm.deliver = kept  # type: ignore[method-assign]
        playing = asyncio.create_task(swarm.run())
        try:
            if not await until_seated(node.admin_url, bots, 60.0):
                raise SystemExit(f"bench/bot_receive: not all {bots} bots were seated in 60 s")
            log(f"{bots} bots seated; recording {seconds:g} s")
            await asyncio.sleep(seconds)
        finally:
            swarm.finish()
            await asyncio.gather(playing, return_exceptions=True)
    return frames


async def replay(bots: int, frames: list[tuple[int, bytes]]) -> dict[str, Any]:
    """Hand ``frames`` to a fresh swarm of ``bots`` bots without sockets; the second half
    timed."""
    swarm = Swarm(swarm_config("ws://127.0.0.1:9/ws", bots, 1.0))
    warm_up_kernels()  # (the bots' kernels, loaded before anything is timed)
    swarm.pump = DeliveryPump(asyncio.get_running_loop())
    swarm.welcomed = asyncio.Event()
    team = swarm.bots = [
        Bot(i, params, swarm, *swarm._seat(i)) for i, params in enumerate(swarm.config.bots)
    ]
    half = len(frames) // 2
    deliver = swarm.deliver
    for index, data in frames[:half]:
        deliver(team[index], data)
    snapshots_before = sum(bot.snapshot_count for bot in team)
    began = time.process_time()
    for index, data in frames[half:]:
        deliver(team[index], data)
    spent = time.process_time() - began
    swarm.pump.close()
    snapshots = sum(bot.snapshot_count for bot in team) - snapshots_before
    return {
        "frames": len(frames) - half,
        "snapshots": snapshots,
        "cpu_s": round(spent, 4),
        "us_per_frame": round(spent / max(1, len(frames) - half) * 1e6, 2),
        "us_per_snapshot": round(spent / max(1, snapshots) * 1e6, 2),
        "errors": dict(swarm.errors),
    }


def save(path: Path, bots: int, frames: list[tuple[int, bytes]]) -> None:
    path.write_bytes(msgpack.packb({"format": FORMAT, "bots": bots, "frames": frames}))


def load(path: Path) -> tuple[int, list[tuple[int, bytes]]]:
    try:
        kept = msgpack.unpackb(path.read_bytes())
    except (OSError, ValueError) as error:
        raise SystemExit(f"bench/bot_receive: cannot read {path}: {error}") from None
    if not isinstance(kept, dict) or kept.get("format") != FORMAT:
        raise SystemExit(f"bench/bot_receive: {path} is not a {FORMAT} recording")
    return kept["bots"], [(index, data) for index, data in kept["frames"]]


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    load_at_start = os.getloadavg()[0]
    if args.load:
        bots, frames = load(args.load)
        log(f"{len(frames)} frames of {bots} bots from {args.load}")
    else:
        bots, frames = args.bots, await record(args.bots, args.seconds)
        log(f"recorded {len(frames)} frames")
        if args.save:
            save(args.save, bots, frames)
    runs = []
    for repeat in range(args.repeats):
        runs.append(await replay(bots, frames))
        log(f"replay {repeat + 1}/{args.repeats}: {runs[-1]['us_per_frame']} us a frame")
    return {
        "bench": "bot_receive",
        "bots": bots,
        "recording": str(args.load) if args.load else None,
        "us_per_frame": statistics.median(run["us_per_frame"] for run in runs),
        "us_per_snapshot": statistics.median(run["us_per_snapshot"] for run in runs),
        "runs": runs,
        "machine": {
            "cpus": os.cpu_count(),
            "loadavg_1m_at_start": load_at_start,
            "loadavg_1m_at_end": os.getloadavg()[0],
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bots", type=int, default=300, help="bots recorded (default 300)")
    parser.add_argument(
        "--seconds", type=float, default=6.0, help="seconds recorded once seated (default 6)"
    )
    parser.add_argument("--repeats", type=int, default=5, help="replays (default 5)")
    parser.add_argument("--save", type=Path, help="keep the recording here (msgpack)")
    parser.add_argument("--load", type=Path, help="replay this recording instead of recording")
    add_json_option(parser, "bot_receive")
    args = parser.parse_args(argv)
    start = Start.now("bot_receive", "bench/bot_receive.py", argv)
    if args.bots < 1 or args.seconds <= 0 or args.repeats < 1:
        parser.error("--bots, --seconds and --repeats must be positive")
    try:
        check_writable(args.save and str(args.save), "--save")
        check_writable(args.json and str(args.json), "--json")
    except ValueError as error:
        parser.error(str(error))
    report = asyncio.run(main_async(args))
    emit(report, args.json, start)
    return 0


if __name__ == "__main__":
    sys.exit(main())
