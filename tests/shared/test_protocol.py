"""The wire codec: round trips, the spliced snapshot, entity quantisation and every
rejection path."""

from __future__ import annotations

import math
import struct
from typing import Any

import msgpack
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared import protocol
from shared.protocol import (
    ENTITIES_PART_BYTES,
    MAX_CLIENT_FRAME_BYTES,
    MAX_SERVER_FRAME_BYTES,
    PROTOCOL_VERSION,
    SNAPSHOT_HEAD_BYTES,
    EntityCodec,
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
)
from shared.protocol.deltas import POSITION_STEP_M, VELOCITY_STEP_MS, Z_RANGE_M
from shared.protocol.events import JoinEvent, ShotEvent, SnapshotEvent, encode_event
from shared.protocol.snapshots import snapshot_heads_reference
from tests.shared.strategies import snapshot_events

U32 = 2**32 - 1
MAX_SEQ = 2**31 - 1
MAX_TICK = 2**53
MAX_BASE = 2**53  # MAX_TICK: a head writes its base as an int64 (a fixed layout)

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
    state=st.binary(max_size=8),
    base=st.integers(-1, MAX_TICK),
)
pongs = st.builds(PongMessage, id=st.integers(0, U32), t=finite(), server_time=finite(0.0))
errors = st.builds(
    ErrorMessage, code=st.text(max_size=64), message=st.text(max_size=256), fatal=st.booleans()
)
tokens = st.builds(TokenMessage, token=ascii_token)
connect_tokens = st.builds(
    protocol.ConnectTokenMessage, token=st.text(max_size=protocol.MAX_CONNECT_TOKEN_CHARS)
)
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


@given(st.one_of(welcomes, snapshots, pongs, errors, tokens, connect_tokens))
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


def test_a_connect_token_message_carries_a_bounded_string() -> None:
    message = protocol.ConnectTokenMessage('{"private": "..."}')
    assert decode_server(encode(message)) == message
    limit = protocol.MAX_CONNECT_TOKEN_CHARS
    full = frame(type="connect_token", token="x" * limit)
    assert decode_server(full) == protocol.ConnectTokenMessage("x" * limit)
    with pytest.raises(InvalidField, match="token"):
        decode_server(frame(type="connect_token", token="x" * (limit + 1)))
    with pytest.raises(InvalidField, match="token"):
        decode_server(frame(type="connect_token", token=b"{}"))
    with pytest.raises(UnknownMessageType):
        decode_client(encode(message))


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
    args: dict[str, Any] = dict(
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
        yaw=np.float32(0.5),  # type: ignore[arg-type]  # (what a bot passes, on purpose)
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
    base=st.integers(-1, MAX_BASE),
    entities=st.binary(max_size=26 * 4),
    events=events,
    state=st.binary(max_size=8),
)
def test_spliced_snapshot_decodes_to_the_same_message(
    tick: int,
    server_time: float,
    epoch: int,
    ack: int,
    you: list[float],
    base: int,
    entities: bytes,
    events: list[SnapshotEvent],
    state: bytes,
) -> None:
    body = encode_snapshot_body(tick, server_time, epoch, state)
    frame_ = encode_snapshot(body, ack, you, base, entities, events)
    decoded = decode_server(frame_)
    assert isinstance(decoded, SnapshotMessage)
    assert decoded == SnapshotMessage(
        tick, server_time, epoch, ack, tuple(you), entities, tuple(events), state, base
    )
    # Full float64 precision, down to the sign of zero.
    assert [bits(v) for v in decoded.you] == [bits(v) for v in you]
    assert bits(decoded.server_time) == bits(server_time)


#: The events pair's bytes before its events: the key and an array32 header.
EVENTS_PART_BYTES = len(msgpack.packb("events")) + 5


@given(
    ack=st.integers(-1, U32),
    base=st.integers(-1, MAX_BASE),
    entities=st.binary(max_size=64),
    events=events,
)
def test_a_clients_part_has_a_fixed_layout_whatever_its_values(
    ack: int, base: int, entities: bytes, events: list[SnapshotEvent]
) -> None:
    """The node builds every client's head at once and splices its players and its events
    after it: the head, the base/entities part and the events' header must not change size
    with the values they carry (the events themselves are packed once per tick)."""
    body = encode_snapshot_body(5, 0.5, 1)
    packed = [protocol.pack_event(event) for event in events]
    frame_ = encode_snapshot(body, ack, (0.0,) * 6, base, entities, events)
    told = protocol.events_part(packed)
    assert len(told) == EVENTS_PART_BYTES + sum(map(len, packed))
    assert len(frame_) == (
        SNAPSHOT_HEAD_BYTES + ENTITIES_PART_BYTES + len(entities) + len(told) + len(body)
    )
    assert frame_.endswith(entities + told + body)
    assert frame_[SNAPSHOT_HEAD_BYTES:].startswith(protocol.entities_part(base, entities) + told)


@given(
    acks=st.lists(st.integers(-1, U32), max_size=12),
    values=st.lists(
        st.floats(allow_nan=True, allow_infinity=True, width=64), min_size=72, max_size=72
    ),
)
def test_the_heads_kernel_is_the_structured_reference_bit_for_bit(
    acks: list[int], values: list[float]
) -> None:
    """Every ack the node writes (-1 as an int32, the rest as uint32) and any float64 bits,
    NaNs, infinities and negative zeros included: the same bytes as the layout's dtype."""
    states = np.array(values[: 6 * len(acks)], dtype=np.float64).reshape(-1, 6)
    heads = protocol.snapshot_heads(np.array(acks, dtype=np.int64), states)
    assert heads == snapshot_heads_reference(np.array(acks, dtype=np.int64), states)
    assert len(heads) == SNAPSHOT_HEAD_BYTES * len(acks)


@pytest.mark.parametrize("count", [0, 1, 15, 16, 70_000])
def test_the_events_are_always_an_array32_of_events_packed_on_their_own(count: int) -> None:
    """Whatever their number (msgpack would write a fixarray or an array16 for most), so
    that a part is its packed events behind a fixed header."""
    event = JoinEvent(3)
    packed = protocol.pack_event(event)
    assert packed == msgpack.packb(encode_event(event), use_bin_type=True)
    told = protocol.events_part([packed] * count)
    assert told[:EVENTS_PART_BYTES] == msgpack.packb("events") + b"\xdd" + struct.pack(">I", count)
    unpacker = msgpack.Unpacker(raw=False, max_array_len=max(count, 1))
    unpacker.feed(told)
    assert [*unpacker] == ["events", [encode_event(event)] * count]


def test_spliced_snapshot_is_the_same_map_as_a_plain_encoded_one() -> None:
    you = (1.0 / 3.0, -2.0e-300, 0.0, -0.0, 6.0, 1e9)
    events: list[SnapshotEvent] = [
        JoinEvent(3),
        ShotEvent(3, 1, 0, "hit", 0.5, victim=2, damage=20),
    ]
    body = encode_snapshot_body(42, 0.7, 3, b"\x07" * 8)
    spliced = msgpack.unpackb(encode_snapshot(body, 9, you, 40, b"\x01\x02", events), raw=False)
    assert len(spliced) == 10
    plain = msgpack.unpackb(
        encode(SnapshotMessage(42, 0.7, 3, 9, you, b"\x01\x02", tuple(events), b"\x07" * 8, 40))
    )
    assert spliced == plain


def test_the_shared_body_carries_no_clients_part() -> None:
    """Five pairs every recipient shares; what each client is told (its events too) is its
    own part's."""
    body = encode_snapshot_body(42, 0.7, 3, b"\x07" * 8)
    assert msgpack.unpackb(bytes([0x85]) + body) == {
        "type": "snapshot",
        "tick": 42,
        "server_time": 0.7,
        "epoch": 3,
        "state": b"\x07" * 8,
    }
    assert encode_snapshot_body(42, 0.7, 3) == encode_snapshot_body(42, 0.7, 3, b"")


def test_a_snapshot_without_a_base_says_so() -> None:
    """``base`` -1 (every record full) is also what a snapshot built without one carries."""
    body = encode_snapshot_body(3, 0.05, 0)
    decoded = decode_server(encode_snapshot(body, -1, (0.0,) * 6))
    assert isinstance(decoded, SnapshotMessage)
    assert (decoded.base, decoded.entities, decoded.events) == (-1, b"", ())
    assert SnapshotMessage(3, 0.05, 0, -1, (0.0,) * 6, b"").base == -1


def test_one_body_serves_every_client_with_its_own_part() -> None:
    body = encode_snapshot_body(10, 10 / 60, 0)
    a = decode_server(
        encode_snapshot(body, 1, np.arange(6.0).tolist(), 8, b"\x01\x02\x03", [JoinEvent(2)])
    )
    b = decode_server(encode_snapshot(body, -1, (-np.arange(6.0)).tolist()))
    assert isinstance(a, SnapshotMessage) and isinstance(b, SnapshotMessage)
    assert (a.ack, a.you, a.base, a.entities) == (1, (0.0, 1.0, 2.0, 3.0, 4.0, 5.0), 8, b"\1\2\3")
    assert (b.ack, b.you, b.base, b.entities) == (-1, (-0.0, -1.0, -2.0, -3.0, -4.0, -5.0), -1, b"")
    assert a.tick == b.tick == 10
    assert (a.events, b.events) == ((JoinEvent(2),), ())


# -- entity quantisation ------------------------------------------------------------------


def angle_difference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.abs((a - b + math.pi) % (2 * math.pi) - math.pi)


@given(
    n=st.integers(0, 60),
    seed=st.integers(0, 2**32 - 1),
    corner=st.tuples(st.integers(-1000, 0), st.integers(-1000, 0)),
    size=st.tuples(st.integers(1, 2000), st.integers(1, 2000)),
    fraction=st.sampled_from([0.0, 0.3, 0.123456789]),
)
def test_the_quantise_kernel_is_the_numpy_reference_bit_for_bit(
    n: int, seed: int, corner: tuple[int, int], size: tuple[int, int], fraction: float
) -> None:
    """Values inside and outside every field's range, and exactly halfway between two
    steps (rounded to even by both): the kernels write what the references write (the
    quantised fields, and the feet a client draws from them: a map's corner off the
    float32 grid makes their rounding to float32 count)."""
    rng = np.random.default_rng(seed)
    lo = np.array(corner, dtype=np.float64) - fraction
    hi = lo + np.array(size, dtype=np.float64)
    codec = EntityCodec.for_bounds(lo, hi)
    pos = np.column_stack(
        [rng.uniform(lo[0] - 5, hi[0] + 5, n), rng.uniform(lo[1] - 5, hi[1] + 5, n),
         rng.uniform(Z_RANGE_M[0] - 5, Z_RANGE_M[1] + 5, n)]
    )  # fmt: skip
    vel = rng.normal(0.0, 60.0, size=(n, 3))
    halves = rng.random(n) < 0.3  # exactly between two steps
    pos[halves] = lo[0] + (np.round(pos[halves] / POSITION_STEP_M) + 0.5) * POSITION_STEP_M
    vel[halves] = (np.round(vel[halves] / VELOCITY_STEP_MS) + 0.5) * VELOCITY_STEP_MS
    yaw = rng.uniform(-10.0, 10.0, size=n)
    pitch = rng.uniform(-3.0, 3.0, size=n)
    health = rng.integers(-40, 300, size=n).astype(np.int16)
    alive = rng.random(n) < 0.5
    kernel = codec.quantise(pos, vel, yaw, pitch, health, alive)
    reference = codec.quantise_reference(pos, vel, yaw, pitch, health, alive)
    assert kernel.dtype == reference.dtype and np.array_equal(kernel, reference)
    # The feet a client draws, from the same cells: the kernel's bits are the reference's.
    shown, shown_reference = codec.shown_positions(pos), codec.shown_positions_reference(pos)
    assert shown.dtype == shown_reference.dtype == np.float64
    assert shown.tobytes() == shown_reference.tobytes()


@given(
    n=st.integers(0, 40),
    seed=st.integers(0, 2**32 - 1),
    corner=st.tuples(st.integers(-1000, 0), st.integers(-1000, 0)),
    size=st.tuples(st.integers(1, 2000), st.integers(1, 2000)),
)
def test_entities_quantise_within_the_stated_precision(
    n: int, seed: int, corner: tuple[int, int], size: tuple[int, int]
) -> None:
    """deltas.py's stated precision over a map's bounds: positions within half a
    POSITION_STEP_M, velocity within half a VELOCITY_STEP_MS, angles within half a step;
    the records a client draws are those values as ENTITY_DTYPE holds them."""
    rng = np.random.default_rng(seed)
    lo = np.array(corner, dtype=np.float64)
    hi = lo + np.array(size, dtype=np.float64)
    codec = EntityCodec.for_bounds(lo, hi)
    ids = np.sort(rng.choice(65536, size=n, replace=False))
    pos = np.column_stack(
        [rng.uniform(lo[0], hi[0], n), rng.uniform(lo[1], hi[1], n), rng.uniform(*Z_RANGE_M, n)]
    )
    vel = rng.uniform(-64.0, 64.0, size=(n, 3))
    yaw = rng.uniform(-math.pi, math.pi, size=n)
    pitch = rng.uniform(-math.pi / 2, math.pi / 2, size=n)
    health = rng.integers(0, 256, size=n)
    alive = rng.random(n) < 0.5

    quantised = codec.quantise(pos, vel, yaw, pitch, health, alive)
    assert quantised.shape == (n, 10) and quantised.dtype == np.int32
    assert np.all((quantised >= 0) & (quantised < (1 << codec.bits)))  # each within its bits
    records = codec.records(ids, quantised)
    assert records.dtype == protocol.ENTITY_DTYPE

    assert records["id"].tolist() == ids.tolist()
    half = 1 << (int(codec.bits[3]) - 1)
    for axis, key in enumerate("xyz"):
        exact = codec.origin[axis] + quantised[:, axis] * POSITION_STEP_M
        assert np.all(np.abs(exact - pos[:, axis]) <= POSITION_STEP_M / 2 + 1e-9)
        assert np.array_equal(records[key], exact.astype(protocol.ENTITY_DTYPE[key]))
    for axis, key in enumerate(("vx", "vy", "vz")):
        exact = (quantised[:, 3 + axis] - half) * VELOCITY_STEP_MS
        assert np.all(np.abs(exact - vel[:, axis]) <= VELOCITY_STEP_MS / 2 + 1e-9)
        assert np.array_equal(records[key], exact.astype(protocol.ENTITY_DTYPE[key]))
    yaw_step = 2 * math.pi / 65536
    pitch_step = (math.pi / 2) / 32767
    assert np.all(angle_difference(protocol.entity_yaw(records), yaw) <= yaw_step / 2 + 1e-12)
    assert np.all(np.abs(protocol.entity_pitch(records) - pitch) <= pitch_step / 2 + 1e-12)
    assert records["health"].tolist() == health.tolist()
    assert records["flags"].tolist() == alive.astype(int).tolist()


def test_positions_on_the_grid_come_back_exactly() -> None:
    """Binary fractions of a metre (what the interpolation tests use) survive exactly."""
    codec = EntityCodec.for_bounds(np.array([-30.0, -30.0]), np.array([30.0, 30.0]))
    pos = np.array(
        [[-30.0, -30.0, -16.0], [0.0, 0.0, 0.0], [1.5, -2.25, 0.125], [30.0, 30.0, 48.0]]
    )
    vel = np.array([[0.0, 0.0, 0.0], [-64.0, 64.0, 0.5], [1 / 256, -1 / 256, 7.5], [3.0] * 3])
    n = len(pos)
    quantised = codec.quantise(pos, vel, np.zeros(n), np.zeros(n), np.full(n, 100), np.ones(n))
    records = codec.records(np.arange(n), quantised)
    assert np.column_stack([records[k] for k in "xyz"]).tolist() == pos.tolist()
    assert np.column_stack([records[k] for k in ("vx", "vy", "vz")]).tolist() == vel.tolist()


def test_entity_angles_wrap_and_clamp_and_health_clamps() -> None:
    n = 4
    codec = EntityCodec.for_bounds(np.array([-30.0, -30.0]), np.array([30.0, 30.0]))
    quantised = codec.quantise(
        np.zeros((n, 3)),
        np.zeros((n, 3)),
        np.array([math.pi, -math.pi, 3 * math.pi / 2, 0.0]),
        np.array([2.0, -2.0, math.pi / 2, -math.pi / 2]),
        np.array([-5, 300, 100, 0]),
        np.array([True, False, True, True]),
    )
    records = codec.records(np.arange(n), quantised)
    yaw = protocol.entity_yaw(records)
    assert yaw[0] == yaw[1] == -math.pi  # pi and -pi are the same direction
    assert yaw[2] == pytest.approx(-math.pi / 2, abs=1e-12)
    assert yaw[3] == 0.0
    assert records["pitch"].tolist() == [32767, -32767, 32767, -32767]
    assert records["health"].tolist() == [0, 255, 100, 0]
    assert records["flags"].tolist() == [1, 0, 1, 1]


def test_positions_and_velocities_beyond_the_ranges_clamp_to_their_edges() -> None:
    """Outside the map (or faster than any player moves) a field saturates at its width
    instead of wrapping into a value on the far side."""
    codec = EntityCodec.for_bounds(np.array([-30.0, -30.0]), np.array([30.0, 30.0]))
    pos = np.array([[-31.0, -1e6, -100.0], [1e6, 1e6, 1e6]])
    vel = np.array([[-1e6, -200.0, 0.0], [1e6, 200.0, 0.0]])
    quantised = codec.quantise(pos, vel, np.zeros(2), np.zeros(2), np.zeros(2), np.ones(2))
    top = (1 << codec.bits) - 1
    assert quantised[0, 0:5].tolist() == [0, 0, 0, 0, 0]
    assert quantised[1, 0:5].tolist() == top[0:5].tolist()
    records = codec.records(np.arange(2), quantised)
    assert (records["x"][0], records["y"][0], records["z"][0]) == (-30.0, -30.0, -16.0)
    assert min(records["x"][1], records["y"][1]) >= 30.0 and records["z"][1] >= 48.0


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
        {"type": "join", "v": PROTOCOL_VERSION, "name": "x" * 33},
        {"type": "join", "v": 65536},
        {"type": "join", "v": PROTOCOL_VERSION, "interp_delay": 1.5},
        {"type": "join", "v": PROTOCOL_VERSION, "token": 5},
        {"type": "ping", "id": 1, "t": math.nan},
        {"type": "ping", "id": -1, "t": 0.0},
    ],
)
def test_join_and_ping_fields_are_validated(fields: dict[str, Any]) -> None:
    raises_code(InvalidField, frame(**fields))


def test_join_defaults_apply_to_omitted_optional_fields() -> None:
    assert decode_client(frame(type="join", v=PROTOCOL_VERSION)) == JoinMessage(
        PROTOCOL_VERSION, "", None, 0.1
    )


@pytest.mark.parametrize(
    "fields",
    [
        {"you": [0.0] * 5},
        {"you": [0.0] * 5 + [math.inf]},
        {"ack": -2},
        {"base": -2},
        {"base": MAX_TICK + 1},
        {"base": 1.0},
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
