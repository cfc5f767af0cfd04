"""Who leads a region, and at which fencing epoch: the static and etcd coordinators."""

from __future__ import annotations

from server.coordination.base import (
    Coordinator,
    CoordinatorError,
    CoordinatorUnavailable,
    LeaderInfo,
    make_coordinator,
    parse_coordinator_spec,
)
from server.coordination.etcd import EtcdCoordinator
from server.coordination.static import StaticCoordinator

__all__ = [
    "Coordinator",
    "CoordinatorError",
    "CoordinatorUnavailable",
    "EtcdCoordinator",
    "LeaderInfo",
    "StaticCoordinator",
    "make_coordinator",
    "parse_coordinator_spec",
]
