"""``arena-chaos torture``: a region under bots, through kills and pauses, then an audit.

Two nodes (static, or etcd from Debian's package when ``--coordinator etcd``) on ports
picked at start, each writing its journal and its checkpoints; ``arena-bots --record``
plays on them throughout, and a supervisor restarts whichever node exits, with the command
it always had (as ``arena-cluster`` does): nothing is restarted by hand. ``--hog-phase``
first runs that long with a core kept busy and no fault. Then the faults come in a
shuffled order, each once the region is healthy again (a primary with a standby in sync):
SIGKILL the primary, SIGSTOP it for 1-10 s and SIGCONT it, SIGKILL its standby, or SIGKILL
both (the match resumes from its newest checkpoint). Then everything stops and
:func:`launch.audit.audit` checks every tick a bot accepted against the lineage the last
primary carries. The report (JSON) says what was done, what was lost and how fast the
region healed.

With root and ``ip netns`` (:mod:`launch.netns`) each node runs in a network namespace of
its own and ``--partitions`` cuts the primary off from its standby alone for
``--partition-for`` seconds, the bots still reaching both; elsewhere the report says why
there was no partition.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import random
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from client_sim.provenance import RunStart, provenance
from launch import netns
from launch.audit import Fault, audit, read_journal, read_record
from launch.cluster_run import RESTART_BACKOFF_S
from launch.etcd_local import EtcdUnavailable, running_etcd
from launch.health import node_health
from launch.netns import Namespaces
from launch.nodes import NodeProcess, start_node
from launch.supervisor import ChildError, cpu_hog
from shared import commandline, eventloop

__all__ = ["add_arguments", "run_torture", "torture"]

HEALTHY_WITHIN_S = 30.0  # the region must have a primary with a standby in sync again
SETTLE_S = 1.0  # between faults, once healthy
SUPERVISE_POLL_S = 0.1
RECOVERY_S = 10.0  # after a node restarted from a kill of both: every bot back by then


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("torture")
    group.add_argument("--coordinator", default="static", help="static, etcd (start one) "
                       "or etcd://HOST:PORT[,HOST:PORT...] (default: static)")  # fmt: skip
    group.add_argument(
        "--replication",
        default="sync",
        choices=["sync", "async"],
        help="the nodes' replication mode (default: sync; async's losses are reported)",
    )
    group.add_argument("--bots", type=int, default=40, help="bots playing (default: 40)")
    group.add_argument("--kills", type=int, default=20, help="primary SIGKILLs (default: 20)")
    group.add_argument("--pauses", type=int, default=10, help="primary SIGSTOPs (default: 10)")
    group.add_argument(
        "--standby-kills", type=int, default=2, help="SIGKILLs of the standby (default: 2)"
    )
    group.add_argument(
        "--both-kills",
        type=int,
        default=0,
        help="SIGKILLs of both nodes at once: the match resumes from its newest checkpoint "
        "when the supervisor restarts them (default: 0)",
    )
    group.add_argument(
        "--hog-phase",
        type=commandline.seconds,
        default=0.0,
        metavar="SECONDS",
        help="before the faults, this long with one core kept busy and no fault at all: "
        "every promotion and bot reconnect in it is spurious (default: 0, none)",
    )
    group.add_argument(
        "--pause-min", type=commandline.seconds, default=1.0, help="seconds (default: 1)"
    )
    group.add_argument(
        "--pause-max", type=commandline.seconds, default=10.0, help="seconds (default: 10)"
    )
    group.add_argument(
        "--partitions",
        type=int,
        default=1,
        help="cuts of the primary from its standby alone, clients still reaching both "
        "(default: 1; needs root and ip netns: skipped, and said, elsewhere)",
    )
    group.add_argument(
        "--partition-for", type=commandline.seconds, default=8.0, help="seconds (default: 8)"
    )
    group.add_argument(
        "--seed", type=int, default=1, help="the faults' order and pauses (default: 1)"
    )
    group.add_argument("--hog", action="store_true", help="keep one core busy meanwhile")
    group.add_argument(
        "--out",
        metavar="DIR",
        help="keep the journals, the bots' records and the logs here (default: a new "
        "temporary folder, named at the start)",
    )


class _Region:
    """Two nodes on fixed ports that take turns being primary."""

    def __init__(
        self,
        coordinator: str,
        replication: str,
        folder: Path,
        env: dict[str, str],
        spaces: Namespaces | None,
    ):
        self.coordinator = coordinator
        self.spaces = spaces
        self.replication = replication
        self.folder = folder
        self.env = env
        self.names = ("a", "b")
        self.ports = {name: _free_port() for name in self.names}
        self.nodes: dict[str, NodeProcess] = {}
        self._stacks: dict[str, contextlib.ExitStack] = {}
        self.restarts = 0  # by the supervisor
        self.restarted_at: dict[str, float] = {}  # monotonic
        self.launched_at: dict[str, float] = {}  # wall clock: the supervisor's last start
        self.no_primary_s = 0.0
        self.no_standby_s = 0.0

    def host(self, name: str) -> str:
        return "127.0.0.1" if self.spaces is None else self.spaces.addresses[name]

    def url(self, name: str) -> str:
        return f"http://{self.host(name)}:{self.ports[name]}"

    def other(self, name: str) -> str:
        return self.names[1 - self.names.index(name)]

    def start(self, name: str) -> None:
        """Start ``name`` with the command it always has (a as the primary, b as its
        standby): a restarted node finds out for itself what the region needs of it."""
        args = [
            "--host", self.host(name), "--port", str(self.ports[name]), "--node-id", name,
            "--admin-host", self.host(name), "--admin-port", "0",
            "--coordinator", self.coordinator, "--replication", self.replication,
            "--peer", self.url(self.other(name)),
            "--journal", str(self.folder / f"journal-{name}.jsonl"),
            "--state-dir", str(self.folder / "state"),
            "--checkpoint-dir", str(self.folder / "checkpoints"),
        ]  # fmt: skip
        if name == "b":
            args += ["--role", "standby", "--primary", self.url("a")]
        stack = contextlib.ExitStack()
        prefix = () if self.spaces is None else self.spaces.prefix(name)
        self.nodes[name] = stack.enter_context(start_node(*args, env=self.env, prefix=prefix))
        self._stacks[name] = stack

    async def supervise(self, say: Callable[[str], None]) -> None:
        """Restart every node that exited (as ``arena-cluster`` does: at once, then no
        more often than every :data:`RESTART_BACKOFF_S`), and time the region's spans
        with no primary and with no standby in sync."""
        restarting: dict[str, asyncio.Task[None]] = {}
        last = time.monotonic()
        while True:
            await asyncio.sleep(SUPERVISE_POLL_S)
            for name in self.names:
                node = self.nodes.get(name)
                if node is not None and node.process.poll() is None:
                    continue  # running
                if name in restarting and not restarting[name].done():
                    continue
                if time.monotonic() - self.restarted_at.get(name, -math.inf) < RESTART_BACKOFF_S:
                    continue
                self.restarted_at[name] = time.monotonic()
                restarting[name] = asyncio.ensure_future(self._restart(name, say))
            found = await self.primary()
            now = time.monotonic()
            if found is None:
                self.no_primary_s += now - last
            elif not found[1].get("standbys_in_sync"):
                self.no_standby_s += now - last
            last = now

    async def _restart(self, name: str, say: Callable[[str], None]) -> None:
        await asyncio.to_thread(self.reap, name)
        self.launched_at[name] = time.time()
        try:
            await asyncio.to_thread(self.start, name)
        except ChildError as error:
            say(f"supervisor: {name} did not come back ({error}); trying again")
            return
        self.restarts += 1

    def reap(self, name: str) -> None:
        stack = self._stacks.pop(name, None)
        self.nodes.pop(name, None)
        if stack is not None:
            stack.close()

    def close(self) -> None:
        for name in list(self._stacks):
            self.reap(name)

    async def primary(self) -> tuple[str, dict[str, Any]] | None:
        found = []
        for name in self.names:
            if (node := self.nodes.get(name)) is not None:
                health = await node_health(node.admin_url, within=0.5)
                if health is not None and health.get("role") == "primary":
                    found.append((int(health["epoch"]), name, health))
        if not found:
            return None
        _, name, health = max(found)
        return name, health

    async def healthy(self, within: float = HEALTHY_WITHIN_S) -> tuple[str, dict[str, Any]]:
        """The primary, once it has a standby in sync."""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            found = await self.primary()
            if found is not None and any(
                s.get("state") == "in_sync" for s in found[1].get("standbys", [])
            ):
                return found
            await asyncio.sleep(0.1)
        raise RuntimeError(f"the region had no primary with a standby in sync for {within:g} s")


def _faults(
    args: argparse.Namespace, rng: random.Random, partitions: int
) -> list[tuple[str, float]]:
    plan = [("kill", 0.0)] * args.kills + [
        ("pause", rng.uniform(args.pause_min, args.pause_max)) for _ in range(args.pauses)
    ]
    plan += [("partition", args.partition_for)] * partitions
    plan += [("kill_standby", 0.0)] * args.standby_kills
    plan += [("kill_both", 0.0)] * args.both_kills
    rng.shuffle(plan)
    return plan


@contextlib.contextmanager
def _coordinator(spec: str, host: str) -> Iterator[str]:
    if spec == "etcd":
        with running_etcd(host=host) as etcd:
            yield etcd.endpoint
    else:
        yield spec


async def _run_faults(
    region: _Region, plan: list[tuple[str, float]], say: Callable[[str], None]
) -> tuple[list[Fault], list[float]]:
    """Make the faults, each once the region is healthy again; no node is restarted here
    (the supervisor does it). Returns the faults, and for each kill the seconds until the
    region had a primary with a standby in sync again."""
    faults: list[Fault] = []
    restored: list[float] = []
    for number, (kind, seconds) in enumerate(plan, 1):
        name, health = await region.healthy()
        await asyncio.sleep(SETTLE_S)
        node = region.nodes[name]
        epoch = int(health["epoch"])
        began = time.time()
        if kind == "kill":
            os.kill(node.process.pid, signal.SIGKILL)
            faults.append(Fault("kill", name, began, began, epoch))
            successor = await _successor(region, epoch)
            say(f"kill {number}/{len(plan)}: {name} (epoch {epoch}) -> {successor}")
        elif kind == "kill_standby":
            standby = region.other(name)
            os.kill(region.nodes[standby].process.pid, signal.SIGKILL)
            faults.append(Fault("kill_standby", standby, began, began, epoch))
            say(f"standby kill {number}/{len(plan)}: {standby}; {name} carries on")
        elif kind == "kill_both":
            for victim in region.names:
                os.kill(region.nodes[victim].process.pid, signal.SIGKILL)
            successor = await _successor(region, epoch, within=HEALTHY_WITHIN_S)
            started = region.launched_at.get(successor, began)
            faults.append(Fault("kill_both", name, began, started, epoch))
            say(f"both nodes killed {number}/{len(plan)} (epoch {epoch}): {successor} "
                f"leads again {time.time() - started:.1f} s after its restart")  # fmt: skip
        elif kind == "partition":
            assert region.spaces is not None
            standby = region.other(name)
            region.spaces.cut(name, standby)
            try:
                await asyncio.sleep(seconds)
            finally:
                region.spaces.heal(name, standby)
            faults.append(Fault("partition", name, began, time.time(), epoch))
            found = await region.primary()
            now = f"{found[0]} (epoch {found[1]['epoch']})" if found else "none yet"
            say(f"partition {number}/{len(plan)}: {name} cut from {standby} for {seconds:g} s; "
                f"primary now {now}")  # fmt: skip
        else:
            os.kill(node.process.pid, signal.SIGSTOP)
            try:
                await asyncio.sleep(seconds)
            finally:
                os.kill(node.process.pid, signal.SIGCONT)
            faults.append(Fault("pause", name, began, time.time(), epoch))
            found = await region.primary()
            now = f"{found[0]} (epoch {found[1]['epoch']})" if found else "none yet"
            say(f"pause {number}/{len(plan)}: {name} for {seconds:.1f} s; primary now {now}")
        if "kill" in kind:
            await region.healthy()
            restored.append(time.time() - began)
        if kind == "kill_both":
            # The players come back at their own pace (backoff): give every one of them the
            # whole recovery bound before the next fault, so that each outage is seen whole.
            await asyncio.sleep(max(0.0, faults[-1].end + RECOVERY_S - time.time()))
    await region.healthy()
    return faults, restored


async def _successor(region: _Region, above: int, within: float = 10.0) -> str:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        found = await region.primary()
        if found is not None and int(found[1]["epoch"]) > above:
            return found[0]
        await asyncio.sleep(0.02)
    raise RuntimeError(f"no node took over within {within:g} s of the kill")


async def _hog_phase(
    args: argparse.Namespace, say: Callable[[str], None]
) -> tuple[float, float] | None:
    """``--hog-phase``: that long with one core busy (``--hog``'s, or one of its own) and
    no fault; its span, for the audit to count what happened in it."""
    if args.hog_phase <= 0:
        return None
    say(f"hog phase: {args.hog_phase:g} s with one core busy and no fault")
    with cpu_hog(not args.hog):
        began = time.time()
        while (left := began + args.hog_phase - time.time()) > 0:
            await asyncio.sleep(min(30.0, left))
            if left > 30.0:
                say(f"hog phase: {max(0.0, left - 30.0):.0f} s left")
        return began, time.time()


def _start_bots(region: _Region, args: argparse.Namespace, folder: Path, duration: float) -> Any:
    records = folder / "bots"
    records.mkdir(exist_ok=True)
    log = open(folder / "bots.log", "a", encoding="utf-8")
    command = [
        sys.executable, "-m", "client_sim.cli",
        "--server", region.url("a").replace("http", "ws", 1) + "/ws",
        "--count", str(args.bots), "--duration", str(duration),
        "--record", str(records), "--quiet",
    ]  # fmt: skip
    process = subprocess.Popen(command, stdout=log, stderr=log, stdin=subprocess.DEVNULL)
    log.close()
    return process


def _stop(process: Any) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _read_all(
    folder: Path,
) -> tuple[list[Any], list[Any], dict[int, list[Any]], dict[int, list[Any]]]:
    published, promotions = [], []
    for path in sorted(folder.glob("journal-*.jsonl")):
        more, promoted = read_journal(path.read_text(encoding="utf-8").splitlines())
        published += more
        promotions += promoted
    accepted, welcomes = {}, {}
    for path in sorted((folder / "bots").glob("bot-*.jsonl")):
        records, welcomed = read_record(path.read_text(encoding="utf-8").splitlines())
        if records:
            accepted[records[0].bot] = records
        if welcomed:
            welcomes[welcomed[0].bot] = welcomed
    return published, promotions, accepted, welcomes


async def run_torture(
    args: argparse.Namespace, folder: Path, say: Callable[[str], None]
) -> dict[str, Any]:
    """One torture run (the options of ``arena-chaos torture``) in ``folder``: the report."""
    rng = random.Random(args.seed)
    why_not = netns.unavailable() if args.partitions else "none asked for (--partitions 0)"
    plan = _faults(args, rng, args.partitions if why_not is None else 0)
    if why_not is not None and args.partitions:
        say(f"no partition: {why_not}")
    env = {"ARENA_CLUSTER_SECRET": secrets.token_hex(16)}
    os.environ["ARENA_NODE_LOGS"] = str(folder / "logs")
    load_before = os.getloadavg()
    with contextlib.ExitStack() as stack:
        spaces = stack.enter_context(netns.isolated(("a", "b"))) if why_not is None else None
        spec = stack.enter_context(
            _coordinator(args.coordinator, "127.0.0.1" if spaces is None else spaces.host)
        )
        stack.enter_context(cpu_hog(args.hog))
        region = _Region(spec, args.replication, folder, env, spaces)
        try:
            await asyncio.to_thread(region.start, "a")
            await asyncio.to_thread(region.start, "b")
            await region.healthy()
            supervisor = asyncio.ensure_future(region.supervise(say))
            budget = args.hog_phase + sum(
                (20.0 if kind == "kill_both" else 8.0) if "kill" in kind else seconds + 6.0
                for kind, seconds in plan
            )
            bots = _start_bots(region, args, folder, budget + 60.0)
            try:
                await asyncio.sleep(4.0)  # every bot seated, clocks synced
                say(f"{args.bots} bots playing; {len(plan)} faults to go")
                calm = await _hog_phase(args, say)
                faults, restored = await _run_faults(region, plan, say)
                await asyncio.sleep(3.0)
                ended_at = time.time()
            finally:
                supervisor.cancel()
                await asyncio.gather(supervisor, return_exceptions=True)
                await asyncio.to_thread(_stop, bots)
            last = await region.primary()
            if last is not None:  # the standby first: stopping the primary is no failover
                await asyncio.to_thread(region.reap, region.other(last[0]))
        finally:
            await asyncio.to_thread(region.close)
    published, promotions, accepted, welcomes = _read_all(folder)
    figures = audit(
        published, promotions, accepted, faults, ended_at=ended_at, welcomes=welcomes, calm=calm
    )
    return {
        "tool": "arena-chaos torture",
        "coordinator": "etcd" if spec.startswith("etcd") else "static",
        "replication": args.replication,
        "bots": args.bots,
        "hog": args.hog,
        "seed": args.seed,
        "machine": {
            "cpus": os.cpu_count(),
            "loadavg_before": [round(x, 2) for x in load_before],
            "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        },
        "partition": f"{args.partitions} x {args.partition_for:g} s in network namespaces"
        if why_not is None
        else f"not made: {why_not}",
        "audit": figures,
        "supervisor": {
            "restarts": region.restarts,
            "seconds_without_primary": round(region.no_primary_s, 2),
            "seconds_without_standby_in_sync": round(region.no_standby_s, 2),
            "standby_back_in_sync_s_p50": round(statistics.median(restored), 2)
            if restored
            else None,
            "standby_back_in_sync_s_max": round(max(restored), 2) if restored else None,
        },
        "faults": [asdict(f) for f in faults],
        "bots_connected": figures["bots"],  # bots shown at least one snapshot
        "folder": str(folder),
    }


def torture(args: argparse.Namespace, start: RunStart | None = None) -> int:
    """Run the torture (see the module); print the report (with its provenance from
    ``start``, when given); 1 if a guarantee broke."""
    for flag in ("bots", "kills", "pauses", "partitions", "standby_kills", "both_kills"):
        if getattr(args, flag) < 0 or (flag == "bots" and args.bots < 1):
            print(f"arena-chaos: --{flag.replace('_', '-')} must be a positive count",
                  file=sys.stderr)  # fmt: skip
            return 2
    if not 0 <= args.hog_phase <= 3600:
        print("arena-chaos: --hog-phase must be from 0 to 3600 seconds", file=sys.stderr)
        return 2
    if not 0 < args.pause_min <= args.pause_max <= 60:
        print("arena-chaos: need 0 < --pause-min <= --pause-max <= 60", file=sys.stderr)
        return 2
    if args.out:
        folder = Path(args.out)
        folder.mkdir(parents=True, exist_ok=True)
    else:
        folder = Path(tempfile.mkdtemp(prefix="arena-torture-"))

    def say(line: str) -> None:
        print(f"arena-chaos: {line}", file=sys.stderr, flush=True)

    say(f"journals, records and logs in {folder}")
    try:
        # SIGTERM and Ctrl-C cancel the run: nodes, bots, etcd and namespaces are removed.
        report = eventloop.run(
            run_torture(args, folder, say), cancel_on=(signal.SIGTERM, signal.SIGINT)
        )
    except (RuntimeError, EtcdUnavailable) as error:
        say(f"{str(error).splitlines()[0]} (logs in {folder})")
        return 1
    except (asyncio.CancelledError, KeyboardInterrupt):
        say(f"interrupted (journals, records and logs so far in {folder})")
        return 130
    if start is not None:
        report["provenance"] = provenance(start)
    text = json.dumps(report, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n", encoding="utf-8")
    figures = report["audit"]
    broken = figures["acked_ticks_lost"] or figures["published_by_deposed_primary_accepted"]
    say(
        f"audit: {figures['acked_ticks']} acked bot-ticks, {figures['acked_ticks_lost']} lost, "
        f"{figures['inputs_lost']} inputs lost, {figures['published_by_deposed_primary']} "
        f"published by a deposed primary ({figures['published_by_deposed_primary_accepted']} "
        f"accepted); {figures['promotions']} promotions ({figures['spurious_promotions']} "
        f"spurious); stall p99 {figures['stall_ms_p99']} ms; longest without a primary "
        f"{figures['longest_without_primary_ms']} ms; {figures['bots_lost']} bots lost; "
        f"{figures['bot_reconnects']} bot reconnects ({figures['seats_resumed']} seats "
        f"resumed, {figures['seats_lost']} lost)"
    )
    supervised = report["supervisor"]
    say(
        f"supervisor: {supervised['restarts']} restarts; "
        f"{supervised['seconds_without_standby_in_sync']} s with no standby in sync; back "
        f"in sync within {supervised['standby_back_in_sync_s_max']} s of a kill"
    )
    for recovery in figures["checkpoint_recoveries"]:
        say(
            f"checkpoint recovery: epoch {recovery['epoch']} from tick {recovery['from_tick']} "
            f"({recovery['ticks_lost']} ticks lost), first tick "
            f"{recovery['first_tick_s_after_node_start']} s after the node started"
        )
    if figures["calm_phase"] is not None:
        calm = figures["calm_phase"]
        say(
            f"hog phase: {calm['seconds']} s, {calm['promotions']} promotions, "
            f"{calm['bot_reconnects']} bot reconnects"
        )
    return 1 if broken and args.replication == "sync" else 0
