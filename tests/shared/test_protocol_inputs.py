"""The input's one table: every encoder and decoder follows it, in its order and bounds."""

from __future__ import annotations

import math

import msgpack
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.protocol import InputMessage, InvalidField, decode_client, encode, encode_input
from shared.protocol.inputs import (
    FLOAT_COLUMNS,
    INPUT_FIELDS,
    INT_COLUMNS,
    VIEW_TIME,
    YAW,
    InputField,
    input_columns,
    quantize_angle,
    quantize_angles,
    quantize_move,
    quantize_moves,
)

MESSAGE = InputMessage(7, 9, (0.5, -0.25), 1.0, -0.5, 3, 12.5, 8)


def test_the_message_and_both_encoders_write_the_table_keys_in_its_order() -> None:
    names = [field.name for field in INPUT_FIELDS]
    assert list(InputMessage.FIELDS) == names
    assert list(msgpack.unpackb(encode(MESSAGE)))[1:] == names  # after "type"
    fast = encode_input(seq=7, tick=9, move=(0.5, -0.25), yaw=1, pitch=-0.5, buttons=3,
                        view_time=12.5, ack_tick=8)  # fmt: skip
    assert fast == encode(MESSAGE)


@pytest.mark.parametrize("field", INPUT_FIELDS, ids=lambda f: f.name)
def test_each_bound_of_the_table_is_the_decoders_bound(field: InputField) -> None:
    wire = MESSAGE.to_wire()
    name, kind, low, high = field.name, field.kind, field.low, field.high
    beyond = [low - 1, high + 1] if kind == "int" else [x for x in (low, high) if math.isfinite(x)]
    for value in beyond:
        if kind != "int":
            value = math.nextafter(value, -math.inf if value == low else math.inf)
        wire[name] = [value, 0.0] if kind == "float_pair" else value
        with pytest.raises(InvalidField, match=name):
            decode_client(msgpack.packb(wire))
    for value in (low, high):
        if kind == "int" or math.isfinite(value):
            wire[name] = [float(value), 0.0] if kind == "float_pair" else value
            assert type(decode_client(msgpack.packb(wire))) is InputMessage


def test_the_column_order_is_the_one_the_names_say() -> None:
    ints, floats = input_columns(MESSAGE)
    assert dict(zip(INT_COLUMNS, ints, strict=True)) == {
        "seq": 7, "tick": 9, "ack_tick": 8, "buttons": 3}  # fmt: skip
    assert dict(zip(FLOAT_COLUMNS, floats, strict=True)) == {
        "move_x": 0.5, "move_y": -0.25, "yaw": 1.0, "pitch": -0.5, "view_time": 12.5}  # fmt: skip
    assert floats[YAW] == MESSAGE.yaw and floats[VIEW_TIME] == MESSAGE.view_time


@given(st.lists(st.floats(-math.pi, math.pi), min_size=1, max_size=50))
def test_the_bots_array_rounding_gives_the_node_s_bits(values: list[float]) -> None:
    """The bots round whole arrays (NumPy), the node one value at a time (its kernel): the
    same bits either way, or a bot would predict and aim off the node's by a step."""
    array = np.array(values)
    for limit in (math.pi, math.pi / 2):
        inside = np.clip(array, -limit, limit)
        assert quantize_angles(inside, limit).tolist() == [
            quantize_angle(v, limit) for v in inside.tolist()
        ]
    moves = array / math.pi
    assert quantize_moves(moves).tolist() == [quantize_move(v) for v in moves.tolist()]
