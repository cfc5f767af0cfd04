"""The coordinators' asyncio clients, and the factory that picks one from
``--coordinator``."""

from __future__ import annotations

from collections.abc import Sequence

from server.coordination.base import Coordinator, parse_coordinator_spec
from server.coordination.epochs import EpochStore
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
) -> Coordinator:
    """Build the coordinator named by ``--coordinator`` (not started yet).

    ``peers`` are the other nodes' base URLs (used by ``static``); ``region`` names the etcd
    election key ``/arena/{region}/leader``; ``state_dir`` is where static keeps the epochs
    this node used (etcd's revisions never repeat on their own).
    """
    kind, endpoint = parse_coordinator_spec(spec)
    if not node_id:
        raise ValueError("empty node id: every node of a region needs its own id")
    if kind == "static":
        return StaticCoordinator(node_id, peers, epochs=EpochStore(state_dir, region, node_id))
    assert endpoint is not None
    return EtcdCoordinator(endpoint, region=region, node_id=node_id)
