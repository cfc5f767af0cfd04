"""The directory's request logic without HTTP: exact answers on injected clocks."""

from __future__ import annotations

import json
from typing import Any

import pytest

from server.directory.auth import (
    HeartbeatSequence,
    Stamp,
    sign,
    sign_heartbeat,
    signed_heartbeat,
)
from server.directory.reservations import verify
from server.directory.service import Directory, DirectoryConfig
from shared.directory import Heartbeat, HeartbeatAck, RegionListing, Seat

SECRET = b"service-test-secret-0123456789"
WALL = 1_800_000_000.0
SEQUENCE = HeartbeatSequence(WALL)


class Clocks:
    def __init__(self) -> None:
        self.now = 100.0

    def monotonic(self) -> float:
        return self.now

    def wall(self) -> float:
        return WALL + self.now - 100.0


@pytest.fixture
def clocks() -> Clocks:
    return Clocks()


@pytest.fixture
def directory(clocks: Clocks) -> Directory:
    config = DirectoryConfig(secret=SECRET, heartbeat_timeout=1.5, reservation_ttl=10.0)
    return Directory(config, clocks.monotonic, clocks.wall)


def beat(node_id: str, region: str = "eu", **changes: Any) -> Heartbeat:
    fields: dict[str, Any] = {
        "node_id": node_id,
        "region": region,
        "endpoint": f"ws://{node_id}.test:7777/ws",
        "probe": f"http://{node_id}.test:7777/probe",
        "role": "primary",
        "epoch": 1,
        "matches": 1,
        "players": 0,
        "capacity": 1,
    }
    fields.update(changes)
    return Heartbeat(**fields)


def send(directory: Directory, heartbeat: Heartbeat) -> tuple[int, dict[str, object]]:
    """``heartbeat`` signed now (on the directory's clock) with the next sequence number."""
    body, headers = signed_heartbeat(
        SECRET, heartbeat, now=directory.wall(), sequence=SEQUENCE.next()
    )
    return directory.heartbeat(body, headers)


def stamped(body: bytes, signature: str, node: str = "eu-1", time_ms: int = 0) -> dict[str, str]:
    """Headers for ``body`` with ``signature`` and a fresh stamp (its time: WALL)."""
    return {
        "X-Arena-Signature": signature,
        "X-Arena-Node": node,
        "X-Arena-Time": str(time_ms or int(WALL * 1000)),
        "X-Arena-Sequence": str(SEQUENCE.next()),
    }


def signed(body: bytes, node: str = "eu-1") -> dict[str, str]:
    """Headers that sign ``body`` as a fresh heartbeat of ``node``."""
    headers = stamped(body, "", node)
    stamp = Stamp(node, int(headers["X-Arena-Time"]), int(headers["X-Arena-Sequence"]))
    return {**headers, "X-Arena-Signature": sign_heartbeat(SECRET, body, stamp)}


def test_a_heartbeat_is_acknowledged_and_a_deposed_primary_fenced(directory: Directory) -> None:
    status, answer = send(directory, beat("eu-1", epoch=2))
    assert status == 200
    assert answer == HeartbeatAck("eu-1", "routable", 2, 0, 1.5).to_json()
    assert send(directory, beat("eu-0", epoch=1)) == (
        200,
        HeartbeatAck("eu-0", "fenced", 2, 0, 1.5).to_json(),
    )


def test_heartbeats_are_authenticated_before_they_are_parsed(directory: Directory) -> None:
    body = b"not json at all"
    assert directory.heartbeat(body, {}) == (
        401,
        {"error": "unauthenticated", "message": "missing X-Arena-Signature header"},
    )
    no_stamp = {"X-Arena-Signature": sign(SECRET, body)}  # the body's MAC alone is not enough
    assert directory.heartbeat(body, no_stamp) == (
        401,
        {"error": "unauthenticated", "message": "missing X-Arena-Node header"},
    )
    assert directory.heartbeat(body, stamped(body, sign(SECRET, body)))[1]["error"] == (
        "bad_signature"
    )
    other = Stamp("eu-1", int(WALL * 1000), SEQUENCE.next())
    foreign = sign_heartbeat(b"another-secret-0123456789", body, other)
    assert directory.heartbeat(body, stamped(body, foreign))[0] == 401
    assert directory.heartbeat(body, signed(body)) == (
        400,
        {"error": "malformed", "message": "the body is not valid JSON"},
    )
    bad = json.dumps({**beat("eu-1").to_json(), "epoch": -1}).encode()
    status, answer = directory.heartbeat(bad, signed(bad))
    assert (status, answer["error"]) == (400, "invalid_field")
    good = beat("eu-1").encode()
    status, answer = directory.heartbeat(good, signed(good, node="eu-2"))
    assert (status, answer["error"]) == (400, "invalid_field")  # another node's stamp
    assert directory.registry.known == 0


def test_a_seat_is_a_signed_reservation_counted_against_its_node(
    directory: Directory, clocks: Clocks
) -> None:
    send(directory, beat("eu-1"))
    send(directory, beat("na-1", "na", capacity=5))
    status, answer = directory.seat({"player": "alice", "rtt_ms": {"eu": 30, "na": 60}})
    assert status == 200
    seat = Seat.parse(answer)
    assert (seat.region, seat.node_id, seat.rtt_ms, seat.overflow) == ("eu", "eu-1", 30.0, False)
    assert seat.expires_at == WALL + 10.0
    assert verify(SECRET, seat.reservation, "eu-1", WALL).player == "alice"
    # eu's only seat is reserved: bob overflows to na, within the 40 ms slack
    status, answer = directory.seat({"player": "bob", "rtt_ms": {"eu": 30, "na": 60}})
    assert (status, answer["region"], answer["overflow"], answer["best_region"]) == (
        200,
        "na",
        True,
        "eu",
    )
    assert directory.seat({"player": "carol", "rtt_ms": {"eu": 30, "na": 90}}) == (
        503,
        {
            "error": "no_capacity",
            "message": "every region within 40 ms of the best (eu, 30 ms) is full; retry shortly",
            "best_region": "eu",
            "best_rtt_ms": 30.0,
        },
    )
    assert directory.seat({"player": "dave", "rtt_ms": {"asia": 10}})[1]["error"] == "no_region"
    assert directory.seat({"player": "", "rtt_ms": {"eu": 1}})[0] == 400
    health = directory.health()
    assert (health["seats_granted"], health["seats_refused"]) == (2, 2)
    assert health["reservations_outstanding"] == 2


def test_the_listing_and_health_follow_liveness(directory: Directory, clocks: Clocks) -> None:
    send(directory, beat("eu-1"))
    send(directory, beat("eu-2", role="standby"))
    listing = RegionListing.parse(directory.regions())
    assert [r.region for r in listing.regions] == ["eu"]
    assert listing.regions[0].primary is not None
    assert listing.regions[0].primary.node_id == "eu-1"
    assert listing.generated_at == WALL
    clocks.now += 2.0  # both silent for longer than the 1.5 s timeout
    assert directory.regions()["regions"] == []
    assert directory.health()["nodes_live"] == 0
    directory.sweep()
    assert directory.health()["nodes_known"] == 0


def test_a_captured_heartbeat_sent_again_is_refused_and_counted(
    directory: Directory, clocks: Clocks
) -> None:
    body, headers = signed_heartbeat(
        SECRET, beat("eu-1"), now=directory.wall(), sequence=SEQUENCE.next()
    )
    assert directory.heartbeat(body, headers)[0] == 200
    status, answer = directory.heartbeat(body, headers)  # the same bytes, a second time
    assert (status, answer["error"]) == (401, "replayed")
    clocks.now += 1.4
    assert directory.heartbeat(body, headers)[1]["error"] == "replayed"
    # (the node itself goes on beating, each beat above the last)
    assert send(directory, beat("eu-1"))[0] == 200
    # Long after, the copy is stale whatever directory memory is left.
    clocks.now += 60
    assert directory.heartbeat(body, headers)[1]["error"] == "stale"
    assert directory.replays.refused == {"replayed": 2, "stale": 1}
    metrics = directory.metrics.registry
    assert (
        metrics.get_sample_value("arena_directory_heartbeats_total", {"outcome": "replayed"}) == 2
    )
    assert metrics.get_sample_value("arena_directory_heartbeats_total", {"outcome": "stale"}) == 1


def test_a_heartbeat_signed_too_far_from_the_directorys_clock_is_stale(
    directory: Directory,
) -> None:
    window = directory.config.heartbeat_window
    for offset, status in ((-window - 1, 401), (window + 1, 401), (-window + 1, 200)):
        body, headers = signed_heartbeat(
            SECRET, beat("eu-1"), now=directory.wall() + offset, sequence=SEQUENCE.next()
        )
        assert directory.heartbeat(body, headers)[0] == status, offset


def test_a_restarted_node_is_accepted_at_once(directory: Directory, clocks: Clocks) -> None:
    first_run = HeartbeatSequence(directory.wall())
    for _ in range(3):
        body, headers = signed_heartbeat(
            SECRET, beat("eu-1"), now=directory.wall(), sequence=first_run.next()
        )
        assert directory.heartbeat(body, headers)[0] == 200
        clocks.now += 0.5
    restarted = HeartbeatSequence(directory.wall())  # a new process: nothing remembered
    body, headers = signed_heartbeat(
        SECRET, beat("eu-1"), now=directory.wall(), sequence=restarted.next()
    )
    assert directory.heartbeat(body, headers)[0] == 200
