"""SnapshotReader reads a snapshot frame in one kernel call: it must say exactly what the
general path says (decode_server, then EntityBaselines.apply), leave to that path every
frame it cannot read, and hold, show and store the same values bit for bit."""

from __future__ import annotations

import copy
import struct
from typing import Any

import msgpack
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.protocol import (
    EntityBaselines,
    InvalidField,
    JoinEvent,
    MissingBaseline,
    PlayerValues,
    ProtocolError,
    ReadSnapshot,
    ServerFrameDecoder,
    ShotEvent,
    SnapshotEvent,
    SnapshotMessage,
    SnapshotReader,
    decode_server,
    encode_snapshot,
    encode_snapshot_body,
)
from shared.protocol.reader import _skip_value
from tests.shared.strategies import snapshot_events
from tests.shared.test_baselines import (
    CODEC,
    POOL,
    Players,
    Record,
    delta,
    encode,
    full,
    gone,
    moved,
    player,
    ticks_of,
)
from tests.shared.test_snapshot_decoder import acks, yous

EPOCH = 3
YOU = (1.0, 2.0, 3.0, 0.5, -0.5, 0.0)
SHOT = ShotEvent(1, 7, 0, "hit", 2.5, victim=4, damage=20)


def body_of(tick: int, epoch: int = EPOCH) -> bytes:
    return encode_snapshot_body(tick, tick / 30, epoch, bytes([tick % 256]) * 8)


def told(decoder: ServerFrameDecoder, body: bytes, events: tuple[SnapshotEvent, ...]) -> None:
    """Another client's frame of the same tick, read first (as the node's first recipient's
    is): the decoder then knows the body and the events."""
    message = decoder.decode(encode_snapshot(body, 0, YOU, -1, b"", events))
    assert isinstance(message, SnapshotMessage)


def general(frame: bytes, baselines: EntityBaselines, values: PlayerValues) -> Any:
    """What the general path makes of ``frame``: (the message, its records), or the type
    of the protocol error it raised."""
    try:
        message = decode_server(frame)
        assert isinstance(message, SnapshotMessage)
        records = baselines.apply(
            message.epoch, message.tick, message.base, message.entities, values
        )
    except ProtocolError as error:
        return type(error)
    return message, records


def fast(
    frame: bytes, decoder: ServerFrameDecoder, baselines: EntityBaselines, values: PlayerValues
) -> Any:
    """What the reader makes of ``frame``: a ReadSnapshot, None (left to the general path)
    or the type of the protocol error it raised."""
    body = decoder.shared_body(frame)
    if body is None:
        return None
    try:
        return SnapshotReader(decoder).read(frame, body, baselines, values)
    except ProtocolError as error:
        return type(error)


def assert_same(read: ReadSnapshot, expected: Any) -> None:
    assert isinstance(expected, tuple), expected
    message, records = expected
    assert (read.epoch, read.tick, read.server_time, read.state) == (
        message.epoch,
        message.tick,
        message.server_time,
        message.state,
    )
    assert (read.ack, read.you, read.base, read.events) == (
        message.ack,
        message.you,
        message.base,
        message.events,
    )
    assert read.records.dtype == records.dtype
    assert read.records.tobytes() == records.tobytes()


def assert_same_state(
    a: tuple[EntityBaselines, PlayerValues], b: tuple[EntityBaselines, PlayerValues]
) -> None:
    """Two clients hold the same ticks, and their stores the same values for them."""
    (baselines_a, values_a), (baselines_b, values_b) = a, b
    assert sorted(baselines_a.row_ticks.tolist()) == sorted(baselines_b.row_ticks.tolist())
    for tick in baselines_a.row_ticks.tolist():
        held_a, held_b = baselines_a.held(tick), baselines_b.held(tick)
        assert ticks_of(held_a) == ticks_of(held_b)
        if held_a is not None:
            ids_a, rows_a = values_a.held(held_a)
            ids_b, rows_b = values_b.held(held_b)  # type: ignore[arg-type]
            assert ids_a.tolist() == ids_b.tolist()
            assert rows_a.tobytes() == rows_b.tobytes()


# -- frames as the node writes them ------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_a_chain_of_frames_reads_as_the_general_path_decodes_it(data: st.DataObject) -> None:
    """Frame after frame of one world, each coded against one of the client's newest
    snapshots (or none), with its own ack, state and events: the reader shows, holds and
    stores exactly what decode_server and EntityBaselines.apply do."""
    kept = data.draw(st.integers(1, 5), label="kept")
    interval = data.draw(st.sampled_from([1, 2]), label="interval")
    reader_side = (EntityBaselines(kept), PlayerValues(CODEC, interval, players=8))
    general_side = (EntityBaselines(kept), PlayerValues(CODEC, interval, players=8))
    decoder = ServerFrameDecoder()
    account: dict[int, dict[int, np.ndarray]] = {}  # per tick, what the client holds
    world: Players = {}
    tick = interval * data.draw(st.integers(1, 1000))
    for _ in range(data.draw(st.integers(1, 8))):
        tick += interval * data.draw(st.integers(1, 3))
        for entity in POOL[:6]:
            if entity in world and data.draw(st.integers(0, 5)) == 0:
                del world[entity]
            elif entity in world:
                world[entity] = moved(world[entity], data.draw(st.integers(0, 2**32 - 1)))
            elif data.draw(st.integers(0, 2)) == 0:
                world[entity] = player(data.draw(st.integers(0, 10**6)))
        base = data.draw(st.sampled_from([-1, *sorted(account)[-kept:]]), label="base")
        before = account.get(base, {})
        records: list[Record] = []
        for entity in sorted(set(world) | set(before)):
            if not data.draw(st.booleans()):
                continue  # interest management left it out: held as it was
            if entity not in world:
                records.append(gone(entity))
            elif entity in before and data.draw(st.booleans()):
                records.append(delta(entity, world[entity], before[entity]))
            else:
                records.append(full(entity, world[entity]))
        events = tuple(data.draw(snapshot_events, label="events"))
        body = body_of(tick)
        told(decoder, body, events)
        frame = encode_snapshot(
            body, data.draw(acks), data.draw(yous), base, encode(records), events
        )
        read = fast(frame, decoder, *reader_side)
        assert isinstance(read, ReadSnapshot)
        assert_same(read, general(frame, *general_side))
        after = dict(before)
        for entity, kind, value, _ in records:
            if kind == 2:
                after.pop(entity, None)
            else:
                after[entity] = value
        account[tick] = after
        assert_same_state(reader_side, general_side)


def test_a_base_not_held_or_not_earlier_is_a_missing_baseline_and_nothing_is_held() -> None:
    decoder, baselines, values = ServerFrameDecoder(), EntityBaselines(), PlayerValues(CODEC, 1)
    body = body_of(5)
    told(decoder, body, ())
    for base in (3, 5, 6):
        frame = encode_snapshot(body, 0, YOU, base, b"", ())
        assert fast(frame, decoder, baselines, values) is MissingBaseline
    assert baselines.held(5) is None


def test_players_that_do_not_decode_are_invalid_and_not_held() -> None:
    decoder, baselines, values = ServerFrameDecoder(), EntityBaselines(), PlayerValues(CODEC, 1)
    body = body_of(5)
    told(decoder, body, ())
    a = player(1)
    for blob in (encode([delta(1, a, a)]), encode([full(1, a)])[:-1]):
        frame = encode_snapshot(body, 0, YOU, -1, blob, ())
        assert fast(frame, decoder, baselines, values) is InvalidField
    assert baselines.held(5) is None


def test_an_id_beyond_the_store_grows_it() -> None:
    decoder, baselines, values = ServerFrameDecoder(), EntityBaselines(), PlayerValues(CODEC, 1, 4)
    body = body_of(2)
    told(decoder, body, ())
    a, b = player(1), player(2)
    frame = encode_snapshot(body, 0, YOU, -1, encode([full(2, a), full(300, b)]), ())
    read = fast(frame, decoder, baselines, values)
    assert isinstance(read, ReadSnapshot)
    assert read.records["id"].tolist() == [2, 300]
    assert values.values.shape[1] > 300 and baselines.rows.shape[1] >= values.values.shape[1]
    assert ticks_of(baselines.held(2)) == {2: 2, 300: 2}


def test_a_new_epoch_starts_afresh() -> None:
    decoder, baselines, values = ServerFrameDecoder(), EntityBaselines(), PlayerValues(CODEC, 1)
    a = player(1)
    body = body_of(4)
    told(decoder, body, ())
    assert isinstance(
        fast(
            encode_snapshot(body, 0, YOU, -1, encode([full(1, a)]), ()), decoder, baselines, values
        ),
        ReadSnapshot,
    )
    later = body_of(5, EPOCH + 1)
    told(decoder, later, ())
    fresh = PlayerValues(CODEC, 1)
    frame = encode_snapshot(later, 0, YOU, 4, encode([delta(1, a, a)]), ())
    assert fast(frame, decoder, baselines, fresh) is MissingBaseline
    assert baselines.held(4) is None


def test_one_reader_s_records_stay_as_read_while_it_reads_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A reader writes each snapshot's records into a chunk they share with the next
    snapshots' (a fresh chunk once one is full): what a snapshot showed stays as it was
    read, whatever the reader reads or refuses after it."""
    monkeypatch.setattr(SnapshotReader, "CHUNK_RECORDS", 5)
    decoder, baselines, values = ServerFrameDecoder(), EntityBaselines(), PlayerValues(CODEC, 1)
    reader = SnapshotReader(decoder)
    world = {entity: player(entity) for entity in (1, 2, 3)}
    shown: list[tuple[np.ndarray, bytes]] = []
    base = -1
    for tick in range(1, 13):
        events: tuple[SnapshotEvent, ...] = (SHOT,) if tick % 3 == 0 else ()
        body = body_of(tick)
        told(decoder, body, events)
        world = {entity: moved(value, tick) for entity, value in world.items()}
        blob = encode([full(entity, value) for entity, value in sorted(world.items())])
        if tick % 4 == 0:  # refused: a base it does not hold, then a cut blob
            for bad_base, bad_blob in ((tick - 1 + 100, blob), (base, blob[:-1])):
                frame = encode_snapshot(body, 0, YOU, bad_base, bad_blob, events)
                shared = decoder.shared_body(frame)
                assert shared is not None
                with pytest.raises(ProtocolError):
                    reader.read(frame, shared, baselines, values)
        frame = encode_snapshot(body, 0, YOU, -1, blob, events)
        shared = decoder.shared_body(frame)
        assert shared is not None
        read = reader.read(frame, shared, baselines, values)
        assert isinstance(read, ReadSnapshot) and read.events == events
        assert_same(read, general(frame, EntityBaselines(), PlayerValues(CODEC, 1)))
        shown.append((read.records, read.records.tobytes()))
        base = tick
    assert all(records.tobytes() == kept for records, kept in shown)


# -- what is left to the general path ----------------------------------------------------


def test_a_body_not_decoded_yet_is_left_to_the_general_path_and_a_new_event_decoded() -> None:
    decoder, baselines, values = ServerFrameDecoder(), EntityBaselines(), PlayerValues(CODEC, 1)
    blob = encode([full(1, player(1))])
    frame = encode_snapshot(body_of(2), 0, YOU, -1, blob, (JoinEvent(1),))
    assert decoder.shared_body(frame) is None  # no body known yet
    told(decoder, body_of(2), ())
    read = fast(frame, decoder, baselines, values)  # the event is new: decoded, and kept
    assert isinstance(read, ReadSnapshot) and read.events == (JoinEvent(1),)
    assert ticks_of(baselines.held(2)) == {1: 2}
    again = fast(frame, decoder, EntityBaselines(), values)
    assert isinstance(again, ReadSnapshot) and again.events[0] is read.events[0]


def test_a_new_event_does_not_cost_the_snapshot_whose_base_was_its_oldest_row() -> None:
    """Every row held, the snapshot coded against the oldest, an event nobody told yet: the
    reader keeps the snapshot in the base's row (the oldest goes, as ever). Decoding its
    players a second time, against a base no longer held, lost the snapshot."""
    decoder, values = ServerFrameDecoder(), PlayerValues(CODEC, 1)
    baselines = EntityBaselines(kept=3)
    a = player(1)
    for tick in (1, 2, 3):
        told(decoder, body_of(tick), ())
        frame = encode_snapshot(body_of(tick), 0, YOU, -1, encode([full(1, a)]), ())
        assert isinstance(fast(frame, decoder, baselines, values), ReadSnapshot)
    told(decoder, body_of(4), ())
    moved_a = moved(a, 4)
    frame = encode_snapshot(body_of(4), 0, YOU, 1, encode([delta(1, moved_a, a)]), (SHOT,))
    read = fast(frame, decoder, baselines, values)
    assert isinstance(read, ReadSnapshot) and read.events == (SHOT,)
    assert sorted(baselines.row_ticks.tolist()) == [2, 3, 4]
    assert ticks_of(baselines.held(4)) == {1: 4}


def test_only_the_newest_bodies_are_matched() -> None:
    decoder = ServerFrameDecoder()
    for tick in range(1, 7):
        told(decoder, body_of(tick), ())
    assert decoder.shared_body(encode_snapshot(body_of(1), 0, YOU)) is None
    shared = decoder.shared_body(encode_snapshot(body_of(6), 0, YOU))
    assert shared is not None and shared[0].tick == 6


msgpack_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(width=32)
    | st.text(max_size=40)
    | st.binary(max_size=300),
    lambda inner: (
        st.lists(inner, max_size=20) | st.dictionaries(st.text(max_size=5), inner, max_size=8)
    ),
    max_leaves=40,
)


@settings(max_examples=300, deadline=None)
@given(value=msgpack_values, single=st.booleans())
def test_a_value_s_end_is_where_msgpack_says_and_a_cut_value_has_none(
    value: Any, single: bool
) -> None:
    packed = msgpack.packb(value, use_single_float=single)
    data = np.frombuffer(b"\x00" + packed + b"\x00", dtype=np.uint8)
    assert _skip_value(data, 1, 1 + len(packed)) == 1 + len(packed)
    for cut in range(len(packed) - 1, max(-1, len(packed) - 12), -1):
        assert _skip_value(data, 1, 1 + cut) == -1


def test_an_extension_or_a_reserved_byte_has_no_end() -> None:
    for packed in (b"\xc1", msgpack.packb(msgpack.ExtType(1, b"ab")), b"\xd4\x01\x00"):
        assert _skip_value(np.frombuffer(packed, dtype=np.uint8), 0, len(packed)) == -1


def _ack_as(tag: int, fmt: str, value: int) -> bytes:
    return bytes([tag]) + struct.pack(fmt, value)


@pytest.mark.parametrize(
    ("ack", "expected"),
    [
        (b"\x05", 5),  # positive fixint
        (b"\xff", -1),  # negative fixint
        (_ack_as(0xD2, ">i", -1), -1),  # how the node writes -1
        (_ack_as(0xCC, ">B", 200), 200),
        (_ack_as(0xCD, ">H", 60_000), 60_000),
        (_ack_as(0xCE, ">I", 4_000_000_000), 4_000_000_000),
        (_ack_as(0xD2, ">i", -2), None),  # an ack below -1: not read here
        (_ack_as(0xD3, ">q", 5), None),  # valid msgpack, not the node's layout
        (b"\xc0", None),
    ],
)
def test_every_ack_the_head_reader_takes_and_nothing_else(ack: bytes, expected: int | None) -> None:
    decoder, baselines, values = ServerFrameDecoder(), EntityBaselines(), PlayerValues(CODEC, 1)
    body = body_of(2)
    told(decoder, body, ())
    frame = encode_snapshot(body, 7, YOU)
    # The map header and the ack key, then the ack as the node writes it (a uint32).
    assert frame[5] == 0xCE
    frame = frame[:5] + ack + frame[10:]
    read = fast(frame, decoder, baselines, values)
    if expected is None:
        assert read is None
    else:
        assert isinstance(read, ReadSnapshot) and read.ack == expected
        assert_same(read, general(frame, EntityBaselines(), PlayerValues(CODEC, 1)))


@settings(max_examples=300, deadline=None)
@given(at=st.integers(0, 10_000), byte=st.integers(0, 255), cut=st.booleans())
def test_a_damaged_frame_is_left_alone_or_read_as_the_general_path_reads_it(
    at: int, byte: int, cut: bool
) -> None:
    """One byte changed (or the frame cut there), anywhere before the body: the reader
    leaves the frame to the general path, or says what that path says and holds what it
    holds."""
    decoder = ServerFrameDecoder()
    a, b = player(1), player(2)
    first = encode([full(1, a), full(2, b)])
    events: tuple[SnapshotEvent, ...] = (JoinEvent(3), SHOT)
    body = body_of(2)
    told(decoder, body_of(1), ())
    told(decoder, body, events)
    reader_side = (EntityBaselines(), PlayerValues(CODEC, 1))
    fast(encode_snapshot(body_of(1), 0, YOU, -1, first, ()), decoder, *reader_side)
    general_side = copy.deepcopy(reader_side)
    frame = encode_snapshot(body, 3, YOU, 1, encode([delta(1, moved(a, 1), a), gone(2)]), events)
    at %= len(frame) - len(body)
    damaged = frame[:at] + frame[at + 1 :] if cut else frame[:at] + bytes([byte]) + frame[at + 1 :]
    read = fast(damaged, decoder, *reader_side)
    expected = general(damaged, *general_side)
    if read is None:
        return
    if isinstance(read, ReadSnapshot):
        assert_same(read, expected)
    else:
        assert read is expected
    assert_same_state(reader_side, general_side)
