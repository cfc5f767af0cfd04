"""The directory's Prometheus metrics, on a registry of its own (``GET /metrics`` exposes it).

Named as the node's are (:mod:`server.net.metrics`): counters end in ``_total``, and each
labelled counter starts with every outcome the directory can answer, at 0.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge

from server.exposition import Registry

__all__ = ["HEARTBEAT_OUTCOMES", "SEAT_OUTCOMES", "DirectoryMetrics"]

#: ``arena_directory_seat_requests_total{outcome}`` (``unavailable``: the shared state in etcd
#: could not be reached, ``--registry etcd://`` only).
SEAT_OUTCOMES = ("granted", "overflow", "no_capacity", "no_region", "bad_request", "unavailable")
#: ``arena_directory_heartbeats_total{outcome}``: accepted, or the error code answered
#: (:meth:`server.directory.service.Directory.heartbeat`; ``stale`` and ``replayed`` count the
#: heartbeats refused as not new).
HEARTBEAT_OUTCOMES = (
    "accepted",
    "unauthenticated",
    "bad_signature",
    "stale",
    "replayed",
    "malformed",
    "invalid_field",
    "unavailable",
)


class DirectoryMetrics:
    """Counters of answers by outcome and gauges of live nodes and seats per region."""

    def __init__(self) -> None:
        self.registry = Registry()
        r = self.registry
        self.seat_requests = Counter(
            "arena_directory_seat_requests",
            "POST /seat answers by outcome: granted (best region), overflow (a region within "
            "the slack), no_capacity, no_region, bad_request, unavailable (etcd)",
            ["outcome"],
            registry=r,
        )
        self.heartbeats = Counter(
            "arena_directory_heartbeats",
            "POST /nodes/heartbeat answers by outcome (accepted or the error code; stale and "
            "replayed: refused as copies of earlier heartbeats)",
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
        for outcome in SEAT_OUTCOMES:
            self.seat_requests.labels(outcome)
        for outcome in HEARTBEAT_OUTCOMES:
            self.heartbeats.labels(outcome)
