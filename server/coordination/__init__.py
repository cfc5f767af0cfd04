"""Who leads a region, and at which fencing epoch.

The interface, its errors and the ``--coordinator`` grammar are here (:mod:`.base`); the
static and etcd coordinators, which talk to peers or to etcd, are in :mod:`.net`.
"""

from __future__ import annotations

from server.coordination.base import (
    Coordinator,
    CoordinatorError,
    CoordinatorUnavailable,
    LeaderInfo,
    RegionTaken,
    parse_coordinator_spec,
)

__all__ = [
    "Coordinator",
    "CoordinatorError",
    "CoordinatorUnavailable",
    "LeaderInfo",
    "RegionTaken",
    "parse_coordinator_spec",
]
