"""A node at a region's scale: 600 playing players, most of them light, as JSON.

One fresh node (bench/server_load.py's measurement) under ``--players`` players, of which
``--full`` are Arena's full bots (they measure: fair agreement, prediction, RTT) and the
rest light players (``arena-bots --light``: the same inputs, acknowledgements and shots,
none of the bots' decoding), over ``--transport``; again with one more core kept busy by a
CPU hog (``--hog``). The window's tick p50/p99, overruns and skipped ticks, the node's CPU
per player-tick and the full bots' fair agreement are reported for each, with the load.

A run is refused (``"valid": false`` with its reasons) as server_load refuses one: the bot
process below 95 % of the tick rate, a reconnect, fewer players seated or connected than
asked. A hogged run that overran is reported as what it is, with the hog beside it.

    python bench/scale.py [--players 600] [--full 50] [--duration 75] [--warmup 5]
                          [--transport ws|udp] [--hog] [--json PATH]
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.report import Start, add_json_option, emit
from bench.server_load import measure, run_summary
from launch.supervisor import cpu_hog
from shared.commandline import OneLineParser, seconds

__all__ = ["main"]

#: The issue's bar for a region's node: every tick within its 60 Hz budget.
TICK_BUDGET_MS = 16.7
MIN_FAIR_AGREEMENT = 0.99


def verdicts(run: dict[str, Any]) -> dict[str, bool | None]:
    """The targets, checked on one run."""
    p99, fair = run.get("tick_p99_ms"), run.get("fair_agreement")
    return {
        "tick_p99_within_budget": None if p99 is None else p99 <= TICK_BUDGET_MS,
        "no_overruns": run.get("tick_overruns") == 0,
        "fair_agreement_ge_0.99": None if fair is None else fair >= MIN_FAIR_AGREEMENT,
    }


async def bench(players: int, full: int, duration: float, warmup: float, transport: str,
                hog: bool) -> dict[str, Any]:  # fmt: skip
    runs: dict[str, Any] = {}
    for label, busy in (("quiet", False), ("hog", True)) if hog else (("quiet", False),):
        print(f"bench/scale: {players} players ({full} full), {label} ...", file=sys.stderr)
        with cpu_hog(busy):
            record = await measure(
                players, duration, warmup, light=players - full, transport=transport
            )
        print(run_summary(record), file=sys.stderr, flush=True)
        runs[label] = {**record, "targets_met": verdicts(record)}
    return {
        "bench": "scale",
        "players": players,
        "full": full,
        "light": players - full,
        "transport": transport,
        "tick_budget_ms": TICK_BUDGET_MS,
        "runs": runs,
        "valid": all(run["valid"] for run in runs.values()),
    }


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="bench/scale.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--players", type=int, default=600, help="players in all (600)")
    parser.add_argument("--full", type=int, default=50, help="of them, full bots (50)")
    parser.add_argument("--duration", type=seconds, default=75.0, help="the bots' run (75 s)")
    parser.add_argument("--warmup", type=seconds, default=5.0, help="after all joined (5 s)")
    parser.add_argument("--transport", choices=("ws", "udp"), default="ws")
    parser.add_argument("--hog", action="store_true", help="again with a CPU hog")
    add_json_option(parser, "scale")
    args = parser.parse_args(argv)
    if not 0 < args.full <= args.players:
        parser.error("--full must be between 1 and --players")
    if args.duration <= args.warmup + 10:
        parser.error("--duration must leave at least 10 s after --warmup")
    start = Start.now("scale", "bench/scale.py", argv)
    report = asyncio.run(
        bench(args.players, args.full, args.duration, args.warmup, args.transport, args.hog)
    )
    emit(report, args.json, start)
    return 0 if report["valid"] else 2


if __name__ == "__main__":
    sys.exit(main())
