"""ServerFrameDecoder must say exactly what decode_server says, sharing each body's decode
and each event's.

A frame is a client's head (ack, you), its players (base, entities), the events it is told
(an array32 of events, each packed once per tick by the node) and the tick's shared body
(type, tick, server time, epoch, state). Only the body is shared between all recipients;
``base`` and ``entities`` are every frame's own, and an event's decode is shared by every
frame that tells it, whatever else that frame tells.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Sequence
from typing import Any

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.protocol import (
    MAX_SERVER_FRAME_BYTES,
    MAX_TICK,
    U32_MAX,
    ErrorMessage,
    FrameTooLarge,
    LeaveEvent,
    Message,
    PongMessage,
    ProtocolError,
    ServerFrameDecoder,
    ServerMessage,
    SnapshotEvent,
    SnapshotMessage,
    StandbysMessage,
    TokenMessage,
    WelcomeMessage,
    decode_server,
    encode,
    encode_snapshot,
    encode_snapshot_body,
    entities_part,
    events_part,
    pack_event,
)
from shared.protocol.events import JoinEvent, RespawnEvent, ShotEvent, encode_event
from tests.shared.strategies import events as one_event
from tests.shared.strategies import snapshot_events

# -- strategies ----------------------------------------------------------------------------

ticks = st.integers(0, MAX_TICK)
server_times = st.floats(0.0, 1e9, allow_nan=False, allow_infinity=False)
epochs = st.integers(0, 2**63 - 1)
acks = st.one_of(  # every msgpack encoding the head reads directly
    st.just(-1),  # negative fixint
    st.integers(0, 127),  # positive fixint
    st.integers(128, 255),  # uint 8
    st.integers(256, 65535),  # uint 16
    st.integers(65536, U32_MAX),  # uint 32
)
yous = st.tuples(*[st.floats(-1e9, 1e9, allow_nan=False, allow_infinity=False)] * 6)
#: A head's base is an int64 (a fixed layout): -1 (none) or a tick.
bases = st.one_of(st.just(-1), st.integers(0, MAX_TICK))
#: The frame decoder does not decode the players, so any bytes will do.
entity_blobs = st.binary(max_size=64)
states = st.binary(max_size=8)
events_lists = snapshot_events.map(tuple)
#: One client's part of a frame: (ack, you, base, entities, events).
parts = st.tuples(acks, yous, bases, entity_blobs, events_lists)

Events = tuple[SnapshotEvent, ...]
Part = tuple[int, tuple[float, ...], int, bytes, Events]


@st.composite
def bodies(draw: st.DrawFn) -> bytes:
    return encode_snapshot_body(draw(ticks), draw(server_times), draw(epochs), draw(states))


def body_of(tick: int = 7, *, state: bytes = b"\x01" * 8) -> bytes:
    """A small valid shared body."""
    return encode_snapshot_body(tick, tick / 60, 3, state)


YOU = (1.0, 2.0, 3.0, 0.5, -0.5, 0.0)
ENTITIES = b"\x05\x00\x40\x00\x00"  # (the decoder never reads the players' records)
JOIN = JoinEvent(1)
SHOT = ShotEvent(1, 7, 0, "miss", 2.5)
HIT = ShotEvent(4, 8, 1, "hit", 3.0, victim=1, damage=50, kill=True)


def outcome(decode: Callable[[bytes], ServerMessage], frame: bytes) -> ServerMessage | type:
    """The decoded message, or the type of the protocol error it raised."""
    try:
        return decode(frame)
    except ProtocolError as error:
        return type(error)


def assert_same_as_decode_server(decoder: ServerFrameDecoder, frame: bytes) -> None:
    assert outcome(decoder.decode, frame) == outcome(decode_server, frame)


def packed_events(events: Sequence[SnapshotEvent]) -> list[bytes]:
    return [pack_event(event) for event in events]


# -- snapshots as encode_snapshot lays them out ------------------------------------------------


@given(body=bodies(), part=parts)
def test_a_first_snapshot_decodes_as_decode_server_does(body: bytes, part: Part) -> None:
    frame = encode_snapshot(body, *part)
    decoder = ServerFrameDecoder()
    message = decoder.decode(frame)
    assert message == decode_server(frame)
    assert isinstance(message, SnapshotMessage)
    assert (message.ack, message.you, message.base, message.entities, message.events) == part
    assert decoder.shared == 0


@st.composite
def regrouped(draw: st.DrawFn, events: Events) -> Events:
    """Some of ``events`` (repeats allowed), in any order; or events of its own."""
    regroup: bool = draw(st.booleans())
    if events and regroup:
        return tuple(draw(st.lists(st.sampled_from(events), max_size=6)))
    return draw(events_lists)


@given(body=bodies(), first=parts, second=parts, data=st.data())
def test_a_second_frame_with_the_same_body_shares_its_decode(
    body: bytes, first: Part, second: Part, data: st.DataObject
) -> None:
    """Shared exactly when every event it tells was decoded already (by the first)."""
    second = (*second[:4], data.draw(regrouped(first[4])))
    decoder = ServerFrameDecoder()
    first_frame, second_frame = encode_snapshot(body, *first), encode_snapshot(body, *second)
    one = decoder.decode(first_frame)
    two = decoder.decode(second_frame)
    assert two == decode_server(second_frame)
    assert isinstance(one, SnapshotMessage) and isinstance(two, SnapshotMessage)
    assert (two.ack, two.you, two.base, two.entities, two.events) == second  # its own
    decoded: dict[bytes, SnapshotEvent] = {}
    for raw, event in zip(packed_events(first[4]), one.events, strict=True):
        decoded.setdefault(raw, event)  # (the first of repeated events is the one kept)
    known = all(raw in decoded for raw in packed_events(second[4]))
    # A body that holds a client's key anywhere (its state may spell "base") is never
    # shared: a repeated key would override the client's own.
    clean = not any(key in body for key in (b"ack", b"you", b"base", b"entities", b"events"))
    assert decoder.shared == int(known and clean)
    if known and clean:
        for raw, event in zip(packed_events(second[4]), two.events, strict=True):
            assert event is decoded[raw]
    assert one == decode_server(first_frame)  # the first message was not changed


def test_many_recipients_of_one_tick_keep_their_players_and_their_events() -> None:
    decoder = ServerFrameDecoder()
    body = body_of()
    told: list[Events] = [(JOIN, SHOT, HIT), (JOIN,), (), (HIT, JOIN), (SHOT,)]
    frames = [
        encode_snapshot(body, ack, YOU, ack - 1, bytes([ack + 1]) * 3, told[ack % len(told)])
        for ack in range(50)
    ]
    messages = [decoder.decode(frame) for frame in frames]
    assert decoder.shared == len(messages) - 1  # the first told every event
    snapshots = [m for m in messages if isinstance(m, SnapshotMessage)]
    assert len(snapshots) == len(messages)
    assert [m.ack for m in snapshots] == list(range(50))
    assert [m.base for m in snapshots] == list(range(-1, 49))
    assert [m.entities for m in snapshots] == [bytes([ack + 1]) * 3 for ack in range(50)]
    assert [m.events for m in snapshots] == [told[ack % len(told)] for ack in range(50)]
    assert len({id(e) for m in snapshots for e in m.events}) == 3  # one object per event
    assert snapshots == [decode_server(frame) for frame in frames]


@given(
    pool=st.lists(one_event, min_size=1, max_size=6, unique_by=pack_event),
    data=st.data(),
)
def test_recipients_of_the_same_packed_events_share_each_event_object(
    pool: list[SnapshotEvent], data: st.DataObject
) -> None:
    """Once an event is decoded, every frame telling those bytes gets that very object,
    in whatever subset and order (repeats too) it tells them, for any body after. (Each
    new body's first frame tells nothing: that frame is decoded afresh, see below.)"""
    decoder = ServerFrameDecoder()
    first = decoder.decode(encode_snapshot(body_of(1), 0, YOU, -1, b"", pool))
    assert isinstance(first, SnapshotMessage)
    indices = st.lists(st.integers(0, len(pool) - 1), max_size=8)
    frames = data.draw(st.lists(st.tuples(st.integers(1, 3), indices), min_size=1, max_size=12))
    seen_bodies = {1}
    for ack, (tick, told) in enumerate(frames, 1):
        if tick not in seen_bodies:
            seen_bodies.add(tick)
            decoder.decode(encode_snapshot(body_of(tick), ack, YOU))
        frame = encode_snapshot(body_of(tick), ack, YOU, ack - 1, ENTITIES, [pool[i] for i in told])
        message = decoder.decode(frame)
        assert message == decode_server(frame)
        assert isinstance(message, SnapshotMessage)
        assert all(e is first.events[i] for e, i in zip(message.events, told, strict=True))
    assert decoder.shared == len(frames)


def test_a_frame_that_brings_a_new_event_shares_the_events_already_decoded() -> None:
    decoder = ServerFrameDecoder()
    one = decoder.decode(encode_snapshot(body_of(), 1, YOU, -1, b"", (JOIN,)))
    two = decoder.decode(encode_snapshot(body_of(), 2, YOU, -1, b"", (JOIN, SHOT)))
    assert isinstance(one, SnapshotMessage) and isinstance(two, SnapshotMessage)
    assert two.events[0] is one.events[0]


def test_the_first_frame_of_a_new_body_shares_the_events_already_decoded() -> None:
    decoder = ServerFrameDecoder()
    one = decoder.decode(encode_snapshot(body_of(1), 1, YOU, -1, b"", (JOIN,)))
    two = decoder.decode(encode_snapshot(body_of(2), 2, YOU, -1, b"", (JOIN,)))
    assert isinstance(one, SnapshotMessage) and isinstance(two, SnapshotMessage)
    assert two.events[0] is one.events[0]


def test_a_decoded_snapshot_is_frozen_like_any_other() -> None:
    decoder = ServerFrameDecoder()
    body = body_of()
    decoder.decode(encode_snapshot(body, 1, YOU, events=(JOIN,)))
    shared = decoder.decode(encode_snapshot(body, 2, YOU, events=(JOIN,)))
    assert isinstance(shared, SnapshotMessage) and decoder.shared == 1
    with pytest.raises(AttributeError):
        shared.ack = 5  # type: ignore[misc]
    with pytest.raises(AttributeError):
        shared.base = 5  # type: ignore[misc]
    with pytest.raises(AttributeError):
        shared.events = ()  # type: ignore[misc]
    assert isinstance(shared.events, tuple)


# -- everything else takes the general path ------------------------------------------------


@pytest.mark.parametrize(
    "message",
    [
        WelcomeMessage(1, 4, 60, 120, 2.0, "tok", "arena", "eu", 3, ("ws://b",), 17, 2),
        PongMessage(9, 1.25, 3.5),
        ErrorMessage("full", "the node is full", True),
        StandbysMessage(("ws://s1", "ws://s2"), 4),
        TokenMessage("body.mac"),
        SnapshotMessage(
            5, 0.1, 1, 2, YOU, b"\x00" * 26, (ShotEvent(3, 1, 0, "world", 0.1),), b"", 4
        ),
    ],
    ids=lambda m: type(m).__name__,
)
def test_other_frames_decode_as_decode_server_does(message: Message) -> None:
    decoder = ServerFrameDecoder()
    frame = encode(message)
    for _ in range(2):
        assert decoder.decode(frame) == decode_server(frame) == message
    assert decoder.shared == 0


@pytest.mark.parametrize(
    "frame",
    [
        pytest.param(b"", id="empty"),
        pytest.param(b"\xc1", id="not-msgpack"),
        pytest.param(msgpack.packb([1, 2]), id="not-a-map"),
        pytest.param(msgpack.packb({"type": "nope"}), id="unknown-type"),
        pytest.param(msgpack.packb({"type": "pong", "id": 1}), id="missing-field"),
    ],
)
def test_garbage_raises_what_decode_server_raises(frame: bytes) -> None:
    assert_same_as_decode_server(ServerFrameDecoder(), frame)


# -- malformed client parts fall back to the general path -------------------------------------


def frame_with_head(
    ack_bytes: bytes,
    you_bytes: bytes,
    body: bytes,
    players: bytes | None = None,
    events: bytes | None = None,
) -> bytes:
    """A snapshot frame laid out like encode_snapshot's, with hand-written encodings
    (``players``: the base and entities pairs, by default base -1 and no entities;
    ``events``: the events pair, by default an empty array32)."""
    return (
        bytes([0x8A])
        + msgpack.packb("ack")
        + ack_bytes
        + msgpack.packb("you")
        + bytes([0x96])
        + you_bytes
        + (players_part() if players is None else players)
        + (events_pair() if events is None else events)
        + body
    )


def players_part(base: bytes = b"\xd3" + struct.pack(">q", -1), entities: bytes = b"") -> bytes:
    """The base and entities pairs with hand-written encodings (``entities`` whole: its
    msgpack header too; by default an empty bin32)."""
    entities = entities or b"\xc6" + struct.pack(">I", 0)
    return msgpack.packb("base") + base + msgpack.packb("entities") + entities


def array32(count: int) -> bytes:
    return b"\xdd" + struct.pack(">I", count)


def events_pair(
    packed: Sequence[bytes] = (), header: bytes | None = None, key: bytes | None = None
) -> bytes:
    """The events pair with hand-written encodings: ``key``, then ``header`` (by default
    an array32 of as many as ``packed``), then ``packed``."""
    return (
        (msgpack.packb("events") if key is None else key)
        + (array32(len(packed)) if header is None else header)
        + b"".join(packed)
    )


def float64s(values: Sequence[float]) -> bytes:
    return b"".join(b"\xcb" + struct.pack(">d", v) for v in values)


def test_frame_with_head_builds_what_encode_snapshot_does() -> None:
    """The node writes every ack as a 32-bit int (fixed-size heads): uint32, int32 for -1;
    the base as an int64, the entities as a bin32 (a fixed-size part); and the events as
    an array32 of events each packed on its own."""
    body = body_of()
    assert frame_with_head(
        b"\xce" + struct.pack(">I", 300), float64s(YOU), body
    ) == encode_snapshot(body, 300, YOU)
    assert frame_with_head(b"\xd2" + struct.pack(">i", -1), float64s(YOU), body) == encode_snapshot(
        body, -1, YOU
    )
    players = players_part(
        b"\xd3" + struct.pack(">q", 299), b"\xc6" + struct.pack(">I", len(ENTITIES)) + ENTITIES
    )
    assert players == entities_part(299, ENTITIES)
    told = [msgpack.packb(encode_event(e), use_bin_type=True) for e in (JOIN, SHOT)]
    assert told == packed_events((JOIN, SHOT))
    assert events_pair(told) == events_part(told)
    assert events_pair() == events_part([])
    assert frame_with_head(
        b"\xce" + struct.pack(">I", 300), float64s(YOU), body, players, events_pair(told)
    ) == encode_snapshot(body, 300, YOU, 299, ENTITIES, (JOIN, SHOT))


@pytest.mark.parametrize(
    ("ack_bytes", "you_bytes"),
    [
        pytest.param(b"\xd0\xff", float64s(YOU), id="ack-as-int8"),  # valid: -1
        pytest.param(b"\xd2" + struct.pack(">i", -2), float64s(YOU), id="ack-int32-below-1"),
        pytest.param(b"\xcf" + (5).to_bytes(8, "big"), float64s(YOU), id="small-ack-as-uint64"),
        pytest.param(b"\xcf" + (2**40).to_bytes(8, "big"), float64s(YOU), id="ack-too-large"),
        pytest.param(b"\xfe", float64s(YOU), id="ack-minus-two"),
        pytest.param(b"\xc0", float64s(YOU), id="ack-nil"),
        pytest.param(b"\xc3", float64s(YOU), id="ack-true"),
        pytest.param(b"\xcb" + struct.pack(">d", 1.0), float64s(YOU), id="ack-float"),
        pytest.param(b"\xa11", float64s(YOU), id="ack-string"),
        pytest.param(b"\x05", float64s((math.nan, *YOU[1:])), id="you-nan"),
        pytest.param(b"\x05", float64s((*YOU[:5], math.inf)), id="you-inf"),
        pytest.param(b"\x05", float64s((*YOU[:2], 2e9, *YOU[3:])), id="you-too-large"),
        pytest.param(b"\x05", float64s((-1e9 - 1, *YOU[1:])), id="you-too-small"),
        pytest.param(
            b"\x05", b"\xca" + struct.pack(">f", 1.5) + float64s(YOU[1:]), id="you-float32"
        ),
        pytest.param(b"\x05", b"\x01" + float64s(YOU[1:]), id="you-int"),
    ],
)
def test_an_unusual_head_decodes_as_decode_server_does(ack_bytes: bytes, you_bytes: bytes) -> None:
    decoder = ServerFrameDecoder()
    body = body_of()
    frame = frame_with_head(ack_bytes, you_bytes, body)
    for _ in range(2):
        assert_same_as_decode_server(decoder, frame)
    # The body may be cached from the unusual frame or not: a usual frame still decodes right.
    usual = encode_snapshot(body, 9, YOU, 3, ENTITIES)
    assert decoder.decode(usual) == decode_server(usual)


def bin32(blob: bytes, declared: int | None = None) -> bytes:
    """``blob`` as a msgpack bin32, declaring ``declared`` bytes (its length by default)."""
    return b"\xc6" + struct.pack(">I", len(blob) if declared is None else declared) + blob


INT64_FIVE = b"\xd3" + struct.pack(">q", 5)
#: How many bytes after the entities' blob the body starts when no event is told.
EMPTY_EVENTS = len(events_part([]))


@pytest.mark.parametrize(
    "players",
    [
        pytest.param(players_part(b"\x05", bin32(ENTITIES)), id="base-as-fixint"),  # valid
        pytest.param(players_part(b"\xce" + struct.pack(">I", 5)), id="base-as-uint32"),
        pytest.param(players_part(b"\xd2" + struct.pack(">i", 5)), id="base-as-int32"),
        pytest.param(players_part(b"\xd3" + struct.pack(">q", MAX_TICK + 1)), id="base-beyond-max"),
        pytest.param(players_part(b"\xd3" + struct.pack(">q", -2)), id="base-below-1"),
        pytest.param(players_part(b"\xd3" + struct.pack(">q", -(2**63))), id="base-int64-min"),
        pytest.param(players_part(b"\xc0"), id="base-nil"),
        pytest.param(players_part(b"\xc2"), id="base-false"),
        pytest.param(players_part(b"\xcb" + struct.pack(">d", 5.0)), id="base-float"),
        pytest.param(players_part(INT64_FIVE, b"\xc4\x05" + ENTITIES), id="entities-bin8"),
        pytest.param(
            players_part(INT64_FIVE, b"\xc5" + struct.pack(">H", 5) + ENTITIES), id="entities-bin16"
        ),
        pytest.param(players_part(INT64_FIVE, b"\xa3abc"), id="entities-str"),
        pytest.param(players_part(INT64_FIVE, b"\xc0"), id="entities-nil"),
        pytest.param(players_part(INT64_FIVE, bin32(ENTITIES, 2)), id="entities-declared-short"),
        pytest.param(
            players_part(INT64_FIVE, bin32(ENTITIES, 5 + EMPTY_EVENTS)),
            id="entities-swallow-the-events",
        ),
        pytest.param(
            players_part(INT64_FIVE, bin32(ENTITIES, 5 + EMPTY_EVENTS + len(body_of()))),
            id="entities-swallow-the-body",
        ),
        pytest.param(
            players_part(INT64_FIVE, bin32(ENTITIES, 2**32 - 1)), id="entities-beyond-the-frame"
        ),
        pytest.param(
            msgpack.packb("entities") + bin32(ENTITIES) + msgpack.packb("base") + INT64_FIVE,
            id="entities-before-base",
        ),
        pytest.param(
            msgpack.packb("bass") + INT64_FIVE + msgpack.packb("entities") + bin32(ENTITIES),
            id="base-misspelt",
        ),
        pytest.param(
            msgpack.packb("base") + INT64_FIVE + msgpack.packb("entitiez") + bin32(ENTITIES),
            id="entities-misspelt",
        ),
        pytest.param(
            events_pair() + players_part(INT64_FIVE, bin32(ENTITIES)),
            id="events-before-the-players",  # (and none after them)
        ),
    ],
)
def test_an_unusual_players_part_decodes_as_decode_server_does(players: bytes) -> None:
    decoder = ServerFrameDecoder()
    body = body_of()
    events = b"" if players.startswith(msgpack.packb("events")) else None
    frame = frame_with_head(b"\x05", float64s(YOU), body, players, events)
    for _ in range(2):
        assert_same_as_decode_server(decoder, frame)
    usual = encode_snapshot(body, 9, YOU, 3, ENTITIES)
    assert decoder.decode(usual) == decode_server(usual)


JOIN_PACKED, SHOT_PACKED = packed_events((JOIN, SHOT))
BOTH = [JOIN_PACKED, SHOT_PACKED]
EVENTS_KEY = msgpack.packb("events")


@pytest.mark.parametrize(
    ("events", "valid"),
    [
        pytest.param(events_pair(BOTH, b"\x92"), True, id="fixarray"),
        pytest.param(events_pair([], b"\x90"), True, id="empty-fixarray"),
        pytest.param(events_pair(BOTH, b"\xdc\x00\x02"), True, id="array16"),
        pytest.param(events_pair(BOTH, key=b"\xd9\x06events"), True, id="key-as-str8"),
        pytest.param(events_pair([JOIN_PACKED] * 4096), True, id="the-longest-array"),
        pytest.param(events_pair([JOIN_PACKED] * 4097), False, id="beyond-the-longest-array"),
        pytest.param(events_pair(BOTH, array32(1)), False, id="count-short"),
        pytest.param(events_pair(BOTH, array32(3)), False, id="count-long"),  # eats the body
        pytest.param(events_pair([], array32(2**32 - 1)), False, id="count-huge"),
        pytest.param(events_pair([], b"\xdd\x00\x00"), False, id="count-cut"),
        pytest.param(events_pair([SHOT_PACKED[:-3]]), False, id="event-cut"),
        pytest.param(events_pair([b"\xc1"]), False, id="event-not-msgpack"),
        pytest.param(events_pair([msgpack.packb(1)]), False, id="event-not-a-map"),
        pytest.param(events_pair([msgpack.packb({1: 2})]), False, id="event-int-key"),
        pytest.param(
            events_pair([msgpack.packb({"kind": "teleport", "player": 1})]),
            False,
            id="unknown-kind",
        ),
        pytest.param(
            events_pair([msgpack.packb({"kind": "join"})]), False, id="event-missing-a-field"
        ),
        pytest.param(
            events_pair([msgpack.packb({"kind": "leave", "player": -3})]),
            False,
            id="event-out-of-range",
        ),
        pytest.param(
            events_pair([msgpack.packb({"kind": "join", "player": 1, "hat": 2})]),
            False,
            id="event-extra-field",
        ),
        # (A key a client does not know is ignored: a snapshot without events, by the default.)
        pytest.param(events_pair(BOTH, key=msgpack.packb("eventz")), True, id="key-misspelt"),
        pytest.param(EVENTS_KEY + b"\xc0", False, id="events-nil"),
        pytest.param(EVENTS_KEY + msgpack.packb({"kind": "join"}), False, id="events-a-map"),
        pytest.param(b"", False, id="events-missing"),
    ],
)
def test_an_unusual_events_part_decodes_as_decode_server_does(events: bytes, valid: bool) -> None:
    """Even with the body and every event cached (by a usual frame first), an events part
    laid out otherwise than the node writes it takes the general path."""
    decoder = ServerFrameDecoder()
    body = body_of()
    usual = encode_snapshot(body, 9, YOU, 3, ENTITIES, (JOIN, SHOT))
    assert decoder.decode(usual) == decode_server(usual)
    frame = frame_with_head(b"\x05", float64s(YOU), body, players_part(), events)
    assert isinstance(outcome(decode_server, frame), SnapshotMessage) is valid
    for _ in range(2):
        assert_same_as_decode_server(decoder, frame)
    again = encode_snapshot(body, 10, YOU, 4, ENTITIES, (SHOT, JOIN))
    message = decoder.decode(again)
    assert message == decode_server(again)
    assert isinstance(message, SnapshotMessage) and message.events == (SHOT, JOIN)


def test_the_largest_base_a_head_can_write_decodes() -> None:
    decoder = ServerFrameDecoder()
    body = body_of()
    for ack in (1, 2):
        frame = encode_snapshot(body, ack, YOU, MAX_TICK, ENTITIES)
        message = decoder.decode(frame)
        assert message == decode_server(frame)
        assert isinstance(message, SnapshotMessage) and message.base == MAX_TICK
    assert decoder.shared == 1


def test_every_truncation_of_a_snapshot_raises_what_decode_server_raises() -> None:
    decoder = ServerFrameDecoder()
    frame = encode_snapshot(body_of(), 70_000, YOU, 69_990, ENTITIES, (RespawnEvent(2), SHOT))
    for end in range(len(frame)):
        assert_same_as_decode_server(decoder, frame[:end])
    assert decoder.decode(frame) == decode_server(frame)


def test_every_truncation_of_a_frame_whose_parts_are_cached_raises_the_same() -> None:
    """A cut frame whose body (or most of it) and events the decoder holds must not be
    answered from the cache: it is not the frame they were decoded from."""
    decoder = ServerFrameDecoder()
    body = body_of()
    told = (RespawnEvent(2), SHOT)
    decoder.decode(encode_snapshot(body, 1, YOU, 0, ENTITIES, told))
    frame = encode_snapshot(body, 2, YOU, 1, ENTITIES, told)
    for end in range(len(frame)):
        assert_same_as_decode_server(decoder, frame[:end])
    assert decoder.decode(frame) == decode_server(frame)
    assert decoder.shared == 1


@given(
    edits=st.lists(
        st.tuples(
            st.sampled_from(["set", "insert", "delete"]), st.integers(0), st.integers(0, 255)
        ),
        min_size=1,
        max_size=3,
    )
)
def test_any_corruption_of_a_frame_whose_parts_are_cached_decodes_as_decode_server_does(
    edits: list[tuple[str, int, int]],
) -> None:
    decoder = ServerFrameDecoder()
    body = body_of()
    told = (JOIN, HIT, SHOT)
    decoder.decode(encode_snapshot(body, 1, YOU, 0, ENTITIES, told))
    frame = bytearray(encode_snapshot(body, 2, YOU, 1, ENTITIES, told))
    for op, where, value in edits:
        at = where % (len(frame) + (op == "insert"))
        if op == "set":
            frame[at] = value
        elif op == "insert":
            frame.insert(at, value)
        else:
            del frame[at]
    assert_same_as_decode_server(decoder, bytes(frame))


@pytest.mark.parametrize("trailing", [b"\x00", b"\xc0\xc0", b"\x01" * 9])
def test_trailing_bytes_after_a_cached_body_raise_what_decode_server_raises(
    trailing: bytes,
) -> None:
    decoder = ServerFrameDecoder()
    body = body_of()
    decoder.decode(encode_snapshot(body, 1, YOU, 0, ENTITIES, (JOIN,)))
    assert_same_as_decode_server(
        decoder, encode_snapshot(body + trailing, 2, YOU, 1, ENTITIES, (JOIN,))
    )


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(encode_snapshot_body(-1, 0.0, 0), id="negative-tick"),
        pytest.param(encode_snapshot_body(1, -0.5, 0), id="negative-time"),
        pytest.param(encode_snapshot_body(1, math.nan, 0), id="nan-time"),
        pytest.param(encode_snapshot_body(1, 0.5, -1), id="negative-epoch"),
    ],
)
def test_an_invalid_body_raises_every_time_and_is_never_shared(body: bytes) -> None:
    decoder = ServerFrameDecoder()
    for ack in (1, 2, 3):
        frame = encode_snapshot(body, ack, YOU, ack - 1, ENTITIES, (JOIN,))
        expected = outcome(decode_server, frame)
        assert isinstance(expected, type) and issubclass(expected, ProtocolError)
        assert outcome(decoder.decode, frame) == expected
    assert decoder.shared == 0


@pytest.mark.parametrize(
    "event",
    [
        pytest.param(1, id="not-a-map"),
        pytest.param({"kind": "teleport", "player": 1}, id="unknown-kind"),
        pytest.param({"kind": "join"}, id="missing-a-field"),
        pytest.param({"kind": "leave", "player": -3}, id="out-of-range"),
    ],
)
def test_an_invalid_event_raises_every_time_and_is_never_shared(event: Any) -> None:
    """Beside a valid, cached event and a cached body: the invalid one is never cached."""
    decoder = ServerFrameDecoder()
    body = body_of()
    decoder.decode(encode_snapshot(body, 0, YOU, -1, ENTITIES, (JOIN,)))
    for ack in (1, 2, 3):
        told = events_pair([JOIN_PACKED, msgpack.packb(event, use_bin_type=True)])
        frame = frame_with_head(bytes([ack]), float64s(YOU), body, players_part(), told)
        expected = outcome(decode_server, frame)
        assert isinstance(expected, type) and issubclass(expected, ProtocolError)
        assert outcome(decoder.decode, frame) == expected
    assert decoder.shared == 0


REPEATED = {
    "ack": 5,
    "you": list(YOU),
    "base": 4,
    "entities": ENTITIES,
    "events": [encode_event(JOIN)],
}


def body_repeating(key: bytes, value: Any) -> bytes:
    """A body of five pairs, the last (instead of ``state``, which has a default) ``key``
    (already packed) with ``value``."""
    packer = msgpack.Packer(use_bin_type=True, autoreset=False)
    for name, item in (("type", "snapshot"), ("tick", 9), ("server_time", 0.5), ("epoch", 0)):
        packer.pack(name)
        packer.pack(item)
    return packer.bytes() + key + msgpack.packb(value, use_bin_type=True)


def assert_a_repeated_key_is_never_answered_from_the_cache(body: bytes) -> None:
    """The first recipient's part carries the very values the body repeats, so even its
    decode agrees with its part; the second's differ in every field (its events told
    nothing new), so a decode from the cache would differ from decode_server's."""
    decoder = ServerFrameDecoder()
    first = encode_snapshot(body, 5, YOU, 4, ENTITIES, (JOIN,))
    second = encode_snapshot(body, 6, (9.0,) * 6, 5, b"\x07" * 3, ())
    assert isinstance(outcome(decode_server, second), SnapshotMessage)
    assert_same_as_decode_server(decoder, first)
    assert_same_as_decode_server(decoder, second)
    assert decoder.shared == 0


@pytest.mark.parametrize("key", sorted(REPEATED))
def test_a_body_that_repeats_a_clients_key_decodes_as_decode_server_does(key: str) -> None:
    """msgpack keeps the last of repeated keys, so decode_server takes the body's value:
    such a body is a valid snapshot for decode_server, and the decoder must not answer a
    second recipient with its own part's value instead. (Were decode_server to refuse
    repeated keys, both would raise and this would hold too.)"""
    assert_a_repeated_key_is_never_answered_from_the_cache(
        body_repeating(msgpack.packb(key), REPEATED[key])
    )


@pytest.mark.parametrize("key", sorted(REPEATED))
def test_a_body_that_repeats_a_clients_key_as_a_str8_decodes_as_decode_server_does(
    key: str,
) -> None:
    """As above, with the key written as a str8 (as valid msgpack, and the same key)."""
    assert_a_repeated_key_is_never_answered_from_the_cache(
        body_repeating(b"\xd9" + bytes([len(key)]) + key.encode(), REPEATED[key])
    )


@pytest.mark.parametrize("where", ["entities", "events", "body"])
def test_an_oversized_frame_raises_frame_too_large(where: str) -> None:
    big = b"\x00" * MAX_SERVER_FRAME_BYTES
    body = encode_snapshot_body(1, 0.5, 0, big if where == "body" else b"")
    told = events_part([msgpack.packb(big)] if where == "events" else [])
    frame = frame_with_head(
        b"\x01", float64s(YOU), body, entities_part(0, big if where == "entities" else b""), told
    )
    assert len(frame) > MAX_SERVER_FRAME_BYTES
    decoder = ServerFrameDecoder()
    for _ in range(2):
        with pytest.raises(FrameTooLarge):
            decoder.decode(frame)
    assert decoder.shared == 0


def test_a_frame_at_the_size_limit_is_decoded_and_one_byte_more_is_not() -> None:
    body = encode_snapshot_body(1, 0.5, 0)
    padding = MAX_SERVER_FRAME_BYTES - len(encode_snapshot(body, 1, YOU, events=(JOIN,)))
    frame = encode_snapshot(body, 1, YOU, 0, b"\x00" * padding, (JOIN,))
    assert len(frame) == MAX_SERVER_FRAME_BYTES
    decoder = ServerFrameDecoder()
    assert decoder.decode(frame) == decode_server(frame)
    again = encode_snapshot(body, 2, YOU, 1, b"\x01" * padding, (JOIN,))
    assert decoder.decode(again) == decode_server(again) and decoder.shared == 1
    with pytest.raises(FrameTooLarge):
        decoder.decode(encode_snapshot(body, 2, YOU, 1, b"\x01" * (padding + 1), (JOIN,)))


# -- the caches --------------------------------------------------------------------------------


def test_the_cache_drops_the_oldest_body_beyond_its_capacity() -> None:
    decoder = ServerFrameDecoder(capacity=3)
    for tick in range(4):  # body 0 is dropped when body 3 arrives
        decoder.decode(encode_snapshot(body_of(tick), 0, YOU, -1, ENTITIES))
    assert decoder.shared == 0
    for tick in (3, 2, 1):
        frame = encode_snapshot(body_of(tick), 1, YOU, tick - 1, bytes([tick]))
        assert decoder.decode(frame) == decode_server(frame)
    assert decoder.shared == 3
    frame = encode_snapshot(body_of(0), 1, YOU)
    assert decoder.decode(frame) == decode_server(frame)
    assert decoder.shared == 3  # decoded afresh (and cached again, dropping body 1)
    frame = encode_snapshot(body_of(1), 2, YOU)
    assert decoder.decode(frame) == decode_server(frame)
    assert decoder.shared == 3


def told_by(decoder: ServerFrameDecoder, ack: int, events: Events) -> Events:
    """The events ``decoder`` gives for a frame of one body telling ``events``, checked
    against decode_server."""
    frame = encode_snapshot(body_of(), ack, YOU, ack - 1, ENTITIES, events)
    message = decoder.decode(frame)
    assert message == decode_server(frame)
    assert isinstance(message, SnapshotMessage)
    return message.events


def same(events: Events, objects: Events) -> bool:
    """Whether ``events`` are those very objects."""
    return len(events) == len(objects) and all(e is o for e, o in zip(events, objects, strict=True))


def test_the_cache_drops_the_oldest_event_beyond_its_capacity() -> None:
    decoder = ServerFrameDecoder(events_capacity=2)
    a, b, c = JoinEvent(1), LeaveEvent(2), RespawnEvent(3)
    (one,) = told_by(decoder, 1, (a,))
    (two,) = told_by(decoder, 2, (b,))
    (three,) = told_by(decoder, 3, (c,))  # event a is dropped
    assert decoder.shared == 0
    assert same(told_by(decoder, 4, (c, b)), (three, two))
    assert decoder.shared == 1
    assert same(told_by(decoder, 5, (c, b, c)), (three, two, three))
    assert decoder.shared == 2
    (again,) = told_by(decoder, 6, (a,))  # decoded afresh (and cached again, dropping b)
    assert decoder.shared == 2 and again is not one
    assert same(told_by(decoder, 7, (a, c)), (again, three))
    assert decoder.shared == 3
    told_by(decoder, 8, (b,))
    assert decoder.shared == 3


def test_a_frame_telling_more_events_than_the_cache_holds_is_decoded_afresh_each_time() -> None:
    decoder = ServerFrameDecoder(events_capacity=2)
    told = (JOIN, SHOT, HIT)
    for ack in range(4):
        assert told_by(decoder, ack, told) == told
    assert decoder.shared == 0
    assert told_by(decoder, 9, told[1:]) == told[1:]  # the last two stayed
    assert decoder.shared == 1


def test_bodies_alike_in_their_first_bytes_and_length_are_told_apart() -> None:
    decoder = ServerFrameDecoder()
    body_a = body_of(state=b"\x01" * 100)
    body_b = body_of(state=b"\x01" * 99 + b"\x02")
    assert len(body_a) == len(body_b) and body_a[:64] == body_b[:64]
    for body, ack in ((body_a, 1), (body_b, 2), (body_a, 3), (body_b, 4), (body_b, 5)):
        frame = encode_snapshot(body, ack, YOU, ack - 1, ENTITIES, (JOIN,))
        assert decoder.decode(frame) == decode_server(frame)
    assert decoder.shared == 1  # only the last: each other body replaced the one before


def test_frames_alike_but_for_their_players_are_each_their_own() -> None:
    """The players sit between head and body: a frame whose body is cached gets its own."""
    decoder = ServerFrameDecoder()
    body = body_of()
    blobs = [b"", ENTITIES, ENTITIES[:-1] + b"\x01", ENTITIES + ENTITIES]
    for base, blob in enumerate(blobs):
        frame = encode_snapshot(body, 1, YOU, base - 1, blob)
        message = decoder.decode(frame)
        assert message == decode_server(frame)
        assert isinstance(message, SnapshotMessage)
        assert (message.base, message.entities) == (base - 1, blob)
    assert decoder.shared == len(blobs) - 1


POOL = (JOIN, SHOT, HIT, RespawnEvent(2), LeaveEvent(3))


@given(
    capacity=st.integers(1, 4),
    events_capacity=st.integers(1, 4),
    stream=st.lists(
        st.tuples(st.integers(0, 6), parts, st.lists(st.sampled_from(POOL), max_size=4)),
        max_size=40,
    ),
)
def test_any_stream_through_small_caches_decodes_as_decode_server_does(
    capacity: int,
    events_capacity: int,
    stream: list[tuple[int, Part, list[SnapshotEvent]]],
) -> None:
    decoder = ServerFrameDecoder(capacity=capacity, events_capacity=events_capacity)
    for tick, part, told in stream:
        frame = encode_snapshot(body_of(tick), *part[:4], told)
        assert decoder.decode(frame) == decode_server(frame)
    assert decoder.shared <= len(stream)
