"""Failover under faults, audited: ``arena-chaos torture`` per coordinator, as JSON.

For each coordinator (static, over WebSocket and over UDP; etcd from Debian's package when
installed, over WebSocket): a region of two nodes under 40 bots through 20 SIGKILLs and 10
SIGSTOPs (1-10 s) of the primary, then the audit of every tick a bot accepted against the
lineage the surviving primary carries (``launch/audit.py``). ``--hog`` runs each again
with one core kept busy. Targets, in ``--replication sync``: 0 acknowledged ticks and 0
inputs lost, 0 ticks of a deposed primary accepted, no region without a primary for more
than 1 s, stall p99 at most 300 ms (static) and 1 s (etcd) on a quiet machine. A run
whose bots did not all connect is refused (exit 2): its figures would describe fewer
players than asked for.

    python bench/failover.py [--kills 20] [--pauses 10] [--bots 40] [--hog]
                             [--coordinators static,etcd] [--transports ws,udp] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
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
from launch.etcd_local import find_etcd
from launch.torture import run_torture

TARGETS = {
    "acked_ticks_lost": 0,
    "inputs_lost": 0,
    "published_by_deposed_primary_accepted": 0,
    "longest_without_primary_ms": 1000,
    "stall_ms_p99": {"static": 300, "etcd": 1000},
}


def log(line: str) -> None:
    print(f"bench/failover: {line}", file=sys.stderr, flush=True)


def one_run(
    coordinator: str, transport: str, hog: bool, args: argparse.Namespace
) -> dict[str, Any]:
    argv = [
        "torture", "--coordinator", coordinator, "--bots", str(args.bots),
        "--kills", str(args.kills), "--pauses", str(args.pauses), "--seed", str(args.seed),
        "--transport", transport,
    ]  # fmt: skip
    if hog:
        argv.append("--hog")
    options = chaos_parser().parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix=f"arena-bench-failover-{coordinator}-{transport}-"))
    began = time.monotonic()
    report = asyncio.run(run_torture(options, folder, log))
    report["wall_s"] = round(time.monotonic() - began, 1)
    report["valid"] = report["bots_connected"] == args.bots
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--pauses", type=int, default=10)
    parser.add_argument("--bots", type=int, default=40)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--hog", action="store_true", help="also run each with a CPU hog")
    parser.add_argument("--coordinators", default="static,etcd")
    parser.add_argument(
        "--transports", default="ws,udp",
        help="how the bots reach the region, each run in turn (default: ws,udp; the etcd "
        "coordinator runs over ws only: the transport does not change what it decides)",
    )  # fmt: skip
    add_json_option(parser, "failover")
    args = parser.parse_args()
    if unknown := set(args.transports.split(",")) - {"ws", "udp"}:
        parser.error(f"--transports: ws and/or udp, not {', '.join(sorted(unknown))}")
    start = Start.now("failover", "bench/failover.py", None)
    runs = []
    for coordinator in args.coordinators.split(","):
        if coordinator == "etcd" and find_etcd() is None:
            log("etcd is not installed (apt-get install etcd-server): skipping the etcd runs")
            continue
        transports = args.transports.split(",") if coordinator == "static" else ["ws"]
        hogs = (False, True) if args.hog else (False,)
        for transport, hog in itertools.product(transports, hogs):
            log(f"{coordinator} over {transport}{' with a CPU hog' if hog else ''}: torture starts")
            runs.append(one_run(coordinator, transport, hog, args))
            log(json.dumps(runs[-1]["audit"]))
    report = {
        "bench": "failover",
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
        "targets": TARGETS,
        "runs": runs,
    }
    emit(report, args.json, start)
    return 0 if all(run["valid"] for run in runs) else 2


if __name__ == "__main__":
    sys.exit(main())
