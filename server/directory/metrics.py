"""The directory's Prometheus metrics, on a registry of its own (``GET /metrics`` exposes it)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

__all__ = ["DirectoryMetrics"]


class DirectoryMetrics:
    """Counters of answers by outcome and gauges of live nodes and seats per region."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.seat_requests = Counter(
            "arena_directory_seat_requests",
            "POST /seat answers by outcome: granted (best region), overflow (a region within "
            "the slack), no_capacity, no_region, bad_request",
            ["outcome"],
            registry=r,
        )
        self.heartbeats = Counter(
            "arena_directory_heartbeats",
            "POST /nodes/heartbeat answers by outcome (accepted or the error code)",
            ["outcome"],
            registry=r,
        )
        self.nodes_live = Gauge(
            "arena_directory_nodes_live",
            "Live nodes by region and state (routable, standby, fenced)",
            ["region", "state"],
            registry=r,
        )
        self.reserved = Gauge(
            "arena_directory_reservations_outstanding",
            "Seats handed out and not yet shown in a heartbeat, by region",
            ["region"],
            registry=r,
        )
        self.nodes_expired = Counter(
            "arena_directory_nodes_expired", "Nodes forgotten after going silent", registry=r
        )
