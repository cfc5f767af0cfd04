"""The wire codec: round trips, the spliced snapshot, quantisation and every rejection path."""

from __future__ import annotations

import math
import struct
from typing import Any

import msgpack
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from server.sim.input_frames import PAYLOAD_MIN_BYTES
from shared import protocol
from shared.protocol import (
    ENTITY_DTYPE,
    MAX_CLIENT_FRAME_BYTES,
    MAX_SERVER_FRAME_BYTES,
    ErrorMessage,
    FrameTooLarge,
    InputMessage,
    InvalidField,
    JoinMessage,
    MalformedFrame,
    PingMessage,
    PongMessage,
    ProtocolError,
    SnapshotMessage,
    TokenMessage,
    UnknownMessageType,
    WelcomeMessage,
    decode_client,
    decode_server,
    encode,
    encode_input,
    encode_snapshot,
    encode_snapshot_body,
    pack_entities,
    unpack_entities,
)
from shared.protocol.events import JoinEvent, SnapshotEvent
from tests.shared.strategies import snapshot_events

U32 = 2**32 - 1
MAX_SEQ = 2**31 - 1
MAX_TICK = 2**53

# -- strategies ---------------------------------------------------------------------------


def finite(lo: float | None = None, hi: float | None = None) -> st.SearchStrategy[float]:
    return st.floats(min_value=lo, max_value=hi, allow_nan=False, allow_infinity=False)


def ints_as_floats(lo: int, hi: int) -> st.SearchStrategy[float]:
    """Numbers that are valid float fields but arrive as msgpack ints."""
    return st.integers(lo, hi)


short_text = st.text(max_size=32)
ascii_token = st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126), max_size=64)

joins = st.builds(
    JoinMessage,
    v=st.integers(0, 65535),
    name=short_text,
    token=st.none() | ascii_token,
    interp_delay=finite(0.0, 1.0),
)
inputs = st.builds(
    InputMessage,
    seq=st.integers(0, MAX_SEQ),
    tick=st.integers(0, MAX_TICK),
    move=st.tuples(finite(-1e6, 1e6), finite(-1e6, 1e6)),
    yaw=finite(),
    pitch=finite(),
    buttons=st.integers(0, 255),
    view_time=finite(0.0, 1e9),
    ack_tick=st.integers(-1, MAX_TICK),
)
pings = st.builds(PingMessage, id=st.integers(0, U32), t=finite())
welcomes = st.builds(
    WelcomeMessage,
    v=st.integers(0, 65535),
    player_id=st.integers(0, 65535),
    tick_rate=st.integers(1, 1000),
    tick=st.integers(0, MAX_TICK),
    server_time=finite(0.0),
    token=ascii_token,
    map=st.text(max_size=64),
    region=st.text(max_size=64),
    epoch=st.integers(0, 2**63 - 1),
    standbys=st.lists(st.text(max_size=40), max_size=5).map(tuple),
)
events = snapshot_events
snapshots = st.builds(
    SnapshotMessage,
    tick=st.integers(0, MAX_TICK),
    server_time=finite(0.0),
    epoch=st.integers(0, 2**63 - 1),
    ack=st.integers(-1, U32),
    you=st.tuples(*[finite(-1e9, 1e9)] * 6),
    entities=st.binary(max_size=26 * 8),
    events=events.map(tuple),
)
pongs = st.builds(PongMessage, id=st.integers(0, U32), t=finite(), server_time=finite(0.0))
errors = st.builds(
    ErrorMessage, code=st.text(max_size=64), message=st.text(max_size=256), fatal=st.booleans()
)
tokens = st.builds(TokenMessage, token=ascii_token)
sightings = st.builds(
    protocol.SightingMessage,
    seq=st.integers(0, U32),
    target=st.integers(0, 65535),
    seen=st.tuples(*[finite(-1e6, 1e6)] * 3),
)


def frame(**fields: Any) -> bytes:
    return msgpack.packb(fields, use_bin_type=True)


def valid_input_fields(**overrides: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "type": "input",
        "seq": 7,
        "tick": 100,
        "ack_tick": 98,
        "move": [0.5, -0.5],
        "yaw": 0.25,
        "pitch": -0.1,
        "buttons": 1,
        "view_time": 1.5,
    }
    fields.update(overrides)
    return fields


def bits(value: float) -> bytes:
    return struct.pack(">d", value)


# -- round trips --------------------------------------------------------------------------


@given(st.one_of(joins, inputs, pings, sightings))
def test_every_client_message_round_trips(message: protocol.Message) -> None:
    data = encode(message)
    assert len(data) <= MAX_CLIENT_FRAME_BYTES
    assert decode_client(data) == message


@given(sightings)
def test_a_sighting_is_charged_to_the_small_frames_budget_not_the_inputs(
    message: protocol.SightingMessage,
) -> None:
    """Frames are charged by size before they are decoded (server/sim/input_budget.py):
    a sighting must never be as long as the shortest input, or it would eat the inputs'."""
    assert len(encode(message)) < PAYLOAD_MIN_BYTES


@given(st.one_of(welcomes, snapshots, pongs, errors, tokens))
def test_every_server_message_round_trips(message: protocol.Message) -> None:
    assert decode_server(encode(message)) == message


def test_a_token_message_is_its_token_and_nothing_else() -> None:
    message = TokenMessage("body.mac")
    assert msgpack.unpackb(encode(message)) == {"type": "token", "token": "body.mac"}
    assert decode_server(encode(message)) == message
    with pytest.raises(InvalidField, match="token"):
        decode_server(frame(type="token", token="x" * 513))  # longer than a join may carry
    with pytest.raises(InvalidField, match="missing"):
        decode_server(frame(type="token"))
    with pytest.raises(UnknownMessageType):
        decode_client(encode(message))  # a server's message only


@given(
    seq=st.integers(0, MAX_SEQ),
    tick=st.integers(0, MAX_TICK),
    move=st.tuples(finite(-1.0, 1.0) | ints_as_floats(-1, 1), finite(-1.0, 1.0)),
    yaw=finite(-math.pi, math.pi) | ints_as_floats(-3, 3),
    pitch=finite(-1.5, 1.5),
    buttons=st.integers(0, 255),
    view_time=finite(0.0, 1e9) | ints_as_floats(0, 10**9),
    ack_tick=st.integers(-1, MAX_TICK),
)
def test_encode_input_is_byte_identical_to_encoding_an_input_message(
    seq: int,
    tick: int,
    move: tuple[float, float],
    yaw: float,
    pitch: float,
    buttons: int,
    view_time: float,
    ack_tick: int,
) -> None:
    args = dict(
        seq=seq,
        tick=tick,
        move=move,
        yaw=yaw,
        pitch=pitch,
        buttons=buttons,
        view_time=view_time,
        ack_tick=ack_tick,
    )
    assert encode_input(**args) == encode(InputMessage(**args))


def test_encode_input_accepts_numpy_floats_like_a_bot_computes_them() -> None:
    move = np.array([0.25, -0.75], dtype=np.float32)
    frame_ = encode_input(
        seq=1,
        tick=2,
        move=(move[0], move[1]),
        yaw=np.float32(0.5),
        pitch=np.float64(0.0),
        buttons=0,
        view_time=1.0,
        ack_tick=1,
    )
    assert decode_client(frame_) == InputMessage(1, 2, (0.25, -0.75), 0.5, 0.0, 0, 1.0, 1)


# -- the spliced snapshot -----------------------------------------------------------------


@given(
    tick=st.integers(0, MAX_TICK),
    server_time=finite(0.0),
    epoch=st.integers(0, 2**63 - 1),
    ack=st.integers(-1, U32),
    you=st.lists(finite(-1e9, 1e9), min_size=6, max_size=6),
    entities=st.binary(max_size=26 * 4),
    events=events,
)
def test_spliced_snapshot_decodes_to_the_same_message(
    tick: int,
    server_time: float,
    epoch: int,
    ack: int,
    you: list[float],
    entities: bytes,
    events: list[SnapshotEvent],
) -> None:
    body = encode_snapshot_body(tick, server_time, epoch, entities, events)
    decoded = decode_server(encode_snapshot(body, ack, np.array(you, dtype=np.float64)))
    assert isinstance(decoded, SnapshotMessage)
    assert decoded == SnapshotMessage(tick, server_time, epoch, ack, tuple(you), entities, events)
    # Full float64 precision, down to the sign of zero.
    assert [bits(v) for v in decoded.you] == [bits(v) for v in you]
    assert bits(decoded.server_time) == bits(server_time)


def test_spliced_snapshot_is_the_same_map_as_a_plain_encoded_one() -> None:
    you = (1.0 / 3.0, -2.0e-300, 0.0, -0.0, 6.0, 1e9)
    events = [JoinEvent(3)]
    body = encode_snapshot_body(42, 0.7, 3, b"\x01\x02", events)
    spliced = msgpack.unpackb(encode_snapshot(body, 9, np.array(you)), raw=False)
    plain = msgpack.unpackb(encode(SnapshotMessage(42, 0.7, 3, 9, you, b"\x01\x02", events)))
    assert spliced == plain


def test_one_body_serves_every_client_with_its_own_header() -> None:
    body = encode_snapshot_body(10, 10 / 60, 0, b"", [])
    a = decode_server(encode_snapshot(body, 1, np.arange(6.0)))
    b = decode_server(encode_snapshot(body, -1, -np.arange(6.0)))
    assert (a.ack, a.you) == (1, (0.0, 1.0, 2.0, 3.0, 4.0, 5.0))
    assert (b.ack, b.you) == (-1, (-0.0, -1.0, -2.0, -3.0, -4.0, -5.0))
    assert a.tick == b.tick == 10


# -- entity quantisation ------------------------------------------------------------------


def angle_difference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.abs((a - b + math.pi) % (2 * math.pi) - math.pi)


@given(st.integers(0, 40), st.integers(0, 2**32 - 1))
def test_entities_round_trip_within_the_documented_quantisation(n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    ids = rng.choice(65536, size=n, replace=False)
    pos = rng.uniform(-1000.0, 1000.0, size=(n, 3))
    vel = rng.uniform(-60.0, 60.0, size=(n, 3))
    yaw = rng.uniform(-math.pi, math.pi, size=n)
    pitch = rng.uniform(-math.pi / 2, math.pi / 2, size=n)
    health = rng.integers(0, 256, size=n)
    alive = rng.random(n) < 0.5

    blob = pack_entities(ids, pos, vel, yaw, pitch, health, alive)
    assert len(blob) == n * ENTITY_DTYPE.itemsize == n * 26
    records = unpack_entities(blob)

    assert records["id"].tolist() == ids.tolist()
    for axis, key in enumerate("xyz"):  # float32: exactly the nearest float32
        assert np.array_equal(records[key], pos[:, axis].astype(np.float32))
    for axis, key in enumerate(("vx", "vy", "vz")):  # float16: 11 significant bits
        got = records[key].astype(np.float64)
        assert np.all(np.abs(got - vel[:, axis]) <= np.abs(vel[:, axis]) * 2.0**-11 + 1e-7)
    yaw_step = 2 * math.pi / 65536
    pitch_step = (math.pi / 2) / 32767
    assert np.all(angle_difference(protocol.entity_yaw(records), yaw) <= yaw_step / 2 + 1e-12)
    assert np.all(np.abs(protocol.entity_pitch(records) - pitch) <= pitch_step / 2 + 1e-12)
    assert records["health"].tolist() == health.tolist()
    assert records["flags"].tolist() == alive.astype(int).tolist()


def test_entity_angles_wrap_and_clamp_and_health_clamps() -> None:
    n = 4
    blob = pack_entities(
        np.arange(n),
        np.zeros((n, 3)),
        np.zeros((n, 3)),
        np.array([math.pi, -math.pi, 3 * math.pi / 2, 0.0]),
        np.array([2.0, -2.0, math.pi / 2, -math.pi / 2]),
        np.array([-5, 300, 100, 0]),
        np.array([True, False, True, True]),
    )
    records = unpack_entities(blob)
    yaw = protocol.entity_yaw(records)
    assert yaw[0] == yaw[1] == -math.pi  # pi and -pi are the same direction
    assert yaw[2] == pytest.approx(-math.pi / 2, abs=1e-12)
    assert yaw[3] == 0.0
    assert records["pitch"].tolist() == [32767, -32767, 32767, -32767]
    assert records["health"].tolist() == [0, 255, 100, 0]
    assert records["flags"].tolist() == [1, 0, 1, 1]


def test_unpack_entities_rejects_a_partial_record() -> None:
    with pytest.raises(InvalidField) as info:
        unpack_entities(b"\x00" * 27)
    assert info.value.code == "invalid_field"


# -- rejections ---------------------------------------------------------------------------


def raises_code(error: type[ProtocolError], data: bytes, decoder=decode_client) -> ProtocolError:
    with pytest.raises(error) as info:
        decoder(data)
    assert info.value.code == error.code
    assert "\n" not in str(info.value)
    return info.value


def test_error_codes_are_distinct_and_stable() -> None:
    assert {
        FrameTooLarge.code,
        MalformedFrame.code,
        UnknownMessageType.code,
        InvalidField.code,
        protocol.VersionMismatch.code,
    } == {"frame_too_large", "malformed_frame", "unknown_type", "invalid_field", "version_mismatch"}


def test_client_frame_of_exactly_the_limit_is_read_and_one_byte_more_is_refused() -> None:
    overhead = len(frame(type="ping", id=1, t=0.0, x="a" * 300)) - 300  # str16 header
    fits = frame(type="ping", id=1, t=0.0, x="a" * (MAX_CLIENT_FRAME_BYTES - overhead))
    assert len(fits) == MAX_CLIENT_FRAME_BYTES
    raises_code(InvalidField, fits)  # read and parsed: only the extra field is wrong
    raises_code(FrameTooLarge, fits + b"\x00")


def test_oversized_server_frame_is_refused() -> None:
    huge = encode(ErrorMessage("x", "y")) + b"\x00" * MAX_SERVER_FRAME_BYTES
    raises_code(FrameTooLarge, huge, decode_server)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\xc1",  # the one byte msgpack never uses
        b"\x82\xa4type",  # a map cut short
        encode(PingMessage(1, 2.0))[:-3],  # a valid frame truncated
        encode(PingMessage(1, 2.0)) + b"\x00",  # trailing garbage
        msgpack.packb({1: 2}),  # non-string key
    ],
)
def test_non_msgpack_and_truncated_frames_are_malformed(data: bytes) -> None:
    raises_code(MalformedFrame, data)


@pytest.mark.parametrize("value", [1, "ping", [1, 2], None, True, 1.5, b"ping"])
def test_a_frame_that_is_not_a_map_is_malformed(value: object) -> None:
    raises_code(MalformedFrame, msgpack.packb(value, use_bin_type=True))


@pytest.mark.parametrize("kind", ["hello", "", "INPUT", 3, None, b"input"])
def test_unknown_type_is_refused(kind: object) -> None:
    raises_code(UnknownMessageType, frame(**valid_input_fields(type=kind)))


def test_frame_without_a_type_is_unknown() -> None:
    fields = valid_input_fields()
    del fields["type"]
    raises_code(UnknownMessageType, frame(**fields))


@pytest.mark.parametrize(
    "message",
    [
        WelcomeMessage(1, 2, 60, 3, 0.05, "tok", "courtyard", "eu", 0),
        SnapshotMessage(1, 0.1, 0, -1, (0.0,) * 6, b""),
        PongMessage(1, 0.5, 0.25),
        ErrorMessage("bad", "worse", True),
    ],
)
def test_server_only_types_are_unknown_to_decode_client(message: protocol.Message) -> None:
    raises_code(UnknownMessageType, encode(message))


@pytest.mark.parametrize(
    "message",
    [
        JoinMessage(1, "bot"),
        InputMessage(1, 2, (0.0, 0.0), 0.0, 0.0, 0, 0.0, -1),
        PingMessage(1, 0.5),
    ],
)
def test_client_only_types_are_unknown_to_decode_server(message: protocol.Message) -> None:
    raises_code(UnknownMessageType, encode(message), decode_server)


def test_a_valid_input_frame_is_accepted() -> None:
    # The baseline every rejection test below varies by exactly one field.
    assert decode_client(frame(**valid_input_fields())) == InputMessage(
        7, 100, (0.5, -0.5), 0.25, -0.1, 1, 1.5, 98
    )


@pytest.mark.parametrize("missing", sorted(InputMessage.FIELDS))
def test_missing_field_is_refused_and_named(missing: str) -> None:
    fields = valid_input_fields()
    del fields[missing]
    error = raises_code(InvalidField, frame(**fields))
    assert repr(missing) in str(error)


@pytest.mark.parametrize("extra", ["pos", "vel", "health", "hit"])
def test_extra_field_is_refused_and_named(extra: str) -> None:
    error = raises_code(InvalidField, frame(**valid_input_fields(**{extra: [1.0, 2.0, 3.0]})))
    assert repr(extra) in str(error)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("seq", True),  # bool where int
        ("buttons", False),
        ("seq", 1.0),  # float where int
        ("tick", "5"),
        ("yaw", "0.5"),  # str where float
        ("pitch", True),  # bool where float
        ("view_time", None),
        ("move", [0.5]),  # wrong length
        ("move", [0.5, 0.5, 0.5]),
        ("move", 0.5),
        ("move", [0.5, "x"]),
        ("move", {"x": 1}),
    ],
)
def test_wrong_type_is_refused(name: str, value: object) -> None:
    error = raises_code(InvalidField, frame(**valid_input_fields(**{name: value})))
    assert name in str(error)


@pytest.mark.parametrize("name", ["yaw", "pitch", "view_time"])
@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_non_finite_floats_are_refused(name: str, value: float) -> None:
    raises_code(InvalidField, frame(**valid_input_fields(**{name: value})))


@pytest.mark.parametrize("value", [math.nan, math.inf])
def test_non_finite_move_is_refused(value: float) -> None:
    raises_code(InvalidField, frame(**valid_input_fields(move=[0.0, value])))


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("seq", -1),
        ("seq", MAX_SEQ + 1),  # sequence numbers never wrap
        ("seq", 2**32 - 1),
        ("tick", -1),
        ("tick", 2**53 + 1),
        ("ack_tick", -2),
        ("buttons", 256),
        ("buttons", -1),
        ("view_time", -0.001),
        ("view_time", 1e9 + 1),
        ("move", [1e6 + 1, 0.0]),
    ],
)
def test_out_of_range_values_are_refused(name: str, value: object) -> None:
    raises_code(InvalidField, frame(**valid_input_fields(**{name: value})))


@pytest.mark.parametrize(
    ("name", "value"),
    [("seq", 0), ("seq", MAX_SEQ), ("tick", 2**53), ("ack_tick", -1), ("buttons", 255)],
)
def test_range_limits_themselves_are_accepted(name: str, value: int) -> None:
    assert getattr(decode_client(frame(**valid_input_fields(**{name: value}))), name) == value


@pytest.mark.parametrize(
    "fields",
    [
        {"type": "join", "v": 1, "name": "x" * 33},
        {"type": "join", "v": 65536},
        {"type": "join", "v": 1, "interp_delay": 1.5},
        {"type": "join", "v": 1, "token": 5},
        {"type": "ping", "id": 1, "t": math.nan},
        {"type": "ping", "id": -1, "t": 0.0},
    ],
)
def test_join_and_ping_fields_are_validated(fields: dict[str, Any]) -> None:
    raises_code(InvalidField, frame(**fields))


def test_join_defaults_apply_to_omitted_optional_fields() -> None:
    assert decode_client(frame(type="join", v=1)) == JoinMessage(1, "", None, 0.1)


@pytest.mark.parametrize(
    "fields",
    [
        {"you": [0.0] * 5},
        {"you": [0.0] * 5 + [math.inf]},
        {"ack": -2},
        {"entities": "text"},
        {"events": [1, 2]},
        {"server_time": -1.0},
    ],
)
def test_snapshot_fields_are_validated(fields: dict[str, Any]) -> None:
    good = SnapshotMessage(1, 0.1, 0, -1, (0.0,) * 6, b"").to_wire()
    good.update(fields)
    raises_code(InvalidField, msgpack.packb(good, use_bin_type=True), decode_server)


def test_invalid_messages_cannot_be_constructed_either() -> None:
    with pytest.raises(InvalidField):
        InputMessage(1, 2, (0.0, 0.0), math.nan, 0.0, 0, 0.0, -1)
    with pytest.raises(InvalidField):
        ErrorMessage("code", "m" * 257)


@given(st.binary(max_size=2 * MAX_CLIENT_FRAME_BYTES))
def test_arbitrary_bytes_only_ever_raise_protocol_errors(data: bytes) -> None:
    try:
        message = decode_client(data)
    except ProtocolError:
        return
    assert isinstance(message, JoinMessage | InputMessage | PingMessage)


msgpack_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=10,
)


@given(
    st.sampled_from(["join", "input", "ping", "pong", "other"]),
    st.dictionaries(
        st.sampled_from(["v", "name", "token", "seq", "tick", "move", "yaw", "t", "id", "x"]),
        msgpack_values,
    ),
)
def test_arbitrary_maps_only_ever_raise_protocol_errors(kind: str, fields: dict) -> None:
    data = frame(type=kind, **fields)
    try:
        message = decode_client(data)
    except ProtocolError:
        return
    assert message.TYPE == kind
