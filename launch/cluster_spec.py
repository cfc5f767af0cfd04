"""What ``arena-cluster`` starts: its regions and settings, validated before anything runs.

A :class:`ClusterSpec` comes from the command line or a ``--config`` JSON document
(:meth:`ClusterSpec.from_mapping`); a wrong one is a ValueError of one line for the user.
The node's own limits (matches, seats, tick rate) are :mod:`server.limits`'s, so a spec the
cluster accepts is one every node accepts; standbys and regions are the cluster's own
(what one machine holds).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from launch.supervisor import READY_WITHIN_S
from server import limits
from server.coordination.base import parse_coordinator_spec
from shared.geo import default_matrix, split_region

__all__ = [
    "LOG_LEVELS",
    "MAX_REGIONS",
    "MAX_STANDBYS",
    "ClusterSpec",
    "RegionSpec",
    "parse_regions",
]

#: Standbys per region and regions on one machine: each node is a process of its own.
MAX_STANDBYS = 8
MAX_REGIONS = 16
LOG_LEVELS = ("debug", "info", "warning", "error")
_STANDBYS = limits.Limit("standbys", 0, MAX_STANDBYS)


@dataclass(frozen=True, slots=True)
class RegionSpec:
    """A region ``name`` whose nodes stand for a data centre at ``location`` (a location of
    ``shared/data/latency_matrix.json``; the bots' latency model uses it)."""

    name: str
    location: str


def parse_regions(spec: str | list[str] | tuple[str, ...]) -> tuple[RegionSpec, ...]:
    """``"na,eu,us-east@na"`` (or the same as a list) -> region specs, in order.

    A region is named after its location (``na``, ``eu``, ``asia``...) or written
    ``name@location``; names are directory region names and unique. The same rules as
    :func:`shared.geo.parse_regions` (which the bots use). ValueError, one line.
    """
    known = default_matrix()
    items = spec.split(",") if isinstance(spec, str) else list(spec)
    if not items or not any(isinstance(i, str) and i.strip() for i in items):
        raise ValueError("regions: empty; expected e.g. 'na,eu,asia' or 'us-east@na,eu'")
    regions: dict[str, RegionSpec] = {}
    for item in items:
        if not isinstance(item, str) or not item.strip():
            raise ValueError(f"regions: empty or non-text entry in {spec!r}")
        name, location = split_region(item.strip(), known)
        if name in regions:
            raise ValueError(f"regions: {name!r} is given twice")
        regions[name] = RegionSpec(name, location)
    if len(regions) > MAX_REGIONS:
        raise ValueError(f"regions: at most {MAX_REGIONS} on one machine")
    return tuple(regions.values())


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    """Everything :func:`~launch.cluster_run.start_cluster` starts; validated on
    construction (ValueError, one line).

    ``matches``/``max_players``/``tick_rate``: passed to every node when set (``None``: the
    node's default). ``register``: give nodes ``--directory`` so that they heartbeat to the
    directory and check reservations (``None``, the default, means yes). ``log_dir``: where
    the children's logs go, one file each (``None``: this process's stderr).
    ``checkpoint_dir``: every node's ``--checkpoint-dir`` (``None``: no checkpoints).
    """

    regions: tuple[RegionSpec, ...]
    standbys: int = 1
    matches: int | None = None
    max_players: int | None = None
    tick_rate: int | None = None
    coordinator: str = "static"
    heartbeat_timeout: float = 1.5
    reservation_ttl: float = 10.0
    overflow_slack_ms: float = 40.0
    register: bool | None = None
    log_level: str = "warning"
    log_dir: Path | None = None
    checkpoint_dir: Path | None = None
    startup_timeout: float = READY_WITHIN_S
    stop_timeout: float = 5.0

    def __post_init__(self) -> None:
        if not self.regions:
            raise ValueError("regions: at least one")
        if len({r.name for r in self.regions}) != len(self.regions):
            raise ValueError("regions: every region name must be unique")
        for limit, count in (
            (_STANDBYS, self.standbys),
            (limits.MATCHES, self.matches),
            (limits.MAX_PLAYERS, self.max_players),
            (limits.TICK_RATE, self.tick_rate),
        ):
            if count is not None:
                limit.check(count)
        parse_coordinator_spec(self.coordinator)
        for name, value, high in (
            ("heartbeat timeout", self.heartbeat_timeout, 60.0),
            ("reservation TTL", self.reservation_ttl, 3600.0),
            ("startup timeout", self.startup_timeout, 3600.0),
            ("stop timeout", self.stop_timeout, 600.0),
        ):
            if not (math.isfinite(value) and 0 < value <= high):
                raise ValueError(f"{name}: {value:g} s is outside (0, {high:g}] s")
        if not (math.isfinite(self.overflow_slack_ms) and 0 <= self.overflow_slack_ms <= 10000):
            raise ValueError("overflow slack: must be between 0 and 10000 ms")
        if self.log_level not in LOG_LEVELS:
            raise ValueError(f"log level: {self.log_level!r} is not one of {', '.join(LOG_LEVELS)}")

    @classmethod
    def from_mapping(cls, document: Mapping[str, Any]) -> ClusterSpec:
        """From a config document (``--config FILE``): the command line's fields with ``_``
        for ``-``; ``regions`` as a string or a list. Unknown fields are refused."""
        if not isinstance(document, Mapping):
            raise ValueError("config: expected a JSON object")
        known = {f.name for f in fields(cls)}
        unknown = sorted(str(k) for k in document if k not in known)
        if unknown:
            raise ValueError(
                f"config: unknown field(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})"
            )
        if "regions" not in document:
            raise ValueError("config: 'regions' is missing (e.g. \"na,eu,asia\")")
        values = dict(document)
        values["regions"] = parse_regions(values["regions"])
        for folder in ("log_dir", "checkpoint_dir"):
            if values.get(folder) is not None:
                values[folder] = Path(str(values[folder]))
        for name, kind in (
            ("standbys", int),
            ("matches", int),
            ("max_players", int),
            ("tick_rate", int),
            ("heartbeat_timeout", float),
            ("reservation_ttl", float),
            ("overflow_slack_ms", float),
            ("startup_timeout", float),
            ("stop_timeout", float),
        ):
            value = values.get(name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"config: {name} must be a number, got {value!r}")
            if kind is int and value != int(value):
                raise ValueError(f"config: {name} must be a whole number, got {value!r}")
            values[name] = kind(value)
        for name in ("coordinator", "log_level"):
            if name in values and not isinstance(values[name], str):
                raise ValueError(f"config: {name} must be a string")
        if values.get("register") not in (None, True, False):
            raise ValueError("config: register must be true, false or null")
        return cls(**values)
