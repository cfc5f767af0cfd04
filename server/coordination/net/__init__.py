"""The coordinators' asyncio clients, and the factory that picks one from
``--coordinator``."""

from __future__ import annotations

import ssl
from collections.abc import Sequence

from server.coordination.base import Coordinator, parse_coordinator_spec
from server.coordination.epochs import EpochStore
from server.coordination.etcd_config import DEFAULT_LEASE_TTL, EtcdAccess, EtcdCluster
from server.coordination.net.etcd import EtcdCoordinator
from server.coordination.net.static import StaticCoordinator

__all__ = ["EtcdCoordinator", "StaticCoordinator", "make_coordinator"]


def make_coordinator(
    spec: str,
    *,
    node_id: str,
    peers: Sequence[str] = (),
    region: str = "default",
    state_dir: str = "",
    tls: ssl.SSLContext | bool = True,
    etcd_access: EtcdAccess | None = None,
    etcd_lease_ttl: int = DEFAULT_LEASE_TTL,
) -> Coordinator:
    """Build the coordinator named by ``--coordinator`` (not started yet).

    ``peers`` are the other nodes' base URLs (used by ``static``); ``region`` names the etcd
    election key ``/arena/{region}/leader``; ``state_dir`` is where static keeps the epochs
    this node used (etcd's revisions never repeat on their own); ``tls`` is how static
    verifies an ``https://`` peer; ``etcd_access`` is how etcd is reached (TLS files, user:
    ``--etcd-*``); ``etcd_lease_ttl`` is the seconds the leader's lease outlives its last
    keep-alive (``--etcd-lease-ttl``).
    """
    kind, _ = parse_coordinator_spec(spec)
    if not node_id:
        raise ValueError("empty node id: every node of a region needs its own id")
    if kind == "static":
        epochs = EpochStore(state_dir, region, node_id)
        return StaticCoordinator(node_id, peers, epochs=epochs, tls=tls)
    cluster = EtcdCluster.from_address(spec, etcd_access)
    return EtcdCoordinator(cluster, region=region, node_id=node_id, ttl=etcd_lease_ttl)
