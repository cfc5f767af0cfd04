"""``arena-chaos``: kill or pause a region's primary and watch a standby take over.

For people who run their own nodes on one machine: the node's full ``/health`` (on its admin
port) names its process id, so ``arena-chaos kill --node http://127.0.0.1:9777`` (the admin
URL) SIGKILLs it, then waits for one of the ``--watch`` nodes to report itself primary at a
higher epoch and prints what happened (as JSON with ``--json``). ``pause`` stops the process
(SIGSTOP) for a while and resumes it (SIGCONT): the split-brain drill, after which the old
primary must step down. ``torture`` runs a region of its own through many of both under bots
and audits the result (:mod:`launch.torture`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import signal
import sys
import time
from typing import Any

from client_sim.cli import check_writable
from client_sim.provenance import provenance, run_start
from launch import torture
from launch.health import HEALTH_WITHIN_S, base_url, node_health
from shared.commandline import OneLineParser, check_duration, milliseconds, seconds
from shared.lifetime import pid_namespace

__all__ = ["base_url", "kill_primary", "main", "node_health", "wait_for_new_primary"]


async def wait_for_new_primary(
    watch: list[str], above_epoch: int, within: float
) -> dict[str, Any] | None:
    """Poll ``watch`` until one is primary above ``above_epoch`` and has published a tick."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        for url in watch:
            health = await node_health(url, within=0.3)
            if (
                health is not None
                and health.get("role") == "primary"
                and int(health.get("epoch", 0)) > above_epoch
                and "first_tick_at" in health.get("failover", {})
            ):
                return {**health, "url": base_url(url)}
        await asyncio.sleep(0.02)
    return None


def node_pid(url: str, health: dict[str, Any]) -> int:
    """The node's process id as this machine knows it; RuntimeError when the node runs in
    another pid namespace (a container: its pid means another process here)."""
    theirs = health.get("pid_namespace")
    if theirs is not None and theirs != pid_namespace():
        raise RuntimeError(
            f"{base_url(url)} runs in another pid namespace (a container?): its pid "
            f"{health['pid']} is not a process here; stop it with its container engine "
            "(podman kill, docker kill)"
        )
    return int(health["pid"])


async def kill_primary(
    primary: str, watch: list[str], within: float = 10.0, pid: int | None = None
) -> dict[str, Any]:
    """SIGKILL the node at ``primary`` and wait for a standby in ``watch`` to take over.

    ``pid``: the process to kill when the caller started it (the demo does); it must be
    the one ``/health`` names, so nothing else is ever killed by mistake."""
    health = await node_health(primary, within=HEALTH_WITHIN_S)
    if health is None:
        raise RuntimeError(f"no node answers at {base_url(primary)} within {HEALTH_WITHIN_S:g} s")
    if health.get("role") != "primary":
        raise RuntimeError(f"{base_url(primary)} is a {health.get('role')}, not the primary")
    target = node_pid(primary, health)
    if pid is not None and pid != target:
        raise RuntimeError(f"{base_url(primary)} is process {target}, not {pid}; not killing it")
    killed_at = time.time()
    os.kill(target, signal.SIGKILL)
    successor = await wait_for_new_primary(watch, int(health["epoch"]), within)
    return {
        "killed": base_url(primary),
        "killed_at": killed_at,
        "old_epoch": int(health["epoch"]),
        "epoch": None if successor is None else int(successor["epoch"]),
        "new_primary": None if successor is None else successor["url"],
        "failover": {} if successor is None else successor["failover"],
    }


async def pause_node(node: str, seconds: float) -> dict[str, Any]:
    """SIGSTOP the node for ``seconds``, then SIGCONT it."""
    health = await node_health(node, within=HEALTH_WITHIN_S)
    if health is None:
        raise RuntimeError(f"no node answers at {base_url(node)} within {HEALTH_WITHIN_S:g} s")
    pid = node_pid(node, health)
    os.kill(pid, signal.SIGSTOP)
    try:
        await asyncio.sleep(seconds)
    finally:
        os.kill(pid, signal.SIGCONT)
    return {"paused": base_url(node), "seconds": seconds, "epoch": int(health["epoch"])}


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="arena-chaos",
        description="Kill or pause an Arena node running on this machine (the full /health "
        "on its admin port gives the process id) and report the failover; or torture a "
        "region of its own and audit what its players were shown (docs/failover.md).",
    )
    parser.add_argument(
        "action",
        choices=["kill", "pause", "torture"],
        help="kill: SIGKILL --node; pause: SIGSTOP it, then SIGCONT; torture: run a region "
        "of its own under bots through kills and pauses, and audit every tick they accepted",
    )
    parser.add_argument(
        "--node",
        metavar="ADMIN_URL",
        help="the node to hit (kill, pause): its admin URL (arena-server --admin-port, "
        "e.g. http://127.0.0.1:9777), where the full /health names its process",
    )
    parser.add_argument(
        "--watch",
        action="append",
        default=[],
        metavar="ADMIN_URL",
        help="standbys to watch for the takeover, by their admin URLs (repeat)",
    )
    parser.add_argument(
        "--for",
        dest="pause_for",
        type=milliseconds,
        default="2s",
        help="how long to pause, at most 60 s (default: 2s)",
    )
    parser.add_argument(
        "--timeout",
        type=seconds,
        default=10.0,
        help="seconds to wait for a new primary (default: 10)",
    )
    parser.add_argument("--json", metavar="PATH", help="also write the outcome as JSON")
    torture.add_arguments(parser)
    return parser


async def _run(args: argparse.Namespace, pause: float) -> dict[str, Any]:
    if args.action == "kill":
        return await kill_primary(args.node, args.watch, args.timeout)
    before = await node_health(args.node)
    outcome = await pause_node(args.node, pause)
    await asyncio.sleep(1.0)
    after = await node_health(args.node)
    outcome["role_before"] = None if before is None else before.get("role")
    outcome["role_after"] = None if after is None else after.get("role")
    return outcome


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # The torture's seed orders its faults; a kill or a pause draws nothing.
    seed = args.seed if args.action == "torture" else None
    start = run_start(sys.argv[1:] if argv is None else list(argv), seed)
    if args.action != "torture" and not args.node:
        print(f"arena-chaos: {args.action} needs --node ADMIN_URL", file=sys.stderr)
        return 2
    try:
        pause = check_duration(args.pause_for, "--for", "ms") / 1000.0
        if not (math.isfinite(args.timeout) and args.timeout > 0):
            raise ValueError("--timeout must be a positive number of seconds")
        check_writable(args.json, "--json")
    except ValueError as error:
        print(f"arena-chaos: {error}", file=sys.stderr)
        return 2
    if args.action == "torture":
        return torture.torture(args, start)
    try:
        outcome = asyncio.run(_run(args, pause))
    except (RuntimeError, ProcessLookupError, PermissionError) as error:
        print(f"arena-chaos: {error}", file=sys.stderr)
        return 1
    outcome["provenance"] = provenance(start)
    text = json.dumps(outcome, indent=2)
    print(text)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            handle.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
