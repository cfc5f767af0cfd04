"""``arena-demo``: the front door. Start a region, play a two-continent match, kill the
primary halfway, watch the match carry on, report.

It starts ``arena-server`` twice as subprocesses on free loopback ports (a primary and a
standby sharing a fresh cluster secret), runs the bots against the primary with progress
lines, SIGKILLs the primary halfway through, prints the summary, writes
``demo-report.json`` (the same schema as ``arena-bots --json``), ``demo-report.html``
(self-contained: the summary and every picture) and the pictures as PNGs in
``demo-report/``, and stops everything it started, also on Ctrl-C (the report of the part
that ran is still written, marked partial). It exits non-zero, with one line that says
why, when a bot was lost, a bot never joined, the run was invalid (its bot process could
not keep up: docs/load-testing.md) or a ``--fail-if`` threshold was breached.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import secrets
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from client_sim.cli import (
    DEFAULT_LATENCY,
    DEFAULT_POPULATION,
    BotRun,
    add_fail_if,
    admin_pair,
    check_writable,
    parse_thresholds,
    run_bots,
    verdict,
    write_report,
)
from client_sim.latency import LatencySpecError
from client_sim.provenance import provenance, run_start
from client_sim.report import format_summary
from client_sim.report_html import write_html_report
from launch.chaos import kill_primary
from launch.nodes import start_node
from launch.supervisor import READY_WITHIN_S, Child, ChildError
from server import limits
from server.replication.auth import SECRET_ENV  # how arena-server takes the region's secret
from shared import eventloop
from shared.commandline import OneLineParser, seconds
from shared.geo import GeoError, default_matrix, parse_population, parse_regions
from shared.lifetime import sigterm_as_interrupt

__all__ = ["main", "outcome", "report_paths"]

Progress = Callable[[str], None]


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="arena-demo",
        description="Start an Arena region (a primary and a standby) on free loopback ports, "
        "play a match with bots on two continents' latencies, kill the primary halfway, print "
        "a summary and write the report (JSON, a self-contained HTML page, PNG pictures; "
        "docs/load-testing.md). With --regions, start a whole cluster instead "
        "(a directory and a primary and standby per region) and seat the bots by measured "
        "latency from five continents.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--bots", type=int, default=40, help="bots in the match")
    parser.add_argument("--duration", type=seconds, default=20.0, help="seconds to play")
    parser.add_argument("--latency", default=DEFAULT_LATENCY, help="bots' RTT distribution")
    parser.add_argument("--tick-rate", type=int, default=60, help="the node's tick rate (Hz)")
    parser.add_argument("--seed", type=int, default=1, help="bot population seed")
    parser.add_argument(
        "--regions",
        default="",
        metavar="LIST",
        help="run across regions, e.g. na,eu,asia (arena-cluster)",
    )
    parser.add_argument(
        "--population", default=DEFAULT_POPULATION, help="with --regions: the bots' home locations"
    )
    parser.add_argument(
        "--json",
        default="demo-report.json",
        metavar="PATH",
        help="where to write the report; the HTML page goes beside it (demo-report.html) "
        "and its pictures into a folder of the same name (demo-report/)",
    )
    add_fail_if(parser)
    return parser


def report_paths(json_path: str) -> tuple[Path, Path]:
    """The HTML page and the pictures' folder that go with the JSON report at
    ``json_path``: ``demo-report.json`` -> ``demo-report.html``, ``demo-report/``."""
    path = Path(json_path)
    if not path.suffix:
        return path.with_name(path.name + ".html"), path.with_name(path.name + "-pictures")
    return path.with_suffix(".html"), path.with_suffix("")


@contextlib.contextmanager
def start_cluster_process(
    regions: str, tick_rate: int, ready_within: float = READY_WITHIN_S
) -> Iterator[dict[str, Any]]:
    """Run ``arena-cluster`` as a child (its nodes and directory stop with it); yield its
    JSON once every node of it is ready. Its progress lines go to this terminal."""
    with tempfile.TemporaryDirectory() as folder:
        described = Path(folder) / "cluster.json"
        command = [sys.executable, "-m", "launch.cluster", "--regions", regions]
        command += ["--standbys", "1", "--tick-rate", str(tick_rate), "--json", str(described)]
        command += ["--startup-timeout", f"{ready_within:g}"]
        child = Child("arena-cluster", command, inherit_stderr=True)
        try:
            deadline = time.monotonic() + ready_within + 30  # it keeps its own bound too
            while not described.exists():  # (written whole, by a rename)
                if not child.alive():
                    raise ChildError(
                        f"arena-cluster exited with {child.process.returncode} (its error is above)"
                    )
                if time.monotonic() > deadline:
                    raise ChildError(f"the cluster was not ready within {ready_within:g} s")
                time.sleep(0.2)
            yield json.loads(described.read_text())
        finally:
            child.stop(30.0)


def demo_run(
    args: argparse.Namespace,
    url: str = "",
    directory: str = "",
    admin: tuple[tuple[str, str], ...] = (),
) -> BotRun:
    """The demo's bots: the foundation's defaults (2 ms jitter, no loss, 100 ms interp);
    ``admin``: where the report reads each node's full /health and /metrics."""
    return BotRun(
        url=url,
        count=args.bots,
        duration=args.duration,
        latency=args.latency,
        jitter_ms=2.0,
        loss=0.0,
        clock_offset="uniform(-200ms,200ms)",
        seed=args.seed,
        workers=1,
        interp_delay=0.1,
        directory=directory,
        population=args.population,
        admin=admin,
    )


def regions_demo(args: argparse.Namespace) -> dict[str, Any]:
    print(
        f"arena-demo: starting a cluster: regions {args.regions}, a primary and a standby "
        "each, and the directory",
        flush=True,
    )
    with start_cluster_process(args.regions, args.tick_rate) as cluster:
        first = next(iter(cluster["regions"].values()))
        primary, standby = first["primary"], first["standbys"][0]
        print(
            f"arena-demo: directory at {cluster['directory']}; {args.bots} bots from "
            f"{args.population} for {args.duration:g} s; {primary['node_id']} is killed "
            f"halfway",
            flush=True,
        )
        run = demo_run(args, directory=cluster["directory"])

        async def kill_halfway() -> list[dict[str, Any]]:
            await asyncio.sleep(args.duration / 2)
            print(f"arena-demo: killing {primary['node_id']} (SIGKILL)", flush=True)
            killed = await kill_primary(primary["admin"], [standby["admin"]], pid=primary["pid"])
            return [killed]

        return eventloop.run(run_bots(run, during=kill_halfway), cancel_on=STOP_SIGNALS)


#: Ctrl-C and SIGTERM while the bots play: they stop, and the partial report is written.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def publish(report: dict[str, Any], path: str) -> None:
    """The human summary on stdout, the JSON report at ``path``, the HTML page and its
    pictures beside it."""
    summary = format_summary(report)
    print(summary)
    write_report(report, path)
    html_path, png_dir = report_paths(path)
    write_html_report(report, summary, html_path, png_dir)
    print(
        f"arena-demo: report written to {Path(path).resolve()} and {html_path.resolve()} "
        f"(pictures in {png_dir.resolve()}/)"
    )


def outcome(report: dict[str, Any], expected_bots: int | None, breached: bool) -> tuple[int, str]:
    """The demo's exit status and the one line that says why (``expected_bots``: how many
    must have joined; None with --regions, where the directory may turn some away)."""
    if report["partial"]:
        return 130, "interrupted; everything it started was stopped; the report is partial"
    lost = report["failover"]["bots_lost"]
    if lost:
        return 1, f"{lost} bot(s) never resumed after the failover"
    joined = report["bots"]["connected"]
    if expected_bots is not None and joined != expected_bots:
        return 1, f"only {joined} of {expected_bots} bots joined"
    if not report["valid"]:
        return 1, "invalid run, its figures are no measurement: " + "; ".join(
            report["invalid_reasons"]
        )
    if breached:
        return 1, "a --fail-if threshold was breached (above)"
    return 0, "ok"


def check_args(args: argparse.Namespace) -> None:
    """Every mistake found before anything starts; ValueError with one line."""
    if args.bots < 1 or not (math.isfinite(args.duration) and args.duration > 0):
        raise ValueError("--bots must be >= 1 and --duration a positive number of seconds")
    limits.TICK_RATE.check(args.tick_rate)
    demo_run(args, url="ws://127.0.0.1:1/ws").swarm_configs()  # parses --latency and co.
    if args.regions:
        parse_population(args.population)
        parse_regions(args.regions, default_matrix())
    check_writable(args.json, "--json")
    html_path, png_dir = report_paths(args.json)
    check_writable(str(html_path), "--json (its HTML page)")
    if png_dir.exists() and not png_dir.is_dir():
        raise ValueError(f"--json {args.json}: {png_dir} (for its pictures) is not a folder")


def single_region_demo(args: argparse.Namespace) -> dict[str, Any]:
    secret = {SECRET_ENV: secrets.token_hex(16)}  # shared by the region's two nodes only
    common = ("--tick-rate", str(args.tick_rate), "--log-level", "warning")
    print(
        f"arena-demo: starting a primary and a standby at {args.tick_rate} Hz on free "
        "loopback ports (each compiles or loads its kernels first)",
        flush=True,
    )
    with (
        start_node(*common, "--node-id", "demo-1", env=secret, progress=_say) as primary,
        start_node(
            *common,
            "--node-id",
            "demo-2",
            "--role",
            "standby",
            "--primary",
            primary.base_url,
            env=secret,
            progress=_say,
        ) as standby,
    ):
        print(
            f"arena-demo: primary at {primary.url}, standby at {standby.url}; "
            f"{args.bots} bots for {args.duration:g} s, RTT model {args.latency}; the "
            f"primary is killed (SIGKILL) at {args.duration / 2:g} s",
            flush=True,
        )
        print(
            f"arena-demo: watch it live at {primary.admin_url}/view (the standby's, which "
            f"takes over: {standby.admin_url}/view)",
            flush=True,
        )
        admin = tuple(admin_pair(n.url, n.admin_url) for n in (primary, standby))
        run = demo_run(args, url=primary.url, admin=admin)

        async def kill_halfway() -> list[dict[str, Any]]:
            await asyncio.sleep(args.duration / 2)
            print("arena-demo: killing the primary (SIGKILL)", flush=True)
            outcome = await kill_primary(
                primary.admin_url, [standby.admin_url], pid=primary.process.pid
            )
            took_over = (
                f"{outcome['new_primary']} is primary at epoch {outcome['epoch']}"
                if outcome["epoch"] is not None
                else "no new primary was seen in time (the report tells what the bots saw)"
            )
            print(f"arena-demo: {took_over}", flush=True)
            return [outcome]

        return eventloop.run(run_bots(run, during=kill_halfway), cancel_on=STOP_SIGNALS)


def _say(line: str) -> None:
    print(f"arena-demo: {line}", flush=True)


def main(argv: list[str] | None = None) -> int:
    sigterm_as_interrupt()  # SIGTERM stops the nodes like Ctrl-C does
    args = build_parser().parse_args(argv)
    start = run_start(sys.argv[1:] if argv is None else list(argv), args.seed)
    try:
        check_args(args)
        thresholds = parse_thresholds(args.fail_if)
    except (ValueError, LatencySpecError, GeoError) as error:
        print(f"arena-demo: {error}", file=sys.stderr)
        return 2
    try:
        report = regions_demo(args) if args.regions else single_region_demo(args)
    except (RuntimeError, ValueError, OSError) as error:
        print(f"arena-demo: {error}", file=sys.stderr)
        return 1
    except (KeyboardInterrupt, asyncio.CancelledError):
        print("arena-demo: interrupted; everything it started was stopped", file=sys.stderr)
        return 130
    report["provenance"] = provenance(start)
    try:
        publish(report, args.json)
    except OSError as error:
        print(f"arena-demo: cannot write the report: {error}", file=sys.stderr)
        return 1
    passed = verdict(report, thresholds, "arena-demo")
    status, why = outcome(report, None if args.regions else args.bots, breached=not passed)
    if status:
        print(f"arena-demo: {why}", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
