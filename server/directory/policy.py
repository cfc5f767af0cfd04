"""The routing policy: which region and node a player gets. Pure: plain data in, a decision
out (a :class:`Placement`, or :class:`NoPlacement` saying why there is none); the directory
turns a placement into the wire's :class:`~shared.directory.Seat` by adding a reservation.

Rules, in order (``docs/routing.md`` explains why):

1. Only *routable* nodes count: live (``now <= expires_at``), role ``primary``, and at the
   highest epoch of their replication group (the larger of the epoch the registry
   remembers for the group and the highest live primary's). A lower-epoch primary is a
   deposed one still talking; standbys never take players.
2. The client's measured RTTs order the regions (ties by region name). Regions the client
   did not measure, regions without a routable node and RTTs that are not finite and
   non-negative are ignored. The *best* region is the lowest-RTT one left.
3. The first region in that order with a free seat wins, as long as its RTT is within
   ``slack_ms`` of the best (inclusive). A region further away is never used, even if empty.
4. Within the region, the least-loaded node wins: ``(players + reserved) / capacity``,
   ties by ``node_id`` (or by the caller's ``tie_break`` rank: directories sharing a
   registry rank per player, so that two of them seating at once rarely pick the same
   node and lose a transaction to each other). A node is full when
   ``players + reserved >= capacity``.

No wall clock and no I/O here: ``now`` is a parameter, on whatever clock built the views.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from shared.directory import Heartbeat, Role

__all__ = [
    "NoPlacement",
    "NodeView",
    "Placement",
    "RegionView",
    "choose",
    "routable_nodes",
]


@dataclass(frozen=True, slots=True)
class NodeView:
    """A node as the policy sees it. ``reserved``: seats handed out that its heartbeat does
    not show yet. ``expires_at``: the node counts as live while ``now <= expires_at``.
    ``group``: its replication group (primary and standbys); empty means the region."""

    node_id: str
    region: str
    endpoint: str
    role: Role
    epoch: int
    players: int
    capacity: int
    reserved: int = 0
    expires_at: float = math.inf
    group: str = ""
    probe: str = ""

    @classmethod
    def of(cls, beat: Heartbeat, reserved: int, expires_at: float) -> NodeView:
        """The node its last heartbeat describes, with the seats handed out since."""
        return cls(
            node_id=beat.node_id,
            region=beat.region,
            endpoint=beat.endpoint,
            role=beat.role,
            epoch=beat.epoch,
            players=beat.players,
            capacity=beat.capacity,
            reserved=reserved,
            expires_at=expires_at,
            group=beat.group,
            probe=beat.probe,
        )

    @property
    def group_key(self) -> str:
        return self.group or self.region

    @property
    def free(self) -> int:
        return self.capacity - self.players - self.reserved

    @property
    def load(self) -> float:
        """Occupied share of the seats, reservations included; ``inf`` with no capacity."""
        if self.capacity <= 0:
            return math.inf
        return (self.players + self.reserved) / self.capacity

    def live(self, now: float) -> bool:
        return now <= self.expires_at


@dataclass(frozen=True, slots=True)
class RegionView:
    """One region's nodes, and the highest epoch remembered per replication group (so a
    deposed primary stays fenced even after its successor fell silent)."""

    name: str
    nodes: tuple[NodeView, ...]
    fences: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Placement:
    """The decision: a node for the player, and the region it would ideally have had."""

    region: str
    node_id: str
    endpoint: str
    epoch: int
    rtt_ms: float
    best_region: str
    best_rtt_ms: float

    @property
    def overflow(self) -> bool:
        return self.region != self.best_region


@dataclass(frozen=True, slots=True)
class NoPlacement:
    """No seat. ``reason``: ``full`` (every region within the slack is full) or
    ``no_region`` (none of the measured regions has a routable node)."""

    reason: Literal["full", "no_region"]
    best_region: str | None = None
    best_rtt_ms: float | None = None
    considered: tuple[str, ...] = ()


def routable_nodes(region: RegionView, now: float) -> tuple[NodeView, ...]:
    """The region's live primaries at their group's highest epoch, sorted by ``node_id``."""
    return tuple(sorted(_routable(region, now), key=_by_id))


def _routable(region: RegionView, now: float) -> list[NodeView]:
    live = [n for n in region.nodes if n.role == "primary" and n.live(now)]
    top: dict[str, int] = {}
    for node in live:
        key = node.group_key
        top[key] = max(top.get(key, region.fences.get(key, node.epoch)), node.epoch)
    return [n for n in live if n.epoch >= top[n.group_key]]


def _by_id(node: NodeView) -> str:
    return node.node_id


def _least_loaded(
    nodes: Iterable[NodeView], tie_break: Callable[[str], str] | None
) -> NodeView | None:
    best: NodeView | None = None
    best_key: tuple[float, str, str] | None = None
    for node in nodes:
        if node.free < 1:
            continue
        rank = tie_break(node.node_id) if tie_break is not None else ""
        key = (node.load, rank, node.node_id)
        if best_key is None or key < best_key:
            best, best_key = node, key
    return best


def choose(
    regions: Iterable[RegionView],
    rtt_ms: Mapping[str, float],
    *,
    now: float,
    slack_ms: float,
    tie_break: Callable[[str], str] | None = None,
) -> Placement | NoPlacement:
    """The placement the rules above give, or :class:`NoPlacement` saying why there is none."""
    if not math.isfinite(slack_ms) or slack_ms < 0:
        raise ValueError("slack_ms must be finite and >= 0")
    ranked: list[tuple[float, str, RegionView]] = []
    for region in regions:
        rtt = rtt_ms.get(region.name)
        if rtt is None or not isinstance(rtt, int | float) or not 0 <= rtt < math.inf:
            continue
        ranked.append((float(rtt), region.name, region))
    ranked.sort(key=lambda item: (item[0], item[1]))
    best: tuple[float, str] | None = None
    considered: list[str] = []
    # Walk outwards from the nearest region; only look at a region's nodes when needed.
    for rtt, name, region in ranked:
        if best is not None and rtt > best[0] + slack_ms:
            break
        nodes = _routable(region, now)
        if not nodes:
            continue  # out of service: as if not measured
        if best is None:
            best = (rtt, name)
        considered.append(name)
        node = _least_loaded(nodes, tie_break)
        if node is not None:
            return Placement(
                region=name,
                node_id=node.node_id,
                endpoint=node.endpoint,
                epoch=node.epoch,
                rtt_ms=rtt,
                best_region=best[1],
                best_rtt_ms=best[0],
            )
    if best is None:
        return NoPlacement("no_region")
    return NoPlacement("full", best[1], best[0], tuple(considered))
