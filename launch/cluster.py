"""``arena-cluster``: a whole regional deployment on one machine, for demos, tests and drills.

It starts ``arena-directory`` and, per region, a primary and its standbys (``arena-server``)
as child processes on loopback ports chosen at run time, waits until every primary has its
standbys and every node is registered with the directory, prints where everything is, and
stops it all on Ctrl-C or SIGTERM.

Why it is shaped this way:

* **Ports are picked up front** (bound to port 0 all at once, then released), so every node
  can be told the URLs of its region's other nodes (``--peer``) before any of them starts,
  and all of them can start at the same time.
* **One fresh random cluster secret** per run, handed to every child in the environment
  variable ``ARENA_CLUSTER_SECRET``: never on a command line (where ``ps`` shows it to every
  user of the machine), never printed, never written to the ``--json`` file. Heartbeats,
  reservations, session tokens and the standbys' replication links are all signed with it.
* **Nothing outlives the cluster.** Children stay in its process group and die with it
  (:mod:`launch.supervisor`), so ``kill -TERM -PGID`` or a terminal's Ctrl-C reaches them
  all, and even a SIGKILLed ``arena-cluster`` leaves nothing behind. On Ctrl-C or SIGTERM
  it stops them in order: standbys first (so none of them takes over from a primary that
  is merely shutting down), then primaries, then the directory; each with SIGTERM (a
  clean shutdown), then SIGKILL after ``stop_timeout``.
* **Ready means ready.** A node says it listens only once its kernels are compiled or
  loaded; the cluster waits for that, then for every primary to have its standbys, with a
  bound (``--startup-timeout``) sized for a cold cache on a busy machine.
* The pieces are functions (:func:`start_cluster`, :class:`Cluster`, :class:`ClusterSpec`)
  so that ``arena-demo`` and the integration tests start exactly what users start.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import math
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from types import FrameType
from typing import Any

from launch.supervisor import READY_WITHIN_S, Child, ChildError, stop_all
from server.coordination.base import parse_coordinator_spec
from shared.commandline import OneLineParser
from shared.geo import GeoError, default_matrix, split_region
from shared.lifetime import exit_with_parent_if_asked

__all__ = [
    "SECRET_ENV",
    "SERVER_MODULE",
    "Cluster",
    "ClusterError",
    "ClusterNode",
    "ClusterSpec",
    "RegionNodes",
    "RegionSpec",
    "main",
    "parse_regions",
    "start_cluster",
]

PROG = "arena-cluster"
SECRET_ENV = "ARENA_CLUSTER_SECRET"
HOST = "127.0.0.1"
MAX_STANDBYS = 8
MAX_REGIONS = 16
_LOG_LEVELS = ("debug", "info", "warning", "error")
_POLL_S = 0.1

Progress = Callable[[str], None]


class ClusterError(Exception):
    """The cluster could not be started as asked; the message is one line for the user."""


# -- what to start -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RegionSpec:
    """A region ``name`` whose nodes stand for a data centre at ``location`` (a location of
    ``shared/data/latency_matrix.json``; the bots' latency model uses it)."""

    name: str
    location: str


def parse_regions(spec: str | list[str] | tuple[str, ...]) -> tuple[RegionSpec, ...]:
    """``"na,eu,us-east@na"`` (or the same as a list) -> region specs, in order.

    A region is named after its location (``na``, ``eu``, ``asia``...) or written
    ``name@location``; names are directory region names and unique. The same rules as
    :func:`shared.geo.parse_regions` (which the bots use). ValueError, one line.
    """
    known = default_matrix()
    items = spec.split(",") if isinstance(spec, str) else list(spec)
    if not items or not any(isinstance(i, str) and i.strip() for i in items):
        raise ValueError("regions: empty; expected e.g. 'na,eu,asia' or 'us-east@na,eu'")
    regions: dict[str, RegionSpec] = {}
    for item in items:
        if not isinstance(item, str) or not item.strip():
            raise ValueError(f"regions: empty or non-text entry in {spec!r}")
        name, location = split_region(item.strip(), known)
        if name in regions:
            raise ValueError(f"regions: {name!r} is given twice")
        regions[name] = RegionSpec(name, location)
    if len(regions) > MAX_REGIONS:
        raise ValueError(f"regions: at most {MAX_REGIONS} on one machine")
    return tuple(regions.values())


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    """Everything :func:`start_cluster` starts; validated on construction (ValueError).

    ``matches``/``max_players``/``tick_rate``: passed to every node when set (``None``: the
    node's default). ``register``: give nodes ``--directory`` so that they heartbeat to the
    directory and check reservations; ``None`` = whenever this ``arena-server`` has the
    option. ``log_dir``: where the children's logs go, one file each (``None``: this
    process's stderr).
    """

    regions: tuple[RegionSpec, ...]
    standbys: int = 1
    matches: int | None = None
    max_players: int | None = None
    tick_rate: int | None = None
    coordinator: str = "static"
    heartbeat_timeout: float = 1.5
    reservation_ttl: float = 10.0
    overflow_slack_ms: float = 40.0
    register: bool | None = None
    log_level: str = "warning"
    log_dir: Path | None = None
    startup_timeout: float = READY_WITHIN_S
    stop_timeout: float = 5.0

    def __post_init__(self) -> None:
        if not self.regions:
            raise ValueError("regions: at least one")
        if len({r.name for r in self.regions}) != len(self.regions):
            raise ValueError("regions: every region name must be unique")
        if not 0 <= self.standbys <= MAX_STANDBYS:
            raise ValueError(f"standbys: {self.standbys} is outside 0-{MAX_STANDBYS}")
        if self.matches is not None and not 1 <= self.matches <= 64:
            raise ValueError(f"matches: {self.matches} is outside 1-64")
        if self.max_players is not None and not 1 <= self.max_players <= 65535:
            raise ValueError(f"max players: {self.max_players} is outside 1-65535")
        if self.tick_rate is not None and not 20 <= self.tick_rate <= 128:
            raise ValueError(f"tick rate: {self.tick_rate} Hz is outside 20-128 Hz")
        parse_coordinator_spec(self.coordinator)
        for name, value, high in (
            ("heartbeat timeout", self.heartbeat_timeout, 60.0),
            ("reservation TTL", self.reservation_ttl, 3600.0),
            ("startup timeout", self.startup_timeout, 3600.0),
            ("stop timeout", self.stop_timeout, 600.0),
        ):
            if not (math.isfinite(value) and 0 < value <= high):
                raise ValueError(f"{name}: {value:g} s is outside (0, {high:g}] s")
        if not (math.isfinite(self.overflow_slack_ms) and 0 <= self.overflow_slack_ms <= 10000):
            raise ValueError("overflow slack: must be between 0 and 10000 ms")
        if self.log_level not in _LOG_LEVELS:
            raise ValueError(
                f"log level: {self.log_level!r} is not one of {', '.join(_LOG_LEVELS)}"
            )

    @classmethod
    def from_mapping(cls, document: Mapping[str, Any]) -> ClusterSpec:
        """From a config document (``--config FILE``): the command line's fields with ``_``
        for ``-``; ``regions`` as a string or a list. Unknown fields are refused."""
        if not isinstance(document, Mapping):
            raise ValueError("config: expected a JSON object")
        known = {f.name for f in fields(cls)}
        unknown = sorted(str(k) for k in document if k not in known)
        if unknown:
            raise ValueError(
                f"config: unknown field(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})"
            )
        if "regions" not in document:
            raise ValueError("config: 'regions' is missing (e.g. \"na,eu,asia\")")
        values = dict(document)
        values["regions"] = parse_regions(values["regions"])
        if values.get("log_dir") is not None:
            values["log_dir"] = Path(str(values["log_dir"]))
        for name, kind in (
            ("standbys", int),
            ("matches", int),
            ("max_players", int),
            ("tick_rate", int),
            ("heartbeat_timeout", float),
            ("reservation_ttl", float),
            ("overflow_slack_ms", float),
            ("startup_timeout", float),
            ("stop_timeout", float),
        ):
            value = values.get(name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"config: {name} must be a number, got {value!r}")
            if kind is int and value != int(value):
                raise ValueError(f"config: {name} must be a whole number, got {value!r}")
            values[name] = kind(value)
        for name in ("coordinator", "log_level"):
            if name in values and not isinstance(values[name], str):
                raise ValueError(f"config: {name} must be a string")
        if values.get("register") not in (None, True, False):
            raise ValueError("config: register must be true, false or null")
        return cls(**values)


# -- what runs ---------------------------------------------------------------------------


@dataclass(slots=True)
class ClusterNode:
    """One ``arena-server`` of the cluster; ``role`` is the role it was started in."""

    node_id: str
    region: str
    role: str
    port: int
    _child: Child = field(repr=False)

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT``: peers, ``/health``, ``/metrics`` (and ``/probe``)."""
        return f"http://{HOST}:{self.port}"

    @property
    def ws_url(self) -> str:
        """Where players connect."""
        return f"ws://{HOST}:{self.port}/ws"

    @property
    def pid(self) -> int:
        return self._child.pid

    @property
    def process(self) -> subprocess.Popen[str]:
        return self._child.process

    def describe(self) -> dict[str, Any]:
        return {"node_id": self.node_id, "url": self.base_url, "ws": self.ws_url, "pid": self.pid}


@dataclass(slots=True)
class RegionNodes:
    """A region's nodes as started: its primary and its standbys."""

    name: str
    location: str
    primary: ClusterNode
    standbys: tuple[ClusterNode, ...]

    @property
    def nodes(self) -> tuple[ClusterNode, ...]:
        return (self.primary, *self.standbys)


@dataclass(slots=True)
class Cluster:
    """A started cluster. ``secret`` is the cluster secret (for tests that sign or verify;
    never print it). ``registered``: whether the nodes heartbeat to the directory."""

    directory_url: str
    regions: dict[str, RegionNodes]
    registered: bool
    secret: bytes = field(repr=False)
    _directory: Child = field(repr=False)
    _stopped: bool = field(default=False, repr=False)

    @property
    def directory_pid(self) -> int:
        return self._directory.pid

    def nodes(self) -> list[ClusterNode]:
        return [node for region in self.regions.values() for node in region.nodes]

    def pids(self) -> list[int]:
        """Every child's process id, the directory's first."""
        return [self._directory.pid, *(node.pid for node in self.nodes())]

    def describe(self) -> dict[str, Any]:
        """The ``--json`` document: where everything is (no secret)."""
        return {
            "directory": self.directory_url,
            "directory_pid": self._directory.pid,
            "registered": self.registered,
            "regions": {
                name: {
                    "location": region.location,
                    "primary": region.primary.describe(),
                    "standbys": [node.describe() for node in region.standbys],
                }
                for name, region in self.regions.items()
            },
        }

    def table(self) -> str:
        """A table for people: one line per node, then the directory."""
        rows = [("region", "location", "role", "node", "players connect to", "pid")]
        for name, region in self.regions.items():
            for node in region.nodes:
                rows.append(
                    (name, region.location, node.role, node.node_id, node.ws_url, str(node.pid))
                )
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        lines = [
            "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
            for row in rows
        ]
        lines.append(f"directory  {self.directory_url}  (pid {self._directory.pid})")
        return "\n".join(lines)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop every child: standbys, then primaries, then the directory. Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        waves = [
            [n._child for r in self.regions.values() for n in r.standbys],
            [r.primary._child for r in self.regions.values()],
            [self._directory],
        ]
        try:
            for wave in waves:
                stop_all(wave, timeout)
        finally:  # interrupted while waiting: nothing may be left behind
            stop_all([child for wave in waves for child in wave], 0.0)


# -- starting it -------------------------------------------------------------------------


#: The module the nodes run (``python -m``): ``arena-server``.
SERVER_MODULE = "server.net.cli"


@functools.cache
def server_options() -> frozenset[str]:
    """The options this ``arena-server`` understands (``--directory``, ``--matches`` are newer)."""
    from server.net.cli import build_parser  # cheap: argparse only, no node is built

    return frozenset(re.findall(r"--[a-z][a-z0-9-]*", build_parser().format_help()))


def _free_ports(count: int) -> list[int]:
    """``count`` distinct free loopback ports, all bound at once, then released.

    Another program could take one between now and the node's bind; on a development
    machine that is rare, and the node then says "cannot listen" and the start fails.
    """
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sockets.append(s)
            s.bind((HOST, 0))
        return [int(s.getsockname()[1]) for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _get_json(url: str, timeout: float = 1.0) -> Any:
    """The JSON body of ``GET url``, or None when it cannot be had right now."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return json.loads(response.read())
    except (OSError, ValueError, urllib.error.URLError):
        return None


def _start_child(spec: ClusterSpec, name: str, command: list[str], env: dict[str, str]) -> Child:
    """A child whose stderr goes to ``log_dir/NAME.log``, or to this terminal without one."""
    if spec.log_dir is None:
        return Child(name, command, env=env, inherit_stderr=True)
    return Child(name, command, env=env, log_path=spec.log_dir / f"{name}.log")


def _await_listening(children: list[Child], spec: ClusterSpec, deadline: float) -> None:
    """Every child ready (it says it listens only then), before ``deadline``."""
    for child in children:
        try:
            child.wait_ready(max(0.0, deadline - time.monotonic()))
        except ChildError as error:
            if child.alive():
                raise ClusterError(
                    f"{child.name} was not ready within {spec.startup_timeout:g} s"
                ) from None
            where = "" if spec.log_dir else " (its error is above)"
            raise ClusterError(f"{error}{where}") from None


def _node_command(
    spec: ClusterSpec,
    region: RegionSpec,
    node_id: str,
    port: int,
    primary_port: int,
    peers: list[int],
    directory_url: str | None,
) -> list[str]:
    role = "primary" if port == primary_port else "standby"
    command = [sys.executable, "-m", SERVER_MODULE, "--host", HOST, "--port", str(port)]
    command += ["--region", region.name, "--node-id", node_id, "--role", role]
    command += ["--public-url", f"http://{HOST}:{port}", "--coordinator", spec.coordinator]
    command += ["--log-level", spec.log_level]
    if role == "standby":
        command += ["--primary", f"http://{HOST}:{primary_port}"]
    for peer in peers:
        if peer != port:
            command += ["--peer", f"http://{HOST}:{peer}"]
    for flag, value in (
        ("--matches", spec.matches),
        ("--max-players", spec.max_players),
        ("--tick-rate", spec.tick_rate),
    ):
        if value is not None:
            command += [flag, str(value)]
    if directory_url is not None:
        command += ["--directory", directory_url]
    return command


def _until(
    what: str, ready: Callable[[], bool], spec: ClusterSpec, deadline: float, children: list[Child]
) -> None:
    while not ready():
        for child in children:
            if not child.alive():
                where = "" if spec.log_dir else " (its error is above)"
                raise ClusterError(f"{child.exited_error()}{where}")
        if time.monotonic() > deadline:
            raise ClusterError(f"{what} not within {spec.startup_timeout:g} s")
        time.sleep(_POLL_S)


def _roles_ready(cluster: Cluster, standbys: int) -> bool:
    """Every node reports its role, and every primary has all its standbys live."""
    for region in cluster.regions.values():
        health = _get_json(region.primary.base_url + "/health")
        if not isinstance(health, dict) or health.get("role") != "primary":
            return False
        links = health.get("standbys") or []
        if sum(1 for s in links if isinstance(s, dict) and s.get("state") == "live") < standbys:
            return False
        for node in region.standbys:
            health = _get_json(node.base_url + "/health")
            if not isinstance(health, dict) or health.get("role") != "standby":
                return False
    return True


def _registered(cluster: Cluster) -> bool:
    """The directory lists every region with the right primary and all its standbys."""
    body = _get_json(cluster.directory_url + "/regions")
    if not isinstance(body, dict) or not isinstance(body.get("regions"), list):
        return False
    listed = {r.get("region"): r for r in body["regions"] if isinstance(r, dict)}
    for name, region in cluster.regions.items():
        entry = listed.get(name)
        if entry is None or not isinstance(entry.get("primary"), dict):
            return False
        if entry["primary"].get("node_id") != region.primary.node_id:
            return False
        standbys = {s.get("node_id") for s in entry.get("standbys", []) if isinstance(s, dict)}
        if standbys != {n.node_id for n in region.standbys}:
            return False
    return True


def _decide_register(spec: ClusterSpec) -> bool:
    options = server_options()
    if spec.matches is not None and "--matches" not in options:
        raise ClusterError("this arena-server has no --matches option; leave --matches out")
    if spec.register is None:
        return "--directory" in options
    if spec.register and "--directory" not in options:
        raise ClusterError(
            "this arena-server has no --directory option, so nodes cannot register; "
            "pass --no-register"
        )
    return spec.register


@contextlib.contextmanager
def start_cluster(spec: ClusterSpec, progress: Progress | None = None) -> Iterator[Cluster]:
    """Start the cluster; yield it once every node is up in its role (and registered);
    stop every child when the block ends, however it ends.

    Raises :class:`ClusterError` (one line) when something does not come up in time; what
    had started is stopped first.
    """
    say = progress or (lambda line: None)
    register = _decide_register(spec)
    secret = secrets.token_urlsafe(32)
    env = {**os.environ, SECRET_ENV: secret, "PYTHONUNBUFFERED": "1"}
    began = time.monotonic()
    deadline = began + spec.startup_timeout
    children: list[Child] = []
    cluster: Cluster | None = None
    try:
        say("starting the directory")
        directory = _start_child(
            spec,
            "directory",
            [
                sys.executable, "-m", "server.directory.net.cli", "--host", HOST, "--port", "0",
                "--heartbeat-timeout", f"{spec.heartbeat_timeout:g}",
                "--reservation-ttl", f"{spec.reservation_ttl:g}",
                "--overflow-slack-ms", f"{spec.overflow_slack_ms:g}",
                "--log-level", spec.log_level,
            ],
            env,
        )  # fmt: skip
        children.append(directory)
        _await_listening([directory], spec, deadline)
        assert directory.url is not None
        directory_url = directory.url
        per_region = 1 + spec.standbys
        ports = _free_ports(per_region * len(spec.regions))
        say(
            f"directory at {directory_url}; starting {len(ports)} node(s) in "
            f"{len(spec.regions)} region(s): 1 primary + {spec.standbys} standby(s) each"
        )
        regions: dict[str, RegionNodes] = {}
        for r, region in enumerate(spec.regions):
            mine = ports[r * per_region : (r + 1) * per_region]
            started = []
            for i, port in enumerate(mine):
                node_id = f"{region.name}-{i + 1}"
                command = _node_command(
                    spec, region, node_id, port, mine[0], mine, directory_url if register else None
                )
                child = _start_child(spec, node_id, command, env)
                children.append(child)
                role = "primary" if i == 0 else "standby"
                started.append(ClusterNode(node_id, region.name, role, port, child))
            regions[region.name] = RegionNodes(
                region.name, region.location, started[0], tuple(started[1:])
            )
        cluster = started_cluster = Cluster(
            directory_url, regions, register, secret.encode(), directory
        )
        _await_listening(children[1:], spec, deadline)
        say(f"every node listens ({time.monotonic() - began:.1f} s); waiting for the roles")
        _until(
            "every primary with its standbys",
            lambda: _roles_ready(started_cluster, spec.standbys),
            spec,
            deadline,
            children,
        )
        if register:
            _until(
                "every node registered with the directory",
                lambda: _registered(started_cluster),
                spec,
                deadline,
                children,
            )
        say(
            f"ready in {time.monotonic() - began:.1f} s"
            + ("; every node registered with the directory" if register else "")
        )
        yield cluster
    finally:
        if cluster is not None:
            cluster.stop(spec.stop_timeout)
        else:
            stop_all(children[::-1], spec.stop_timeout)


# -- the command line --------------------------------------------------------------------


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
    add("--coordinator", help="static (default) or etcd://HOST:PORT: who decides leadership")
    add(
        "--heartbeat-timeout",
        type=float,
        metavar="S",
        help="directory: a node silent this long is no longer routed to (default 1.5)",
    )
    add(
        "--reservation-ttl",
        type=float,
        metavar="S",
        help="directory: how long a seat reservation is valid (default 10)",
    )
    add(
        "--overflow-slack-ms",
        type=float,
        metavar="MS",
        help="directory: how much farther than the best region a player may go (default 40)",
    )
    add(
        "--no-register",
        dest="register",
        action="store_const",
        const=False,
        default=None,
        help="do not pass --directory to the nodes (for an arena-server without it; by "
        "default nodes register whenever arena-server supports it)",
    )
    add("--log-level", choices=_LOG_LEVELS, help="the children's log level (default warning)")
    add(
        "--log-dir",
        metavar="DIR",
        help="write each child's log to DIR/NAME.log (default: this terminal's stderr)",
    )
    add(
        "--startup-timeout",
        type=float,
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
        "log_dir", "startup_timeout",
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
        _decide_register(spec)  # an option this arena-server lacks is a usage error too
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
    """Until interrupted: report children that exit (a drill may kill a primary on purpose;
    the others go on). The cluster is useless without its directory: that one ends it."""
    reported: set[int] = set()
    while True:
        time.sleep(0.5)
        if not cluster._directory.alive():
            code = cluster._directory.process.poll()
            say(f"the directory exited (code {code}); stopping the cluster")
            return 1
        for node in cluster.nodes():
            if node.pid not in reported and node.process.poll() is not None:
                reported.add(node.pid)
                say(
                    f"{node.node_id} ({node.region}, started as {node.role}) exited with code "
                    f"{node.process.poll()}"
                )


if __name__ == "__main__":
    sys.exit(main())
