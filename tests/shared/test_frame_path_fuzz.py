"""The node's frame path under hostile bytes, property-based: whatever a client writes, the
frame reader (:class:`shared.wsframe.FrameReader`, as the node reads a player's socket)
either hands on whole messages or raises :class:`~shared.wsframe.FrameFault` with a close
code the protocol names (1002, 1009), and every binary message either decodes
(:func:`shared.protocol.decode_client`) or raises a :class:`~shared.protocol.ProtocolError`
with a documented error code. Never another exception: that would be a traceback in the
node. The streams are frames with arbitrary header bits, masks, declared lengths and
payloads (random bytes, msgpack values, protocol messages with one field spoiled), cut
into reads anywhere."""

from __future__ import annotations

import itertools
import struct
from typing import Any

import msgpack
from hypothesis import given, settings
from hypothesis import strategies as st

from shared import protocol
from shared.wsframe import OP_BINARY, OP_CLOSE, FrameFault, FrameReader, close_code, mask

#: docs/protocol.md, "error": what the codec may answer a frame with.
CODEC_ERRORS = {
    "malformed_frame",
    "frame_too_large",
    "unknown_type",
    "invalid_field",
    "version_mismatch",
}
FRAMING_CLOSES = {1002, 1009}  # a framing fault; a message over the limit
MAX_MESSAGE = 1 << 16  # the node's WebSocket message limit

values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats()  # NaN and the infinities included
    | st.text(max_size=40)
    | st.binary(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)
VALID: tuple[dict[str, Any], ...] = (
    {"type": "join", "v": protocol.PROTOCOL_VERSION, "name": "a", "token": None,
     "interp_delay": 0.1},
    {"type": "input", "seq": 1, "tick": 1, "ack_tick": 0, "move": [0.0, 1.0], "yaw": 0.5,
     "pitch": 0.0, "buttons": 2, "view_time": 1.0},
    {"type": "ping", "id": 1, "t": 2.0},
    {"type": "probe_echo", "id": 3},
)  # fmt: skip


@st.composite
def spoiled(draw: st.DrawFn) -> bytes:
    """A valid client message with one field replaced, removed or added."""
    message = dict(draw(st.sampled_from(VALID)))
    name = draw(st.sampled_from([*message, "extra"]))
    if draw(st.booleans()) and name in message:
        del message[name]
    else:
        message[name] = draw(values)
    return msgpack.packb(message, use_bin_type=True)


payloads = st.one_of(
    st.binary(max_size=300),
    values.map(lambda value: msgpack.packb(value, use_bin_type=True)),
    spoiled(),
    st.sampled_from(VALID).map(lambda value: msgpack.packb(value, use_bin_type=True)),
    spoiled().flatmap(lambda whole: st.integers(0, len(whole)).map(lambda cut: whole[:cut])),
    st.integers(1020, 1100).map(lambda n: msgpack.packb({"type": "ping", "pad": "x" * n})),
)


@st.composite
def frames(draw: st.DrawFn) -> bytes:
    """One frame: any first byte (FIN, RSV, opcode), masked or not, its length in any of
    the three encodings, sometimes declaring more or fewer bytes than follow."""
    if draw(st.integers(0, 7)):  # mostly what clients send: binary, text, fragments, control
        first = draw(st.sampled_from([0x82, 0x82, 0x82, 0x81, 0x02, 0x80, 0x88, 0x89, 0x8A]))
    else:
        first = draw(st.integers(0, 255))
    payload = draw(payloads)
    if first & 0x0F == OP_CLOSE and draw(st.booleans()):
        payload = struct.pack("!H", draw(st.integers(0, 5000))) + payload[:100]
    masked = draw(st.integers(0, 19)) > 0
    length = len(payload)
    if draw(st.integers(0, 19)) == 0:  # a lie about the length (over the limit too)
        length = draw(st.integers(0, MAX_MESSAGE + 10) | st.integers(0, 2**64 - 1))
    form = draw(st.sampled_from(["short", "16", "64"]))
    if form == "short" and length < 126:
        head = bytes((first, (0x80 if masked else 0) | length))
    elif form != "64" and length < 1 << 16:
        head = struct.pack("!BBH", first, (0x80 if masked else 0) | 126, length)
    else:
        head = struct.pack("!BBQ", first, (0x80 if masked else 0) | 127, length)
    if not masked:
        return head + payload
    key = draw(st.binary(min_size=4, max_size=4))
    return head + key + mask(payload, key)


junk = st.binary(max_size=16) | st.just(b"")
streams = st.tuples(st.lists(frames(), max_size=6), junk).map(
    lambda parts: b"".join(parts[0]) + parts[1]
)


def read(stream: bytes, cuts: list[int]) -> tuple[list[tuple[int, bytes]], int | None]:
    """What the frame reader makes of ``stream`` fed in the reads ``cuts`` makes of it:
    the messages and control frames it handed on, and the fault's close code (or None)."""
    seen: list[tuple[int, bytes]] = []

    def control(opcode: int, payload: bytes) -> None:
        if opcode == OP_CLOSE:
            close_code(payload)  # as the node reads a close (a bad code is a fault)
        seen.append((opcode, payload))

    reader = FrameReader(
        masked=True,
        max_size=MAX_MESSAGE,
        on_message=lambda opcode, payload: seen.append((opcode, payload)),
        on_control=control,
    )
    bounds = [0, *sorted(cut % (len(stream) + 1) for cut in cuts), len(stream)]
    try:
        for start, stop in itertools.pairwise(bounds):
            reader.feed(stream[start:stop])
    except FrameFault as fault:
        return seen, fault.code
    return seen, None


@settings(max_examples=300)
@given(streams, st.lists(st.integers(0, 2**16), max_size=5))
def test_any_stream_gives_messages_or_a_framing_close_and_never_another_error(
    stream: bytes, cuts: list[int]
) -> None:
    seen, fault = read(stream, cuts)
    assert fault is None or fault in FRAMING_CLOSES
    # However the bytes were cut into reads, the reader makes the same of them.
    assert read(stream, []) == (seen, fault)
    for opcode, payload in seen:
        assert len(payload) <= MAX_MESSAGE
        if opcode != OP_BINARY:
            continue
        try:
            message = protocol.decode_client(payload)
        except protocol.ProtocolError as error:
            assert error.code in CODEC_ERRORS, error
        else:
            assert isinstance(
                message,
                protocol.JoinMessage
                | protocol.InputMessage
                | protocol.PingMessage
                | protocol.ProbeEchoMessage
                | protocol.SightingMessage,
            )


@settings(max_examples=300)
@given(spoiled())
def test_a_spoiled_message_that_decodes_is_a_valid_message_and_round_trips(
    payload: bytes,
) -> None:
    """What the decoder accepts (its fast paths included) passes every field's check when
    built again, and encodes back to itself: a bad value never gets through as a default."""
    try:
        message = protocol.decode_client(payload)
    except protocol.ProtocolError as error:
        assert error.code in CODEC_ERRORS
        return
    fields = {name: getattr(message, name) for name in message.FIELDS}
    assert type(message)(**fields) == message
    assert protocol.decode_client(protocol.encode(message)) == message
