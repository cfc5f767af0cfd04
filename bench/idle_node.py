"""What a node costs with nobody playing: its CPU a second with one empty match, as JSON.

The fixed cost of ticking at all, which a small node spreads over few players: the node
starts (``arena-server``, one empty match at 60 Hz), is pinned to the first core this bench
may use, is left to settle once it is ready, and its user + system time is read from
``/proc`` over a window; each repeat is a fresh node. The figure per player-tick at
``--players`` is that CPU shared among them, what an idle node adds to each player's cost.

    python bench/idle_node.py [--window 20] [--settle 8] [--repeats 2] [--players 60]
                              [--json PATH]
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.report import Start, add_json_option, emit
from launch.nodes import start_node
from shared.commandline import OneLineParser

TICK_RATE_HZ = 60
NODE_FLAGS = ("--node-id", "idle", "--log-level", "warning", "--max-players", "600")


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds process ``pid`` has used (all its threads), from /proc."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pin(pid: int, core: int) -> None:
    """Every thread of ``pid`` on ``core``: the node alone there, as in a deployment."""
    for thread in os.listdir(f"/proc/{pid}/task"):
        os.sched_setaffinity(int(thread), {core})


def measure(window_s: float, settle_s: float, core: int) -> float:
    """Milliseconds of CPU a second one fresh idle node used over ``window_s``."""
    with start_node(*NODE_FLAGS) as node:
        pin(node.process.pid, core)
        time.sleep(settle_s)
        began, cpu_before = time.monotonic(), process_cpu_s(node.process.pid)
        time.sleep(window_s)
        cpu = process_cpu_s(node.process.pid) - cpu_before
        return round(1000 * cpu / (time.monotonic() - began), 1)


def per_player_tick_us(ms_per_s: float, players: int) -> float:
    """An idle node's CPU shared among ``players`` ticking at 60 Hz, in µs a player-tick."""
    return round(1000 * ms_per_s / (players * TICK_RATE_HZ), 2)


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="bench/idle_node.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--window", type=float, default=20.0, help="seconds measured (20)")
    parser.add_argument("--settle", type=float, default=8.0, help="seconds after ready (8)")
    parser.add_argument("--repeats", type=int, default=2, help="fresh nodes measured (2)")
    parser.add_argument(
        "--players", type=int, default=60, help="players to share the CPU among (60)"
    )
    add_json_option(parser, "idle_node")
    args = parser.parse_args(argv)
    if not args.window > 0 or args.settle < 0 or args.repeats < 1 or args.players < 1:
        parser.error("--window, --repeats and --players must be positive, --settle >= 0")
    start = Start.now("idle_node", "bench/idle_node.py", argv)
    core = min(os.sched_getaffinity(0))
    runs = [measure(args.window, args.settle, core) for _ in range(args.repeats)]
    report: dict[str, Any] = {
        "bench": "idle_node",
        "tick_rate_hz": TICK_RATE_HZ,
        "node_flags": list(NODE_FLAGS),
        "node_core": core,
        "window_s": args.window,
        "settle_s": args.settle,
        "runs_ms_cpu_per_s": runs,
        "ms_cpu_per_s": round(statistics.median(runs), 1),
        "players": args.players,
        "per_player_tick_us": per_player_tick_us(statistics.median(runs), args.players),
    }
    emit(report, args.json, start)
    return 0


if __name__ == "__main__":
    sys.exit(main())
