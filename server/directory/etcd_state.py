"""The directory's registry and reservations kept in etcd, as data (sans-I/O).

Several ``arena-directory --registry etcd://HOST:PORT`` processes share one etcd; this module
says what they store where, builds the transactions (bodies of etcd's v3 JSON gateway, made
with :mod:`server.coordination.etcd_gateway`) and reads the answers. No I/O and no clock:
the edge (:mod:`server.directory.net.etcd`) sends the bodies and passes ``now`` in unix
seconds, because directories on several machines share no monotonic clock.

Keys, under ``/arena-directory/`` (``docs/routing.md``, "Several directories over etcd"):

* ``nodes/{node_id}``: the node's last heartbeat and the time it stops counting as live, on
  the node's lease (TTL: the heartbeat timeout rounded up, at least etcd's 2 s). Each beat
  keeps that lease alive, so a node that stops beating disappears with its lease.
* ``groups/{region}/{group}``: the highest epoch a primary of the replication group
  announced, rewritten by every member's beat on that member's lease (so it lives while any
  member beats). Only a transaction that compares its ``mod_revision`` changes it: two
  directories cannot lower it by racing.
* ``seats/{node_id}``: the node's seat counter. A reservation rewrites it in a transaction
  that compares its ``mod_revision`` with the one read when the seat was chosen, so of two
  directories that chose the same last seat only one gets it (fencing by revision); the
  other reads again and chooses again.
* ``reservations/{node_id}/{id}``: one outstanding seat, on a lease of the reservation TTL
  plus at most :data:`LEASE_SPAN_S` (the reservations made within that span share a lease);
  the node's ``claimed`` ids delete them.
* ``players/{player}``: the player's current reservation, so that asking again (at this or
  another directory, e.g. after one died before answering) releases the previous seat.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from server.coordination.etcd_gateway import (
    KeyValue,
    compare_mod_revision,
    delete_op,
    gateway_int,
    key_values,
    put_op,
    range_op,
    txn_body,
    txn_ranges,
)
from server.directory.policy import NodeView, RegionView
from server.directory.registry import HeartbeatOutcome
from shared.directory import Heartbeat, MessageError, NodeStatus

__all__ = [
    "LEASE_SPAN_S",
    "GroupState",
    "KeyLayout",
    "LeaseBucket",
    "Snapshot",
    "StoredNode",
    "StoredReservation",
    "Written",
    "delete_txns",
    "heartbeat_outcome",
    "heartbeat_result",
    "heartbeat_txn",
    "node_lease_ttl",
    "read_snapshot",
    "reserve_result",
    "reserve_txn",
    "snapshot_txn",
    "to_settle",
]

#: Reservations made within this many seconds share one lease (one grant a second, not one
#: per seat); each key so lives between its TTL and its TTL plus this span in etcd, while
#: its ``expires_at`` says exactly when it stops counting.
LEASE_SPAN_S = 1.0
_ETCD_MIN_TTL_S = 2  # etcd 3.4 raises shorter leases to this with its default raft timings
# etcd refuses transactions of more than 128 operations (--max-txn-ops): a heartbeat's
# transaction carries at most this many deletes, the rest go in follow-ups of _CHUNK.
_FIRST_DELETES = 100
_CHUNK = 120


def node_lease_ttl(heartbeat_timeout: float) -> int:
    """Whole seconds a node's lease lives without a beat: the timeout rounded up (>= 2)."""
    return max(_ETCD_MIN_TTL_S, math.ceil(heartbeat_timeout))


@dataclass(frozen=True, slots=True)
class KeyLayout:
    """Where each record lives; ``root`` ends with ``/``."""

    root: str = "/arena-directory/"

    @property
    def nodes(self) -> str:
        return f"{self.root}nodes/"

    @property
    def groups(self) -> str:
        return f"{self.root}groups/"

    @property
    def seat_counters(self) -> str:
        return f"{self.root}seats/"

    @property
    def all_reservations(self) -> str:
        return f"{self.root}reservations/"

    def node(self, node_id: str) -> str:
        return f"{self.nodes}{node_id}"

    def group(self, region: str, group: str) -> str:
        return f"{self.groups}{region}/{group}"

    def seats(self, node_id: str) -> str:
        return f"{self.seat_counters}{node_id}"

    def reservations(self, node_id: str) -> str:
        return f"{self.all_reservations}{node_id}/"

    def reservation(self, node_id: str, rid: str) -> str:
        return f"{self.reservations(node_id)}{rid}"

    def player(self, player: str) -> str:
        # Node ids, regions, groups and reservation ids never hold "/"; a player name may.
        return f"{self.root}players/{quote(player, safe='')}"


@dataclass(frozen=True, slots=True)
class StoredNode:
    beat: Heartbeat
    expires_at: float  # unix seconds: live while now <= expires_at
    lease: int


@dataclass(frozen=True, slots=True)
class StoredReservation:
    node_id: str
    id: str
    player: str
    expires_at: float  # unix seconds: counts while now < expires_at
    create_revision: int  # the order they were made in


@dataclass(frozen=True, slots=True)
class GroupState:
    """A replication group's remembered epoch and the revision it was written at (0: no
    key, a group nobody in it beats for)."""

    epoch: int
    revision: int


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything a seat decision needs, read at one etcd revision."""

    revision: int
    nodes: Mapping[str, StoredNode]
    fences: Mapping[tuple[str, str], int]  # (region, group) -> epoch
    reservations: Mapping[str, tuple[StoredReservation, ...]]  # node id -> its seats
    seats: Mapping[str, int]  # node id -> its seat counter's mod_revision
    held: tuple[str, str] | None = None  # the asking player's (node id, reservation id)
    held_revision: int = 0  # the player key's mod_revision (0: none)
    unreadable: int = 0  # records skipped because they are not ours to parse

    def views(self, now: float) -> tuple[RegionView, ...]:
        """The nodes as the policy sees them (as :meth:`Registry.views` lays them out)."""
        by_region: dict[str, list[NodeView]] = {}
        for node_id, stored in self.nodes.items():
            beat = stored.beat
            reserved = sum(1 for r in self.reservations.get(node_id, ()) if now < r.expires_at)
            by_region.setdefault(beat.region, []).append(
                NodeView.of(beat, reserved, stored.expires_at)
            )
        return tuple(
            RegionView(
                region,
                tuple(sorted(by_region[region], key=lambda n: n.node_id)),
                {g: e for (r, g), e in self.fences.items() if r == region},
            )
            for region in sorted(by_region)
        )


def _json(value: bytes) -> dict[str, Any]:
    record = json.loads(value)
    if not isinstance(record, dict):
        raise ValueError("not a JSON object")
    return record


def _record(document: dict[str, object]) -> bytes:
    return json.dumps(document, sort_keys=True, separators=(",", ":")).encode()


def _stored_node(kv: KeyValue) -> StoredNode:
    record = _json(kv.value)
    expires_at = record["expires_at"]
    if not isinstance(expires_at, int | float):
        raise ValueError("expires_at: not a number")
    return StoredNode(Heartbeat.parse(record["beat"]), float(expires_at), kv.lease)


def _reservation(node_id: str, rid: str, kv: KeyValue) -> StoredReservation:
    record = _json(kv.value)
    player, expires_at = record["player"], record["expires_at"]
    if not isinstance(player, str) or not isinstance(expires_at, int | float):
        raise ValueError("not a reservation record")
    return StoredReservation(node_id, rid, player, float(expires_at), kv.create_revision)


def _group(kv: KeyValue) -> GroupState:
    epoch = _json(kv.value)["epoch"]
    if not isinstance(epoch, int) or isinstance(epoch, bool):
        raise ValueError("epoch: not an integer")
    return GroupState(epoch, kv.mod_revision)


_UNREADABLE = (ValueError, KeyError, TypeError, MessageError)

# -- reading every record -----------------------------------------------------------------


def _snapshot_ranges(layout: KeyLayout, player: str | None) -> list[dict[str, Any]]:
    ranges = [
        range_op(layout.nodes, prefix=True),
        range_op(layout.groups, prefix=True),
        range_op(layout.all_reservations, prefix=True),
        range_op(layout.seat_counters, prefix=True),
    ]
    if player is not None:
        ranges.append(range_op(layout.player(player)))
    return ranges


def snapshot_txn(layout: KeyLayout, player: str | None = None) -> dict[str, Any]:
    """One transaction reading nodes, groups, reservations, seat counters (and ``player``'s
    reservation): a snapshot at a single revision."""
    return txn_body([], _snapshot_ranges(layout, player))


def read_snapshot(layout: KeyLayout, body: dict[str, Any]) -> Snapshot:
    """The :class:`Snapshot` in the answer to :func:`snapshot_txn` (or to a failed
    :func:`reserve_txn`, whose failure branch reads the same)."""
    ranged = txn_ranges(body)
    if len(ranged) < 4:
        raise ValueError("a snapshot answer without its four ranges")
    unreadable = 0
    nodes: dict[str, StoredNode] = {}
    for kv in ranged[0]:
        try:
            stored = _stored_node(kv)
        except _UNREADABLE:
            unreadable += 1
            continue
        if kv.key == layout.node(stored.beat.node_id):
            nodes[stored.beat.node_id] = stored
        else:
            unreadable += 1
    fences: dict[tuple[str, str], int] = {}
    for kv in ranged[1]:
        region, _, group = kv.key.removeprefix(layout.groups).partition("/")
        try:
            fences[(region, group)] = _group(kv).epoch
        except _UNREADABLE:
            unreadable += 1
    reservations: dict[str, list[StoredReservation]] = {}
    for kv in ranged[2]:
        node_id, _, rid = kv.key.removeprefix(layout.all_reservations).partition("/")
        try:
            reservation = _reservation(node_id, rid, kv)
        except _UNREADABLE:
            unreadable += 1
            continue
        reservations.setdefault(node_id, []).append(reservation)
    seats = {kv.key.removeprefix(layout.seat_counters): kv.mod_revision for kv in ranged[3]}
    held, held_revision = None, 0
    if len(ranged) > 4 and ranged[4]:
        kv = ranged[4][0]
        held_revision = kv.mod_revision
        try:
            record = _json(kv.value)
            held = (str(record["node"]), str(record["reservation"]))
        except _UNREADABLE:
            unreadable += 1
    return Snapshot(
        revision=gateway_int(body.get("header", {}).get("revision")),
        nodes=nodes,
        fences=fences,
        reservations={
            n: tuple(sorted(rs, key=lambda r: r.create_revision)) for n, rs in reservations.items()
        },
        seats=seats,
        held=held,
        held_revision=held_revision,
        unreadable=unreadable,
    )


# -- seats ----------------------------------------------------------------------------------


def reserve_txn(
    layout: KeyLayout,
    snapshot: Snapshot,
    *,
    node_id: str,
    rid: str,
    player: str,
    region: str,
    expires_at: float,
    lease: int,
) -> dict[str, Any]:
    """Take one seat on ``node_id`` for ``player`` if nobody took one there (and the player
    asked nowhere else) since ``snapshot`` was read; otherwise read a fresh snapshot.

    Succeeds only while the node's seat counter and the player's key are at the revisions
    the snapshot saw; then it bumps the counter (on the node's lease), writes the
    reservation and the player's key (on ``lease``) and releases the player's previous
    reservation.
    """
    node = snapshot.nodes[node_id]
    compare = [
        compare_mod_revision(layout.seats(node_id), snapshot.seats.get(node_id, 0)),
        compare_mod_revision(layout.player(player), snapshot.held_revision),
    ]
    success = [
        put_op(layout.seats(node_id), _record({"last": rid}), lease=node.lease),
        put_op(
            layout.reservation(node_id, rid),
            _record({"expires_at": expires_at, "player": player, "region": region}),
            lease=lease,
        ),
        put_op(layout.player(player), _record({"node": node_id, "reservation": rid}), lease=lease),
    ]
    if snapshot.held is not None and snapshot.held != (node_id, rid):
        success.append(delete_op(layout.reservation(*snapshot.held)))
    return txn_body(compare, success, _snapshot_ranges(layout, player))


def reserve_result(layout: KeyLayout, body: dict[str, Any]) -> Snapshot | None:
    """None when :func:`reserve_txn` took the seat, else the fresh snapshot it read."""
    if body.get("succeeded"):
        return None
    return read_snapshot(layout, body)


class LeaseBucket:
    """The reservation lease of the current :data:`LEASE_SPAN_S` (on the caller's clock):
    reservations made at ``now`` go on a lease granted at most one span earlier with a TTL
    of their TTL plus the span, so the lease outlives each of them."""

    def __init__(self, reservation_ttl: float) -> None:
        self.ttl_s = max(_ETCD_MIN_TTL_S, math.ceil(reservation_ttl + LEASE_SPAN_S))
        self._lease = 0
        self._since = -math.inf

    def current(self, now: float) -> int | None:
        """The lease to use at ``now``; None: grant one (``ttl_s``) and call :meth:`granted`."""
        return self._lease if self._lease and now < self._since + LEASE_SPAN_S else None

    def granted(self, lease: int, now: float) -> None:
        self._lease, self._since = lease, now

    def forget(self) -> None:
        """The lease is gone (etcd said so): grant a new one next time."""
        self._lease, self._since = 0, -math.inf


# -- heartbeats -----------------------------------------------------------------------------


def _next_epoch(group: GroupState, beat: Heartbeat) -> int:
    """The group's epoch once ``beat`` is counted (the registry's rule)."""
    if group.revision == 0:
        return beat.epoch if beat.role == "primary" else 0
    if beat.role == "primary" and beat.epoch > group.epoch:
        return beat.epoch
    return group.epoch


def heartbeat_txn(
    layout: KeyLayout,
    beat: Heartbeat,
    *,
    expires_at: float,
    lease: int,
    group: GroupState,
    claimed: Sequence[str] = (),
) -> dict[str, Any]:
    """Record ``beat`` on the node's ``lease`` if its group is still as ``group`` says.

    Success writes the node (returning its previous record), the group's epoch, deletes
    the first claimed reservations (at most ``_FIRST_DELETES``; :func:`delete_txns` for the
    rest) and reads the node's reservations; failure reads the group again.
    """
    stored = dataclasses.replace(beat, claimed=None)
    group_key = layout.group(beat.region, beat.group_key)
    success = [
        put_op(
            layout.node(beat.node_id),
            _record({"beat": stored.to_json(), "expires_at": expires_at}),
            lease=lease,
            prev_kv=True,
        ),
        put_op(group_key, _record({"epoch": _next_epoch(group, beat)}), lease=lease),
        *(delete_op(layout.reservation(beat.node_id, rid)) for rid in claimed[:_FIRST_DELETES]),
        range_op(layout.reservations(beat.node_id), prefix=True),
    ]
    return txn_body(
        [compare_mod_revision(group_key, group.revision)], success, [range_op(group_key)]
    )


@dataclass(frozen=True, slots=True)
class Written:
    """A heartbeat recorded: the node's previous beat (None: new to etcd), its outstanding
    reservations (oldest first) and the group as now stored."""

    previous: Heartbeat | None
    reservations: tuple[StoredReservation, ...]
    group: GroupState


def heartbeat_result(
    body: dict[str, Any], beat: Heartbeat, group: GroupState
) -> Written | GroupState:
    """:class:`Written` when :func:`heartbeat_txn` succeeded; else the group as it is now
    (build the transaction again with it)."""
    if not body.get("succeeded"):
        kvs = txn_ranges(body)
        found = kvs[0] if kvs else []
        try:
            return _group(found[0]) if found else GroupState(0, 0)
        except _UNREADABLE:
            return GroupState(0, found[0].mod_revision)  # overwritten by the retry
    responses = body.get("responses") or []
    previous = None
    prev_kv = responses[0].get("response_put", {}).get("prev_kv") if responses else None
    if prev_kv:
        try:
            previous = _stored_node(key_values([prev_kv])[0]).beat
        except _UNREADABLE:
            previous = None
    node_id = beat.node_id
    ranged = txn_ranges(body)
    reservations = []
    for kv in ranged[0] if ranged else []:
        rid = kv.key.rpartition("/")[2]
        try:
            reservations.append(_reservation(node_id, rid, kv))
        except _UNREADABLE:
            continue
    revision = gateway_int(body.get("header", {}).get("revision"))
    return Written(
        previous,
        tuple(sorted(reservations, key=lambda r: r.create_revision)),
        GroupState(_next_epoch(group, beat), revision),
    )


def to_settle(beat: Heartbeat, written: Written) -> tuple[str, ...]:
    """Reservations the beat shows taken that its transaction did not delete: the claimed
    ids past the first transaction's share, or (a beat without ``claimed``) the oldest as
    many as ``players`` rose by (the registry's rule)."""
    if beat.claimed is not None:
        left = set(beat.claimed[_FIRST_DELETES:])
        return tuple(r.id for r in written.reservations if r.id in left)
    if written.previous is None:
        return ()
    joined = beat.players - written.previous.players
    return tuple(r.id for r in written.reservations[: max(0, joined)])


def delete_txns(layout: KeyLayout, node_id: str, rids: Sequence[str]) -> list[dict[str, Any]]:
    """Transactions deleting these reservations of ``node_id`` (each within etcd's limit)."""
    return [
        txn_body([], [delete_op(layout.reservation(node_id, rid)) for rid in rids[i : i + _CHUNK]])
        for i in range(0, len(rids), _CHUNK)
    ]


def heartbeat_outcome(
    beat: Heartbeat, before: GroupState, written: Written, settled: Sequence[str], now: float
) -> HeartbeatOutcome:
    """What the beat changed, as :meth:`Registry.heartbeat` reports it. ``before``: the group
    the successful transaction compared against; ``settled``: ids deleted after it."""
    epoch = written.group.epoch
    status: NodeStatus
    if beat.role == "standby":
        status = "standby"
    else:
        status = "routable" if beat.epoch >= epoch else "fenced"
    gone = set(settled)
    live = sum(1 for r in written.reservations if now < r.expires_at and r.id not in gone)
    return HeartbeatOutcome(
        status=status,
        group_epoch=epoch,
        new_node=written.previous is None,
        previous_group_epoch=before.epoch if before.revision else None,
        reserved=live,
    )
