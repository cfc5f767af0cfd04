"""A snapshot's ack read from its first bytes (what a light player needs) is the ack the
full decoder reads, for every way msgpack can write it, and nothing for other frames."""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared import protocol
from shared.protocol.snapshots import _ACK_KEY, _MAP_HEADER


def _frame(ack: int) -> bytes:
    body = protocol.encode_snapshot_body(tick=12, server_time=0.2, epoch=1)
    return protocol.encode_snapshot(body, ack, (1.0, 2.0, 0.0, 0.0, 0.0, 0.0))


@given(st.integers(min_value=-1, max_value=2**31 - 1))
def test_the_head_s_ack_is_the_decoded_one(ack: int) -> None:
    frame = _frame(ack)
    decoded = protocol.decode_server(frame)
    assert isinstance(decoded, protocol.SnapshotMessage)
    assert protocol.snapshot_ack(frame) == decoded.ack == ack


@pytest.mark.parametrize("ack", [-1, 0, 5, 127, 128, 255, 256, 65_535, 65_536, 2**31])
def test_every_msgpack_width_of_the_ack_is_read(ack: int) -> None:
    packed = _MAP_HEADER + _ACK_KEY + msgpack.packb(ack)
    assert protocol.snapshot_ack(packed + b"\x00" * 8) == ack


def test_other_frames_have_no_ack() -> None:
    assert protocol.snapshot_ack(protocol.encode(protocol.PongMessage(1, 0.5, 0.6))) is None
    assert protocol.snapshot_ack(b"") is None
    assert protocol.snapshot_ack(_MAP_HEADER + _ACK_KEY + b"\xc3" + b"\x00" * 8) is None  # true
    assert protocol.snapshot_ack(_MAP_HEADER + _ACK_KEY + b"\xd2\xff\xff\xff\xfe") is None  # -2
