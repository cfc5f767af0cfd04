"""The directory's wire messages: validated on construction, strict requests, tolerant answers,
and every refusal one line that names the field."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.directory import (
    ErrorAnswer,
    Heartbeat,
    HeartbeatAck,
    MessageError,
    NodeSummary,
    RegionListing,
    RegionSummary,
    Seat,
    SeatRequest,
)
from tests.shared.heartbeats import beat


def body(**changes: Any) -> dict[str, Any]:
    document = beat().to_json()
    document.update(changes)
    return document


def refusal(parse: Any, document: Any) -> MessageError:
    with pytest.raises(MessageError) as error:
        parse(document)
    assert "\n" not in str(error.value)
    return error.value


# -- the heartbeat (a request: strict) ----------------------------------------------------


def test_a_heartbeat_round_trips_through_its_compact_json_body() -> None:
    original = beat(group="pair-a", claimed=("0123456789abcdef",))
    wire = original.encode()
    assert b" " not in wire
    assert Heartbeat.parse(json.loads(wire)) == original
    assert Heartbeat.parse(body()) == beat()
    assert "group" not in beat().to_json() and "claimed" not in beat().to_json()
    assert list(beat().to_json()) == [
        "node_id",
        "region",
        "endpoint",
        "probe",
        "role",
        "epoch",
        "matches",
        "players",
        "capacity",
    ]
    assert (beat().group_key, beat(group="pair-a").group_key) == ("eu", "pair-a")


@pytest.mark.parametrize(
    ("document", "code", "expected"),
    [
        ([], "malformed", "must be a JSON object"),
        ({"node_id": "eu-1"}, "invalid_field", "missing field(s): region, endpoint, probe"),
        (body(capcity=10), "invalid_field", "unknown field(s): capcity"),
        (body(node_id=""), "invalid_field", "node_id: 1-64 letters"),
        (body(node_id="eu 1"), "invalid_field", "node_id"),
        (body(node_id="x" * 65), "invalid_field", "node_id"),
        (body(region="EU"), "invalid_field", "region: 1-32 lowercase"),
        (body(endpoint="http://eu-1:7777/ws"), "invalid_field", "endpoint: expected a ws://"),
        (body(endpoint="ws://"), "invalid_field", "endpoint"),
        (body(endpoint="ws://a b/ws"), "invalid_field", "endpoint"),
        (body(probe="ftp://eu-1/"), "invalid_field", "probe"),
        (body(role="leader"), "invalid_field", "role: expected 'primary' or 'standby'"),
        (body(epoch=-1), "invalid_field", "epoch: -1 is outside"),
        (body(epoch=1.0), "invalid_field", "epoch: expected an integer, got float"),
        (body(players=True), "invalid_field", "players: expected an integer, got bool"),
        (body(capacity="300"), "invalid_field", "capacity: expected an integer"),
        (body(matches=-2), "invalid_field", "matches"),
        (body(group=5), "invalid_field", "group: expected a string"),
        (body(claimed="abc"), "invalid_field", "claimed: expected a list"),
        (body(claimed=["XYZ"]), "invalid_field", "claimed: ids are 16 lowercase hex digits"),
        (body(claimed=["0" * 16] * 5000), "invalid_field", "at most 4096"),
    ],
)
def test_bad_heartbeats_are_refused_with_a_code_and_one_line(
    document: Any, code: str, expected: str
) -> None:
    error = refusal(Heartbeat.parse, document)
    assert error.code == code
    assert expected in str(error)


def test_heartbeat_is_immutable_and_validated_on_construction() -> None:
    with pytest.raises(MessageError):
        replace(beat(), capacity=-1)
    with pytest.raises(AttributeError):
        beat().players = 3  # type: ignore[misc]


# -- the seat request (a request: strict) -------------------------------------------------

RTTS = {"eu": 30, "na": 90.5}


@pytest.mark.parametrize(
    ("document", "code", "message"),
    [
        ([], "malformed", "the request must be a JSON object"),
        ({"player": "x", "rtt_ms": RTTS, "z": 1}, "invalid_field", "unknown field(s): z"),
        ({"rtt_ms": RTTS}, "invalid_field", "player: expected 1-32 printable characters"),
        ({"player": "", "rtt_ms": RTTS}, "invalid_field", "player: expected 1-32 printable"),
        ({"player": "x" * 33, "rtt_ms": RTTS}, "invalid_field", "player: expected 1-32"),
        ({"player": "x\n", "rtt_ms": RTTS}, "invalid_field", "player: expected 1-32"),
        ({"player": 5, "rtt_ms": RTTS}, "invalid_field", "player: expected 1-32"),
        (
            {"player": "x"},
            "invalid_field",
            "rtt_ms: expected an object of region -> measured RTT in ms (GET /regions lists "
            "the probes to time)",
        ),
        ({"player": "x", "rtt_ms": {}}, "invalid_field", "rtt_ms: expected an object"),
        ({"player": "x", "rtt_ms": [1]}, "invalid_field", "rtt_ms: expected an object"),
        (
            {"player": "x", "rtt_ms": {str(i): 1 for i in range(65)}},
            "invalid_field",
            "rtt_ms: more than 64 regions",
        ),
        ({"player": "x", "rtt_ms": {"eu": True}}, "invalid_field", "rtt_ms.eu: expected a number"),
        ({"player": "x", "rtt_ms": {"eu": "3"}}, "invalid_field", "rtt_ms.eu: expected a number"),
        (
            {"player": "x", "rtt_ms": {"eu": -1}},
            "invalid_field",
            "rtt_ms.eu: must be between 0 and 10000 ms",
        ),
        ({"player": "x", "rtt_ms": {"eu": 1e9}}, "invalid_field", "rtt_ms.eu: must be between"),
        ({"player": "x", "rtt_ms": {"eu": math.nan}}, "invalid_field", "rtt_ms.eu: must be"),
    ],
)
def test_bad_seat_requests_are_refused_with_the_directorys_400s(
    document: Any, code: str, message: str
) -> None:
    error = refusal(SeatRequest.parse, document)
    assert error.code == code
    assert str(error).startswith(message)


def test_a_seat_request_keeps_its_own_copy_of_the_rtts_as_floats() -> None:
    rtts: dict[str, float] = {"eu": 30, "na": 90.5}
    request = SeatRequest("alice", rtts)
    rtts["eu"] = 1.0
    assert request.rtt_ms == {"eu": 30.0, "na": 90.5}
    assert all(type(v) is float for v in request.rtt_ms.values())
    assert SeatRequest.parse(request.to_json()) == request
    assert request.to_json() == {"player": "alice", "rtt_ms": {"eu": 30.0, "na": 90.5}}


# -- answers (checked for shape; unknown fields ignored) ------------------------------------

SEAT = Seat(
    player="alice",
    region="eu",
    node_id="eu-1",
    endpoint="ws://eu-1.test:7777/ws",
    epoch=2,
    rtt_ms=31.0,
    best_region="eu",
    best_rtt_ms=31.0,
    overflow=False,
    reservation="payload.signature",
    expires_at=1_800_000_010.0,
)


def test_a_seat_round_trips_with_the_wire_field_order_and_ignores_new_fields() -> None:
    document = SEAT.to_json()
    assert list(document) == [
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
    ]
    assert Seat.parse(json.loads(json.dumps(document))) == SEAT
    assert Seat.parse({**document, "added_later": 1}) == SEAT


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"epoch": "2"}, "epoch: expected an integer, got str"),
        ({"epoch": -1}, "epoch: -1 is outside"),
        ({"rtt_ms": None}, "rtt_ms: expected a number, got NoneType"),
        ({"best_rtt_ms": math.inf}, "best_rtt_ms: inf is not a finite number"),
        ({"overflow": "no"}, "overflow: expected true or false, got str"),
        ({"reservation": 7}, "reservation: expected a string"),
        ({"expires_at": True}, "expires_at: expected a number, got bool"),
    ],
)
def test_a_malformed_seat_is_one_line_naming_the_field(
    change: dict[str, Any], expected: str
) -> None:
    error = refusal(Seat.parse, {**SEAT.to_json(), **change})
    assert error.code == "invalid_field" and expected in str(error)


def test_a_seat_missing_fields_or_not_an_object_is_refused() -> None:
    document = SEAT.to_json()
    del document["reservation"], document["epoch"]
    assert str(refusal(Seat.parse, document)) == "missing field(s): epoch, reservation"
    assert refusal(Seat.parse, None).code == "malformed"


def test_the_heartbeat_ack_is_what_the_directory_answers() -> None:
    ack = HeartbeatAck("eu-1", "fenced", 3, 0, 1.5)
    document = ack.to_json()
    assert document == {
        "ok": True,
        "node_id": "eu-1",
        "status": "fenced",
        "group_epoch": 3,
        "reserved": 0,
        "heartbeat_timeout_s": 1.5,
    }
    assert HeartbeatAck.parse(document) == ack
    assert "status: expected one of routable, standby, fenced" in str(
        refusal(HeartbeatAck.parse, {**document, "status": "leader"})
    )
    assert "reserved" in str(refusal(HeartbeatAck.parse, {**document, "reserved": -1}))


def test_error_answers_carry_the_best_region_only_when_full() -> None:
    plain = ErrorAnswer("no_region", "none of the measured regions has a live primary node")
    assert plain.to_json() == {"error": "no_region", "message": plain.message}
    full = ErrorAnswer("no_capacity", "full; retry shortly", "eu", 30.0)
    assert list(full.to_json()) == ["error", "message", "best_region", "best_rtt_ms"]
    assert ErrorAnswer.parse(full.to_json()) == full
    assert ErrorAnswer.parse(plain.to_json()) == plain
    assert refusal(ErrorAnswer.parse, {"error": "x"}).code == "invalid_field"


def node(node_id: str) -> NodeSummary:
    return NodeSummary(node_id, f"ws://{node_id}/ws", f"http://{node_id}/p", 1, "eu", 2, 1, 10)


def test_a_region_listing_round_trips_and_names_the_bad_entry() -> None:
    eu = RegionSummary(
        region="eu",
        primary=node("eu-1"),
        primaries=(node("eu-1"),),
        standbys=(node("eu-2"),),
        fenced=(),
        probe="http://eu-1/p",
        probes=("http://eu-1/p", "http://eu-2/p"),
        players=2,
        reserved=1,
        capacity=10,
        load=0.3,
    )
    listing = RegionListing((eu,), 1.5, 1_800_000_000.123)
    document = json.loads(json.dumps(listing.to_json()))
    assert RegionListing.parse(document) == listing
    assert listing.probes() == {"eu": "http://eu-1/p"}
    document["regions"][0]["standbys"][0]["epoch"] = "one"
    assert str(refusal(RegionListing.parse, document)) == (
        "regions[0]: standbys[0]: epoch: expected an integer, got str"
    )
    assert "regions: expected a list" in str(
        refusal(RegionListing.parse, {**listing.to_json(), "regions": {}})
    )


# -- every message: what it writes, it reads back --------------------------------------------

NAMES = st.from_regex(r"[a-z][a-z0-9_-]{0,31}", fullmatch=True)
AMOUNTS = st.floats(min_value=0, max_value=1e12, allow_nan=False)


@settings(max_examples=100, deadline=None)
@given(
    player=st.text(min_size=1, max_size=32),
    region=NAMES,
    best=NAMES,
    epoch=st.integers(0, 2**53),
    rtt=AMOUNTS,
    best_rtt=AMOUNTS,
    expires=AMOUNTS,
)
def test_every_seat_round_trips_through_json(
    player: str, region: str, best: str, epoch: int, rtt: float, best_rtt: float, expires: float
) -> None:
    seat = replace(
        SEAT,
        player=player,
        region=region,
        best_region=best,
        epoch=epoch,
        rtt_ms=rtt,
        best_rtt_ms=best_rtt,
        overflow=region != best,
        expires_at=expires,
    )
    assert Seat.parse(json.loads(json.dumps(seat.to_json()))) == seat


@settings(max_examples=200, deadline=None)
# Keys without control characters: the refusal names unknown keys as they were sent.
@given(
    st.dictionaries(
        st.text(st.characters(blacklist_categories=("Cc", "Cs")), max_size=12),
        st.none() | st.integers() | st.text(max_size=4),
    )
)
def test_arbitrary_objects_are_refused_with_a_code_never_another_exception(
    document: dict[str, Any],
) -> None:
    for parse in (Heartbeat.parse, SeatRequest.parse, Seat.parse, RegionListing.parse):
        try:
            parse(document)
        except MessageError as error:
            assert error.code in {"malformed", "invalid_field"} and "\n" not in str(error)
