"""Two network namespaces on a bridge, so one link between two nodes can be cut.

What ``arena-chaos torture --partitions N`` needs to cut a primary off from its standby
while both stay reachable from the bots (on the host): each node runs in a namespace of
its own with one veth on a bridge that the host is on too; a partition adds, inside each
namespace, a blackhole route to the other's address, and healing deletes them. Nothing else
on the machine is touched, and everything made is removed at the end.

Needs root and iproute2 (``ip netns``): :func:`unavailable` says, in one line, why not.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

__all__ = ["Namespaces", "isolated", "unavailable"]


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True)


def unavailable() -> str | None:
    """None when namespaces can be made here; else why not (one line)."""
    if shutil.which("ip") is None:
        return "no iproute2 (ip) on this machine"
    if os.geteuid() != 0:
        return "network namespaces need root"
    probe = f"arena-probe-{os.getpid()}"
    made = _ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"ip netns add failed: {made.stderr.strip() or made.returncode}"
    _ip("netns", "delete", probe, check=False)
    return None


@dataclass(frozen=True, slots=True)
class Namespaces:
    names: dict[str, str]  # node -> namespace
    addresses: dict[str, str]  # node -> its address on the bridge
    host: str  # the host's address on the bridge (where an etcd for the nodes listens)

    def prefix(self, node: str) -> Sequence[str]:
        """The command prefix that runs a process in ``node``'s namespace."""
        return ("ip", "netns", "exec", self.names[node])

    def cut(self, a: str, b: str) -> None:
        """Drop everything between ``a`` and ``b`` (both ways); the host still reaches both."""
        _ip("-n", self.names[a], "route", "add", "blackhole", f"{self.addresses[b]}/32")
        _ip("-n", self.names[b], "route", "add", "blackhole", f"{self.addresses[a]}/32")

    def heal(self, a: str, b: str) -> None:
        _ip("-n", self.names[a], "route", "del", "blackhole", f"{self.addresses[b]}/32",
            check=False)  # fmt: skip
        _ip("-n", self.names[b], "route", "del", "blackhole", f"{self.addresses[a]}/32",
            check=False)  # fmt: skip


@contextlib.contextmanager
def isolated(nodes: Sequence[str]) -> Iterator[Namespaces]:
    """A bridge with the host on it, and a namespace per node on the bridge."""
    tag = os.getpid() % 100000
    bridge = f"arbr{tag}"
    subnet = f"10.{77 + tag % 100}.{tag % 250}"
    host = f"{subnet}.1"
    names = {node: f"arena-{tag}-{node}" for node in nodes}
    addresses = {node: f"{subnet}.{i + 2}" for i, node in enumerate(nodes)}
    try:
        _ip("link", "add", bridge, "type", "bridge")
        _ip("addr", "add", f"{host}/24", "dev", bridge)
        _ip("link", "set", bridge, "up")
        for i, node in enumerate(nodes):
            outside, inside = f"arv{tag}{i}", f"arw{tag}{i}"
            _ip("netns", "add", names[node])
            _ip("link", "add", outside, "type", "veth", "peer", "name", inside)
            _ip("link", "set", inside, "netns", names[node])
            _ip("link", "set", outside, "master", bridge, "up")
            _ip("-n", names[node], "addr", "add", f"{addresses[node]}/24", "dev", inside)
            _ip("-n", names[node], "link", "set", inside, "up")
            _ip("-n", names[node], "link", "set", "lo", "up")
        yield Namespaces(names, addresses, host)
    finally:
        for node in nodes:
            _ip("netns", "delete", names[node], check=False)  # its veth ends go with it
        _ip("link", "delete", bridge, check=False)
