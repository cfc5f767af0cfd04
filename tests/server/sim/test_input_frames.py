"""The batch input decoder must be sure when it says ok: every row it decodes equals what
the ordinary decoder makes of the same frame, and every read it cannot vouch for is
handed back whole. The split tells a frame's kind by its message ``type``, as msgpack's
own reader finds it, in the kernel and in the plain-Python paths alike."""

from __future__ import annotations

import math

import msgpack
import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from server.sim.input_frames import (
    FRAME_CLOSE,
    FRAME_INPUT,
    FRAME_LONG_INPUT,
    FRAME_ODD,
    FRAME_OTHER,
    decode_input_frames,
    few_frames,
    sole_frame_kind,
    split_read,
)
from shared import protocol
from shared.protocol import InputMessage, PingMessage, ProtocolError, decode_client
from shared.wsframe import OP_BINARY, OP_CLOSE, OP_PING, OP_TEXT, frame
from tests.shared.test_protocol import inputs as input_messages
from tests.shared.test_protocol import joins, pings, sightings
from tests.shared.test_protocol_fast_path import values

#: The protocol takes an integer wherever it documents a number: small ones (a compact
#: client's), and ones beyond 2**53 (which the kernel leaves to the ordinary reader).
integral = st.one_of(st.integers(-300, 300), st.integers(-(2**60), 2**60))
inputs = st.fixed_dictionaries(
    {
        "type": st.one_of(st.just("input"), st.just("inpuT"), values),
        "seq": st.one_of(st.integers(-5, 2**32 + 5), values),
        "tick": st.one_of(st.integers(-5, 2**53 + 2), values),
        "ack_tick": st.one_of(st.integers(-(2**40), 10**6), values),
        "move": st.one_of(
            st.lists(st.one_of(st.floats(-2e6, 2e6), integral), min_size=2, max_size=2), values
        ),
        "yaw": st.one_of(st.floats(-4.0, 4.0), integral, values),
        "pitch": st.one_of(st.floats(-2.0, 2.0), integral, values),
        "buttons": st.one_of(st.integers(-3, 300), values),
        "view_time": st.one_of(st.floats(-1.0, 2e9), integral, values),
    },
    optional={"extra": values},
)


def ordinary(payload: bytes) -> InputMessage | None:
    """What the node's ordinary path makes of a payload: the input, or None."""
    try:
        message = decode_client(payload)
    except ProtocolError:
        return None
    return message if isinstance(message, InputMessage) else None


def row(columns, index: int) -> InputMessage:  # type: ignore[no-untyped-def]
    seq, tick, ack, buttons = columns.ints[index].tolist()
    move_x, move_y, yaw, pitch, view = columns.floats[index].tolist()
    return InputMessage(seq, tick, (move_x, move_y), yaw, pitch, buttons, view, ack)


@settings(max_examples=400, deadline=None)  # (the first call may compile the kernel)
@given(inputs, st.randoms(use_true_random=False), st.booleans())
def test_a_row_the_kernel_decodes_is_what_the_ordinary_decoder_makes_of_the_frame(
    fields: dict, rng, single_floats: bool
) -> None:
    keys = list(fields)
    rng.shuffle(keys)  # any key order is valid msgpack
    try:
        payload = msgpack.packb(
            {key: fields[key] for key in keys}, use_bin_type=True, use_single_float=single_floats
        )
    except OverflowError:  # a float beyond float32's range
        assume(False)
    data = frame(OP_BINARY, payload, masked=True)
    columns = decode_input_frames([data])
    expected = ordinary(payload)
    if columns.read_ok[0]:
        assert len(columns.read_of) == 1
        assert expected is not None and row(columns, 0) == expected
        assert all(math.isfinite(v) for v in columns.floats[0])
    elif len(payload) <= 125 and expected is not None:
        # Declined a valid input: only for an integer beyond 2**53 where a number goes.
        numbers = [*fields["move"], *(fields[key] for key in ("yaw", "pitch", "view_time"))]
        assert any(type(v) is int and abs(v) > 2**53 for v in numbers)
    # Its kind is its type's, however the map is laid out (each input's own budget).
    is_input = fields["type"] == "input"
    kind = FRAME_OTHER if not is_input else FRAME_INPUT if len(payload) <= 125 else FRAME_LONG_INPUT
    assert kinds_of(data)[0] == [kind]
    assert sole_frame_kind(data) in (-1, kind) if len(payload) <= 125 else True


def test_integer_valued_numbers_decode_as_the_floats_they_equal() -> None:
    """A compact client sends whole numbers as msgpack integers, in their shortest
    encodings: its inputs are 73-90 bytes, and the kernel takes them."""
    fields = {"type": "input", "seq": 7, "tick": 420, "ack_tick": 418, "move": [1, 0],
              "yaw": 0, "pitch": -1, "buttons": 2, "view_time": 6}  # fmt: skip
    payloads = [msgpack.packb(fields)]
    for view_time, move in ((0, [0, 0]), (123_456_789, [-(10**6), 1]), (-0.0, [0.5, -1])):
        payloads.append(msgpack.packb(fields | {"view_time": view_time, "move": move}))
    payloads.append(msgpack.packb(fields | {"yaw": -(2**53), "view_time": 10**9}))
    columns = decode_input_frames([frame(OP_BINARY, p, masked=True) for p in payloads])
    assert columns.read_ok.all()
    assert [row(columns, i) for i in range(len(payloads))] == [ordinary(p) for p in payloads]
    assert row(columns, 0) == InputMessage(7, 420, (1.0, 0.0), 0.0, -1.0, 2, 6.0, 418)
    assert type(row(columns, 0).view_time) is float
    beyond = msgpack.packb(fields | {"yaw": 2**53 + 2})  # valid: the ordinary reader's
    assert ordinary(beyond) is not None
    assert not decode_input_frames([frame(OP_BINARY, beyond, masked=True)]).read_ok[0]


def test_what_the_bots_send_is_decoded() -> None:
    sent = [
        InputMessage(seq, seq + 100, (0.5, -0.25), 3.0, -1.5, 3, 12.25, seq - 1)
        for seq in range(0, 300, 7)
    ]
    reads = [frame(OP_BINARY, protocol.encode(message), masked=True) for message in sent]
    columns = decode_input_frames(reads)
    assert columns.read_ok.all() and columns.read_of.tolist() == list(range(len(sent)))
    assert [row(columns, i) for i in range(len(sent))] == sent


def test_a_read_of_several_frames_gives_a_row_for_each_in_order() -> None:
    first = InputMessage(1, 1, (1.0, 0.0), 0.0, 0.0, 0, 1.0, -1)
    second = InputMessage(2, 2, (0.0, 1.0), 0.5, 0.0, 1, 1.5, 1)
    pair = b"".join(frame(OP_BINARY, protocol.encode(m), masked=True) for m in (first, second))
    alone = frame(OP_BINARY, protocol.encode(first), masked=True)
    columns = decode_input_frames([alone, pair])
    assert columns.read_ok.tolist() == [True, True]
    assert columns.read_of.tolist() == [0, 1, 1]
    assert [row(columns, i) for i in range(3)] == [first, first, second]


def test_a_read_with_anything_else_in_it_is_handed_back_whole() -> None:
    good = frame(
        OP_BINARY, protocol.encode(InputMessage(1, 1, (0, 0), 0, 0, 0, 1, -1)), masked=True
    )
    ping = frame(OP_BINARY, protocol.encode(PingMessage(1, 2.0)), masked=True)
    reads = [
        good,
        good + ping,  # an input, then a ping: not all inputs
        good[:-1],  # cut short
        good + good[:10],  # an input and the start of the next
        frame(OP_TEXT, protocol.encode(InputMessage(1, 1, (0, 0), 0, 0, 0, 1, -1)), masked=True),
        frame(OP_BINARY, protocol.encode(InputMessage(1, 1, (0, 0), 0, 0, 0, 1, -1)), masked=False),
        good,
    ]
    columns = decode_input_frames(reads)
    assert columns.read_ok.tolist() == [True, False, False, False, False, False, True]
    assert columns.read_of.tolist() == [0, 6]  # the rejected reads keep no rows


def test_nothing_held_decodes_to_nothing() -> None:
    columns = decode_input_frames([])
    assert columns.read_ok.shape == (0,) and columns.ints.shape == (0, 4)


def kinds_of(data: bytes, max_size: int = 1 << 16) -> tuple[list[int], int, int]:
    frames = split_read(data, max_size)
    assert frames.bounds[0] == 0 or len(frames.kinds) == 0
    return frames.kinds.tolist(), frames.end, frames.need


def test_a_read_splits_into_its_frames_by_their_headers() -> None:
    an_input = frame(
        OP_BINARY, protocol.encode(InputMessage(1, 1, (0, 0), 0, 0, 0, 1, -1)), masked=True
    )
    ping = frame(OP_BINARY, protocol.encode(PingMessage(1, 2.0)), masked=True)
    ws_ping = frame(OP_PING, b"?", masked=True)
    size = len(an_input)
    assert kinds_of(an_input) == ([FRAME_INPUT], size, 0)
    assert kinds_of(an_input * 20) == ([FRAME_INPUT] * 20, 20 * size, 0)  # however many
    assert kinds_of(ping + an_input + ws_ping + frame(OP_TEXT, b"hi", masked=True)) == (
        [FRAME_OTHER, FRAME_INPUT, FRAME_OTHER, FRAME_OTHER],
        len(ping) + size + len(ws_ping) + 8,
        0,
    )
    long_input = frame(OP_BINARY, msgpack.packb({"type": "input", "pad": "x" * 200}), masked=True)
    long_other = frame(OP_BINARY, b"\x89" + b"x" * 200, masked=True)  # (a 16-bit length)
    fragment = bytes([0x02]) + ping[1:]  # binary, not final
    assert kinds_of(long_input + fragment + long_other)[0] == [
        FRAME_LONG_INPUT,
        FRAME_ODD,
        FRAME_OTHER,
    ]
    # A close ends what counts; a frame cut short says what it needs; a fault stops it.
    close = frame(OP_CLOSE, b"", masked=True)
    assert kinds_of(an_input + close + an_input) == ([FRAME_INPUT, FRAME_CLOSE], size + 6, 0)
    assert kinds_of(an_input + an_input[:8]) == ([FRAME_INPUT], size, size)
    assert kinds_of(an_input[:1]) == ([], 0, 2)
    assert kinds_of(long_input[:3]) == ([], 0, 4)  # (the 16-bit length is not there yet)
    assert kinds_of(long_input[:5]) == ([], 0, len(long_input))
    unmasked = frame(OP_BINARY, b"x", masked=False)
    assert kinds_of(ping + unmasked) == ([FRAME_OTHER], len(ping), -1)
    assert kinds_of(long_input, max_size=100) == ([], 0, -1)  # too big: the reader says 1009
    huge = bytes([0x82, 0xFF]) + (1 << 63).to_bytes(8, "big")
    assert kinds_of(huge) == ([], 0, -1)
    assert kinds_of(b"") == ([], 0, 0)


def test_a_read_of_one_frame_is_told_without_the_kernel_as_the_kernel_would() -> None:
    an_input = frame(
        OP_BINARY, protocol.encode(InputMessage(1, 1, (0, 0), 0, 0, 0, 1, -1)), masked=True
    )
    reads = [
        an_input,
        frame(OP_BINARY, protocol.encode(PingMessage(1, 2.0)), masked=True),
        frame(OP_CLOSE, b"", masked=True),
        frame(OP_PING, b"", masked=True),
        frame(0x3, b"?", masked=True),
    ]
    for data in reads:
        assert [sole_frame_kind(data)] == kinds_of(data)[0]
    for data in (an_input * 2, an_input[:-1], an_input[:3], frame(OP_BINARY, b"x", masked=False)):
        assert sole_frame_kind(data) == -1
    assert sole_frame_kind(frame(OP_BINARY, b"\x89" + b"x" * 200, masked=True)) == -1
    # "type" not first: only the kernel's walk can tell
    late = frame(OP_BINARY, msgpack.packb({"seq": 1, "type": "input"}), masked=True)
    assert sole_frame_kind(late) == -1 and kinds_of(late)[0] == [FRAME_INPUT]


def reference_is_input(payload: bytes) -> bool:
    """Whether ``payload`` is a msgpack map whose first ``type`` entry is ``"input"``, as
    msgpack's own streaming reader finds it."""
    unpacker = msgpack.Unpacker(raw=False, unicode_errors="surrogateescape")
    unpacker.feed(payload)
    try:
        for _ in range(unpacker.read_map_header()):
            if unpacker.unpack() == "type":
                return unpacker.unpack() == "input"
            unpacker.skip()
    except Exception:  # (msgpack raises several types for a cut or malformed value)
        return False
    return False


def reference_split(data: bytes, max_size: int) -> tuple[list[int], list[int], int]:
    """A plain walk over the frame headers, as RFC 6455 section 5.2 lays them out, and
    each binary frame's ``type`` as msgpack reads it."""
    at, starts, kinds = 0, [], []
    while at < len(data):
        if len(data) - at < 2:
            return starts, kinds, 2
        first, masked, length = data[at], data[at + 1] >> 7, data[at + 1] & 0x7F
        if not masked:
            return starts, kinds, -1
        head = {126: 4, 127: 10}.get(length, 2)
        if len(data) - at < head:
            return starts, kinds, head
        if head > 2:
            length = int.from_bytes(data[at + 2 : at + head], "big")
        if length > max_size:
            return starts, kinds, -1
        if len(data) - at < head + 4 + length:
            return starts, kinds, head + 4 + length
        key = data[at + head : at + head + 4]
        payload = bytes(b ^ key[k & 3] for k, b in enumerate(data[at + head + 4 :][:length]))
        if first == 0x82 and reference_is_input(payload):
            kind = FRAME_INPUT if head == 2 else FRAME_LONG_INPUT
        else:
            kind = {0x88: FRAME_CLOSE, 0x81: FRAME_OTHER, 0x82: FRAME_OTHER}.get(first, FRAME_ODD)
            kind = FRAME_OTHER if first in (0x89, 0x8A) else kind
        starts.append(at)
        kinds.append(kind)
        at += head + 4 + length
        if kind == FRAME_CLOSE:
            break
    return starts, kinds, 0


some_frames = st.lists(
    st.tuples(
        st.sampled_from([0x82, 0x81, 0x88, 0x89, 0x8A, 0x02, 0x00, 0x80, 0xC2, 0x83]),
        st.one_of(st.integers(0, 140), st.just(93), st.just(125), st.just(126)),
        st.booleans(),
    ),
    max_size=12,
)


@given(some_frames, st.integers(0, 2000), st.binary(max_size=12), st.integers(90, 300))
@settings(max_examples=300, deadline=None)
def test_the_kernel_splits_a_read_as_the_headers_say(
    frames: list[tuple[int, int, bool]], cut: int, garbage: bytes, max_size: int
) -> None:
    parts = []
    for first, length, masked in frames:
        whole = frame(first & 0x0F, bytes(length), masked=masked)
        parts.append(bytes([first]) + whole[1:])
    data = (b"".join(parts) + garbage)[:cut]
    split = split_read(data, max_size)
    starts, kinds, need = reference_split(data, max_size)
    assert split.kinds.tolist() == kinds and split.bounds[:-1].tolist() == starts
    assert split.need == need
    assert split.tally == [kinds.count(kind) for kind in range(FRAME_ODD + 1)]
    assert split.in_order == (FRAME_LONG_INPUT in kinds or FRAME_ODD in kinds or need < 0)
    bounds = split.bounds.tolist()
    for at, stop, kind in zip(bounds, bounds[1:], kinds, strict=False):
        assert reference_split(data[at:stop], max_size) == ([0], [kind], 0)  # one whole frame
    if need == 0 and FRAME_CLOSE not in kinds:
        assert split.end == len(data)


def test_integers_of_every_width_and_sign_decode() -> None:
    for ack in (-1, 0, 127, 128, 255, 256, 65535, 65536, 2**32 - 1, 2**32, 2**53):
        message = InputMessage(2**31 - 1, 2**53, (0.0, 0.0), 0.0, 0.0, 255, 0.0, ack)
        payload = protocol.encode(message)
        if len(payload) > 125:
            continue
        columns = decode_input_frames([frame(OP_BINARY, payload, masked=True)])
        assert columns.read_ok[0] and row(columns, 0) == message
    # int8..int64 encodings of -1 (msgpack-python picks the shortest, so build them)
    for tag, body in (
        (0xD0, b"\xff"),
        (0xD1, b"\xff" * 2),
        (0xD2, b"\xff" * 4),
        (0xD3, b"\xff" * 8),
    ):
        payload = protocol.encode(InputMessage(1, 1, (0, 0), 0, 0, 0, 1, 0))
        at = payload.index(b"\xa8ack_tick") + 9
        assert payload[at] == 0x00
        columns = decode_input_frames(
            [frame(OP_BINARY, payload[:at] + bytes([tag]) + body + payload[at + 1 :], masked=True)]
        )
        assert columns.read_ok[0] and columns.ints[0, 2] == -1
    assert np.array_equal(columns.read_of, [0])


@given(some_frames, st.integers(0, 2000))
@settings(max_examples=300, deadline=None)
def test_a_command_packet_is_told_without_the_kernel_as_the_kernel_would(
    frames: list[tuple[int, int, bool]], cut: int
) -> None:
    parts = [bytes([first]) + frame(first & 0x0F, bytes(length), masked=masked)[1:]
             for first, length, masked in frames]  # fmt: skip
    data = b"".join(parts)[:cut]
    split = split_read(data, 1 << 16)
    few_whole = (
        split.need == 0
        and split.end == len(data)
        and 2 <= len(split.kinds) <= 8
        and all(kind in (FRAME_INPUT, FRAME_OTHER) for kind in split.kinds.tolist())
        and all(data[at + 1] & 0x7F <= 125 for at in split.bounds[:-1].tolist())
    )
    few = few_frames(data)
    assert (few is not None) == few_whole
    if few is not None:
        assert few == (split.bounds[1:].tolist(), split.kinds.tolist())


def test_a_few_whole_inputs_and_small_frames_are_a_command_packet() -> None:
    one = frame(OP_BINARY, protocol.encode(InputMessage(1, 1, (0, 0), 0, 0, 0, 1, -1)), masked=True)
    ping = frame(OP_PING, b"", masked=True)
    assert few_frames(one * 2) == ([len(one), 2 * len(one)], [FRAME_INPUT] * 2)
    assert few_frames(one * 8) == ([len(one) * k for k in range(1, 9)], [FRAME_INPUT] * 8)
    assert few_frames(one * 2 + ping) == (
        [len(one), 2 * len(one), 2 * len(one) + len(ping)],
        [FRAME_INPUT, FRAME_INPUT, FRAME_OTHER],
    )
    close = frame(OP_CLOSE, b"", masked=True)
    for other in (
        one,
        one * 9,
        one * 2 + close,
        (one * 2)[:-1],
        one + frame(OP_BINARY, b"x", masked=False),
    ):
        assert few_frames(other) is None


# -- a frame's kind is its message type ---------------------------------------------------


def _str8(text: str) -> bytes:
    """``text`` as a msgpack str 8 (valid; msgpack-python writes a fixstr instead)."""
    raw = text.encode()
    return b"\xd9" + bytes([len(raw)]) + raw


keys = st.sampled_from(["type", "seq", "move", "t", "id", "typ", "types", ""])
entry_values = st.one_of(
    st.sampled_from(["input", "ping", "inpu", "inputs", "sighting", ""]), values
)
entries = st.lists(st.tuples(keys, st.booleans(), entry_values, st.booleans()), max_size=10)


@st.composite
def maps(draw: st.DrawFn) -> bytes:
    """A msgpack map's bytes, as any client might lay it out: any key order, a key
    repeated or absent, strings as fixstr or str 8, a fixmap or a map 16, cut anywhere,
    garbage after."""
    chosen = draw(entries)
    if draw(st.booleans()):  # "type" first, as clients write it
        kind = draw(st.sampled_from(["input", "ping", "inputs"]))
        chosen.insert(0, ("type", draw(st.booleans()), kind, draw(st.booleans())))
    head = bytes([0x80 | len(chosen)]) if draw(st.booleans()) else b"\xde" + len(chosen).to_bytes(2)
    body = b"".join(
        (_str8(key) if long_key else msgpack.packb(key))
        + (_str8(value) if long_value and type(value) is str else msgpack.packb(value))
        for key, long_key, value, long_value in chosen
    )
    data = head + body
    if draw(st.booleans()):
        data = data[: draw(st.integers(0, len(data)))]
    return data + draw(st.binary(max_size=4))


@given(st.lists(maps(), min_size=1, max_size=4), st.sampled_from([OP_BINARY, OP_TEXT]))
@settings(max_examples=400, deadline=None)
def test_a_frame_is_an_input_when_its_type_says_so(payloads: list[bytes], opcode: int) -> None:
    frames = [frame(opcode, payload, masked=True) for payload in payloads]
    data = b"".join(frames)
    expected = [
        FRAME_OTHER
        if opcode != OP_BINARY or not reference_is_input(payload)
        else FRAME_INPUT
        if len(payload) <= 125
        else FRAME_LONG_INPUT
        for payload in payloads
    ]
    assert kinds_of(data)[0] == expected
    # The plain-Python paths agree wherever they answer.
    for one, kind in zip(frames, expected, strict=True):
        assert sole_frame_kind(one) in (-1, kind)
    few = few_frames(data)
    if few is not None:
        assert few[1] == expected


@given(st.one_of(joins, input_messages, pings, sightings))
def test_every_client_message_is_charged_by_its_type(message: protocol.Message) -> None:
    """A sighting or a join as long as an input, or an input as short as a ping, is still
    charged to its own kind's budget."""
    payload = protocol.encode(message)
    data = frame(OP_BINARY, payload, masked=True)
    kind = FRAME_INPUT if isinstance(message, InputMessage) else FRAME_OTHER
    if kind == FRAME_INPUT and len(payload) > 125:
        kind = FRAME_LONG_INPUT  # (wide integers and float64s: a 16-bit length)
    assert kinds_of(data)[0] == [kind]
    if len(payload) <= 125:
        assert sole_frame_kind(data) == kind  # (our encoders write "type" first)
