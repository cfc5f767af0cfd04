"""The batch input decoder must be sure when it says ok: every row it decodes equals what
the ordinary decoder makes of the same frame, and every read it cannot vouch for is
handed back whole."""

from __future__ import annotations

import math

import msgpack
import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from server.sim.input_frames import decode_input_frames, split_read
from shared import protocol
from shared.protocol import InputMessage, PingMessage, ProtocolError, decode_client
from shared.wsframe import OP_BINARY, OP_PING, OP_TEXT, frame
from tests.shared.test_protocol_fast_path import values

inputs = st.fixed_dictionaries(
    {
        "type": st.one_of(st.just("input"), st.just("inpuT"), values),
        "seq": st.one_of(st.integers(-5, 2**32 + 5), values),
        "tick": st.one_of(st.integers(-5, 2**53 + 2), values),
        "ack_tick": st.one_of(st.integers(-(2**40), 10**6), values),
        "move": st.one_of(st.lists(st.floats(-2e6, 2e6), min_size=2, max_size=2), values),
        "yaw": st.one_of(st.floats(-4.0, 4.0), values),
        "pitch": st.one_of(st.floats(-2.0, 2.0), values),
        "buttons": st.one_of(st.integers(-3, 300), values),
        "view_time": st.one_of(st.floats(-1.0, 2e9), values),
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
    columns = decode_input_frames([frame(OP_BINARY, payload, masked=True)])
    expected = ordinary(payload)
    if columns.read_ok[0]:
        assert len(columns.read_of) == 1
        assert expected is not None and row(columns, 0) == expected
        assert all(math.isfinite(v) for v in columns.floats[0])
    elif len(payload) <= 125 and expected is not None:
        # Declined a valid input: only for a shape outside the common one (ints where
        # floats go, or a map the general path also accepts).
        assert any(type(fields[key]) is not float for key in ("yaw", "pitch", "view_time")) or (
            any(type(v) is not float for v in fields["move"])
        )


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


def test_a_read_splits_into_its_inputs_and_the_rest() -> None:
    an_input = frame(
        OP_BINARY, protocol.encode(InputMessage(1, 1, (0, 0), 0, 0, 0, 1, -1)), masked=True
    )
    ping = frame(OP_BINARY, protocol.encode(PingMessage(1, 2.0)), masked=True)
    ws_ping = frame(OP_PING, b"?", masked=True)
    assert split_read(an_input) == (an_input, b"")
    assert split_read(an_input * 3) == (an_input * 3, b"")
    assert split_read(ping) == (b"", ping)
    assert split_read(an_input + ping + an_input + ws_ping) == (an_input * 2, ping + ws_ping)
    # Anything but whole final frames is the ordinary reader's, all of it.
    assert split_read(an_input[:-1]) is None and split_read(an_input + an_input[:8]) is None
    assert split_read(b"") is None and split_read(an_input[:3]) is None
    assert split_read(an_input * 20) is None  # a long backlog is read at once
    unmasked = frame(
        OP_BINARY, protocol.encode(InputMessage(1, 1, (0, 0), 0, 0, 0, 1, -1)), masked=False
    )
    assert split_read(unmasked) is None and split_read(ping + unmasked) is None
    fragment = bytes([0x02]) + ping[1:]  # binary, not final
    assert split_read(fragment) is None and split_read(an_input + fragment) is None


def test_integers_of_every_width_and_sign_decode() -> None:
    for ack in (-1, 0, 127, 128, 255, 256, 65535, 65536, 2**32 - 1, 2**32, 2**53):
        message = InputMessage(2**32 - 1, 2**53, (0.0, 0.0), 0.0, 0.0, 255, 0.0, ack)
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
