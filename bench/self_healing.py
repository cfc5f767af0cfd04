"""Self-healing regions, audited: three ``arena-chaos torture`` runs and their targets, as JSON.

- ``kills``: 20 consecutive SIGKILLs of whichever node is primary, under 50 bots, and
  nothing restarted by hand (the torture's supervisor restarts what died). Targets: every
  kill finds a standby to promote (20 promotions), 0 bots lost, 0 seats lost, 0 acked
  ticks lost, the standby back in sync within 10 s of each kill.
- ``hog``: 120 s with one core kept busy and no fault, then 5 kills with the hog still on.
  Targets: 0 promotions and 0 bot reconnects in the calm phase; each kill's promotion
  within 500 ms (detection is within that).
- ``both``: 3 SIGKILLs of both nodes at once; the supervisor restarts them, and the
  ``--role primary`` node resumes the match from its newest checkpoint. Targets: the first
  tick, and every bot's first snapshot of the resumed match, within 10 s of the node's
  start; every bot back in its own seat (0 seats lost, 0 bots lost); 0 acked ticks lost
  outside the ticks after the checkpoint.

``--hog`` runs ``kills`` and ``both`` with a CPU hog too. A run whose bots did not all
connect is refused (exit 2): its figures would describe fewer players than asked for.

    python bench/self_healing.py [--bots 50] [--only kills,hog,both] [--hog]
                                 [--hog-seconds 120] [--json PATH]
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.report import Start, add_json_option, emit
from launch.chaos import build_parser as chaos_parser
from launch.torture import run_torture

QUIET = ["--pauses", "0", "--partitions", "0", "--standby-kills", "0"]
STANDBY_BACK_S = 10.0
DETECTED_MS = 500.0
RECOVERED_S = 10.0


def log(line: str) -> None:
    print(f"bench/self_healing: {line}", file=sys.stderr, flush=True)


def scenario(name: str, args: argparse.Namespace) -> list[str]:
    if name == "kills":
        return ["--kills", "20", *QUIET]
    if name == "hog":
        return ["--kills", "5", "--hog-phase", str(args.hog_seconds), "--hog", *QUIET]
    return ["--kills", "0", "--both-kills", "3", *QUIET]


def verdicts(name: str, report: dict[str, Any]) -> dict[str, bool]:
    """Each target of the scenario, met or not."""
    audit, supervisor = report["audit"], report["supervisor"]
    common = {
        "0 bots lost": audit["bots_lost"] == 0,
        "0 seats lost": audit["seats_lost"] == 0,
        "0 acked ticks lost": audit["acked_ticks_lost"] == 0,
    }
    if name == "kills":
        back = supervisor["standby_back_in_sync_s_max"]
        return {
            **common,
            "every kill found a standby": audit["promotions"] == audit["kills"],
            f"standby back within {STANDBY_BACK_S:g} s": back is not None
            and back <= STANDBY_BACK_S,
        }
    if name == "hog":
        calm = audit["calm_phase"]
        slowest = audit["kill_to_promotion_ms_max"]
        return {
            **common,
            "0 promotions while hogged": calm["promotions"] == 0,
            "0 bot reconnects while hogged": calm["bot_reconnects"] == 0,
            f"kills promoted within {DETECTED_MS:g} ms": slowest is not None
            and slowest <= DETECTED_MS
            and audit["promotions"] == audit["kills"],
        }
    recoveries = audit["checkpoint_recoveries"]
    return {
        **common,
        f"resumed within {RECOVERED_S:g} s of a node starting": len(recoveries)
        == audit["both_kills"]
        and all(
            r["first_tick_s_after_node_start"] is not None
            and r["first_tick_s_after_node_start"] <= RECOVERED_S
            for r in recoveries
        ),
        f"every bot back within {RECOVERED_S:g} s of a node starting": all(
            r["every_bot_back_s_after_node_start"] is not None
            and r["every_bot_back_s_after_node_start"] <= RECOVERED_S
            for r in recoveries
        ),
    }


def one_run(name: str, hog: bool, args: argparse.Namespace) -> dict[str, Any]:
    argv = ["torture", "--bots", str(args.bots), "--seed", str(args.seed), *scenario(name, args)]
    if hog and "--hog" not in argv:
        argv.append("--hog")
    options = chaos_parser().parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix=f"arena-bench-self-healing-{name}-"))
    began = time.monotonic()
    report = asyncio.run(run_torture(options, folder, log))
    report["scenario"] = name
    report["wall_s"] = round(time.monotonic() - began, 1)
    report["valid"] = report["bots_connected"] == args.bots
    report["targets"] = verdicts(name, report)
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bots", type=int, default=50)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--only", default="kills,hog,both", help="scenarios (default: all)")
    parser.add_argument("--hog", action="store_true", help="kills and both with a CPU hog too")
    parser.add_argument("--hog-seconds", type=float, default=120.0)
    add_json_option(parser, "self_healing")
    args = parser.parse_args()
    start = Start.now("self_healing", "bench/self_healing.py", None)
    names = [n for n in args.only.split(",") if n]
    unknown = sorted(set(names) - {"kills", "hog", "both"})
    if unknown:
        parser.error(f"unknown scenario(s) {', '.join(unknown)}: use kills, hog, both")
    runs = []
    for name in names:
        for hog in (False, True) if args.hog and name != "hog" else (name == "hog",):
            log(f"{name}{' with a CPU hog' if hog else ''}: torture starts")
            runs.append(one_run(name, hog, args))
            log(f"{name}: {json.dumps(runs[-1]['targets'])}")
    report = {
        "bench": "self_healing",
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
        "runs": runs,
    }
    emit(report, args.json, start)
    if not all(run["valid"] for run in runs):
        return 2
    return 0 if all(all(run["targets"].values()) for run in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
