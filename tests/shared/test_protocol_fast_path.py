"""The inline decoders (inputs, snapshots) must agree with the general, table-driven one."""

from __future__ import annotations

import math

import msgpack
from hypothesis import given
from hypothesis import strategies as st

from shared.protocol import (
    InputMessage,
    ProtocolError,
    SnapshotMessage,
    decode_client,
    decode_server,
)
from shared.protocol.messages import _fast_input, _fast_snapshot

values = st.one_of(
    st.integers(-(2**63), 2**64 - 1),  # what msgpack can carry
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
    st.text(max_size=3),
    st.lists(st.floats(allow_nan=True), max_size=3),
)
plausible = st.fixed_dictionaries(
    {
        "type": st.just("input"),
        "seq": st.one_of(st.integers(-5, 2**32 + 5), values),
        "tick": st.one_of(st.integers(-5, 10**6), values),
        "ack_tick": st.one_of(st.integers(-3, 10**6), values),
        "move": st.one_of(st.lists(st.floats(-2e6, 2e6), min_size=2, max_size=2), values),
        "yaw": st.one_of(st.floats(-4.0, 4.0), values),
        "pitch": st.one_of(st.floats(-2.0, 2.0), values),
        "buttons": st.one_of(st.integers(-3, 300), values),
        "view_time": st.one_of(st.floats(-1.0, 2e9), values),
    },
    optional={"extra": values},
)


def general(data: bytes) -> InputMessage | str:
    """What the table-driven path says, with the fast path out of the way."""
    raw = msgpack.unpackb(data, raw=False)
    raw.pop("type")
    try:
        return InputMessage(**raw)
    except (ProtocolError, TypeError) as error:
        return type(error).__name__


@given(plausible)
def test_the_fast_path_accepts_only_what_the_general_path_accepts(frame: dict) -> None:
    data = msgpack.packb(frame, use_bin_type=True)
    body = dict(frame)
    body.pop("type")
    fast = _fast_input(body)
    expected = general(data)
    if fast is not None:
        assert isinstance(expected, InputMessage)
        assert fast == expected
        assert all(math.isfinite(v) for v in (*fast.move, fast.yaw, fast.pitch, fast.view_time))
    try:
        decoded: InputMessage | str = decode_client(data)  # type: ignore[assignment]
    except ProtocolError as error:
        decoded = type(error).__name__
    if isinstance(expected, InputMessage):
        assert decoded == expected
    else:
        assert not isinstance(decoded, InputMessage)


def test_a_valid_input_takes_the_fast_path_and_equals_the_general_one() -> None:
    frame = {
        "type": "input",
        "seq": 7,
        "tick": 3,
        "ack_tick": -1,
        "move": [0.5, -0.5],
        "yaw": 1.0,
        "pitch": 0.25,
        "buttons": 2,
        "view_time": 1.5,
    }
    body = {k: v for k, v in frame.items() if k != "type"}
    assert _fast_input(body) == InputMessage(7, 3, (0.5, -0.5), 1.0, 0.25, 2, 1.5, -1)


snapshots = st.fixed_dictionaries(
    {
        "type": st.just("snapshot"),
        "tick": st.one_of(st.integers(-2, 10**6), values),
        "server_time": st.one_of(st.floats(-1.0, 1e6), values),
        "epoch": st.one_of(st.integers(-2, 10), values),
        "ack": st.one_of(st.integers(-3, 10**6), values),
        "you": st.one_of(st.lists(st.floats(-2e9, 2e9), min_size=6, max_size=6), values),
        "entities": st.one_of(st.binary(max_size=52), values),
        "state": st.one_of(st.binary(max_size=8), values),
        "base": st.one_of(st.integers(-3, 10**6), values),
        "events": st.one_of(
            st.lists(
                st.dictionaries(st.text(max_size=3), st.integers(-(2**63), 2**64 - 1), max_size=2),
                max_size=3,
            ),
            values,
        ),
    },
    optional={"extra": values},
)


@given(snapshots)
def test_the_snapshot_fast_path_accepts_only_what_the_general_path_accepts(frame: dict) -> None:
    data = msgpack.packb(frame, use_bin_type=True)
    raw = msgpack.unpackb(data, raw=False)
    raw.pop("type")
    try:
        expected: SnapshotMessage | str = SnapshotMessage(**raw)
    except (ProtocolError, TypeError) as error:
        expected = type(error).__name__
    try:
        fast: SnapshotMessage | str | None = _fast_snapshot(dict(raw))
    except ProtocolError as error:  # (it may refuse a frame itself, as the general path would)
        fast = type(error).__name__
    if isinstance(fast, str):
        assert not isinstance(expected, SnapshotMessage), (fast, expected)
    elif fast is not None:
        assert fast == expected
    try:
        decoded: SnapshotMessage | str = decode_server(data)  # type: ignore[assignment]
    except ProtocolError as error:
        decoded = type(error).__name__
    if isinstance(expected, SnapshotMessage):
        assert decoded == expected
    else:
        assert not isinstance(decoded, SnapshotMessage)


def test_the_snapshot_fast_path_takes_a_valid_frame() -> None:
    """Every key a node writes, of its wire type: the fast path, not the general one."""
    raw = {"tick": 9, "server_time": 0.15, "epoch": 1, "ack": 4, "you": [0.0] * 6,
           "entities": b"\x01\x02\x03", "events": [], "state": b"\x00" * 8, "base": 7}  # fmt: skip
    fast = _fast_snapshot(raw)
    assert fast == SnapshotMessage(9, 0.15, 1, 4, (0.0,) * 6, b"\x01\x02\x03", (), b"\x00" * 8, 7)
