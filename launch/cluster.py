"""``arena-cluster``: a whole regional deployment on one machine, for demos, tests and drills.

The command: it reads the spec (flags, or ``--config FILE`` with flags on top;
:mod:`launch.cluster_spec`), starts the directory and per region a primary and its standbys
(:mod:`launch.cluster_run`), prints where everything is (a table on stdout, ``--json PATH``),
reports children that exit, and stops it all on Ctrl-C or SIGTERM (standbys, primaries,
then the directory). A user's mistake is one line and exit 2; a cluster that does not come
up is one line and exit 1.

The names a program needs to start a cluster itself (:func:`start_cluster`,
:class:`ClusterSpec`, :func:`parse_regions`...) are importable from here too.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

from launch.cluster_run import Cluster, ClusterError, Progress, start_cluster
from launch.cluster_spec import LOG_LEVELS, ClusterSpec, parse_regions
from launch.supervisor import READY_WITHIN_S
from shared.commandline import OneLineParser, milliseconds, seconds
from shared.geo import GeoError
from shared.lifetime import exit_with_parent_if_asked

__all__ = ["Cluster", "ClusterError", "ClusterSpec", "main", "parse_regions", "start_cluster"]

PROG = "arena-cluster"

EPILOG = """\
examples:
  arena-cluster --regions na,eu,asia --standbys 1
  arena-cluster --regions us-east@na,us-west@na,eu --standbys 2 --max-players 100 --json c.json
  arena-cluster --config cluster.json        # {"regions": "na,eu", "standbys": 1, ...}

Regions are named after a location of the latency matrix (na, sa, eu, asia, oce, me, af) or
written NAME@LOCATION. Every child gets a fresh random cluster secret in $ARENA_CLUSTER_SECRET
(never on a command line, never printed). The table goes to stdout, progress to stderr;
Ctrl-C or SIGTERM stops everything (standbys, primaries, then the directory)."""


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog=PROG,
        description="Run a whole Arena deployment on this machine: the directory and, per "
        "region, a primary node and its standbys, on free loopback ports, until Ctrl-C.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add = parser.add_argument
    add("--regions", help="comma-separated regions, e.g. na,eu,asia or us-east@na,eu")
    add("--standbys", type=int, help="standbys per region (default 1; 0 = no failover)")
    add("--matches", type=int, help="matches per node (default: the node's own)")
    add("--max-players", type=int, help="seats per node (default: the node's own)")
    add("--tick-rate", type=int, help="every node's tick rate in Hz (default: the node's own)")
    add(
        "--coordinator",
        help="static (default) or etcd://HOST:PORT[,HOST:PORT...]: who decides leadership",
    )
    add(
        "--heartbeat-timeout",
        type=seconds,
        metavar="S",
        help="directory: a node silent this long is no longer routed to (default 1.5)",
    )
    add(
        "--reservation-ttl",
        type=seconds,
        metavar="S",
        help="directory: how long a seat reservation is valid (default 10)",
    )
    add(
        "--overflow-slack-ms",
        type=milliseconds,
        metavar="MS",
        help="directory: how much farther than the best region a player may go (default 40)",
    )
    add(
        "--no-register",
        dest="register",
        action="store_const",
        const=False,
        default=None,
        help="do not pass --directory to the nodes: they neither heartbeat to the directory "
        "nor check its reservations (by default they do)",
    )
    add("--log-level", choices=LOG_LEVELS, help="the children's log level (default warning)")
    add(
        "--log-dir",
        metavar="DIR",
        help="write each child's log to DIR/NAME.log (default: this terminal's stderr)",
    )
    add(
        "--checkpoint-dir",
        metavar="DIR",
        help="every node checkpoints its match to DIR; when every node of a region has "
        "died, its restarted primary resumes the match from there (default: none)",
    )
    add(
        "--startup-timeout",
        type=seconds,
        metavar="S",
        help=f"give up when the cluster is not up within this (default {READY_WITHIN_S:g}: a "
        "cold kernel cache on a busy machine)",
    )
    add(
        "--config",
        metavar="FILE",
        help="JSON object with the fields above (underscores for "
        "dashes, regions as a string or a list); flags given as well override it",
    )
    add("--json", metavar="PATH", help="also write where everything is to PATH (JSON)")
    return parser


def _spec(args: argparse.Namespace) -> ClusterSpec:
    values: dict[str, Any] = {}
    if args.config:
        try:
            document = json.loads(Path(args.config).read_text(encoding="utf-8"))
        except OSError as error:
            raise ValueError(f"cannot read {args.config}: {error.strerror}") from None
        except ValueError as error:
            raise ValueError(f"{args.config} is not valid JSON: {error}") from None
        if not isinstance(document, dict):
            raise ValueError(f"{args.config}: expected a JSON object")
        values.update(document)
    for name in (
        "regions", "standbys", "matches", "max_players", "tick_rate", "coordinator",
        "heartbeat_timeout", "reservation_ttl", "overflow_slack_ms", "register", "log_level",
        "log_dir", "checkpoint_dir", "startup_timeout",
    ):  # fmt: skip
        value = getattr(args, name)
        if value is not None:
            values[name] = value
    if "regions" not in values:
        raise ValueError("--regions is required (e.g. --regions na,eu,asia), or --config FILE")
    return ClusterSpec.from_mapping(values)


class _Interrupted(BaseException):
    """SIGINT or SIGTERM: leave whatever we are doing; the context manager stops the rest."""


def main(argv: list[str] | None = None) -> int:
    exit_with_parent_if_asked()  # started by arena-demo: never outlive it
    args = build_parser().parse_args(argv)
    try:
        spec = _spec(args)
        if args.json and not Path(args.json).resolve().parent.is_dir():
            raise ValueError(f"--json {args.json}: its folder does not exist")
    except (ValueError, GeoError, ClusterError) as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 2

    def say(line: str) -> None:
        print(f"{PROG}: {line}", file=sys.stderr, flush=True)

    stopping = False

    def interrupt(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        if stopping:  # a second Ctrl-C while we stop: we are on it already
            return
        stopping = True
        say(f"{signal.Signals(signum).name}: stopping everything")
        raise _Interrupted(signum)

    signal.signal(signal.SIGINT, interrupt)
    signal.signal(signal.SIGTERM, interrupt)
    status = 0
    try:
        with start_cluster(spec, say) as cluster:
            print(cluster.table(), flush=True)
            if args.json:
                try:  # whole or not at all: a launcher waits for the file to appear
                    partial = Path(args.json).with_name(Path(args.json).name + ".partial")
                    partial.write_text(
                        json.dumps(cluster.describe(), indent=2) + "\n", encoding="utf-8"
                    )
                    partial.replace(args.json)
                except OSError as error:
                    raise ClusterError(f"cannot write {args.json}: {error.strerror}") from None
                say(f"wrote {args.json}")
            say("running; Ctrl-C or SIGTERM stops everything")
            status = _watch(cluster, say)
            stopping = True
            say("stopping")
    except _Interrupted:
        say("stopped")
        return 0
    except ClusterError as error:
        stopping = True
        say(f"error: {error}")
        return 1
    say("stopped")
    return status


def _watch(cluster: Cluster, say: Progress) -> int:
    """Until interrupted: restart every node that exits (a drill may kill a primary on
    purpose; the restarted node comes back as a standby, so the region keeps its standby
    count). The cluster is useless without its directory: that one ends it."""
    while True:
        time.sleep(0.5)
        if (code := cluster.directory_exit_code) is not None:
            say(f"the directory exited (code {code}); stopping the cluster")
            return 1
        for node, code in cluster.heal():
            say(
                f"{node.node_id} ({node.region}, started as {node.role}) exited with code "
                f"{code}; restarted (restart {node.restarts}, pid {node.pid})"
            )


if __name__ == "__main__":
    sys.exit(main())
