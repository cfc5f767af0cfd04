"""What a player (a bot) and the directory say to each other: the region listing, the seat
request and the seat.

``GET /regions`` answers a :class:`RegionListing` (what to probe, who is primary);
``POST /seat`` takes a :class:`SeatRequest` (the RTTs the player measured) and answers a
:class:`Seat` or an :class:`~shared.directory.common.ErrorAnswer`. ``docs/routing.md``
documents every field.

The request is checked strictly (the directory's 400s are these checks); answers are
checked for shape (types and ranges): the directory validated the names they carry when
the nodes registered.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from shared.directory.common import (
    AMOUNT,
    COUNT,
    EPOCH,
    MAX_COUNT,
    MAX_EPOCH,
    MAX_PLAYER_CHARS,
    MAX_RTT_ENTRIES,
    MAX_RTT_MS,
    OPTIONAL_TEXT,
    TEXT,
    MessageError,
    flag,
    invalid,
    is_amount,
    is_count,
    object_of,
)

__all__ = ["NodeSummary", "RegionListing", "RegionSummary", "Seat", "SeatRequest"]

_T = TypeVar("_T")
_RTT_RANGE = f"must be between 0 and {MAX_RTT_MS:g} ms"


_REQUEST_FIELDS = frozenset(("player", "rtt_ms"))


@dataclass(frozen=True, slots=True)
class SeatRequest:
    """``POST /seat``: ``player`` (1-32 printable characters) and the RTT in ms it measured
    to each region's probe (1-64 regions, each in [0, 10000]; kept as floats)."""

    player: str
    rtt_ms: Mapping[str, float]

    def __post_init__(self) -> None:
        player = self.player
        if (
            not isinstance(player, str)
            or not 1 <= len(player) <= MAX_PLAYER_CHARS
            or not player.isprintable()
        ):
            raise invalid(f"player: expected 1-{MAX_PLAYER_CHARS} printable characters")
        raw = self.rtt_ms
        if not (isinstance(raw, dict) or isinstance(raw, Mapping)) or not raw:
            raise invalid(
                "rtt_ms: expected an object of region -> measured RTT in ms (GET /regions "
                "lists the probes to time)"
            )
        if len(raw) > MAX_RTT_ENTRIES:
            raise invalid(f"rtt_ms: more than {MAX_RTT_ENTRIES} regions")
        rtts: dict[str, float] = {}
        for region, value in raw.items():
            if not isinstance(value, int | float) or isinstance(value, bool):
                raise invalid(f"rtt_ms.{str(region)[:32]}: expected a number of ms")
            if not 0 <= value <= MAX_RTT_MS:  # NaN fails both comparisons
                raise invalid(f"rtt_ms.{str(region)[:32]}: {_RTT_RANGE}")
            rtts[region] = float(value)
        object.__setattr__(self, "rtt_ms", rtts)  # a copy of our own, floats only

    @classmethod
    def parse(cls, document: object) -> SeatRequest:
        """From a decoded request body; unknown fields are refused."""
        body = object_of(document, "the request", (), _REQUEST_FIELDS)
        return cls(body.get("player"), body.get("rtt_ms"))  # type: ignore[arg-type]

    def to_json(self) -> dict[str, object]:
        return {"player": self.player, "rtt_ms": dict(self.rtt_ms)}


@dataclass(frozen=True, slots=True)
class Seat:
    """The 200 answer to ``POST /seat``: join ``endpoint`` (node ``node_id`` of ``region``,
    at ``epoch``) with ``reservation`` in the join's ``token`` before ``expires_at`` (unix
    seconds). ``rtt_ms`` is the RTT the player measured to ``region``;
    ``best_region``/``best_rtt_ms`` the nearest region in service (``overflow`` when they
    differ)."""

    player: str
    region: str
    node_id: str
    endpoint: str
    epoch: int
    rtt_ms: float
    best_region: str
    best_rtt_ms: float
    overflow: bool
    reservation: str
    expires_at: float

    def __post_init__(self) -> None:
        if (
            type(self.player) is str
            and type(self.region) is str
            and type(self.node_id) is str
            and type(self.endpoint) is str
            and is_count(self.epoch, MAX_EPOCH)
            and is_amount(self.rtt_ms)
            and type(self.best_region) is str
            and is_amount(self.best_rtt_ms)
            and type(self.overflow) is bool
            and type(self.reservation) is str
            and is_amount(self.expires_at)
        ):
            return  # the fast path: every seat the directory grants
        for name in ("player", "region", "node_id", "endpoint"):
            TEXT(name, getattr(self, name))
        EPOCH("epoch", self.epoch)
        AMOUNT("rtt_ms", self.rtt_ms)
        TEXT("best_region", self.best_region)
        AMOUNT("best_rtt_ms", self.best_rtt_ms)
        flag("overflow", self.overflow)
        TEXT("reservation", self.reservation)
        AMOUNT("expires_at", self.expires_at)

    @classmethod
    def parse(cls, document: object) -> Seat:
        """From a decoded 200 answer (fields it does not know are ignored)."""
        body = object_of(document, "the seat", _SEAT_FIELDS)
        return cls(*(body[name] for name in _SEAT_FIELDS))

    def to_json(self) -> dict[str, object]:
        return {name: getattr(self, name) for name in _SEAT_FIELDS}


_SEAT_FIELDS = (
    "player",
    "region",
    "node_id",
    "endpoint",
    "epoch",
    "rtt_ms",
    "best_region",
    "best_rtt_ms",
    "overflow",
    "reservation",
    "expires_at",
)


@dataclass(frozen=True, slots=True)
class NodeSummary:
    """One node in ``GET /regions``. ``group``: its replication group (the region when it
    has none); ``reserved``: seats handed out that its heartbeats do not show yet."""

    node_id: str
    endpoint: str
    probe: str
    epoch: int
    group: str
    players: int
    reserved: int
    capacity: int

    def __post_init__(self) -> None:
        if (
            type(self.node_id) is str
            and type(self.endpoint) is str
            and type(self.probe) is str
            and is_count(self.epoch, MAX_EPOCH)
            and type(self.group) is str
            and is_count(self.players, MAX_COUNT)
            and is_count(self.reserved, MAX_COUNT)
            and is_count(self.capacity, MAX_COUNT)
        ):
            return  # the fast path
        for name in ("node_id", "endpoint", "probe"):
            TEXT(name, getattr(self, name))
        EPOCH("epoch", self.epoch)
        TEXT("group", self.group)
        COUNT("players", self.players)
        COUNT("reserved", self.reserved)
        COUNT("capacity", self.capacity)

    @classmethod
    def parse(cls, document: object) -> NodeSummary:
        body = object_of(document, "a node", _NODE_FIELDS)
        return cls(*(body[name] for name in _NODE_FIELDS))

    def to_json(self) -> dict[str, object]:
        return {name: getattr(self, name) for name in _NODE_FIELDS}


_NODE_FIELDS = ("node_id", "endpoint", "probe", "epoch", "group", "players", "reserved", "capacity")


@dataclass(frozen=True, slots=True)
class RegionSummary:
    """One region in ``GET /regions``: its routable primaries (highest epoch first; the
    first is ``primary``, ``None`` during a failover), live standbys and fenced primaries,
    the probe to time (``probes``: every live node's), and load summed over the routable
    primaries (``load`` is ``None`` without capacity)."""

    region: str
    primary: NodeSummary | None
    primaries: tuple[NodeSummary, ...]
    standbys: tuple[NodeSummary, ...]
    fenced: tuple[NodeSummary, ...]
    probe: str | None
    probes: tuple[str, ...]
    players: int
    reserved: int
    capacity: int
    load: float | None

    def __post_init__(self) -> None:
        if (
            type(self.region) is str
            and (self.primary is None or type(self.primary) is NodeSummary)
            and _all_nodes(self.primaries)
            and _all_nodes(self.standbys)
            and _all_nodes(self.fenced)
            and (self.probe is None or type(self.probe) is str)
            and type(self.probes) is tuple
            and all(type(p) is str for p in self.probes)
            and is_count(self.players, MAX_COUNT)
            and is_count(self.reserved, MAX_COUNT)
            and is_count(self.capacity, MAX_COUNT)
            and (self.load is None or is_amount(self.load))
        ):
            return  # the fast path
        TEXT("region", self.region)
        if self.primary is not None and not isinstance(self.primary, NodeSummary):
            raise invalid("primary: expected a node or null")
        for name in ("primaries", "standbys", "fenced"):
            nodes = getattr(self, name)
            if not isinstance(nodes, tuple) or not all(isinstance(n, NodeSummary) for n in nodes):
                raise invalid(f"{name}: expected a list of nodes")
        OPTIONAL_TEXT("probe", self.probe)
        if not isinstance(self.probes, tuple) or not all(isinstance(p, str) for p in self.probes):
            raise invalid("probes: expected a list of URLs")
        COUNT("players", self.players)
        COUNT("reserved", self.reserved)
        COUNT("capacity", self.capacity)
        if self.load is not None:
            AMOUNT("load", self.load)

    @classmethod
    def parse(cls, document: object) -> RegionSummary:
        body = object_of(document, "a region", _REGION_FIELDS)
        primary = body["primary"]
        return cls(
            region=body["region"],
            primary=None if primary is None else _nested("primary", primary, NodeSummary.parse),
            primaries=_nodes("primaries", body["primaries"]),
            standbys=_nodes("standbys", body["standbys"]),
            fenced=_nodes("fenced", body["fenced"]),
            probe=body["probe"],
            probes=_items("probes", body["probes"], _probe),
            players=body["players"],
            reserved=body["reserved"],
            capacity=body["capacity"],
            load=body["load"],
        )

    def to_json(self) -> dict[str, object]:
        return {
            "region": self.region,
            "primary": None if self.primary is None else self.primary.to_json(),
            "primaries": [n.to_json() for n in self.primaries],
            "standbys": [n.to_json() for n in self.standbys],
            "fenced": [n.to_json() for n in self.fenced],
            "probe": self.probe,
            "probes": list(self.probes),
            "players": self.players,
            "reserved": self.reserved,
            "capacity": self.capacity,
            "load": self.load,
        }


_REGION_FIELDS = (
    "region",
    "primary",
    "primaries",
    "standbys",
    "fenced",
    "probe",
    "probes",
    "players",
    "reserved",
    "capacity",
    "load",
)


@dataclass(frozen=True, slots=True)
class RegionListing:
    """The 200 answer to ``GET /regions``: regions with a live node, sorted by name;
    ``generated_at`` in unix seconds."""

    regions: tuple[RegionSummary, ...]
    heartbeat_timeout_s: float
    generated_at: float

    def __post_init__(self) -> None:
        if not isinstance(self.regions, tuple) or not all(
            isinstance(r, RegionSummary) for r in self.regions
        ):
            raise invalid("regions: expected a list of regions")
        AMOUNT("heartbeat_timeout_s", self.heartbeat_timeout_s)
        AMOUNT("generated_at", self.generated_at)

    @classmethod
    def parse(cls, document: object) -> RegionListing:
        """From a decoded 200 answer (fields it does not know are ignored)."""
        body = object_of(document, "the region listing", _LISTING_FIELDS)
        return cls(
            _items("regions", body["regions"], RegionSummary.parse),
            body["heartbeat_timeout_s"],
            body["generated_at"],
        )

    def to_json(self) -> dict[str, object]:
        return {
            "regions": [region.to_json() for region in self.regions],
            "heartbeat_timeout_s": self.heartbeat_timeout_s,
            "generated_at": self.generated_at,
        }

    def probes(self) -> dict[str, str]:
        """Region -> the probe URL to time, for the regions that have one."""
        return {r.region: r.probe for r in self.regions if r.probe}


_LISTING_FIELDS = ("regions", "heartbeat_timeout_s", "generated_at")


def _nested(name: str, document: object, parse: Callable[[object], _T]) -> _T:
    """``parse(document)``, its error prefixed with where the document sits."""
    try:
        return parse(document)
    except MessageError as error:
        raise MessageError(f"{name}: {error}", code=error.code) from None


def _items(name: str, documents: Any, parse: Callable[[object], _T]) -> tuple[_T, ...]:
    if not isinstance(documents, list):
        raise invalid(f"{name}: expected a list")
    return tuple(_nested(f"{name}[{i}]", item, parse) for i, item in enumerate(documents))


def _all_nodes(nodes: object) -> bool:
    return type(nodes) is tuple and all(type(n) is NodeSummary for n in nodes)


def _probe(document: object) -> str:
    return TEXT("probe", document)


def _nodes(name: str, documents: object) -> tuple[NodeSummary, ...]:
    return _items(name, documents, NodeSummary.parse)
