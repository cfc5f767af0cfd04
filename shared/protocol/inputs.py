"""The ``input`` message's fields, stated once.

Everything that writes or reads an input derives from this table: the message class's
validation (:class:`~shared.protocol.messages.InputMessage`), the bots' fast encoder and
the strict decoder's fast path (:mod:`shared.protocol.messages`), and the node's numba
frame decoder (:mod:`server.sim.input_frames`: its keys, bounds and column order). A node
decodes inputs into two column arrays: the integer fields in :data:`INT_COLUMNS` order and
the float values (``move`` is two) in :data:`FLOAT_COLUMNS` order; the named indices below
say which column is which, so no reader counts positions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np
from numba.extending import register_jitable

from shared.protocol.fields import MAX_SEQ, MAX_TICK

__all__ = [
    "ACK_TICK",
    "ANGLE_STEP",
    "BUTTONS",
    "FLOAT_COLUMNS",
    "INPUT_FIELDS",
    "INPUT_MIN_BYTES",
    "INT_COLUMNS",
    "MOVE_STEP",
    "MOVE_X",
    "MOVE_Y",
    "PITCH",
    "SEQ",
    "TICK",
    "VIEW_TIME",
    "YAW",
    "InputField",
    "InputValues",
    "input_columns",
    "quantize_angle",
    "quantize_angles",
    "quantize_move",
    "quantize_moves",
]


@dataclass(frozen=True, slots=True)
class InputField:
    """One field: its wire ``kind`` (``move`` is a list of two floats), its inclusive
    bounds (floats must also be finite) and the first column its value fills."""

    name: str
    kind: Literal["int", "float", "float_pair"]
    low: float
    high: float
    column: int


#: In wire order (the order the encoders write the keys in).
INPUT_FIELDS: tuple[InputField, ...] = (
    InputField("seq", "int", 0, MAX_SEQ, 0),
    InputField("tick", "int", 0, MAX_TICK, 1),
    InputField("ack_tick", "int", -1, MAX_TICK, 2),
    InputField("move", "float_pair", -1e6, 1e6, 0),
    InputField("yaw", "float", -math.inf, math.inf, 2),
    InputField("pitch", "float", -math.inf, math.inf, 3),
    InputField("buttons", "int", 0, 255, 3),
    InputField("view_time", "float", 0.0, 1e9, 4),
)

INT_COLUMNS = ("seq", "tick", "ack_tick", "buttons")
FLOAT_COLUMNS = ("move_x", "move_y", "yaw", "pitch", "view_time")
SEQ, TICK, ACK_TICK, BUTTONS = range(len(INT_COLUMNS))
MOVE_X, MOVE_Y, YAW, PITCH, VIEW_TIME = range(len(FLOAT_COLUMNS))


class InputValues(Protocol):
    """What an input message holds (``InputMessage``; this module sits below it)."""

    @property
    def seq(self) -> int: ...
    @property
    def tick(self) -> int: ...
    @property
    def ack_tick(self) -> int: ...
    @property
    def move(self) -> tuple[float, float]: ...
    @property
    def yaw(self) -> float: ...
    @property
    def pitch(self) -> float: ...
    @property
    def buttons(self) -> int: ...
    @property
    def view_time(self) -> float: ...


def input_columns(message: InputValues) -> tuple[tuple[int, ...], tuple[float, ...]]:
    """An input message's values in the node's column order (ints, floats)."""
    values: dict[str, float] = {name: getattr(message, name) for name in INT_COLUMNS}
    for name in ("yaw", "pitch", "view_time"):
        values[name] = getattr(message, name)
    values["move_x"], values["move_y"] = message.move
    ints = tuple(int(values[name]) for name in INT_COLUMNS)
    return ints, tuple(float(values[name]) for name in FLOAT_COLUMNS)


# -- the steps an input is kept to --------------------------------------------------------
#
# The node keeps a view angle to the nearest whole step of 2**-14 rad (0.0035 degrees: 6 mm
# at 100 m; Quake 3 sends angles in 16 bits a turn, a coarser 0.0055 degrees) and each move
# component to a whole step of 2**-10, rounded towards zero (so a move on or inside the
# unit circle stays there). Steps that are powers of two make the rounding exact in any
# language, and a value already on its step is kept bit for bit (a standby taking over
# offers it again). A client that rounds the same way before it predicts and aims predicts
# exactly what the node simulates; one that does not is off by at most half a step. The
# match log stores whole steps, a small integer where a float64's noise did not compress.

#: A view angle's step (radians): yaw and pitch are kept to whole multiples of it.
ANGLE_STEP = 2.0**-14
#: A move component's step: kept to whole multiples of it, rounded towards zero.
MOVE_STEP = 2.0**-10
_ANGLE_SCALE = 1.0 / ANGLE_STEP
_MOVE_SCALE = 1.0 / MOVE_STEP


@register_jitable
def quantize_angle(value: float, limit: float) -> float:
    """``value`` (within ``±limit``) to the nearest whole :data:`ANGLE_STEP`, ties up,
    stepped back inside ``±limit`` where the nearest lies just beyond it."""
    kept = math.floor(value * _ANGLE_SCALE + 0.5) * ANGLE_STEP
    if kept > limit:
        return kept - ANGLE_STEP
    if kept < -limit:
        return kept + ANGLE_STEP
    return kept


@register_jitable
def quantize_move(value: float) -> float:
    """A move component to a whole :data:`MOVE_STEP`, towards zero."""
    return math.trunc(value * _MOVE_SCALE) * MOVE_STEP


def quantize_angles(values: np.ndarray, limit: float) -> np.ndarray:
    """:func:`quantize_angle` of every value (a new array, bit for bit the same)."""
    kept = np.floor(np.asarray(values, dtype=np.float64) * _ANGLE_SCALE + 0.5) * ANGLE_STEP
    kept -= np.where(kept > limit, ANGLE_STEP, 0.0)
    kept += np.where(kept < -limit, ANGLE_STEP, 0.0)
    return kept


def quantize_moves(values: np.ndarray) -> np.ndarray:
    """:func:`quantize_move` of every value (a new array, bit for bit the same)."""
    return np.trunc(np.asarray(values, dtype=np.float64) * _MOVE_SCALE) * MOVE_STEP


def _shortest_input() -> int:
    """The bytes of the shortest valid input payload: a map of the nine keys (``type`` is
    ``"input"``), each number a one-byte msgpack integer (0, or -1 for ``ack_tick``: the
    protocol takes an integer wherever it documents a number)."""
    size = 1 + len(b"\xa4type\xa5input")
    for field in INPUT_FIELDS:
        size += 1 + len(field.name) + (1 + 2 if field.kind == "float_pair" else 1)
    return size


#: The shortest valid ``input`` payload (73 bytes; a bot's, with float64s, is over 100).
INPUT_MIN_BYTES = _shortest_input()


def _check_columns() -> None:
    """The table's columns are the named ones (checked at import: a typo fails at once)."""
    ints = {f.column: f.name for f in INPUT_FIELDS if f.kind == "int"}
    floats = {f.column: f.name for f in INPUT_FIELDS if f.kind == "float"}
    floats |= {f.column + i: f"{f.name}_{'xy'[i]}" for f in INPUT_FIELDS
               if f.kind == "float_pair" for i in range(2)}  # fmt: skip
    if [ints[i] for i in sorted(ints)] != list(INT_COLUMNS) or [
        floats[i] for i in sorted(floats)
    ] != list(FLOAT_COLUMNS):
        raise AssertionError("INPUT_FIELDS' columns disagree with INT_COLUMNS/FLOAT_COLUMNS")


_check_columns()
