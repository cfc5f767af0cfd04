"""The directory's shared state in etcd as data: keys, transaction bodies and answers read,
exactly, without an etcd (the real one: ``tests/integration/test_directory_etcd.py``)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from server.coordination.etcd_gateway import key_values, range_op, txn_ranges
from server.directory.etcd_state import (
    GroupState,
    KeyLayout,
    LeaseBucket,
    Snapshot,
    StoredNode,
    StoredReservation,
    Written,
    delete_txns,
    heartbeat_outcome,
    heartbeat_result,
    heartbeat_txn,
    node_lease_ttl,
    read_snapshot,
    reserve_result,
    reserve_txn,
    snapshot_txn,
    to_settle,
)
from shared.directory import Heartbeat

LAYOUT = KeyLayout()
NOW = 1_800_000_000.0


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def unb64(text: str) -> str:
    return base64.b64decode(text).decode()


def beat(node_id: str = "eu-1", **changes: Any) -> Heartbeat:
    fields: dict[str, Any] = {
        "node_id": node_id,
        "region": "eu",
        "endpoint": f"ws://{node_id}.test:7777/ws",
        "probe": f"http://{node_id}.test:7777/probe",
        "role": "primary",
        "epoch": 1,
        "matches": 1,
        "players": 0,
        "capacity": 4,
    }
    fields.update(changes)
    return Heartbeat(**fields)


def kv(
    key: str, record: object, *, lease: int = 0, create: int = 1, mod: int = 1
) -> dict[str, Any]:
    """A key as etcd's gateway lists it: base64, int64s as strings, zero fields left out."""
    value = record if isinstance(record, str) else json.dumps(record)
    entry = {"key": b64(key), "value": b64(value), "create_revision": str(create)}
    entry["mod_revision"] = str(mod)
    if lease:
        entry["lease"] = str(lease)
    return entry


def ranges(*kvs: list[dict[str, Any]], revision: int = 50, **extra: Any) -> dict[str, Any]:
    responses = [{"response_range": {"kvs": k} if k else {}} for k in kvs]
    return {"header": {"revision": str(revision)}, "responses": responses, **extra}


def node_kv(b: Heartbeat, expires_at: float, lease: int = 7) -> dict[str, Any]:
    return kv(LAYOUT.node(b.node_id), {"beat": b.to_json(), "expires_at": expires_at}, lease=lease)


def reservation_kv(node: str, rid: str, player: str, expires_at: float, create: int) -> dict:
    record = {"expires_at": expires_at, "player": player, "region": "eu"}
    return kv(LAYOUT.reservation(node, rid), record, lease=9, create=create, mod=create)


# -- keys and the gateway's pieces ----------------------------------------------------------


def test_the_key_layout_and_lease_ttls() -> None:
    assert LAYOUT.node("eu-1") == "/arena-directory/nodes/eu-1"
    assert LAYOUT.group("eu", "eu") == "/arena-directory/groups/eu/eu"
    assert LAYOUT.seats("eu-1") == "/arena-directory/seats/eu-1"
    assert LAYOUT.reservation("eu-1", "ab" * 8) == f"/arena-directory/reservations/eu-1/{'ab' * 8}"
    assert LAYOUT.player("a/b c") == "/arena-directory/players/a%2Fb%20c"  # one path segment
    assert [node_lease_ttl(t) for t in (0.5, 1.5, 2.0, 3.0, 3.2)] == [2, 2, 2, 3, 4]


def test_a_prefix_range_ends_just_past_the_prefix() -> None:
    ranged = range_op("/arena-directory/nodes/", prefix=True)["request_range"]
    assert unb64(ranged["key"]) == "/arena-directory/nodes/"
    assert unb64(ranged["range_end"]) == "/arena-directory/nodes0"  # "/" + 1
    assert "range_end" not in range_op("/k")["request_range"]


def test_key_values_decode_the_gateways_strings_and_missing_fields() -> None:
    [one] = key_values([{"key": b64("/k"), "value": b64("v"), "mod_revision": "12"}])
    assert (one.key, one.value, one.lease, one.create_revision, one.mod_revision) == (
        "/k",
        b"v",
        0,
        0,
        12,
    )
    assert key_values(None) == []
    body: dict[str, Any] = {"responses": [{"response_put": {}}, {"response_range": {}}]}
    assert txn_ranges(body) == [[]]


# -- snapshots ------------------------------------------------------------------------------


def test_one_snapshot_transaction_reads_every_kind_of_record_at_one_revision() -> None:
    body = snapshot_txn(LAYOUT, "alice")
    assert body["compare"] == []
    keys = [unb64(op["request_range"]["key"]) for op in body["success"]]
    assert keys == [
        "/arena-directory/nodes/",
        "/arena-directory/groups/",
        "/arena-directory/reservations/",
        "/arena-directory/seats/",
        "/arena-directory/players/alice",
    ]
    assert "range_end" not in body["success"][4]["request_range"]  # the player's key alone
    assert len(snapshot_txn(LAYOUT)["success"]) == 4


def test_a_snapshot_gives_the_policy_the_registrys_views() -> None:
    eu1, eu2 = beat("eu-1"), beat("eu-2", role="standby", epoch=2)
    na1 = beat("na-1", region="na", capacity=2)
    answer = ranges(
        [node_kv(eu2, NOW + 1), node_kv(eu1, NOW + 1, lease=8), node_kv(na1, NOW - 1)],
        [kv(LAYOUT.group("eu", "eu"), {"epoch": 2}, mod=30)],
        [
            reservation_kv("eu-1", "b" * 16, "bob", NOW + 5, create=21),
            reservation_kv("eu-1", "a" * 16, "al", NOW + 5, create=22),
            reservation_kv("eu-1", "c" * 16, "cy", NOW, create=23),  # expired at NOW
        ],
        [kv(LAYOUT.seats("eu-1"), {"last": "a" * 16}, mod=22)],
        [kv(LAYOUT.player("al"), {"node": "eu-1", "reservation": "a" * 16}, mod=22)],
    )
    snapshot = read_snapshot(LAYOUT, answer)
    assert (snapshot.revision, snapshot.unreadable) == (50, 0)
    assert snapshot.nodes["eu-1"] == StoredNode(eu1, NOW + 1, 8)
    assert [r.id for r in snapshot.reservations["eu-1"]] == ["b" * 16, "a" * 16, "c" * 16]
    assert (snapshot.seats, snapshot.held, snapshot.held_revision) == (
        {"eu-1": 22},
        ("eu-1", "a" * 16),
        22,
    )
    eu, na = snapshot.views(NOW)
    assert (eu.name, [n.node_id for n in eu.nodes], eu.fences) == (
        "eu",
        ["eu-1", "eu-2"],
        {"eu": 2},
    )
    assert (eu.nodes[0].reserved, eu.nodes[0].expires_at, eu.nodes[1].role) == (
        2,
        NOW + 1,
        "standby",
    )
    assert (na.name, na.nodes[0].live(NOW), na.fences) == ("na", False, {})


def test_records_that_are_not_ours_are_skipped_and_counted() -> None:
    answer = ranges(
        [kv(LAYOUT.node("x"), "not json"), node_kv(beat("eu-2"), NOW)],
        [kv(LAYOUT.group("eu", "eu"), {"epoch": "high"})],
        [kv(LAYOUT.reservation("eu-2", "f" * 16), {"player": 3})],
        [],
    )
    snapshot = read_snapshot(LAYOUT, answer)
    assert (list(snapshot.nodes), snapshot.fences, snapshot.reservations) == (["eu-2"], {}, {})
    assert snapshot.unreadable == 3
    with pytest.raises(ValueError, match="four ranges"):
        read_snapshot(LAYOUT, ranges([]))


# -- seats ----------------------------------------------------------------------------------


def _snapshot(**changes: Any) -> Snapshot:
    fields: dict[str, Any] = {
        "revision": 40,
        "nodes": {"eu-1": StoredNode(beat(), NOW + 1, 7)},
        "fences": {},
        "reservations": {},
        "seats": {"eu-1": 33},
    }
    fields.update(changes)
    return Snapshot(**fields)


def _reserve(snapshot: Snapshot) -> dict[str, Any]:
    return reserve_txn(
        LAYOUT,
        snapshot,
        node_id="eu-1",
        rid="a" * 16,
        player="al",
        region="eu",
        expires_at=NOW + 10,
        lease=99,
    )


def test_a_seat_is_taken_only_while_the_nodes_seat_counter_is_at_the_revision_read() -> None:
    body = _reserve(_snapshot())
    assert body["compare"] == [
        {"key": b64("/arena-directory/seats/eu-1"), "target": "MOD", "mod_revision": "33"},
        {"key": b64("/arena-directory/players/al"), "target": "MOD", "mod_revision": "0"},
    ]
    puts = [op["request_put"] for op in body["success"]]
    assert [(unb64(p["key"]), p["lease"]) for p in puts] == [
        ("/arena-directory/seats/eu-1", "7"),  # the node's lease: gone with the node
        (f"/arena-directory/reservations/eu-1/{'a' * 16}", "99"),
        ("/arena-directory/players/al", "99"),
    ]
    assert json.loads(unb64(puts[1]["value"])) == {
        "expires_at": NOW + 10,
        "player": "al",
        "region": "eu",
    }
    # On a failed comparison the same transaction reads a fresh snapshot.
    assert body["failure"] == snapshot_txn(LAYOUT, "al")["success"]


def test_asking_again_releases_the_players_previous_seat() -> None:
    body = _reserve(_snapshot(held=("eu-2", "b" * 16), held_revision=31))
    assert body["compare"][1]["mod_revision"] == "31"
    assert body["success"][-1] == {
        "request_delete_range": {"key": b64(f"/arena-directory/reservations/eu-2/{'b' * 16}")}
    }
    # The same reservation again (a retried request) deletes nothing.
    same = _reserve(_snapshot(held=("eu-1", "a" * 16), held_revision=31))
    assert len(same["success"]) == 3


def test_a_reserve_answer_is_done_or_a_fresh_snapshot() -> None:
    assert reserve_result(LAYOUT, {"succeeded": True, "responses": []}) is None
    fresh = reserve_result(LAYOUT, ranges([node_kv(beat(), NOW + 1)], [], [], [], []))
    assert fresh is not None and list(fresh.nodes) == ["eu-1"] and fresh.held is None


def test_reservations_made_within_a_second_share_a_lease_that_outlives_them() -> None:
    bucket = LeaseBucket(10.0)
    assert bucket.ttl_s == 11 and LeaseBucket(0.5).ttl_s == 2
    assert bucket.current(100.0) is None
    bucket.granted(5, 100.0)
    assert (bucket.current(100.0), bucket.current(100.99)) == (5, 5)
    assert bucket.current(101.0) is None
    bucket.granted(6, 101.0)
    bucket.forget()
    assert bucket.current(101.1) is None


# -- heartbeats -----------------------------------------------------------------------------


def test_a_heartbeat_transaction_writes_node_and_group_if_the_group_is_unchanged() -> None:
    claimed = tuple(f"{i:016x}" for i in range(130))
    body = heartbeat_txn(
        LAYOUT,
        beat(claimed=claimed),
        expires_at=NOW + 3,
        lease=7,
        group=GroupState(1, 44),
        claimed=claimed,
    )
    group_key = b64("/arena-directory/groups/eu/eu")
    assert body["compare"] == [{"key": group_key, "target": "MOD", "mod_revision": "44"}]
    assert body["failure"] == [{"request_range": {"key": group_key}}]
    node, group, *deletes, last = body["success"]
    assert (node["request_put"]["lease"], node["request_put"]["prev_kv"]) == ("7", True)
    record = json.loads(unb64(node["request_put"]["value"]))
    assert record["expires_at"] == NOW + 3 and "claimed" not in record["beat"]
    assert Heartbeat.parse(record["beat"]) == beat()
    assert json.loads(unb64(group["request_put"]["value"])) == {"epoch": 1}
    assert len(deletes) == 100  # etcd allows 128 operations a transaction; the rest later
    assert unb64(last["request_range"]["key"]) == "/arena-directory/reservations/eu-1/"


@pytest.mark.parametrize(
    ("stored", "role", "epoch", "written", "status"),
    [
        (GroupState(0, 0), "primary", 3, 3, "routable"),  # a new group takes the epoch
        (GroupState(0, 0), "standby", 3, 0, "standby"),  # a standby announces none
        (GroupState(2, 9), "primary", 3, 3, "routable"),  # a promotion raises it
        (GroupState(4, 9), "primary", 3, 4, "fenced"),  # a deposed primary never lowers it
        (GroupState(4, 9), "standby", 1, 4, "standby"),
    ],
)
def test_group_epochs_follow_the_registrys_rule(
    stored: GroupState, role: str, epoch: int, written: int, status: str
) -> None:
    b = beat(role=role, epoch=epoch)
    body = heartbeat_txn(LAYOUT, b, expires_at=NOW, lease=7, group=stored)
    assert json.loads(unb64(body["success"][1]["request_put"]["value"])) == {"epoch": written}
    answer = {"succeeded": True, "header": {"revision": "60"}, "responses": []}
    result = heartbeat_result(answer, b, stored)
    assert isinstance(result, Written) and result.group == GroupState(written, 60)
    outcome = heartbeat_outcome(b, stored, result, (), NOW)
    assert (outcome.status, outcome.group_epoch, outcome.new_node) == (status, written, True)
    assert outcome.previous_group_epoch == (stored.epoch if stored.revision else None)


def test_a_heartbeat_answer_reports_the_previous_beat_and_the_outstanding_seats() -> None:
    before = beat(players=1)
    prev = node_kv(before, NOW)
    answer = {
        "succeeded": True,
        "header": {"revision": "61"},
        "responses": [
            {"response_put": {"prev_kv": prev}},
            {"response_put": {}},
            {
                "response_range": {
                    "kvs": [
                        reservation_kv("eu-1", "b" * 16, "bob", NOW + 5, create=12),
                        reservation_kv("eu-1", "a" * 16, "al", NOW + 5, create=11),
                        reservation_kv("eu-1", "c" * 16, "cy", NOW - 1, create=13),
                    ]
                }
            },
        ],
    }
    now_beat = beat(players=2)
    result = heartbeat_result(answer, now_beat, GroupState(1, 50))
    assert isinstance(result, Written) and result.previous == before
    assert [r.id for r in result.reservations] == ["a" * 16, "b" * 16, "c" * 16]
    # No ``claimed``: the rise in players settles the oldest (the registry's rule) ...
    assert to_settle(now_beat, result) == ("a" * 16,)
    outcome = heartbeat_outcome(now_beat, GroupState(1, 50), result, ("a" * 16,), NOW)
    assert (outcome.new_node, outcome.reserved, outcome.previous_group_epoch) == (False, 1, 1)
    # ... with ``claimed``, the ids past the first transaction's hundred that still exist.
    claimed = (*(f"{i:016x}" for i in range(100)), "b" * 16, "d" * 16)
    assert to_settle(beat(claimed=claimed), result) == ("b" * 16,)


def test_a_heartbeat_that_lost_the_race_for_its_group_reads_it_again() -> None:
    lost = ranges([kv(LAYOUT.group("eu", "eu"), {"epoch": 5}, mod=70)])
    assert heartbeat_result(lost, beat(), GroupState(1, 44)) == GroupState(5, 70)
    gone = ranges([])
    assert heartbeat_result(gone, beat(), GroupState(1, 44)) == GroupState(0, 0)


def test_settling_many_reservations_is_chunked_within_etcds_limit() -> None:
    rids = [f"{i:016x}" for i in range(250)]
    txns = delete_txns(LAYOUT, "eu-1", rids)
    assert [len(t["success"]) for t in txns] == [120, 120, 10]
    assert all(t["compare"] == [] for t in txns)
    assert delete_txns(LAYOUT, "eu-1", []) == []


def test_a_stored_reservation_counts_until_its_expiry() -> None:
    reservations = (StoredReservation("eu-1", "a" * 16, "al", NOW + 0.5, 3),)
    snapshot = _snapshot(reservations={"eu-1": reservations})
    assert [n.reserved for r in snapshot.views(NOW) for n in r.nodes] == [1]
    assert [n.reserved for r in snapshot.views(NOW + 0.5) for n in r.nodes] == [0]
