"""ServerFrameDecoder must say exactly what decode_server says, sharing each body's decode."""

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
    Message,
    PongMessage,
    ProtocolError,
    ServerFrameDecoder,
    ServerMessage,
    SnapshotMessage,
    StandbysMessage,
    TokenMessage,
    WelcomeMessage,
    decode_server,
    encode,
    encode_snapshot,
    encode_snapshot_body,
)
from shared.protocol.events import JoinEvent, RespawnEvent, ShotEvent
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
entity_blobs = st.binary(max_size=26 * 8)
events_lists = snapshot_events


@st.composite
def bodies(draw: st.DrawFn) -> bytes:
    return encode_snapshot_body(
        draw(ticks), draw(server_times), draw(epochs), draw(entity_blobs), draw(events_lists)
    )


def body_of(tick: int = 7, *, entities: bytes = b"\x01" * 26, events: Any = None) -> bytes:
    """A small valid shared body."""
    return encode_snapshot_body(tick, tick / 60, 3, entities, [] if events is None else events)


YOU = (1.0, 2.0, 3.0, 0.5, -0.5, 0.0)


def raw_body(*, events: list[Any]) -> bytes:
    """A shared body as encode_snapshot_body lays it out, with events no node would send."""
    packer = msgpack.Packer(use_bin_type=True, autoreset=False)
    for key, value in (("type", "snapshot"), ("tick", 1), ("server_time", 0.5), ("epoch", 0),
                       ("entities", b""), ("events", events)):  # fmt: skip
        packer.pack(key)
        packer.pack(value)
    return packer.bytes()


def outcome(decode: Callable[[bytes], ServerMessage], frame: bytes) -> ServerMessage | type:
    """The decoded message, or the type of the protocol error it raised."""
    try:
        return decode(frame)
    except ProtocolError as error:
        return type(error)


def assert_same_as_decode_server(decoder: ServerFrameDecoder, frame: bytes) -> None:
    assert outcome(decoder.decode, frame) == outcome(decode_server, frame)


# -- snapshots as encode_snapshot lays them out ------------------------------------------------


@given(body=bodies(), ack=acks, you=yous)
def test_a_first_snapshot_decodes_as_decode_server_does(
    body: bytes, ack: int, you: tuple[float, ...]
) -> None:
    frame = encode_snapshot(body, ack, you)
    decoder = ServerFrameDecoder()
    message = decoder.decode(frame)
    assert message == decode_server(frame)
    assert isinstance(message, SnapshotMessage)
    assert (message.ack, message.you) == (ack, you)
    assert decoder.shared == 0


@given(body=bodies(), first=st.tuples(acks, yous), second=st.tuples(acks, yous))
def test_a_second_frame_with_the_same_body_shares_its_decode(
    body: bytes, first: tuple[int, tuple[float, ...]], second: tuple[int, tuple[float, ...]]
) -> None:
    decoder = ServerFrameDecoder()
    first_frame, second_frame = encode_snapshot(body, *first), encode_snapshot(body, *second)
    one = decoder.decode(first_frame)
    two = decoder.decode(second_frame)
    assert two == decode_server(second_frame)
    assert isinstance(one, SnapshotMessage) and isinstance(two, SnapshotMessage)
    assert (two.ack, two.you) == second
    assert two.entities is one.entities
    assert two.events is one.events
    assert decoder.shared == 1
    assert one == decode_server(first_frame)  # the first message was not changed


def test_many_recipients_of_one_tick_share_one_entities_and_one_events_object() -> None:
    decoder = ServerFrameDecoder()
    body = body_of(events=[JoinEvent(1), ShotEvent(1, 7, 0, "miss", 2.5)])
    messages = [decoder.decode(encode_snapshot(body, ack, YOU)) for ack in range(-1, 50)]
    assert decoder.shared == len(messages) - 1
    snapshots = [m for m in messages if isinstance(m, SnapshotMessage)]
    assert len(snapshots) == len(messages)
    assert [m.ack for m in snapshots] == list(range(-1, 50))
    assert len({id(m.entities) for m in snapshots}) == 1
    assert len({id(m.events) for m in snapshots}) == 1


def test_a_decoded_snapshot_is_frozen_like_any_other() -> None:
    decoder = ServerFrameDecoder()
    body = body_of()
    decoder.decode(encode_snapshot(body, 1, YOU))
    shared = decoder.decode(encode_snapshot(body, 2, YOU))
    assert isinstance(shared, SnapshotMessage) and decoder.shared == 1
    with pytest.raises(AttributeError):
        shared.ack = 5  # type: ignore[misc]


# -- everything else takes the general path ------------------------------------------------


@pytest.mark.parametrize(
    "message",
    [
        WelcomeMessage(1, 4, 60, 120, 2.0, "tok", "arena", "eu", 3, ("ws://b",), 17, 2),
        PongMessage(9, 1.25, 3.5),
        ErrorMessage("full", "the node is full", True),
        StandbysMessage(("ws://s1", "ws://s2"), 4),
        TokenMessage("body.mac"),
        SnapshotMessage(5, 0.1, 1, 2, YOU, b"\x00" * 26, (ShotEvent(3, 1, 0, "world", 0.1),)),
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


# -- malformed heads fall back to the general path -------------------------------------------


def frame_with_head(ack_bytes: bytes, you_bytes: bytes, body: bytes) -> bytes:
    """A snapshot frame laid out like encode_snapshot's, with hand-written encodings."""
    return (
        bytes([0x89])
        + msgpack.packb("ack")
        + ack_bytes
        + msgpack.packb("you")
        + bytes([0x96])
        + you_bytes
        + body
    )


def float64s(values: Sequence[float]) -> bytes:
    return b"".join(b"\xcb" + struct.pack(">d", v) for v in values)


def test_frame_with_head_builds_what_encode_snapshot_does() -> None:
    """The node writes every ack as a 32-bit int (fixed-size heads): uint32, int32 for -1."""
    body = body_of()
    assert frame_with_head(
        b"\xce" + struct.pack(">I", 300), float64s(YOU), body
    ) == encode_snapshot(body, 300, YOU)
    assert frame_with_head(b"\xd2" + struct.pack(">i", -1), float64s(YOU), body) == encode_snapshot(
        body, -1, YOU
    )


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
    usual = encode_snapshot(body, 9, YOU)
    assert decoder.decode(usual) == decode_server(usual)


def test_every_truncation_of_a_snapshot_raises_what_decode_server_raises() -> None:
    decoder = ServerFrameDecoder()
    frame = encode_snapshot(body_of(events=[RespawnEvent(2)]), 70_000, YOU)
    for end in range(len(frame)):
        assert_same_as_decode_server(decoder, frame[:end])
    assert decoder.decode(frame) == decode_server(frame)


def test_trailing_bytes_after_a_cached_body_raise_what_decode_server_raises() -> None:
    decoder = ServerFrameDecoder()
    body = body_of()
    decoder.decode(encode_snapshot(body, 1, YOU))
    assert_same_as_decode_server(decoder, encode_snapshot(body + b"\x00", 2, YOU))


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(encode_snapshot_body(-1, 0.0, 0, b"", []), id="negative-tick"),
        pytest.param(encode_snapshot_body(1, -0.5, 0, b"", []), id="negative-time"),
        pytest.param(encode_snapshot_body(1, math.nan, 0, b"", []), id="nan-time"),
        pytest.param(encode_snapshot_body(1, 0.5, -1, b"", []), id="negative-epoch"),
        pytest.param(raw_body(events=[1, 2]), id="events-not-maps"),
        pytest.param(raw_body(events=[{"kind": "teleport", "player": 1}]), id="unknown-kind"),
        pytest.param(raw_body(events=[{"kind": "join"}]), id="event-missing-a-field"),
        pytest.param(raw_body(events=[{"kind": "leave", "player": -3}]), id="event-out-of-range"),
    ],
)
def test_an_invalid_body_raises_every_time_and_is_never_shared(body: bytes) -> None:
    decoder = ServerFrameDecoder()
    for ack in (1, 2, 3):
        frame = encode_snapshot(body, ack, YOU)
        expected = outcome(decode_server, frame)
        assert isinstance(expected, type) and issubclass(expected, ProtocolError)
        assert outcome(decoder.decode, frame) == expected
    assert decoder.shared == 0


@pytest.mark.parametrize("key", ["ack", "you"])
def test_a_body_that_repeats_a_head_key_decodes_as_decode_server_does(key: str) -> None:
    """msgpack keeps the last of repeated keys, so decode_server takes the body's value.

    Such a body (six pairs, one of them ``ack`` or ``you`` instead of ``events``, which has
    a default) is a valid snapshot for decode_server; the decoder must not answer a second
    recipient with its own head's value instead. (Were decode_server to refuse repeated
    keys, both would raise and this would hold too.)
    """
    packer = msgpack.Packer(use_bin_type=True, autoreset=False)
    for name, value in (
        ("type", "snapshot"),
        ("tick", 1),
        ("server_time", 0.5),
        ("epoch", 0),
        ("entities", b""),
        ("ack", 5) if key == "ack" else ("you", list(YOU)),
    ):
        packer.pack(name)
        packer.pack(value)
    body = packer.bytes()
    decoder = ServerFrameDecoder()
    first, second = encode_snapshot(body, 5, YOU), encode_snapshot(body, 6, (9.0,) * 6)
    assert_same_as_decode_server(decoder, first)
    assert_same_as_decode_server(decoder, second)


def test_an_oversized_frame_raises_frame_too_large() -> None:
    body = encode_snapshot_body(1, 0.5, 0, b"\x00" * MAX_SERVER_FRAME_BYTES, [])
    frame = encode_snapshot(body, 1, YOU)
    assert len(frame) > MAX_SERVER_FRAME_BYTES
    decoder = ServerFrameDecoder()
    for _ in range(2):
        with pytest.raises(FrameTooLarge):
            decoder.decode(frame)
    assert decoder.shared == 0


def test_a_frame_at_the_size_limit_is_decoded() -> None:
    empty = encode_snapshot(encode_snapshot_body(1, 0.5, 0, b"", []), 1, YOU)
    padding = MAX_SERVER_FRAME_BYTES - len(empty) - 3  # a bin 32 head is 3 bytes over bin 8's
    frame = encode_snapshot(encode_snapshot_body(1, 0.5, 0, b"\x00" * padding, []), 1, YOU)
    assert len(frame) == MAX_SERVER_FRAME_BYTES
    decoder = ServerFrameDecoder()
    assert decoder.decode(frame) == decode_server(frame)


# -- the cache ---------------------------------------------------------------------------------


def test_the_cache_drops_the_oldest_body_beyond_its_capacity() -> None:
    decoder = ServerFrameDecoder(capacity=3)
    for tick in range(4):  # body 0 is dropped when body 3 arrives
        decoder.decode(encode_snapshot(body_of(tick), 0, YOU))
    assert decoder.shared == 0
    for tick in (3, 2, 1):
        frame = encode_snapshot(body_of(tick), 1, YOU)
        assert decoder.decode(frame) == decode_server(frame)
    assert decoder.shared == 3
    frame = encode_snapshot(body_of(0), 1, YOU)
    assert decoder.decode(frame) == decode_server(frame)
    assert decoder.shared == 3  # decoded afresh (and cached again, dropping body 1)
    frame = encode_snapshot(body_of(1), 2, YOU)
    assert decoder.decode(frame) == decode_server(frame)
    assert decoder.shared == 3


def test_bodies_alike_in_their_first_bytes_and_length_are_told_apart() -> None:
    decoder = ServerFrameDecoder()
    body_a = body_of(entities=b"\x01" * 100)
    body_b = body_of(entities=b"\x01" * 99 + b"\x02")
    assert len(body_a) == len(body_b) and body_a[:64] == body_b[:64]
    for body, ack in ((body_a, 1), (body_b, 2), (body_a, 3), (body_b, 4), (body_b, 5)):
        frame = encode_snapshot(body, ack, YOU)
        assert decoder.decode(frame) == decode_server(frame)
    assert decoder.shared == 1  # only the last: each other body replaced the one before


@given(
    capacity=st.integers(1, 4),
    stream=st.lists(st.tuples(st.integers(0, 6), acks, yous), max_size=40),
)
def test_any_stream_through_a_small_cache_decodes_as_decode_server_does(
    capacity: int, stream: list[tuple[int, int, tuple[float, ...]]]
) -> None:
    decoder = ServerFrameDecoder(capacity=capacity)
    for tick, ack, you in stream:
        frame = encode_snapshot(body_of(tick), ack, you)
        assert decoder.decode(frame) == decode_server(frame)
    assert decoder.shared <= len(stream)
