"""Fairness of lag compensation across links: marksmen against moving targets, as JSON.

One standalone node (the default 200 ms rewind cap, or ``--max-rewind-ms``), and for every
cell of the grid a round of ``--seconds``: ``--shooters`` marksmen (a team: they never shoot
each other) against ``--targets`` bots that pace or strafe, all on links of the cell's RTT,
jitter and loss. Per cell, from the bots' report figures (:func:`client_sim.report.shot_figures`):
``fair_agreement``, the fair false-negative and false-positive rates, the disagreements by
cause, and the server's RTT estimate beside the link's. Cells are pooled per RTT too.

A cell whose bots could not keep up is refused, not reported: bots that ticked below 90 % of
the tick rate, any bot that lost its connection (a reconnect), or fewer bots connected than
asked. Refused cells are listed with their reason and left out of the pooled figures; the
exit status is 2 when any cell was refused.

``--hog`` runs the whole grid again while one core is kept busy by a spinning process, and
reports each pooled figure's change from the quiet run.

    python bench/fairness.py [--rtts 40,100,150,200,250] [--jitters 0,2,10] [--losses 0,1]
                             [--behaviours pace,strafe] [--seconds 8] [--max-rewind-ms 200]
                             [--hog] [--json P]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Run as a script from anywhere: the project root is the parent of bench/.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.report import Start, add_json_option, emit
from client_sim.brain import TARGET_BEHAVIOURS
from client_sim.latency import LinkProfile, draw_bot, parse_distribution
from client_sim.marksman import AimSkill
from client_sim.report import rtt_agreement, shot_figures
from client_sim.shooting import ShotSummary
from client_sim.swarm import Swarm, SwarmConfig, SwarmResult
from launch.chaos import node_health
from launch.nodes import start_node
from launch.supervisor import cpu_hog

__all__ = ["main"]

TICK_RATE = 60
MIN_TICK_SHARE = 0.9  # bots ticking slower than this share of the tick rate: refused
#: Aim error high enough that both hits and misses are judged; no launcher (its flights
#: outlast a short round).
SKILL = AimSkill(error_deg=1.5, reaction_s=0.1, fire_rate_hz=4.0, launcher_share=0.0)
FIGURES = ("fair_agreement", "fair_false_negative_rate", "fair_false_positive_rate")


def log(line: str) -> None:
    print(f"bench/fairness: {line}", file=sys.stderr, flush=True)


@dataclass(frozen=True, slots=True)
class Cell:
    behaviour: str
    rtt_ms: float
    jitter_ms: float
    loss: float

    @property
    def name(self) -> str:
        return f"{self.behaviour} {self.rtt_ms:g}ms ±{self.jitter_ms:g}ms loss {self.loss:g}"


def _swarm(url: str, cell: Cell, count: int, first: int, behaviour: str, team: bool) -> Swarm:
    rtt = parse_distribution(f"{cell.rtt_ms:g}ms")
    profile = LinkProfile(jitter_ms=cell.jitter_ms, loss=cell.loss)
    bots = tuple(draw_bot(first + i, seed=11, rtt=rtt, profile=profile) for i in range(count))
    return Swarm(
        SwarmConfig(
            url=url,
            bots=bots,
            duration=ARGS.seconds,
            seed=first,
            behaviour=behaviour,
            skill=SKILL,
            team=team,
            name_prefix="shooter" if team else "target",
        )
    )


def _refusal(results: list[SwarmResult], asked: int) -> str | None:
    connected = sum(r.connected for r in results)
    if connected < asked:
        return f"{connected}/{asked} bots connected"
    reconnects = sum(len(r.failovers) for r in results)
    if reconnects:
        return f"{reconnects} reconnect(s)"
    for result in results:
        rate = result.swarm_ticks / result.duration_s if result.duration_s > 0 else 0.0
        if rate < MIN_TICK_SHARE * TICK_RATE:
            return f"bots ticked at {rate:.1f}/s, below {MIN_TICK_SHARE:.0%} of {TICK_RATE}"
    return None


async def _play(
    url: str, admin: str, cell: Cell, round_: int
) -> tuple[dict[str, Any], list[ShotSummary]]:
    """One cell's round on the node players reach at ``url`` (its full /health at ``admin``)."""
    before = await node_health(admin)
    first = 1000 * round_
    targets = _swarm(url, cell, ARGS.targets, first, cell.behaviour, team=False)
    shooters = _swarm(url, cell, ARGS.shooters, first + 500, "marksman", team=True)
    results = list(await asyncio.gather(targets.run(), shooters.run()))
    after = await node_health(admin)
    shots = results[1].shots
    row: dict[str, Any] = {
        "behaviour": cell.behaviour,
        "rtt_ms": cell.rtt_ms,
        "jitter_ms": cell.jitter_ms,
        "loss": cell.loss,
        "refused": _refusal(results, ARGS.targets + ARGS.shooters),
        "ticks_skipped": (
            int(after["ticks_skipped"]) - int(before["ticks_skipped"]) if before and after else None
        ),
        **_figures(shots),
    }
    return row, shots


def _figures(shots: list[ShotSummary]) -> dict[str, Any]:
    figures = shot_figures(shots)
    return {
        "judged": figures["judged"],
        "fair_judged": figures["fair_judged"],
        **{name: figures[name] for name in FIGURES},
        "causes": figures["disagreements_by_cause"],
        "decided_by_rule": figures["decided_by_rule"],
        "rtt_ms_estimates": rtt_agreement(shots),
    }


async def run_grid(url: str, admin: str, cells: list[Cell], label: str) -> dict[str, Any]:
    rows, pooled = [], {}
    began = time.monotonic()
    for k, cell in enumerate(cells):
        row, shots = await _play(url, admin, cell, k)
        rows.append(row)
        if row["refused"] is None:
            pooled.setdefault(cell.rtt_ms, []).extend(shots)
        eta = (time.monotonic() - began) / (k + 1) * (len(cells) - k - 1)
        verdict = row["refused"] or (
            f"fair agreement {row['fair_agreement']} over {row['fair_judged']} shots"
        )
        log(f"{label} [{k + 1}/{len(cells)}] {cell.name}: {verdict} (about {eta:.0f}s left)")
    by_rtt = {f"{rtt:g}ms": _figures(shots) for rtt, shots in sorted(pooled.items())}
    everything = [s for shots in pooled.values() for s in shots]
    return {
        "cells": rows,
        "refused": [
            f"{r['behaviour']} {r['rtt_ms']:g}ms: {r['refused']}" for r in rows if r["refused"]
        ],
        "by_rtt": by_rtt,
        "all": _figures(everything),
    }


def _changes(quiet: dict[str, Any], busy: dict[str, Any]) -> dict[str, Any]:
    """Busy minus quiet, per pooled RTT and figure (None where either is missing)."""
    out = {}
    for rtt in quiet["by_rtt"]:
        if rtt not in busy["by_rtt"]:
            continue
        q, b = quiet["by_rtt"][rtt], busy["by_rtt"][rtt]
        out[rtt] = {
            name: round(b[name] - q[name], 4)
            if b[name] is not None and q[name] is not None
            else None
            for name in FIGURES
        }
    return out


async def bench() -> dict[str, Any]:
    cells = [
        Cell(b, r, j, loss / 100.0)
        for b, r, j, loss in itertools.product(
            ARGS.behaviours, ARGS.rtts, ARGS.jitters, ARGS.losses
        )
    ]
    report: dict[str, Any] = {
        "bench": "fairness",
        "machine": {"cpus": os.cpu_count(), "load_1m_before": round(os.getloadavg()[0], 2)},
        "settings": {
            "seconds_per_cell": ARGS.seconds,
            "shooters": ARGS.shooters,
            "targets": ARGS.targets,
            "max_rewind_ms": ARGS.max_rewind_ms,
            "skill": {"error_deg": SKILL.error_deg, "fire_rate_hz": SKILL.fire_rate_hz},
        },
    }
    rewind = ("--max-rewind-ms", f"{ARGS.max_rewind_ms:g}")
    # Seats freed at once: the cells share one node, and a departed bot must not linger as
    # a target for the next cell's marksmen.
    grace = ("--seat-grace-s", "0")
    with start_node("--log-level", "warning", *rewind, *grace, progress=log) as node:
        url, admin = node.url, node.admin_url
        report["quiet"] = await run_grid(url, admin, cells, "quiet")
        report["machine"]["load_1m_after_quiet"] = round(os.getloadavg()[0], 2)
        if ARGS.hog:
            with cpu_hog(True):
                report["hog"] = await run_grid(url, admin, cells, "hog")
            report["machine"]["load_1m_after_hog"] = round(os.getloadavg()[0], 2)
            report["hog_minus_quiet"] = _changes(report["quiet"], report["hog"])
    return report


def _numbers(text: str) -> list[float]:
    try:
        return [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a comma-separated list of numbers: {text!r}"
        ) from None


def _words(text: str) -> list[str]:
    words = [w.strip() for w in text.split(",") if w.strip()]
    unknown = [w for w in words if w not in TARGET_BEHAVIOURS]
    if unknown or not words:
        known = ", ".join(TARGET_BEHAVIOURS)
        raise argparse.ArgumentTypeError(f"target behaviours are {known}; got {text!r}")
    return words


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="bench/fairness.py",
        description="Marksmen against pacing and strafing targets over a grid of links; "
        "prints fair agreement, false negatives and positives and their causes as JSON.",
    )
    parser.add_argument("--rtts", type=_numbers, default=[40, 100, 150, 200, 250], help="ms")
    parser.add_argument("--jitters", type=_numbers, default=[0, 2, 10], help="ms")
    parser.add_argument("--losses", type=_numbers, default=[0, 1], help="percent")
    parser.add_argument("--behaviours", type=_words, default=["pace", "strafe"])
    parser.add_argument("--seconds", type=float, default=8.0, help="per cell (default 8)")
    parser.add_argument("--shooters", type=int, default=8)
    parser.add_argument("--targets", type=int, default=10)
    parser.add_argument("--max-rewind-ms", type=float, default=200.0, help="the node's cap")
    parser.add_argument("--hog", action="store_true", help="run the grid again with a CPU hog")
    add_json_option(parser, "fairness")
    args = parser.parse_args(argv)
    if args.seconds <= 0 or args.shooters < 1 or args.targets < 1 or args.max_rewind_ms < 0:
        parser.error("--seconds, --shooters, --targets must be positive, --max-rewind-ms >= 0")
    return args


def main(argv: list[str] | None = None) -> int:
    global ARGS
    ARGS = parse_args(argv)
    start = Start.now("fairness", "bench/fairness.py", argv)
    report = asyncio.run(bench())
    emit(report, ARGS.json, start)
    refused = report["quiet"]["refused"] + report.get("hog", {}).get("refused", [])
    return 2 if refused else 0


ARGS: argparse.Namespace

if __name__ == "__main__":
    sys.exit(main())
