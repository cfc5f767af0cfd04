"""The directory's memory of nodes: heartbeats, liveness, epochs and outstanding seats.

Sans-I/O: every method takes ``now`` (seconds on one monotonic clock of the caller's
choosing) and nothing here reads a clock, sleeps or touches a socket.

* A node is live while ``now <= last heartbeat + heartbeat_timeout``. :meth:`Registry.sweep`
  forgets nodes that went silent; until then views still carry them, marked by
  ``expires_at``, and the policy skips them.
* Epoch fencing per replication group (a primary and its standbys; by default the whole
  region is one group): the highest epoch any primary of the group announced is remembered
  as long as some member of the group keeps heartbeating. A primary below it is deposed
  and never routed to, even after its successor falls silent. A group whose members all
  fell silent is forgotten, so a cluster restarted from epoch 1 is routed again.
* Reservations: every seat handed out counts against its node until it expires or the
  node's heartbeat shows it taken. A node that lists the reservation ids it admitted in
  ``claimed`` gets exact accounting; otherwise each heartbeat's rise in ``players`` settles
  that many of the oldest reservations. A player holds at most one reservation: asking
  again releases the previous one.
"""

from __future__ import annotations

import itertools
import math
from collections import deque
from dataclasses import dataclass, field

from server.directory.policy import NodeView, RegionView
from shared.directory import Heartbeat, NodeStatus

__all__ = ["HeartbeatOutcome", "Registry"]


@dataclass(frozen=True, slots=True)
class HeartbeatOutcome:
    """What a heartbeat changed. ``status``: ``routable`` (a current primary), ``standby``
    or ``fenced`` (a primary below its group's epoch: it should stop serving); the
    directory answers it as a :class:`~shared.directory.HeartbeatAck`, logs the rest."""

    status: NodeStatus
    group_epoch: int
    new_node: bool
    previous_group_epoch: int | None
    reserved: int


@dataclass(slots=True)
class _Node:
    beat: Heartbeat
    last_seen: float
    # reservation id -> expiry (registry clock)
    reservations: dict[str, float] = field(default_factory=dict)
    view: NodeView | None = None  # cached until the node changes


@dataclass(slots=True)
class _Group:
    epoch: int
    last_seen: float


class Registry:
    """Nodes by id, their liveness, group epochs and outstanding reservations.

    Views are cached per node and per region and rebuilt only where something changed, so
    a seat request costs the same with 5 nodes or 500.
    """

    def __init__(self, heartbeat_timeout: float = 1.5) -> None:
        if not math.isfinite(heartbeat_timeout) or heartbeat_timeout <= 0:
            raise ValueError("heartbeat_timeout must be a positive number of seconds")
        self.heartbeat_timeout = heartbeat_timeout
        self._nodes: dict[str, _Node] = {}
        self._by_region: dict[str, dict[str, _Node]] = {}
        self._groups: dict[tuple[str, str], _Group] = {}
        self._players: dict[str, tuple[str, str]] = {}  # player -> (node_id, reservation id)
        self._owner: dict[str, str] = {}  # reservation id -> player
        # (expires, node_id, reservation id) in issue order: expiries rise with it (one
        # TTL, a monotonic clock), so the expired ones are at the front. Should a caller
        # break that order, a reservation is dropped late (counted too long), never early.
        self._expiry: deque[tuple[float, str, str]] = deque()
        self._region_views: dict[str, RegionView] = {}
        self._dirty: set[str] = set()
        self._views: tuple[RegionView, ...] | None = ()

    def _touch(self, node: _Node) -> None:
        node.view = None
        self._dirty.add(node.beat.region)
        self._views = None

    # -- heartbeats ------------------------------------------------------------------------

    def heartbeat(self, beat: Heartbeat, now: float) -> HeartbeatOutcome:
        """Record ``beat`` as received at ``now``."""
        self._expire(now)
        previous = self._nodes.get(beat.node_id)
        key = (beat.region, beat.group_key)
        group = self._groups.get(key)
        if group is not None and group.last_seen + self.heartbeat_timeout < now:
            group = None  # every member fell silent meanwhile: a fresh start
        before = group.epoch if group is not None else None
        if group is None:
            group = self._groups[key] = _Group(beat.epoch if beat.role == "primary" else 0, now)
        elif beat.role == "primary" and beat.epoch > group.epoch:
            group.epoch = beat.epoch
        group.last_seen = now
        if before != group.epoch:
            self._dirty.add(beat.region)
        if previous is None:
            node = self._nodes[beat.node_id] = _Node(beat, now)
        else:
            node = previous
            self._touch(node)
            self._settle(node, beat)
            if previous.beat.region != beat.region:  # moved: leave the old region
                self._by_region[previous.beat.region].pop(beat.node_id, None)
            node.beat, node.last_seen = beat, now
        self._by_region.setdefault(beat.region, {})[beat.node_id] = node
        self._touch(node)
        if beat.role == "standby":
            status: NodeStatus = "standby"
        else:
            status = "routable" if beat.epoch >= group.epoch else "fenced"
        return HeartbeatOutcome(
            status=status,
            group_epoch=group.epoch,
            new_node=previous is None,
            previous_group_epoch=before,
            reserved=len(node.reservations),
        )

    def _settle(self, node: _Node, beat: Heartbeat) -> None:
        """Take off the reservations the new heartbeat shows as players."""
        if beat.claimed is not None:
            for rid in beat.claimed:
                if rid in node.reservations:
                    self._release(node, rid)
            return
        joined = beat.players - node.beat.players
        # dicts keep insertion order: the oldest reservations come first
        for rid in list(itertools.islice(node.reservations, max(0, joined))):
            self._release(node, rid)

    def _release(self, node: _Node, rid: str) -> None:
        if node.reservations.pop(rid, None) is not None:
            self._touch(node)
        player = self._owner.pop(rid, None)
        if player is not None and self._players.get(player, ("", ""))[1] == rid:
            del self._players[player]

    def _expire(self, now: float) -> None:
        expiry = self._expiry
        while expiry and expiry[0][0] <= now:
            expires, node_id, rid = expiry.popleft()
            node = self._nodes.get(node_id)
            if node is not None and node.reservations.get(rid) == expires:
                self._release(node, rid)

    # -- reservations ----------------------------------------------------------------------

    def reserve(
        self, node_id: str, reservation_id: str, player: str, now: float, ttl: float
    ) -> None:
        """Count a seat on ``node_id`` for ``player`` until ``now + ttl`` (or until settled).

        The player's previous outstanding reservation, if any, is released.
        """
        node = self._nodes.get(node_id)
        if node is None:
            raise KeyError(f"unknown node {node_id!r}")
        held = self._players.pop(player, None)
        if held is not None:
            other = self._nodes.get(held[0])
            if other is not None:
                self._release(other, held[1])
        self._release(node, reservation_id)
        node.reservations[reservation_id] = now + ttl
        self._expiry.append((now + ttl, node_id, reservation_id))
        self._players[player] = (node_id, reservation_id)
        self._owner[reservation_id] = player
        self._touch(node)

    # -- time ------------------------------------------------------------------------------

    def sweep(self, now: float) -> list[Heartbeat]:
        """Forget nodes silent for longer than the timeout (returns their last heartbeats),
        groups with no live member and reservations that expired."""
        self._expire(now)
        gone = [n for n in self._nodes.values() if n.last_seen + self.heartbeat_timeout < now]
        for node in gone:
            for rid in list(node.reservations):
                self._release(node, rid)
            self._touch(node)
            del self._nodes[node.beat.node_id]
            members = self._by_region[node.beat.region]
            del members[node.beat.node_id]
            if not members:
                del self._by_region[node.beat.region]
        for key, group in list(self._groups.items()):
            if group.last_seen + self.heartbeat_timeout < now:
                del self._groups[key]
                self._dirty.add(key[0])
                self._views = None
        return [node.beat for node in gone]

    # -- views -----------------------------------------------------------------------------

    def _view(self, node: _Node) -> NodeView:
        if node.view is None:
            beat = node.beat
            node.view = NodeView.of(
                beat, len(node.reservations), node.last_seen + self.heartbeat_timeout
            )
        return node.view

    def views(self, now: float) -> tuple[RegionView, ...]:
        """Every stored node as the policy sees it, grouped by region (sorted by name).

        Reservations expired by ``now`` are dropped on the way. Fences of groups whose
        members all fell silent are still listed: they can only concern stale nodes.
        """
        self._expire(now)
        if self._dirty:
            for region in self._dirty:
                members = self._by_region.get(region, {})
                nodes = sorted((self._view(n) for n in members.values()), key=_node_id)
                if not nodes:
                    self._region_views.pop(region, None)
                    continue
                fences = {g: e.epoch for (r, g), e in self._groups.items() if r == region}
                self._region_views[region] = RegionView(region, tuple(nodes), fences)
            self._dirty.clear()
            self._views = None
        if self._views is None:
            self._views = tuple(self._region_views[name] for name in sorted(self._region_views))
        return self._views

    @property
    def known(self) -> int:
        """Nodes stored (live or not yet swept)."""
        return len(self._nodes)

    @property
    def outstanding(self) -> int:
        """Reservations held (some may have expired since the last sweep)."""
        return len(self._owner)


def _node_id(view: NodeView) -> str:
    return view.node_id
