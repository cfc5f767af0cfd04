"""A running ``arena-cluster``: its children started, waited for, described and stopped.

:func:`start_cluster` starts ``arena-directory`` and, per region, a primary and its standbys
(``arena-server``) as child processes on loopback ports chosen at run time, and yields a
:class:`Cluster` once every primary has its standbys and every node is registered with the
directory. Why it is shaped this way:

* **Ports are picked up front** (bound to port 0 all at once, then released), so every node
  can be told the URLs of its region's other nodes (``--peer``) before any of them starts,
  and all of them can start at the same time.
* **One fresh random cluster secret** per run, handed to every child in the environment
  variable ``ARENA_CLUSTER_SECRET``: never on a command line (where ``ps`` shows it to every
  user of the machine), never printed, never written to the ``--json`` file. Heartbeats,
  reservations, session tokens and the standbys' replication links are all signed with it.
* **Nothing outlives the cluster.** Children stay in its process group and die with it
  (:mod:`launch.supervisor`), so ``kill -TERM -PGID`` or a terminal's Ctrl-C reaches them
  all, and even a SIGKILLed ``arena-cluster`` leaves nothing behind. When the block ends
  it stops them in order: standbys first (so none of them takes over from a primary that
  is merely shutting down), then primaries, then the directory; each with SIGTERM (a
  clean shutdown), then SIGKILL after ``stop_timeout``.
* **Ready means ready.** A node says it listens only once its kernels are compiled or
  loaded; the cluster waits for that, then for every primary to have its standbys, with a
  bound (``startup_timeout``) sized for a cold cache on a busy machine.
* The pieces are functions and classes so that ``arena-cluster`` and the integration tests
  start exactly the same thing.
"""

from __future__ import annotations

import contextlib
import json
import math
import secrets
import socket
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from launch.cluster_spec import ClusterSpec, RegionSpec
from launch.supervisor import Child, ChildError, stop_all
from server.replication.auth import SECRET_ENV

__all__ = [
    "Cluster",
    "ClusterError",
    "ClusterNode",
    "RegionNodes",
    "start_cluster",
]

HOST = "127.0.0.1"
#: The module the nodes run (``python -m``): ``arena-server``.
SERVER_MODULE = "server.net.cli"
_POLL_S = 0.1
#: A node that keeps exiting is restarted at most this often (a bad flag must not spin).
RESTART_BACKOFF_S = 2.0

Progress = Callable[[str], None]


class ClusterError(Exception):
    """The cluster could not be started as asked; the message is one line for the user."""


@dataclass(slots=True)
class ClusterNode:
    """One ``arena-server`` of the cluster; ``role`` is the role it was started in."""

    node_id: str
    region: str
    role: str
    port: int
    admin_port: int
    _child: Child = field(repr=False)
    _command: list[str] = field(default_factory=list, repr=False)
    restarts: int = 0
    restarted_at: float = -math.inf  # monotonic

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT``: players and peers (``/probe``, ``/peer``)."""
        return f"http://{HOST}:{self.port}"

    @property
    def admin_url(self) -> str:
        """``http://127.0.0.1:ADMIN_PORT``: the full ``/health``, ``/metrics``, ``/view``."""
        return f"http://{HOST}:{self.admin_port}"

    @property
    def ws_url(self) -> str:
        """Where players connect."""
        return f"ws://{HOST}:{self.port}/ws"

    @property
    def pid(self) -> int:
        return self._child.pid

    @property
    def exit_code(self) -> int | None:
        """Its exit code once it has exited; None while it runs."""
        return self._child.process.poll()

    def describe(self) -> dict[str, Any]:
        return {
            "node_id": self.node_id,
            "url": self.base_url,
            "ws": self.ws_url,
            "admin": self.admin_url,
            "pid": self.pid,
        }

    def restart(self, spec: ClusterSpec, env: Mapping[str, str]) -> None:
        """Start it again, same command, same port. One started as a primary finds its
        region led (or its match held) by another node and joins as a standby; a standby
        finds the region's primary among its peers."""
        self._child.stop(0.0)  # reaped
        self._child = _start_child(spec, self.node_id, self._command, env)
        self.restarts += 1
        self.restarted_at = time.monotonic()


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
    _spec: ClusterSpec | None = field(default=None, repr=False)
    _env: Mapping[str, str] = field(default_factory=dict, repr=False)

    def heal(self) -> list[tuple[ClusterNode, int]]:
        """Restart every node that exited, so each region keeps its standbys after a
        takeover; the nodes restarted, with the exit codes they had."""
        if self._stopped or self._spec is None:
            return []
        healed = []
        for node in self.nodes():
            soon = time.monotonic() - node.restarted_at < RESTART_BACKOFF_S
            if (code := node.exit_code) is not None and not soon:
                node.restart(self._spec, self._env)
                healed.append((node, code))
        return healed

    @property
    def directory_pid(self) -> int:
        return self._directory.pid

    @property
    def directory_exit_code(self) -> int | None:
        """The directory's exit code once it has exited; None while it runs."""
        return self._directory.process.poll()

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


def _start_child(spec: ClusterSpec, name: str, command: list[str], env: Mapping[str, str]) -> Child:
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
    admin_port: int,
) -> list[str]:
    role = "primary" if port == primary_port else "standby"
    command = [sys.executable, "-m", SERVER_MODULE, "--host", HOST, "--port", str(port)]
    command += ["--admin-host", HOST, "--admin-port", str(admin_port)]
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
    if spec.checkpoint_dir is not None:
        command += ["--checkpoint-dir", str(spec.checkpoint_dir)]
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
    """Every node reports its role, and every primary has all its standbys in sync."""
    for region in cluster.regions.values():
        health = _get_json(region.primary.admin_url + "/health")
        if not isinstance(health, dict) or health.get("role") != "primary":
            return False
        links = health.get("standbys") or []
        if sum(1 for s in links if isinstance(s, dict) and s.get("state") == "in_sync") < standbys:
            return False
        for node in region.standbys:
            health = _get_json(node.admin_url + "/health")
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


@contextlib.contextmanager
def start_cluster(spec: ClusterSpec, progress: Progress | None = None) -> Iterator[Cluster]:
    """Start the cluster; yield it once every node is up in its role (and registered);
    stop every child when the block ends, however it ends.

    Raises :class:`ClusterError` (one line) when something does not come up in time; what
    had started is stopped first.
    """
    say = progress or (lambda line: None)
    register = spec.register is not False  # None: the default, register
    secret = secrets.token_urlsafe(32)
    env = {SECRET_ENV: secret}  # on top of this process's environment
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
        ports = _free_ports(2 * per_region * len(spec.regions))
        ports, admin_ports = ports[: len(ports) // 2], ports[len(ports) // 2 :]
        say(
            f"directory at {directory_url}; starting {len(ports)} node(s) in "
            f"{len(spec.regions)} region(s): 1 primary + {spec.standbys} standby(s) each"
        )
        regions: dict[str, RegionNodes] = {}
        for r, region in enumerate(spec.regions):
            mine = ports[r * per_region : (r + 1) * per_region]
            admins = admin_ports[r * per_region : (r + 1) * per_region]
            started = []
            for i, (port, admin) in enumerate(zip(mine, admins, strict=True)):
                node_id = f"{region.name}-{i + 1}"
                heartbeats_to = directory_url if register else None
                command = _node_command(
                    spec, region, node_id, port, mine[0], mine, heartbeats_to, admin
                )
                child = _start_child(spec, node_id, command, env)
                children.append(child)
                role = "primary" if i == 0 else "standby"
                node = ClusterNode(node_id, region.name, role, port, admin, child, command)
                started.append(node)
            regions[region.name] = RegionNodes(
                region.name, region.location, started[0], tuple(started[1:])
            )
        cluster = started_cluster = Cluster(
            directory_url, regions, register, secret.encode(), directory, _spec=spec, _env=env
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
