"""What a node and the directory say to each other: the heartbeat and its acknowledgement.

``POST /nodes/heartbeat`` carries a :class:`Heartbeat` (compact JSON, signed by the node
with the cluster secret: ``server.directory.auth``); a 200 answer is a
:class:`HeartbeatAck`. ``docs/routing.md`` documents every field.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from shared.directory.common import (
    AMOUNT,
    COUNT,
    EPOCH,
    MAX_CLAIMED,
    MAX_COUNT,
    MAX_EPOCH,
    MAX_URL_CHARS,
    NODE_ID,
    REGION_NAME,
    RESERVATION_ID,
    ROLES,
    STATUSES,
    TEXT,
    NodeStatus,
    Role,
    invalid,
    is_amount,
    is_count,
    matching,
    object_of,
    url,
)

__all__ = ["Heartbeat", "HeartbeatAck"]

_NODE_ID = matching(NODE_ID, "1-64 letters, digits, '.', '_' or '-'")
_REGION = matching(REGION_NAME, "1-32 lowercase letters, digits, '_' or '-'")
_RESERVATION_ID = matching(RESERVATION_ID, "ids are 16 lowercase hex digits")
_ENDPOINT = url(("ws://", "wss://"), MAX_URL_CHARS)
_PROBE = url(("http://", "https://", "ws://", "wss://"), MAX_URL_CHARS)
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
_ALLOWED = frozenset((*_FIELDS, "group", "claimed"))


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """One ``POST /nodes/heartbeat`` body, validated on construction.

    ``group`` (optional): the node's replication group, for regions that run several
    primary/standby pairs; empty means "the region". ``claimed`` (optional): ids of the
    reservations the node admitted since its previous heartbeat; ``None`` when the node
    does not report them.
    """

    node_id: str
    region: str
    endpoint: str
    probe: str
    role: Role
    epoch: int
    matches: int
    players: int
    capacity: int
    group: str = ""
    claimed: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        _NODE_ID("node_id", self.node_id)
        _REGION("region", self.region)
        if self.group:
            _NODE_ID("group", self.group)
        _ENDPOINT("endpoint", self.endpoint)
        _PROBE("probe", self.probe)
        if self.role not in ROLES:
            raise invalid(f"role: expected 'primary' or 'standby', got {self.role!r}")
        EPOCH("epoch", self.epoch)
        COUNT("matches", self.matches)
        COUNT("players", self.players)
        COUNT("capacity", self.capacity)
        if self.claimed is not None:
            if not isinstance(self.claimed, tuple) or len(self.claimed) > MAX_CLAIMED:
                raise invalid(f"claimed: expected a list of at most {MAX_CLAIMED} ids")
            for rid in self.claimed:
                _RESERVATION_ID("claimed", rid)

    @classmethod
    def parse(cls, document: object) -> Heartbeat:
        """Validate a decoded JSON body; unknown and missing fields are refused."""
        body = object_of(document, "the heartbeat", _FIELDS, _ALLOWED)
        claimed = body.get("claimed")
        if claimed is not None:
            if not isinstance(claimed, list):
                raise invalid("claimed: expected a list of reservation ids")
            claimed = tuple(claimed)
        group = body.get("group", "")
        if not isinstance(group, str):
            raise invalid("group: expected a string")
        values: dict[str, Any] = {name: body[name] for name in _FIELDS}
        return cls(**values, group=group, claimed=claimed)

    def to_json(self) -> dict[str, object]:
        body: dict[str, object] = {name: getattr(self, name) for name in _FIELDS}
        if self.group:
            body["group"] = self.group
        if self.claimed is not None:
            body["claimed"] = list(self.claimed)
        return body

    def encode(self) -> bytes:
        """The compact JSON body, as it is signed and sent."""
        return json.dumps(self.to_json(), separators=(",", ":")).encode()

    @property
    def group_key(self) -> str:
        """The replication group epochs are compared in: ``group``, else the region."""
        return self.group or self.region


@dataclass(frozen=True, slots=True)
class HeartbeatAck:
    """The 200 answer to a heartbeat, checked for shape (types and ranges).

    ``status``: ``routable`` (a current primary), ``standby``, or ``fenced`` (a primary
    below its group's epoch ``group_epoch``: it gets no players and should stop serving).
    ``reserved``: seats handed out on the node that its heartbeats do not show yet.
    """

    node_id: str
    status: NodeStatus
    group_epoch: int
    reserved: int
    heartbeat_timeout_s: float

    def __post_init__(self) -> None:
        if (
            type(self.node_id) is str
            and self.status in STATUSES
            and is_count(self.group_epoch, MAX_EPOCH)
            and is_count(self.reserved, MAX_COUNT)
            and is_amount(self.heartbeat_timeout_s)
        ):
            return  # the fast path: the directory answers every heartbeat
        TEXT("node_id", self.node_id)
        if self.status not in STATUSES:
            raise invalid(f"status: expected one of {', '.join(STATUSES)}, got {self.status!r}")
        EPOCH("group_epoch", self.group_epoch)
        COUNT("reserved", self.reserved)
        AMOUNT("heartbeat_timeout_s", self.heartbeat_timeout_s)

    @classmethod
    def parse(cls, document: object) -> HeartbeatAck:
        """From a decoded 200 answer (fields it does not know are ignored)."""
        body = object_of(document, "the heartbeat's answer", _ACK_FIELDS)
        return cls(*(body[name] for name in _ACK_FIELDS))

    def to_json(self) -> dict[str, object]:
        return {"ok": True, **{name: getattr(self, name) for name in _ACK_FIELDS}}


_ACK_FIELDS = ("node_id", "status", "group_epoch", "reserved", "heartbeat_timeout_s")
