"""The coordinator interface: who leads a region, and at which fencing epoch.

A region has one primary and one or more standbys. Leadership is decided by a *coordinator*;
every promotion raises the *epoch*, the fencing token every message from a primary carries
(higher wins, lower is ignored). Two implementations exist:

* ``static`` (:mod:`server.coordination.net.static`): embedded, no extra process. Standbys ask
  each other's ``/peer`` and agree on a winner by a deterministic rule. It cannot fence a
  partitioned primary: see ``docs/failover.md``.
* ``etcd://HOST:PORT[,HOST:PORT...]`` (:mod:`server.coordination.net.etcd`): an election key
  attached to a lease in etcd; the key's create revision is the epoch, and ``confirm`` is a
  linearizable read. The address grammar is :mod:`server.coordination.etcd_config`'s.

:func:`server.coordination.net.make_coordinator` turns the ``--coordinator`` option into one
of them; this module is the sans-I/O part (the interface, the errors, the option's
grammar).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from server.coordination.etcd_config import parse_etcd_address

__all__ = [
    "Coordinator",
    "CoordinatorError",
    "CoordinatorUnavailable",
    "LeaderInfo",
    "RegionTaken",
    "parse_coordinator_spec",
]

#: ``(node_id, url, epoch)`` of a region's leader.
LeaderInfo = tuple[str, str, int]


class CoordinatorError(Exception):
    """The coordinator refused or could not complete an operation (one-line message)."""


class CoordinatorUnavailable(CoordinatorError):
    """The coordinator's backing service cannot be reached (or did not answer in time)."""


class RegionTaken(CoordinatorError):
    """``claim_initial`` found the region led, or its match held, by another node: this
    node should follow ``primary_url`` (its base URL, "" when unknown) instead."""

    def __init__(self, message: str, primary_url: str) -> None:
        super().__init__(message)
        self.primary_url = primary_url


@runtime_checkable
class Coordinator(Protocol):
    """Leadership for one region, used from the node's asyncio edge.

    Call :meth:`start` once before anything else and :meth:`close` once at the end.
    """

    kind: str  # "static" | "etcd"

    @property
    def foresight(self) -> float:
        """How long before a primary's silence counts :meth:`foresee_campaign` wants to
        hear of it (seconds; 0: never)."""

    async def start(self) -> None:
        """Acquire resources (HTTP session; etcd: a lease and its keep-alive task)."""

    async def close(self) -> None:
        """Release resources; a leader gives up its lease and so its key."""

    async def campaign(
        self, *, node_id: str, url: str, replicated_tick: int, known_epoch: int
    ) -> int | None:
        """Try to become the leader (a standby whose primary fell silent).

        Return the new fencing epoch (``> known_epoch``) when this node won, ``None`` when
        another node should lead. Callers retry while no leader emerges.
        """

    def foresee_campaign(self) -> None:
        """The primary may count as silent in :attr:`foresight` seconds: start asking what
        a campaign needs to know, so that the campaign need not wait for the answers."""

    @property
    def leading(self) -> bool:
        """Whether this node holds leadership now (etcd: its key, on a lease kept alive)."""

    async def confirm(self) -> bool:
        """True only if this node still leads at the epoch it won (fail safe: False on error);
        asked before a tick that no standby holds is shown."""

    async def step_down(self) -> None:
        """Give leadership back (etcd: delete the key if it is still ours)."""

    async def depose(self, *, node_id: str) -> None:
        """Make sure the (silent) leader ``node_id`` can no longer :meth:`confirm`."""

    async def leader(self) -> LeaderInfo | None:
        """The current leader ``(node_id, url, epoch)`` if known."""

    async def claim_initial(self, *, node_id: str, url: str, known_epoch: int = 0) -> int:
        """Become leader at start-up (``--role primary``); return the epoch, above
        ``known_epoch`` (a checkpoint's: the resumed match must fence every older one)."""


_USAGE = "use 'static' or 'etcd://HOST:PORT[,HOST:PORT...]' (etcds:// for TLS)"


def parse_coordinator_spec(spec: str) -> tuple[str, tuple[str, ...]]:
    """Split ``--coordinator`` into ``("static", ())`` or ``("etcd", members)``, the etcd
    members' base URLs in the order given (:func:`parse_etcd_address`).

    Raises :class:`ValueError` with a one-line message naming the problem.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"empty coordinator: {_USAGE}")
    if spec == "static":
        return "static", ()
    scheme, sep, _ = spec.partition("://")
    if not sep:
        raise ValueError(f"unknown coordinator {spec!r}: {_USAGE}")
    if scheme not in ("etcd", "etcds"):
        raise ValueError(f"unknown coordinator scheme {scheme + '://'!r} in {spec!r}: {_USAGE}")
    return "etcd", parse_etcd_address(spec)
