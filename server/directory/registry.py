"""The directory's memory of nodes: heartbeats, liveness, epochs and outstanding seats.

Sans-I/O: every method takes ``now`` (seconds on one monotonic clock of the caller's
choosing) and nothing here reads a clock, sleeps or touches a socket.

* A node is live while ``now <= last heartbeat + heartbeat_timeout``. :meth:`Registry.sweep`
  forgets nodes that went silent; until then views still carry them, marked by
  ``expires_at``, and the policy skips them.
* Epoch fencing per replication group (a primary and its standbys; by default the whole
  region is one group): the highest epoch any primary of the group announced is remembered
  as long as some member of the group keeps heartbeating. A primary below it is deposed
  and never routed to, even after its successor falls silent. A group whose members all
  fell silent is forgotten, so a cluster restarted from epoch 1 is routed again.
* Reservations: every seat handed out counts against its node until it expires or the
  node's heartbeat shows it taken. A node that lists the reservation ids it admitted in
  ``claimed`` gets exact accounting; otherwise each heartbeat's rise in ``players`` settles
  that many of the oldest reservations. A player holds at most one reservation: asking
  again releases the previous one.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from server.directory.policy import ROLES, NodeView, RegionView, routable_nodes
from server.directory.reservations import SIGNATURE_HEADER, sign

__all__ = [
    "Heartbeat",
    "HeartbeatAck",
    "HeartbeatError",
    "Registry",
    "region_summary",
    "regions_summary",
]

_NODE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_REGION = re.compile(r"[a-z][a-z0-9_-]{0,31}")
_RESERVATION_ID = re.compile(r"[0-9a-f]{16}")
_URL_SCHEMES = {
    "endpoint": ("ws://", "wss://"),
    "probe": ("http://", "https://", "ws://", "wss://"),
}
_MAX_URL = 256
_MAX_COUNT = 10_000_000
_MAX_EPOCH = 2**53
_MAX_CLAIMED = 4096
_FIELDS = (
    "node_id",
    "region",
    "endpoint",
    "probe",
    "role",
    "epoch",
    "matches",
    "players",
    "capacity",
)
_OPTIONAL = ("group", "claimed")


class HeartbeatError(ValueError):
    """A heartbeat body the directory refuses (400). ``code``: ``malformed`` (not a JSON
    object) or ``invalid_field`` (the message names the field)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def _invalid(message: str) -> HeartbeatError:
    return HeartbeatError("invalid_field", message)


def _count(name: str, value: object, lo: int, hi: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise _invalid(f"{name}: expected an integer, got {type(value).__name__}")
    if not lo <= value <= hi:
        raise _invalid(f"{name}: {value} is outside [{lo}, {hi}]")
    return value


def _text(name: str, value: object, pattern: re.Pattern[str], rule: str) -> str:
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise _invalid(f"{name}: {rule}")
    return value


def _url(name: str, value: object) -> str:
    schemes = _URL_SCHEMES[name]
    if (
        not isinstance(value, str)
        or len(value) > _MAX_URL
        or not value.startswith(schemes)
        or not value.split("://", 1)[1].split("/", 1)[0]
        or any(c.isspace() or not c.isprintable() for c in value)
    ):
        raise _invalid(f"{name}: expected a {'/'.join(schemes)} URL of at most {_MAX_URL} chars")
    return value


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """One ``POST /nodes/heartbeat`` body, validated on construction.

    ``group`` (optional): the node's replication group, for regions that run several
    primary/standby pairs; empty means "the region". ``claimed`` (optional): ids
    (:attr:`Reservation.id <server.directory.reservations.Reservation.id>`) of the
    reservations the node admitted since its previous heartbeat; ``None`` when the node
    does not report them.
    """

    node_id: str
    region: str
    endpoint: str
    probe: str
    role: Literal["primary", "standby"]
    epoch: int
    matches: int
    players: int
    capacity: int
    group: str = ""
    claimed: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        _text("node_id", self.node_id, _NODE_ID, "1-64 letters, digits, '.', '_' or '-'")
        _text("region", self.region, _REGION, "1-32 lowercase letters, digits, '_' or '-'")
        if self.group:
            _text("group", self.group, _NODE_ID, "1-64 letters, digits, '.', '_' or '-'")
        _url("endpoint", self.endpoint)
        _url("probe", self.probe)
        if self.role not in ROLES:
            raise _invalid(f"role: expected 'primary' or 'standby', got {self.role!r}")
        _count("epoch", self.epoch, 0, _MAX_EPOCH)
        for name in ("matches", "players", "capacity"):
            _count(name, getattr(self, name), 0, _MAX_COUNT)
        if self.claimed is not None:
            if not isinstance(self.claimed, tuple) or len(self.claimed) > _MAX_CLAIMED:
                raise _invalid(f"claimed: expected a list of at most {_MAX_CLAIMED} ids")
            for rid in self.claimed:
                _text("claimed", rid, _RESERVATION_ID, "ids are 16 lowercase hex digits")

    @classmethod
    def parse(cls, document: object) -> Heartbeat:
        """Validate a decoded JSON body; unknown and missing fields are refused."""
        if not isinstance(document, dict):
            raise HeartbeatError("malformed", "the heartbeat must be a JSON object")
        missing = [name for name in _FIELDS if name not in document]
        if missing:
            raise _invalid(f"missing field(s): {', '.join(missing)}")
        unknown = sorted(str(k)[:32] for k in document if k not in _FIELDS + _OPTIONAL)
        if unknown:
            raise _invalid(f"unknown field(s): {', '.join(unknown[:8])}")
        claimed = document.get("claimed")
        if claimed is not None:
            if not isinstance(claimed, list):
                raise _invalid("claimed: expected a list of reservation ids")
            claimed = tuple(claimed)
        group = document.get("group", "")
        if not isinstance(group, str):
            raise _invalid("group: expected a string")
        values: dict[str, Any] = {name: document[name] for name in _FIELDS}
        return cls(**values, group=group, claimed=claimed)

    def to_json(self) -> dict[str, object]:
        body: dict[str, object] = {name: getattr(self, name) for name in _FIELDS}
        if self.group:
            body["group"] = self.group
        if self.claimed is not None:
            body["claimed"] = list(self.claimed)
        return body

    def encode(self) -> bytes:
        """The compact JSON body to sign (:func:`~.reservations.sign`) and send."""
        return json.dumps(self.to_json(), separators=(",", ":")).encode()

    def signed(self, secret: bytes | str) -> tuple[bytes, dict[str, str]]:
        """``(body, headers)`` for ``POST /nodes/heartbeat``, signed with the cluster secret."""
        body = self.encode()
        headers = {"Content-Type": "application/json", SIGNATURE_HEADER: sign(secret, body)}
        return body, headers

    @property
    def group_key(self) -> str:
        return self.group or self.region


@dataclass(frozen=True, slots=True)
class HeartbeatAck:
    """What a heartbeat changed. ``status``: ``routable`` (a current primary), ``standby``
    or ``fenced`` (a primary below its group's epoch: it should stop serving)."""

    status: Literal["routable", "standby", "fenced"]
    group_epoch: int
    new_node: bool
    previous_group_epoch: int | None
    reserved: int


@dataclass(slots=True)
class _Node:
    beat: Heartbeat
    last_seen: float
    # reservation id -> expiry (registry clock)
    reservations: dict[str, float] = field(default_factory=dict)
    view: NodeView | None = None  # cached until the node changes


@dataclass(slots=True)
class _Group:
    epoch: int
    last_seen: float


class Registry:
    """Nodes by id, their liveness, group epochs and outstanding reservations.

    Views are cached per node and per region and rebuilt only where something changed, so
    a seat request costs the same with 5 nodes or 500.
    """

    def __init__(self, heartbeat_timeout: float = 1.5) -> None:
        if not math.isfinite(heartbeat_timeout) or heartbeat_timeout <= 0:
            raise ValueError("heartbeat_timeout must be a positive number of seconds")
        self.heartbeat_timeout = heartbeat_timeout
        self._nodes: dict[str, _Node] = {}
        self._by_region: dict[str, dict[str, _Node]] = {}
        self._groups: dict[tuple[str, str], _Group] = {}
        self._players: dict[str, tuple[str, str]] = {}  # player -> (node_id, reservation id)
        self._owner: dict[str, str] = {}  # reservation id -> player
        # (expires, node_id, reservation id) in issue order: expiries rise with it (one
        # TTL, a monotonic clock), so the expired ones are at the front. Should a caller
        # break that order, a reservation is dropped late (counted too long), never early.
        self._expiry: deque[tuple[float, str, str]] = deque()
        self._region_views: dict[str, RegionView] = {}
        self._dirty: set[str] = set()
        self._views: tuple[RegionView, ...] | None = ()

    def _touch(self, node: _Node) -> None:
        node.view = None
        self._dirty.add(node.beat.region)
        self._views = None

    # -- heartbeats ------------------------------------------------------------------------

    def heartbeat(self, beat: Heartbeat, now: float) -> HeartbeatAck:
        """Record ``beat`` as received at ``now``."""
        self._expire(now)
        previous = self._nodes.get(beat.node_id)
        key = (beat.region, beat.group_key)
        group = self._groups.get(key)
        if group is not None and group.last_seen + self.heartbeat_timeout < now:
            group = None  # every member fell silent meanwhile: a fresh start
        before = group.epoch if group is not None else None
        if group is None:
            group = self._groups[key] = _Group(beat.epoch if beat.role == "primary" else 0, now)
        elif beat.role == "primary" and beat.epoch > group.epoch:
            group.epoch = beat.epoch
        group.last_seen = now
        if before != group.epoch:
            self._dirty.add(beat.region)
        if previous is None:
            node = self._nodes[beat.node_id] = _Node(beat, now)
        else:
            node = previous
            self._touch(node)
            self._settle(node, beat)
            if previous.beat.region != beat.region:  # moved: leave the old region
                self._by_region[previous.beat.region].pop(beat.node_id, None)
            node.beat, node.last_seen = beat, now
        self._by_region.setdefault(beat.region, {})[beat.node_id] = node
        self._touch(node)
        if beat.role == "standby":
            status: Literal["routable", "standby", "fenced"] = "standby"
        else:
            status = "routable" if beat.epoch >= group.epoch else "fenced"
        return HeartbeatAck(
            status=status,
            group_epoch=group.epoch,
            new_node=previous is None,
            previous_group_epoch=before,
            reserved=len(node.reservations),
        )

    def _settle(self, node: _Node, beat: Heartbeat) -> None:
        """Take off the reservations the new heartbeat shows as players."""
        if beat.claimed is not None:
            for rid in beat.claimed:
                if rid in node.reservations:
                    self._release(node, rid)
            return
        joined = beat.players - node.beat.players
        # dicts keep insertion order: the oldest reservations come first
        for rid in list(itertools.islice(node.reservations, max(0, joined))):
            self._release(node, rid)

    def _release(self, node: _Node, rid: str) -> None:
        if node.reservations.pop(rid, None) is not None:
            self._touch(node)
        player = self._owner.pop(rid, None)
        if player is not None and self._players.get(player, ("", ""))[1] == rid:
            del self._players[player]

    def _expire(self, now: float) -> None:
        expiry = self._expiry
        while expiry and expiry[0][0] <= now:
            expires, node_id, rid = expiry.popleft()
            node = self._nodes.get(node_id)
            if node is not None and node.reservations.get(rid) == expires:
                self._release(node, rid)

    # -- reservations ----------------------------------------------------------------------

    def reserve(
        self, node_id: str, reservation_id: str, player: str, now: float, ttl: float
    ) -> None:
        """Count a seat on ``node_id`` for ``player`` until ``now + ttl`` (or until settled).

        The player's previous outstanding reservation, if any, is released.
        """
        node = self._nodes.get(node_id)
        if node is None:
            raise KeyError(f"unknown node {node_id!r}")
        held = self._players.pop(player, None)
        if held is not None:
            other = self._nodes.get(held[0])
            if other is not None:
                self._release(other, held[1])
        self._release(node, reservation_id)
        node.reservations[reservation_id] = now + ttl
        self._expiry.append((now + ttl, node_id, reservation_id))
        self._players[player] = (node_id, reservation_id)
        self._owner[reservation_id] = player
        self._touch(node)

    # -- time ------------------------------------------------------------------------------

    def sweep(self, now: float) -> list[Heartbeat]:
        """Forget nodes silent for longer than the timeout (returns their last heartbeats),
        groups with no live member and reservations that expired."""
        self._expire(now)
        gone = [n for n in self._nodes.values() if n.last_seen + self.heartbeat_timeout < now]
        for node in gone:
            for rid in list(node.reservations):
                self._release(node, rid)
            self._touch(node)
            del self._nodes[node.beat.node_id]
            members = self._by_region[node.beat.region]
            del members[node.beat.node_id]
            if not members:
                del self._by_region[node.beat.region]
        for key, group in list(self._groups.items()):
            if group.last_seen + self.heartbeat_timeout < now:
                del self._groups[key]
                self._dirty.add(key[0])
                self._views = None
        return [node.beat for node in gone]

    # -- views -----------------------------------------------------------------------------

    def _view(self, node: _Node) -> NodeView:
        if node.view is None:
            beat = node.beat
            node.view = NodeView(
                node_id=beat.node_id,
                region=beat.region,
                endpoint=beat.endpoint,
                role=beat.role,
                epoch=beat.epoch,
                players=beat.players,
                capacity=beat.capacity,
                reserved=len(node.reservations),
                expires_at=node.last_seen + self.heartbeat_timeout,
                group=beat.group,
                probe=beat.probe,
            )
        return node.view

    def views(self, now: float) -> tuple[RegionView, ...]:
        """Every stored node as the policy sees it, grouped by region (sorted by name).

        Reservations expired by ``now`` are dropped on the way. Fences of groups whose
        members all fell silent are still listed: they can only concern stale nodes.
        """
        self._expire(now)
        if self._dirty:
            for region in self._dirty:
                members = self._by_region.get(region, {})
                nodes = sorted((self._view(n) for n in members.values()), key=_node_id)
                if not nodes:
                    self._region_views.pop(region, None)
                    continue
                fences = {g: e.epoch for (r, g), e in self._groups.items() if r == region}
                self._region_views[region] = RegionView(region, tuple(nodes), fences)
            self._dirty.clear()
            self._views = None
        if self._views is None:
            self._views = tuple(self._region_views[name] for name in sorted(self._region_views))
        return self._views

    def node(self, node_id: str, now: float) -> NodeView | None:
        """One stored node's view, or None."""
        self._expire(now)
        node = self._nodes.get(node_id)
        return None if node is None else self._view(node)

    @property
    def known(self) -> int:
        """Nodes stored (live or not yet swept)."""
        return len(self._nodes)

    @property
    def outstanding(self) -> int:
        """Reservations held (some may have expired since the last sweep)."""
        return len(self._owner)


def _node_id(view: NodeView) -> str:
    return view.node_id


def region_summary(region: RegionView, now: float) -> dict[str, object]:
    """One region for ``GET /regions``: live nodes only, see ``docs/routing.md``."""
    routable = routable_nodes(region, now)
    routable_ids = {n.node_id for n in routable}
    live = [n for n in region.nodes if n.live(now)]
    standbys = [n for n in live if n.role == "standby"]
    fenced = [n for n in live if n.role == "primary" and n.node_id not in routable_ids]
    ordered = sorted(routable, key=lambda n: (-n.epoch, n.node_id))
    players = sum(n.players for n in routable)
    reserved = sum(n.reserved for n in routable)
    capacity = sum(n.capacity for n in routable)
    probe_nodes = ordered or live
    return {
        "region": region.name,
        "primary": _describe(ordered[0]) if ordered else None,
        "primaries": [_describe(n) for n in ordered],
        "standbys": [_describe(n) for n in standbys],
        "fenced": [_describe(n) for n in fenced],
        "probe": probe_nodes[0].probe if probe_nodes else None,
        "probes": sorted({n.probe for n in live}),
        "players": players,
        "reserved": reserved,
        "capacity": capacity,
        "load": round((players + reserved) / capacity, 4) if capacity else None,
    }


def _describe(node: NodeView) -> dict[str, object]:
    return {
        "node_id": node.node_id,
        "endpoint": node.endpoint,
        "probe": node.probe,
        "epoch": node.epoch,
        "group": node.group_key,
        "players": node.players,
        "reserved": node.reserved,
        "capacity": node.capacity,
    }


def regions_summary(views: Iterable[RegionView], now: float) -> list[dict[str, object]]:
    """``GET /regions``' list: regions with at least one live node, sorted by name."""
    return [
        region_summary(region, now)
        for region in views
        if any(node.live(now) for node in region.nodes)
    ]
