"""A block's inputs of one match as columns of byte planes (sans-I/O, NumPy only).

A tick's inputs (:class:`~server.sim.inputs.ReleasedInputs`) are a few rows a seat; a block
holds a second of them. Stored row by row, each row's values sit next to unrelated ones and
zlib finds little to repeat. Here every column of the block's rows becomes its own stream,
each value coded against the same seat's previous row in the block, and every stream is cut
into byte planes (all the first bytes, then all the second...), which the block's framing
deflates one by one, or keeps raw where that does not pay (:mod:`server.record.blocks`):

- integers (seq, tick, ack tick, buttons) as their difference from the seat's previous
  row, zig-zagged and narrowed to the bytes the block's largest needs; a seat's sequence
  numbers and ticks step by one, so most differences are one byte that repeats;
- move, angles, view and arrival times as whole steps (the protocol's steps of a move
  component and an angle, the microsecond of a time: :mod:`shared.protocol.inputs`), each
  as its difference from the seat's previous, where the step gives back the identical
  float64 (the node keeps every input it queues so); the other rows (a value no step
  gives back: an arrival time of 2**32 s or more, say) as the XOR of their 64 bits with the
  seat's previous such row's: a repeated value is eight zero bytes. A flag stream says
  which is which;
- slots, depths and the per-seat guess counts as they are, in tick order (small numbers
  that repeat tick after tick).

Every value decodes to the identical bits: a replay depends on it. The chains start again
at every block, so each block decodes alone. Decoding is the encoding's inverse on whole
arrays (cumulative sums and XORs per seat), with no loop over rows.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from server.sim.inputs import ARRIVAL, ReleasedInputs
from shared.protocol.inputs import (
    ANGLE_STEP,
    INT_COLUMNS,
    MOVE_STEP,
    MOVE_X,
    MOVE_Y,
    PITCH,
    VIEW_TIME,
    YAW,
)

__all__ = ["decode_inputs", "encode_inputs"]

#: Each float column and how many of its steps make one (a step's reciprocal).
_STEPS_PER_UNIT = (
    (MOVE_X, 1.0 / MOVE_STEP),
    (MOVE_Y, 1.0 / MOVE_STEP),
    (YAW, 1.0 / ANGLE_STEP),
    (PITCH, 1.0 / ANGLE_STEP),
    (VIEW_TIME, 1e6),
    (ARRIVAL, 1e6),
)
_FLOATS = ARRIVAL + 1
_VALUE_MAX = 2.0**32  # far beyond any value, its steps (at most 2**20 a unit) within 2**53
_U64 = np.dtype("<u8")
_ONE = np.uint64(1)


def _zigzag(values: np.ndarray) -> np.ndarray:
    """Signed 64-bit values as unsigned ones, small magnitudes small (-1 -> 1, 1 -> 2)."""
    signed = values.astype(np.int64, copy=False)
    return (signed.view(np.uint64) << _ONE) ^ (signed >> np.int64(63)).view(np.uint64)


def _unzigzag(coded: np.ndarray) -> np.ndarray:
    return (coded >> _ONE).view(np.int64) ^ -(coded & _ONE).view(np.int64)


def _starts(slots: np.ndarray) -> np.ndarray:
    """Where each seat's run starts in ``slots`` (sorted by seat)."""
    first = np.ones(len(slots), dtype=bool)
    first[1:] = slots[1:] != slots[:-1]
    return first


def _delta(values: np.ndarray, first: np.ndarray) -> np.ndarray:
    """Each value less its seat's previous one (a seat's first: itself), wrapping."""
    coded = values.copy()
    coded[1:] -= values[:-1]
    coded[first] = values[first]
    return coded


def _undelta(coded: np.ndarray, first: np.ndarray) -> np.ndarray:
    total = np.cumsum(coded)
    base = (total - coded)[first]
    return total - base[np.cumsum(first) - 1]


def _xor(words: np.ndarray, first: np.ndarray) -> np.ndarray:
    coded = words.copy()
    coded[1:] ^= words[:-1]
    coded[first] = words[first]
    return coded


def _unxor(coded: np.ndarray, first: np.ndarray) -> np.ndarray:
    total = np.bitwise_xor.accumulate(coded)
    base = (total ^ coded)[first]
    return total ^ base[np.cumsum(first) - 1]


def _width(stream: np.ndarray) -> int:
    """The bytes its largest value needs (0 for an empty or all-zero stream)."""
    return (int(stream.max(initial=0)).bit_length() + 7) // 8


def _byte_planes(stream: np.ndarray, width: int) -> list[bytes]:
    octets = np.ascontiguousarray(stream, dtype=_U64).view(np.uint8).reshape(-1, 8)
    return [octets[:, b].tobytes() for b in range(width)]


class _Writer:
    def __init__(self) -> None:
        self.widths: list[int] = []
        self.planes: list[bytes] = []

    def put(self, stream: np.ndarray) -> None:
        width = _width(stream)
        self.widths.append(width)
        self.planes += _byte_planes(stream, width)


class _Reader:
    def __init__(self, widths: Sequence[int], planes: Sequence[bytes]) -> None:
        self._widths: Iterator[int] = iter(widths)
        self._planes: Iterator[bytes] = iter(planes)

    def take(self, length: int) -> np.ndarray:
        width = next(self._widths, None)
        if not isinstance(width, int) or not 0 <= width <= 8:
            raise ValueError(f"a column {width} bytes wide")
        octets = np.zeros((length, 8), dtype=np.uint8)
        for b in range(width):
            plane = np.frombuffer(next(self._planes, b""), dtype=np.uint8)
            if len(plane) != length:
                raise ValueError(f"a column of {len(plane)} values, not {length}")
            octets[:, b] = plane
        return octets.reshape(-1).view(_U64)

    def done(self) -> None:
        if next(self._widths, None) is not None or next(self._planes, None) is not None:
            raise ValueError("columns left over")


def encode_inputs(ticks: Sequence[ReleasedInputs]) -> tuple[list[int], list[bytes]]:
    """One match's inputs of a block's ticks (in the order they are logged): each stream's
    width in bytes, and its byte planes, in the order :func:`decode_inputs` takes them."""
    slot = np.concatenate([t.slot for t in ticks]).astype(np.int64, copy=False)
    out = _Writer()
    for name in ("slot", "depth", "guess", "guessed", "dropped"):
        out.put(_zigzag(np.concatenate([getattr(t, name) for t in ticks])))
    order = np.argsort(slot, kind="stable")  # seat by seat, each in the order logged
    seats = slot[order]
    first = _starts(seats)
    ints = np.concatenate([t.ints for t in ticks]).astype(np.int64, copy=False)[order]
    for column in range(len(INT_COLUMNS)):
        out.put(_zigzag(_delta(ints[:, column], first)))
    floats = np.concatenate([t.floats for t in ticks]).astype(np.float64, copy=False)[order]
    for column, per_unit in _STEPS_PER_UNIT:
        values = np.ascontiguousarray(floats[:, column])
        finite = np.isfinite(values) & (np.abs(values) < _VALUE_MAX)
        steps = np.rint(np.where(finite, values, 0.0) * per_unit).astype(np.int64)
        exact = finite & ((steps / per_unit).view(np.uint64) == values.view(np.uint64))
        out.put(exact.astype(np.uint64))
        out.put(_zigzag(_delta(steps[exact], _starts(seats[exact]))))
        out.put(_xor(values[~exact].view(np.uint64), _starts(seats[~exact])))
    return out.widths, out.planes


def decode_inputs(
    rows: Sequence[int], seats: Sequence[int], widths: Sequence[int], planes: Sequence[bytes]
) -> list[ReleasedInputs]:
    """The ticks :func:`encode_inputs` was given (``rows``, ``seats``: each tick's inputs
    and the seats they were released for); ValueError when the columns do not fit."""
    n, m = int(sum(rows)), int(sum(seats))
    read = _Reader(widths, planes)
    slot = _unzigzag(read.take(n))
    depth = _unzigzag(read.take(n))
    guess, guessed, dropped = (_unzigzag(read.take(m)) for _ in range(3))
    if slot.min(initial=0) < 0 or depth.min(initial=0) < 0:
        raise ValueError("a negative slot or depth")
    order = np.argsort(slot, kind="stable")
    seats_sorted = slot[order]
    first = _starts(seats_sorted)
    ints = np.empty((n, len(INT_COLUMNS)), dtype=np.int64)
    floats = np.empty((n, _FLOATS), dtype=np.float64)
    for column in range(len(INT_COLUMNS)):
        ints[order, column] = _undelta(_unzigzag(read.take(n)), first)
    for column, per_unit in _STEPS_PER_UNIT:
        exact = read.take(n).astype(bool)
        count = int(exact.sum())
        steps = _undelta(_unzigzag(read.take(count)), _starts(seats_sorted[exact]))
        bits = _unxor(read.take(n - count), _starts(seats_sorted[~exact]))
        values = np.empty(n, dtype=np.float64)
        values[exact] = steps / per_unit
        values[~exact] = bits.view(np.float64)
        floats[order, column] = values
    read.done()
    row_cuts, seat_cuts = np.cumsum(rows)[:-1], np.cumsum(seats)[:-1]
    return [
        ReleasedInputs(s, d, i, f, g, gd, dr)
        for s, d, i, f, g, gd, dr in zip(
            np.split(slot, row_cuts), np.split(depth, row_cuts), np.split(ints, row_cuts),
            np.split(floats, row_cuts), np.split(guess, seat_cuts),
            np.split(guessed, seat_cuts), np.split(dropped, seat_cuts), strict=True,
        )
    ]  # fmt: skip
