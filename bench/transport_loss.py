"""Loss over UDP against loss over WebSocket, side by side in one run, as JSON.

One standalone node serving both transports. For each loss condition (none, random loss at
each ``--losses`` percentage, and a bursty Gilbert-Elliott channel), ``arena-bots`` plays a
round of ``--seconds`` with ``--bots`` bots on links of ``--rtt-ms`` round trip and
``--jitter-ms`` jitter, once over each transport, with the same seed; the whole grid is
repeated ``--repeats`` times, the transports interleaved, and each figure is the median of
the repeats, with the machine's load average beside it.

Over UDP a lost datagram loses one snapshot (interpolation hides it) and no input (every
packet repeats the inputs not yet acknowledged); over TCP a lost segment holds back
everything behind it for a retransmission. The figures: the per-bot longest gap between
two snapshots shown (p99 over bots), the bots' measured RTT p90, the share of inputs
acknowledged, fair agreement and the shots beyond the rewind cap.

A round is refused, not reported, when the bots' report says it is invalid, or fewer bots
connected than asked; the exit status is 2 when any round was refused.

    python bench/transport_loss.py [--bots 40] [--seconds 20] [--rtt-ms 100] [--jitter-ms 2]
                                   [--losses 2,5] [--burst 0.02,0.3,0.5] [--repeats 3]
                                   [--transports udp,ws] [--json P]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# Run as a script from anywhere: the project root is the parent of bench/.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.report import Start, add_json_option, emit
from launch.nodes import start_node
from shared.commandline import OneLineParser

__all__ = ["main"]

#: (figure, dotted path into the bots' JSON report)
FIGURES = (
    ("longest_gap_ms_p99", "snapshots.longest_gap_ms_p99"),
    ("longest_gap_ms_p50", "snapshots.longest_gap_ms_p50"),
    ("snapshots_lost", "snapshots.lost"),
    ("rtt_p90_ms", "latency_ms.rtt_p90"),
    ("acked_ratio", "inputs.acked_ratio"),
    ("inputs_resent", "inputs.resent"),
    ("inputs_recovered_by_redundancy", "inputs.recovered_by_redundancy"),
    ("fair_agreement", "shots.fair_agreement"),
    ("beyond_cap", "shots.decided_by_rule.beyond_cap"),
    ("interpolation_misses", "snapshots.interpolation_misses"),
    ("down_kbps_per_bot", "bandwidth.down_kbps_per_bot"),
    ("server_tick_p99_ms", "ticks.p99_ms"),
)


def log(line: str) -> None:
    print(f"bench/transport_loss: {line}", file=sys.stderr, flush=True)


def _path(report: dict[str, Any], dotted: str) -> Any:
    value: Any = report
    for key in dotted.split("."):
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return value


def conditions(losses: list[float], burst: str | None) -> dict[str, list[str]]:
    """Each condition's name and the arena-bots flags that make it."""
    grid: dict[str, list[str]] = {"no_loss": ["--loss", "0"]}
    for percent in losses:
        grid[f"loss_{percent:g}pct"] = ["--loss", f"{percent / 100:g}"]
    if burst:
        grid["bursty"] = ["--burst-loss", burst]
    return grid


def play(
    url: str, transport: str, flags: list[str], args: argparse.Namespace, folder: Path
) -> dict[str, Any]:
    """One round of arena-bots; its figures, or the reason it was refused."""
    out = folder / f"{transport}-{time.monotonic_ns()}.json"
    command = [
        sys.executable, "-m", "client_sim.cli", "--server", url, "--transport", transport,
        "--count", str(args.bots), "--duration", f"{args.seconds:g}",
        "--latency", f"{args.rtt_ms:g}ms", "--jitter", f"{args.jitter_ms:g}ms",
        "--seed", str(args.seed), "--json", str(out), "--quiet", "--allow-invalid", *flags,
    ]  # fmt: skip
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=args.seconds + 120, check=False
    )
    if done.returncode != 0 or not out.exists():
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        return {"refused": f"arena-bots exited {done.returncode}: {tail[0]}"}
    report = json.loads(out.read_text(encoding="utf-8"))
    connected = _path(report, "bots.connected") or 0
    if not report.get("valid", False):
        return {"refused": f"invalid run: {report.get('invalid_reasons') or report.get('reasons')}"}
    if connected < args.bots:
        return {"refused": f"{connected} of {args.bots} bots connected"}
    return {name: _path(report, dotted) for name, dotted in FIGURES}


def _median(rounds: list[dict[str, Any]], name: str) -> float | None:
    values = [r[name] for r in rounds if r.get(name) is not None]
    return round(statistics.median(values), 4) if values else None


def verdicts(cells: dict[str, dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    """The targets, checked on the medians: over UDP under loss, gaps within three snapshot
    intervals, RTT p90 within 1.2x the link's, inputs acknowledged, fairness as without loss."""
    quiet = cells.get("no_loss/udp", {}).get("median", {})
    link_rtt_p90 = args.rtt_ms + 2 * args.jitter_ms  # the model's RTT and both ways' jitter
    checks: dict[str, Any] = {}
    for key, cell in cells.items():
        condition, transport = key.split("/")
        if transport != "udp" or condition == "no_loss" or "median" not in cell:
            continue
        m = cell["median"]
        fair, quiet_fair = m.get("fair_agreement"), quiet.get("fair_agreement")
        checks[condition] = {
            "longest_gap_p99_le_100ms": _le(m.get("longest_gap_ms_p99"), 100.0),
            "rtt_p90_within_1.2x_link": _le(m.get("rtt_p90_ms"), 1.2 * link_rtt_p90),
            "acked_ratio_ge_0.999": _le(0.999, m.get("acked_ratio")),
            "fair_agreement_within_0.5pt": None
            if fair is None or quiet_fair is None
            else fair >= quiet_fair - 0.005,
            "beyond_cap_not_above_no_loss": _le(m.get("beyond_cap"), quiet.get("beyond_cap")),
        }
    return checks


def _le(a: float | None, b: float | None) -> bool | None:
    return None if a is None or b is None else a <= b


def bench(args: argparse.Namespace) -> tuple[dict[str, Any], bool]:
    grid = conditions(args.losses, args.burst)
    rounds: dict[str, list[dict[str, Any]]] = {
        f"{name}/{t}": [] for name in grid for t in args.transports
    }
    loads: list[float] = []
    refused = False
    with tempfile.TemporaryDirectory() as tmp, start_node("--node-id", "loss") as node:
        for repeat in range(args.repeats):
            for name, flags in grid.items():
                order = args.transports if repeat % 2 == 0 else args.transports[::-1]
                for transport in order:
                    figures = play(node.url, transport, flags, args, Path(tmp))
                    loads.append(os.getloadavg()[0])
                    figures["loadavg_1m"] = round(loads[-1], 2)
                    rounds[f"{name}/{transport}"].append(figures)
                    refused |= "refused" in figures
                    log(f"repeat {repeat + 1}/{args.repeats} {name} {transport}: {figures}")
    cells: dict[str, dict[str, Any]] = {}
    for key, runs in rounds.items():
        valid = [r for r in runs if "refused" not in r]
        cells[key] = {"rounds": runs}
        if valid:
            cells[key]["median"] = {name: _median(valid, name) for name, _ in FIGURES}
    report = {
        "bench": "loss over UDP and over WebSocket: arena-bots rounds against one node",
        "bots": args.bots,
        "seconds": args.seconds,
        "rtt_ms": args.rtt_ms,
        "jitter_ms": args.jitter_ms,
        "repeats": args.repeats,
        "conditions": {name: " ".join(flags) for name, flags in grid.items()},
        "loadavg_1m_median": round(statistics.median(loads), 2) if loads else None,
        "cells": cells,
        "targets": verdicts(cells, args),
        "valid": not refused,
    }
    return report, refused


def _numbers(text: str) -> list[float]:
    try:
        return [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        message = f"expected numbers separated by commas, not {text!r}"
        raise argparse.ArgumentTypeError(message) from None


def _transports(text: str) -> list[str]:
    names = [part.strip() for part in text.split(",") if part.strip()]
    if not names or any(name not in ("udp", "ws") for name in names):
        raise argparse.ArgumentTypeError(f"expected udp and/or ws, not {text!r}") from None
    return names


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = OneLineParser(prog="bench/transport_loss.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--bots", type=int, default=40, help="bots a round (default 40)")
    parser.add_argument("--seconds", type=float, default=20.0, help="a round (default 20)")
    parser.add_argument("--rtt-ms", type=float, default=100.0, help="link RTT (default 100)")
    parser.add_argument("--jitter-ms", type=float, default=2.0, help="link jitter (default 2)")
    parser.add_argument(
        "--losses", type=_numbers, default=[2.0, 5.0], help="random loss, percent (default 2,5)"
    )
    parser.add_argument(
        "--burst",
        default="0.02,0.3,0.5",
        help="the bursty condition's arena-bots --burst-loss P_GB,P_BG[,LOSS_BAD] "
        "('' for none; default 0.02,0.3,0.5)",
    )
    parser.add_argument("--repeats", type=int, default=3, help="the grid's repeats (default 3)")
    parser.add_argument("--transports", type=_transports, default=["udp", "ws"])
    parser.add_argument("--seed", type=int, default=7, help="the bots' seed (default 7)")
    add_json_option(parser, "transport_loss")
    args = parser.parse_args(argv)
    if args.bots < 1 or args.seconds <= 0 or args.repeats < 1:
        parser.error("--bots, --seconds and --repeats must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    start = Start.now("transport_loss", "bench/transport_loss.py", argv)
    report, refused = bench(args)
    emit(report, args.json, start)
    return 2 if refused else 0


if __name__ == "__main__":
    sys.exit(main())
