"""``arena-demo``: the front door. Start a region, play a two-continent match, kill the
primary halfway, watch the match carry on, report.

It starts ``arena-server`` twice as subprocesses on free loopback ports (a primary and a
standby sharing a fresh cluster secret), runs the bots against the primary with progress
lines, SIGKILLs the primary halfway through, prints the summary, writes
``demo-report.json`` (the same schema as ``arena-bots --json``) and stops everything it
started, also on Ctrl-C.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from shared import eventloop

from .chaos import base_url, kill_primary
from .cli import DEFAULT_LATENCY, DEFAULT_POPULATION, BotRun, run_bots, write_report
from .report import format_summary

__all__ = ["NodeProcess", "main", "start_node"]

_LISTENING = re.compile(r"event=listening url=(\S+)")
SECRET_ENV = "ARENA_CLUSTER_SECRET"  # how arena-server takes the region's shared secret


class NodeProcess:
    """A node running as a child process, and the URL it listens on."""

    def __init__(self, process: subprocess.Popen[str], url: str) -> None:
        self.process = process
        self.url = url

    @property
    def base_url(self) -> str:
        """``http://host:port``: what peers and ``/health`` use."""
        return base_url(self.url)

    def stop(self, timeout: float = 5.0) -> None:
        """SIGTERM (the node closes its sockets cleanly), then SIGKILL if it hangs."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


@contextlib.contextmanager
def start_node(
    *args: str, startup_timeout: float = 30.0, env: dict[str, str] | None = None
) -> Iterator[NodeProcess]:
    """Run ``arena-server --port 0 ARGS`` until the block ends; yields once it listens."""
    command = [sys.executable, "-m", "server.cli", "--host", "127.0.0.1", "--port", "0", *args]
    # The node's structured log goes to $ARENA_NODE_LOGS/<node-id>.log when that is set.
    log_dir = os.environ.get("ARENA_NODE_LOGS")
    node_id = args[args.index("--node-id") + 1] if "--node-id" in args else "node"
    stderr = (
        open(Path(log_dir) / f"{node_id}.log", "a", encoding="utf-8")
        if log_dir
        else subprocess.DEVNULL
    )
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
    )
    node: NodeProcess | None = None
    try:
        deadline = time.monotonic() + startup_timeout
        assert process.stdout is not None
        while node is None:
            line = process.stdout.readline()
            if not line:
                raise RuntimeError(f"the node exited during start-up (code {process.wait()})")
            if match := _LISTENING.search(line):
                node = NodeProcess(process, match.group(1))
            elif time.monotonic() > deadline:
                raise RuntimeError("the node did not start listening in time")
        yield node
    finally:
        (node or NodeProcess(process, "")).stop()
        if not isinstance(stderr, int):
            stderr.close()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="arena-demo",
        description="Start an Arena region (a primary and a standby) on free loopback ports, "
        "play a match with bots on two continents' latencies, kill the primary halfway, print "
        "a summary and write a JSON report. With --regions, start a whole cluster instead "
        "(a directory and a primary and standby per region) and seat the bots by measured "
        "latency from five continents.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--bots", type=int, default=40, help="bots in the match")
    parser.add_argument("--duration", type=float, default=20.0, help="seconds to play")
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
        "--json", default="demo-report.json", metavar="PATH", help="where to write the report"
    )
    return parser


@contextlib.contextmanager
def start_cluster_process(regions: str, tick_rate: int) -> Iterator[dict[str, Any]]:
    """Run ``arena-cluster`` as a child (client_sim never imports server); yield its JSON."""
    with tempfile.TemporaryDirectory() as folder:
        described = Path(folder) / "cluster.json"
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "server.cluster",
                "--regions",
                regions,
                "--standbys",
                "1",
                "--tick-rate",
                str(tick_rate),
                "--json",
                str(described),
            ],
            stdout=subprocess.DEVNULL,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        try:
            deadline = time.monotonic() + 90
            while not described.exists():
                if process.poll() is not None:
                    raise RuntimeError(f"arena-cluster exited with {process.returncode}")
                if time.monotonic() > deadline:
                    raise RuntimeError("the cluster did not come up in 90 s")
                time.sleep(0.2)
            time.sleep(0.2)  # the file is written in one go, but let the writer finish
            yield json.loads(described.read_text())
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def demo_run(args: argparse.Namespace, url: str = "", directory: str = "") -> BotRun:
    """The demo's bots: the foundation's defaults (2 ms jitter, no loss, 100 ms interp)."""
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
            return [await kill_primary(primary["url"], [standby["url"]])]

        return eventloop.run(run_bots(run, during=kill_halfway))


def publish(report: dict[str, Any], path: str) -> None:
    """The human summary on stdout and the JSON report at ``path``."""
    print(format_summary(report))
    write_report(report, path)
    print(f"arena-demo: report written to {Path(path).resolve()}")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.bots < 1 or args.duration <= 0:
        print("arena-demo: --bots must be >= 1 and --duration > 0", file=sys.stderr)
        return 2
    if args.regions:
        try:
            report = regions_demo(args)
        except (RuntimeError, ValueError, OSError) as error:
            print(f"arena-demo: {error}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            print("arena-demo: interrupted; the cluster was stopped", file=sys.stderr)
            return 130
        publish(report, args.json)
        return 0 if report["failover"]["bots_lost"] == 0 else 1
    secret = {SECRET_ENV: secrets.token_hex(16)}  # shared by the region's two nodes only
    common = ("--tick-rate", str(args.tick_rate), "--log-level", "warning")
    print(
        f"arena-demo: starting a primary and a standby at {args.tick_rate} Hz on free "
        "loopback ports",
        flush=True,
    )
    try:
        with (
            start_node(*common, "--node-id", "demo-1", env=secret) as primary,
            start_node(
                *common,
                "--node-id",
                "demo-2",
                "--role",
                "standby",
                "--primary",
                primary.base_url,
                env=secret,
            ) as standby,
        ):
            print(
                f"arena-demo: primary at {primary.url}, standby at {standby.url}; "
                f"{args.bots} bots for {args.duration:g} s, RTT model {args.latency}; the "
                f"primary is killed (SIGKILL) at {args.duration / 2:g} s",
                flush=True,
            )
            run = demo_run(args, url=primary.url)

            async def kill_halfway() -> list[dict[str, Any]]:
                await asyncio.sleep(args.duration / 2)
                print("arena-demo: killing the primary (SIGKILL)", flush=True)
                outcome = await kill_primary(primary.url, [standby.url])
                print(
                    f"arena-demo: {standby.base_url} is primary at epoch {outcome['epoch']}",
                    flush=True,
                )
                return [outcome]

            report = eventloop.run(run_bots(run, during=kill_halfway))
    except (RuntimeError, ValueError) as error:
        print(f"arena-demo: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("arena-demo: interrupted; the nodes were stopped", file=sys.stderr)
        return 130
    publish(report, args.json)
    healthy = report["bots"]["connected"] == args.bots and report["failover"]["bots_lost"] == 0
    return 0 if healthy else 1


if __name__ == "__main__":
    sys.exit(main())
