"""What ``GET /regions`` says: the registry's views as the wire's region listing.

Pure: views and ``now`` in, :class:`~shared.directory.RegionSummary` messages out. Only live
nodes are listed (``docs/routing.md``, ``GET /regions``).
"""

from __future__ import annotations

from collections.abc import Iterable

from server.directory.policy import NodeView, RegionView, routable_nodes
from shared.directory import NodeSummary, RegionSummary

__all__ = ["region_summaries"]


def _region_summary(region: RegionView, now: float) -> RegionSummary:
    """One region: routable primaries (highest epoch first), live standbys, fenced ones."""
    routable = routable_nodes(region, now)
    routable_ids = {n.node_id for n in routable}
    live = [n for n in region.nodes if n.live(now)]
    standbys = [n for n in live if n.role == "standby"]
    fenced = [n for n in live if n.role == "primary" and n.node_id not in routable_ids]
    ordered = tuple(_summary(n) for n in sorted(routable, key=lambda n: (-n.epoch, n.node_id)))
    players = sum(n.players for n in routable)
    reserved = sum(n.reserved for n in routable)
    capacity = sum(n.capacity for n in routable)
    probe = ordered[0].probe if ordered else live[0].probe if live else None
    return RegionSummary(
        region=region.name,
        primary=ordered[0] if ordered else None,
        primaries=ordered,
        standbys=tuple(_summary(n) for n in standbys),
        fenced=tuple(_summary(n) for n in fenced),
        probe=probe,
        probes=tuple(sorted({n.probe for n in live})),
        players=players,
        reserved=reserved,
        capacity=capacity,
        load=round((players + reserved) / capacity, 4) if capacity else None,
    )


def _summary(node: NodeView) -> NodeSummary:
    return NodeSummary(
        node_id=node.node_id,
        endpoint=node.endpoint,
        probe=node.probe,
        epoch=node.epoch,
        group=node.group_key,
        players=node.players,
        reserved=node.reserved,
        capacity=node.capacity,
    )


def region_summaries(views: Iterable[RegionView], now: float) -> tuple[RegionSummary, ...]:
    """Regions with at least one live node, in the views' order (sorted by name)."""
    return tuple(
        _region_summary(region, now)
        for region in views
        if any(node.live(now) for node in region.nodes)
    )
