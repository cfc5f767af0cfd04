"""Bad datagrams against a node's UDP port beside honest UDP bots, as JSON.

One node starts (its cluster secret set here, so the region key is known and expired
tokens are sealed under it: refused for their age alone). Honest bots
(``client_sim.cli --transport udp``, a subprocess) play a baseline window alone, then a
window of the same length beside :mod:`launch.udp_fuzzer` (a worker process) sending
``--datagrams`` bad datagrams at ``--rate`` from ``--sources`` ports: random bytes, mutated,
truncated and oversized genuine datagrams, bad MACs and replays from a connected address,
expired, foreign-key and non-zero-padded requests, forged challenge responses
(:mod:`launch.datagram_fuzz`).

Reported: datagrams sent by kind; the node's refusals by cause (the deltas of
``arena_udp_refused_total`` over the fuzz window) and whether they account for every one
sent (with the kernel's drops); connections accepted from fuzz sources (a connection's
datagram reaching one of them, and the node's ``arena_udp_clients`` during the fuzz, at
most the bots and the fuzzer's own capture client); per source that never answered a
challenge, the bytes the node sent it against the bytes it sent; the bots' snapshots per
bot per second in each window and their ratio (over the bots' whole window, of which the
fuzz fills all but ``--lead`` and a second); the node's CPU in cores per window (from
``/proc``), the load average at each window's end.

A run is refused (exit 2, ``"valid": false`` with ``invalid_reasons``) when the bots'
report is invalid in either window, fewer datagrams were sent than asked, or the fuzzer's
capture client never connected or its challenged address was never challenged (then bad
MACs, replays and forged responses would not meet the checks they are meant for). Exit 1
when a target is missed; 0 when all are met.

    python bench/udp_fuzz.py [--datagrams 100000] [--rate 5000] [--sources 8] [--bots 10]
                             [--lead 3] [--settle 2] [--seed 49] [--json PATH]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import math
import multiprocessing
import os
import secrets
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.report import Start, add_json_option, emit, targets_status
from client_sim.cli import check_writable
from launch.datagram_fuzz import FUZZ_KINDS
from launch.nodes import NodeProcess, start_node
from launch.udp_fuzzer import FuzzPlan, run_fuzzer
from server.region_key import region_key
from shared.commandline import OneLineParser

REGION = "local"
SNAPSHOT_RATE_MIN = 0.95  # of the baseline window's
#: Refusals the node's /metrics must show per datagram sent (a channel's refusals are
#: counted every 50 ms, and those since the last count of a link that a renewal replaced
#: are lost with it: a few in a hundred thousand).
ACCOUNTED_MIN = 0.999
#: Seconds the fuzz window's bots play after the last datagram was due.
TAIL_S = 1.0
#: How long the bots may take to connect before the fuzzer starts.
BOTS_CONNECT_S = 20.0


def log(line: str) -> None:
    print(f"bench/udp_fuzz: {line}", file=sys.stderr, flush=True)


Metrics = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def read_metrics(admin_url: str) -> Metrics:
    with urllib.request.urlopen(admin_url + "/metrics", timeout=10) as answer:
        text = answer.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def udp_clients(admin_url: str) -> int:
    with urllib.request.urlopen(admin_url + "/health", timeout=10) as answer:
        return int(json.loads(answer.read()).get("udp_clients") or 0)


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds process ``pid`` has used (all its threads), from /proc."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def refusals(start: Metrics, end: Metrics) -> dict[str, int]:
    """``arena_udp_refused_total`` by cause, what grew between two readings."""
    grown = {}
    for (name, labels), value in end.items():
        if name == "arena_udp_refused_total":
            delta = int(value - start.get((name, labels), 0.0))
            if delta:
                grown[dict(labels)["cause"]] = delta
    return dict(sorted(grown.items()))


def _delta(start: Metrics, end: Metrics, name: str, **labels: str) -> float:
    key = (name, tuple(sorted(labels.items())))
    return end.get(key, 0.0) - start.get(key, 0.0)


def bots_command(
    args: argparse.Namespace, node: NodeProcess, seconds: float, out: str
) -> list[str]:
    return [
        sys.executable, "-m", "client_sim.cli", "--transport", "udp", "--count", str(args.bots),
        "--duration", f"{seconds:.3f}", "--server", node.url, "--server-admin", node.admin_url,
        "--seed", str(args.seed), "--json", out, "--quiet",
    ]  # fmt: skip


def window(
    args: argparse.Namespace, node: NodeProcess, seconds: float, plan: FuzzPlan | None
) -> dict[str, Any]:
    """One window: the bots play ``seconds``; with a ``plan``, the fuzzer runs beside them
    once they are connected. The node's CPU and counters are read at its edges."""
    with tempfile.TemporaryDirectory() as folder:
        out = str(Path(folder) / "bots.json")
        before = read_metrics(node.admin_url)
        cpu_before, started = process_cpu_s(node.process.pid), time.monotonic()
        bots = subprocess.Popen(
            bots_command(args, node, seconds, out),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        fuzz: dict[str, Any] | None = None
        clients_max = clients_at_start = 0
        try:
            if plan is not None:
                deadline = time.monotonic() + BOTS_CONNECT_S
                while udp_clients(node.admin_url) < args.bots and time.monotonic() < deadline:
                    time.sleep(0.1)
                clients_at_start = udp_clients(node.admin_url)
                fuzz_before = read_metrics(node.admin_url)
                spawn = multiprocessing.get_context("spawn")
                with concurrent.futures.ProcessPoolExecutor(1, mp_context=spawn) as pool:
                    running = pool.submit(run_fuzzer, plan)
                    while not running.done():
                        clients_max = max(clients_max, udp_clients(node.admin_url))
                        time.sleep(0.25)
                    fuzz = running.result()
                time.sleep(0.2)  # (the channels' refusals are counted every 50 ms)
                fuzz["refused_by_cause"] = refusals(fuzz_before, read_metrics(node.admin_url))
            _, stderr = bots.communicate(timeout=seconds + 60)
        finally:
            if bots.poll() is None:
                bots.kill()
                bots.wait()
        elapsed = time.monotonic() - started
        cpu = process_cpu_s(node.process.pid) - cpu_before
        after = read_metrics(node.admin_url)
        try:
            report = json.loads(Path(out).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            tail = (stderr or "").strip().splitlines()[-1:] or ["no report"]
            report = {"valid": False, "invalid_reasons": [f"the bots wrote no report: {tail[0]}"]}
    figures: dict[str, Any] = {
        "seconds": round(elapsed, 2),
        "bots_valid": bool(report.get("valid")),
        "bots_invalid_reasons": report.get("invalid_reasons", []),
        "snapshots_per_bot_per_s": (report.get("snapshots") or {}).get("per_bot_per_s"),
        "node_cores": round(cpu / elapsed, 4),
        "loadavg_1m_at_end": round(os.getloadavg()[0], 2),
        "node_datagrams": {
            direction: int(_delta(before, after, "arena_udp_datagrams_total", direction=direction))
            for direction in ("in", "out")
        },
        "node_bytes": {
            direction: int(_delta(before, after, "arena_udp_bytes_total", direction=direction))
            for direction in ("in", "out")
        },
        "kernel_drops": int(_delta(before, after, "arena_udp_kernel_drops")),
    }
    if fuzz is not None:
        figures["fuzz"] = fuzz
        figures["udp_clients_at_fuzz_start"] = clients_at_start
        figures["udp_clients_max_during_fuzz"] = clients_max
    return figures


def judge(
    args: argparse.Namespace, baseline: dict[str, Any], fuzzed: dict[str, Any]
) -> tuple[list[str], dict[str, dict[str, Any]]]:
    """(reasons the run is invalid, the targets: name -> value, limit, met)."""
    fuzz = fuzzed["fuzz"]
    invalid = [
        f"{name} window: the bots' report is invalid ({'; '.join(w['bots_invalid_reasons'])})"
        for name, w in (("baseline", baseline), ("fuzz", fuzzed))
        if not w["bots_valid"]
    ]
    if fuzz["failure"]:
        invalid.append(f"the fuzzer failed: {fuzz['failure']}")
    if fuzz["sent"] < args.datagrams:
        invalid.append(f"sent {fuzz['sent']} datagrams of the {args.datagrams} asked")
    if not fuzz["capture"]["connections"]:
        invalid.append("the fuzzer's capture client never connected (no bad MAC met a channel)")
    if not fuzz["challenges_received"]:
        invalid.append("the challenged address was never challenged (no forged response met one)")
    refused = sum(fuzz["refused_by_cause"].values())
    accounted = (refused + fuzzed["kernel_drops"]) / max(1, fuzz["sent"])
    honest_most = args.bots + 1  # the bots and the fuzzer's own capture client
    base_rate = baseline["snapshots_per_bot_per_s"] or 0.0
    ratio = (fuzzed["snapshots_per_bot_per_s"] or 0.0) / base_rate if base_rate else 0.0
    amplified = len(fuzz["amplifying_sources"])
    targets = {
        "accepted_from_fuzz_sources": (fuzz["accepted_from_fuzz_sources"], 0),
        "udp_clients_max_during_fuzz": (fuzzed["udp_clients_max_during_fuzz"], honest_most),
        "sources_sent_more_than_they_sent_the_node": (amplified, 0),
        "refusals_per_datagram_sent": (round(accounted, 5), f">= {ACCOUNTED_MIN}"),
        "snapshot_rate_vs_baseline": (round(ratio, 4), f">= {SNAPSHOT_RATE_MIN}"),
    }
    met = {
        "accepted_from_fuzz_sources": fuzz["accepted_from_fuzz_sources"] == 0,
        "udp_clients_max_during_fuzz": fuzzed["udp_clients_max_during_fuzz"] <= honest_most,
        "sources_sent_more_than_they_sent_the_node": amplified == 0,
        "refusals_per_datagram_sent": accounted >= ACCOUNTED_MIN,
        "snapshot_rate_vs_baseline": ratio >= SNAPSHOT_RATE_MIN,
    }
    verdicts = {
        name: {"value": value, "limit": limit, "met": met[name]}
        for name, (value, limit) in targets.items()
    }
    return invalid, verdicts


def run(args: argparse.Namespace) -> dict[str, Any]:
    secret = secrets.token_hex(16)
    env = {**os.environ, "ARENA_CLUSTER_SECRET": secret}
    seconds = args.lead + args.datagrams / args.rate + TAIL_S
    node_args = ("--log-level", "warning", "--region", REGION,
                 "--max-seats-per-address", str(2 * args.bots + 4))  # fmt: skip
    with start_node(*node_args, env=env) as node:
        with urllib.request.urlopen(node.admin_url + "/health", timeout=10) as answer:
            port = int(json.loads(answer.read())["udp"])
        plan = FuzzPlan(
            node=("127.0.0.1", port),
            base_url=node.base_url,
            datagrams=args.datagrams,
            rate=args.rate,
            sources=args.sources,
            seed=args.seed,
            within_s=seconds + 30.0,
            region_key=region_key(secret.encode(), REGION),
        )
        log(f"baseline: {args.bots} bots for {seconds:.1f} s")
        baseline = window(args, node, seconds, None)
        time.sleep(args.settle)
        log(f"fuzz: {args.datagrams} datagrams at {args.rate:g}/s from {args.sources} ports")
        fuzzed = window(args, node, seconds, plan)
    invalid, targets = judge(args, baseline, fuzzed)
    return {
        "valid": not invalid,
        "invalid_reasons": invalid,
        "targets_met": all(t["met"] for t in targets.values()),
        "missed": [name for name, t in targets.items() if not t["met"]],
        "targets": targets,
        "setup": {
            "bots": args.bots,
            "datagrams": args.datagrams,
            "rate_per_s": args.rate,
            "sources": args.sources,
            "kinds": list(FUZZ_KINDS),
            "window_s": round(seconds, 2),
            "seed": args.seed,
            "cpus": os.cpu_count(),
        },
        "baseline": baseline,
        "fuzzed": fuzzed,
    }


def build_parser() -> OneLineParser:
    parser = OneLineParser(
        prog="bench/udp_fuzz.py",
        description="Fuzzed, forged, replayed, truncated and expired-token datagrams against "
        "a node's UDP port beside honest UDP bots: none accepted, each refused by cause, no "
        "reply larger than what drew it, the bots' snapshot rate kept; JSON on stdout.",
    )
    parser.add_argument(
        "--datagrams", type=int, default=100_000, help="bad datagrams to send (100000)"
    )
    parser.add_argument("--rate", type=float, default=5000.0, help="datagrams a second (5000)")
    parser.add_argument(
        "--sources", type=int, default=8, help="source ports sending them, besides the "
        "fuzzer's connected and challenged ones (8)",
    )  # fmt: skip
    parser.add_argument("--bots", type=int, default=10, help="honest UDP bots (10)")
    parser.add_argument(
        "--lead", type=float, default=3.0, help="seconds the bots play before the fuzz (3)"
    )
    parser.add_argument(
        "--settle", type=float, default=2.0, help="seconds between the two windows (2)"
    )
    parser.add_argument("--seed", type=int, default=49, help="the fuzzer's and bots' seed (49)")
    add_json_option(parser, "udp_fuzz")
    return parser


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.datagrams < 1:
        parser.error("--datagrams: at least 1")
    if not (math.isfinite(args.rate) and args.rate > 0):
        parser.error("--rate: a positive number of datagrams a second")
    if args.sources < 1:
        parser.error("--sources: at least 1")
    if args.bots < 1:
        parser.error("--bots: at least 1")
    if not (math.isfinite(args.lead) and args.lead >= 0):
        parser.error("--lead: not negative")
    if not (math.isfinite(args.settle) and args.settle >= 0):
        parser.error("--settle: not negative")
    try:
        check_writable(args.json, "--json")
    except ValueError as error:
        parser.error(str(error))
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    start = Start.now("udp_fuzz", "bench/udp_fuzz.py", argv)
    report = run(args)
    emit(report, args.json, start)
    return targets_status(report, log)


if __name__ == "__main__":
    sys.exit(main())
