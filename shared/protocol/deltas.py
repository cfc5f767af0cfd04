"""Entity deltas: a snapshot's players quantised against the map and coded against the
snapshot the client acknowledged (Quake 3's delta snapshots, Fiedler's bit-packing).

The layout is :mod:`shared.protocol.layout`'s, stated there once: every player's public
state is ten unsigned integers (:data:`FIELDS`), each a stated precision over a stated
range (:class:`EntityCodec`): positions 1/4096 m over the map's bounds, velocity 1/256 m/s
over +-64 m/s, yaw and pitch in 65536 steps, health and flags as bytes. A snapshot's
``entities`` are records, one per player it carries, each starting on a byte (so records
can be spliced) and bit-packed inside, least significant bit first:

* ``id`` (16 bits), ``kind`` (2 bits): 0 a delta, 1 a full record, 2 the player is gone;
* a full record: the ten fields at their full widths;
* a delta: a 4-bit mask of the groups that changed (position, velocity, look, status);
  per field of a changed group a 2-bit class (0 unchanged, 1 a 7-bit signed difference,
  2 a 13-bit signed difference, 3 the field at full width) and its payload. Differences
  are modulo the field's range, so yaw wraps.

A delta is against the value the client held for that player in the baseline snapshot
(``base``, the client's newest acknowledged one; -1 for none, when every record is full).
Decoding gives back exactly the integers the server coded: the tests compare them bit for
bit. The kernels are plain functions over NumPy arrays (numba, cached), no I/O; their
constants are module-level values computed from the layout (numba freezes them at compile
time), and :func:`_check_layout` says at import which shapes of it the kernels assume.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numba
import numpy as np

from shared.protocol import layout
from shared.protocol.errors import InvalidField
from shared.protocol.layout import (
    KIND_DELTA,
    KIND_FULL,
    KIND_GONE,
    MIN_RECORD_BYTES,
    POSITION_STEP_M,
    VELOCITY_STEP_MS,
    Z_RANGE_M,
    field_bits,
    field_origins,
)
from shared.protocol.snapshots import ENTITY_DTYPE, ENTITY_FLAG_ALIVE

__all__ = [
    "FIELDS",
    "KIND_DELTA",
    "KIND_FULL",
    "KIND_GONE",
    "POSITION_STEP_M",
    "STALL_TOLERANCE_S",
    "VALUE_RING",
    "VELOCITY_STEP_MS",
    "Z_RANGE_M",
    "EntityCodec",
    "MissingBaseline",
    "PlayerValues",
    "encode_records",
    "max_record_bytes",
    "write_gone",
    "write_record",
]

FIELDS = tuple(f.name for f in layout.RECORD_FIELDS)
#: Field groups a delta's mask names (position, velocity, look, status): where each starts.
GROUP_STARTS = np.array(
    [FIELDS.index(names[0]) for _, names in layout.GROUPS] + [len(FIELDS)], dtype=np.int64
)
#: Snapshot ticks whose quantised world a node keeps to code against (2.1 s at 30 snapshots
#: a second): a record names a value at most this many snapshots older than its own, and a
#: value the client held from longer ago is sent in full.
VALUE_RING = 64
#: The backlog a bot process can fall behind by (stopped, or starved of CPU) and still decode
#: every snapshot when it catches up: its bots then read their backlogs one after another,
#: so one bot's newest snapshots are stored while another's oldest are still to be decoded.
STALL_TOLERANCE_S = 10.0

_ID_BITS, _KIND_BITS, _CLASS_BITS = layout.ID_BITS, layout.KIND_BITS, layout.CLASS_BITS
_MASK_BITS, _GROUPS = layout.MASK_BITS, len(layout.GROUPS)
_SMALL_BITS, _MEDIUM_BITS = (c.payload or 0 for c in layout.DELTA_CLASSES[1:3])
_SMALL_HALF, _MEDIUM_HALF = 1 << (_SMALL_BITS - 1), 1 << (_MEDIUM_BITS - 1)
_YAW, _PITCH = layout.field("yaw"), layout.field("pitch")
_HEALTH = layout.field("health")
_YAW_STEP, _YAW_SIZE, _YAW_ORIGIN = _YAW.step, 1 << (_YAW.bits or 0), _YAW.origin
_PITCH_STEP, _PITCH_ZERO = _PITCH.step, 1 << ((_PITCH.bits or 0) - 1)
_HEALTH_TOP = (1 << (_HEALTH.bits or 0)) - 1
_PITCH_LIMIT = math.pi / 2


def _check_layout() -> None:
    """The layout has the shape the kernels are written for (checked at import: a change
    there that they do not follow fails at once, not in a client)."""
    f = {spec.name: spec for spec in layout.RECORD_FIELDS}
    fixed = [f["yaw"].bits, f["pitch"].bits, f["health"].bits, f["flags"].bits]
    if (
        FIELDS != ("x", "y", "z", "vx", "vy", "vz", "yaw", "pitch", "health", "flags")
        or [c.code for c in layout.DELTA_CLASSES] != [0, 1, 2, 3]
        or [c.payload for c in layout.DELTA_CLASSES[::3]] != [0, None]
        or {f[n].step for n in ("x", "y", "z")} != {POSITION_STEP_M}
        or {f[n].step for n in ("vx", "vy", "vz")} != {VELOCITY_STEP_MS}
        or not all(f[n].centred and f[n].origin == 0.0 for n in ("vx", "vy", "vz", "pitch"))
        or not (f["yaw"].wraps and f["yaw"].origin == -math.pi)
        or any(spec.wraps for spec in layout.RECORD_FIELDS if spec.name != "yaw")
        or (f["x"].axis, f["y"].axis, f["z"].axis) != (0, 1, None)
        or None in fixed
        or _MASK_BITS < _GROUPS
        or not _SMALL_BITS < _MEDIUM_BITS
        or f["health"].origin != 0.0
        or f["flags"].step != 1.0
    ):
        raise AssertionError("shared.protocol.layout changed: the delta kernels do not follow")


_check_layout()


class MissingBaseline(InvalidField):
    """A snapshot coded against a base this client does not hold (it is not shown, and
    so not acknowledged: the server codes the next one against an older base, or none)."""


@dataclass(frozen=True)
class EntityCodec:
    """The quantisation of one map: each field's width, step and origin."""

    origin: np.ndarray  # (3,) float64, the map's lowest corner (x, y) and lowest z
    bits: np.ndarray  # (10,) int64, each field's width
    #: The value of a velocity of 0 (velocities are offset to be unsigned); kept, not
    #: computed, as every snapshot a bot reads passes it to the decoder.
    velocity_half: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "velocity_half", 1 << (int(self.bits[3]) - 1))

    @classmethod
    def for_bounds(cls, bounds_min: np.ndarray, bounds_max: np.ndarray) -> EntityCodec:
        """The codec of a map whose floor spans ``bounds_min`` to ``bounds_max`` (x, y)."""
        lo = [float(v) for v in bounds_min]
        return cls.for_wire(lo, field_bits(lo, [float(v) for v in bounds_max]))

    @classmethod
    def for_wire(
        cls, bounds_min: tuple[float, ...] | list[float], bits: tuple[int, ...]
    ) -> EntityCodec:
        """The codec a welcome states: the map's lowest corner (x, y) and every field's
        width (``WelcomeMessage.bounds_min``, ``entity_bits``)."""
        if len(bits) != len(FIELDS):
            raise ValueError(f"expected {len(FIELDS)} field widths, got {len(bits)}")
        origin = np.array(field_origins(bounds_min)[:3], dtype=np.float64)
        return cls(origin, np.array(bits, dtype=np.int64))

    def quantise(
        self,
        pos: np.ndarray,
        vel: np.ndarray,
        yaw: np.ndarray,
        pitch: np.ndarray,
        health: np.ndarray,
        alive: np.ndarray,
    ) -> np.ndarray:
        """N players' public state as ``(N, 10)`` int32, each field within its width: one
        kernel pass, exactly :meth:`quantise_reference` (every snapshot tick runs it over
        every seat, and its dozen NumPy calls cost more than the arithmetic)."""
        out = np.empty((len(pos), len(FIELDS)), dtype=np.int32)
        _quantise(
            np.ascontiguousarray(pos, dtype=np.float64),
            np.ascontiguousarray(vel, dtype=np.float64),
            np.ascontiguousarray(yaw, dtype=np.float64),
            np.ascontiguousarray(pitch, dtype=np.float64),
            np.ascontiguousarray(health, dtype=np.int64),
            np.ascontiguousarray(alive, dtype=np.bool_),
            self.origin,
            self.bits,
            self.velocity_half,
            out,
        )
        return out

    def quantise_reference(
        self,
        pos: np.ndarray,
        vel: np.ndarray,
        yaw: np.ndarray,
        pitch: np.ndarray,
        health: np.ndarray,
        alive: np.ndarray,
    ) -> np.ndarray:
        """:meth:`quantise` in NumPy, the readable statement of the quantisation."""
        out = np.empty((len(pos), len(FIELDS)), dtype=np.int32)
        top = (1 << self.bits) - 1
        out[:, 0:3] = np.clip(np.round((pos - self.origin) / POSITION_STEP_M), 0, top[0:3])
        out[:, 3:6] = np.clip(np.round(vel / VELOCITY_STEP_MS) + self.velocity_half, 0, top[3:6])
        out[:, 6] = (
            np.round(np.mod(yaw - _YAW_ORIGIN, 2.0 * math.pi) / _YAW_STEP).astype(np.int64)
            % _YAW_SIZE
        )
        out[:, 7] = (
            np.round(np.clip(pitch, -_PITCH_LIMIT, _PITCH_LIMIT) / _PITCH_STEP) + _PITCH_ZERO
        )
        out[:, 8] = np.clip(health, 0, _HEALTH_TOP)
        out[:, 9] = np.where(alive, ENTITY_FLAG_ALIVE, 0)
        return out

    def shown_positions(self, pos: np.ndarray) -> np.ndarray:
        """Feet ``(N, 3)`` as a client decodes them (quantised, then float32 records,
        then float64 as it interpolates), bit for bit: the world the server rewinds a
        shot into must be the one the shooter drew, not one a quantisation step away.
        One kernel pass, exactly :meth:`shown_positions_reference` (every snapshot tick
        runs it over every seat)."""
        out = np.empty((len(pos), 3))
        _shown_positions(np.ascontiguousarray(pos, dtype=np.float64), self.origin, self.bits, out)
        return out

    def shown_positions_reference(self, pos: np.ndarray) -> np.ndarray:
        """:meth:`shown_positions` in NumPy, the readable statement of it."""
        top = ((1 << self.bits[0:3]) - 1).astype(np.float64)
        cells = np.clip(np.rint((pos - self.origin) / POSITION_STEP_M), 0.0, top)
        return (self.origin + cells * POSITION_STEP_M).astype(np.float32).astype(np.float64)

    def records(self, ids: np.ndarray, quantised: np.ndarray) -> np.ndarray:
        """Quantised players as the entity records clients draw (:data:`ENTITY_DTYPE`),
        exactly as a client decodes them."""
        records = np.empty(len(ids), dtype=ENTITY_DTYPE)
        values = np.ascontiguousarray(quantised, dtype=np.int32)
        _fill_records(
            np.asarray(ids, dtype=np.int64), values, self.origin, self.velocity_half, records
        )
        return records

    def max_record_bytes(self) -> int:
        return max_record_bytes(self.bits)


def max_record_bytes(bits: np.ndarray) -> int:
    """The longest record a codec of these widths writes (a delta of every field)."""
    return layout.max_record_bytes([int(b) for b in bits])


@numba.njit(cache=True, nogil=True)
def _quantise(
    pos: np.ndarray,
    vel: np.ndarray,
    yaw: np.ndarray,
    pitch: np.ndarray,
    health: np.ndarray,
    alive: np.ndarray,
    origin: np.ndarray,
    bits: np.ndarray,
    velocity_half: int,
    out: np.ndarray,
) -> None:
    """:meth:`EntityCodec.quantise_reference`, player by player (``np.rint`` rounds half
    to even, as ``np.round`` does)."""
    top = (1 << bits) - 1
    for i in range(pos.shape[0]):
        for axis in range(3):
            cell = np.rint((pos[i, axis] - origin[axis]) / POSITION_STEP_M)
            out[i, axis] = min(max(cell, 0.0), float(top[axis]))
            step = np.rint(vel[i, axis] / VELOCITY_STEP_MS) + velocity_half
            out[i, 3 + axis] = min(max(step, 0.0), float(top[3 + axis]))
        turn = np.mod(yaw[i] - _YAW_ORIGIN, 2.0 * math.pi)
        out[i, 6] = np.int64(np.rint(turn / _YAW_STEP)) % _YAW_SIZE
        clipped = min(max(pitch[i], -_PITCH_LIMIT), _PITCH_LIMIT)
        out[i, 7] = np.rint(clipped / _PITCH_STEP) + _PITCH_ZERO
        out[i, 8] = min(max(health[i], 0), _HEALTH_TOP)
        out[i, 9] = ENTITY_FLAG_ALIVE if alive[i] else 0


@numba.njit(cache=True, nogil=True)
def _shown_positions(
    pos: np.ndarray, origin: np.ndarray, bits: np.ndarray, out: np.ndarray
) -> None:
    """:meth:`EntityCodec.shown_positions_reference`, player by player."""
    top = (1 << bits) - 1
    for i in range(pos.shape[0]):
        for axis in range(3):
            cell = np.rint((pos[i, axis] - origin[axis]) / POSITION_STEP_M)
            cell = min(max(cell, 0.0), float(top[axis]))
            out[i, axis] = np.float64(np.float32(origin[axis] + cell * POSITION_STEP_M))


# -- bits --------------------------------------------------------------------------------


@numba.njit(cache=True, inline="always")
def _put(out: np.ndarray, at: int, value: int, width: int) -> int:
    """Write ``width`` low bits of ``value`` at bit ``at`` of ``out`` (zeroed); the new end."""
    bits = (value & ((1 << width) - 1)) << (at & 7)
    i = at >> 3
    while bits:
        out[i] |= np.uint8(bits & 0xFF)
        bits >>= 8
        i += 1
    return at + width


@numba.njit(cache=True, inline="always")
def _get(data: np.ndarray, at: int, width: int) -> int:
    """``width`` bits at bit ``at`` (the caller checked that they lie within ``data``)."""
    i, shift = at >> 3, at & 7
    if shift + width <= 32 and i + 4 <= len(data):  # (every field of a usual map: 4 loads)
        value = (
            int(data[i])
            | (int(data[i + 1]) << 8)
            | (int(data[i + 2]) << 16)
            | (int(data[i + 3]) << 24)
        )
        return (value >> shift) & ((1 << width) - 1)
    value = 0
    for k in range((shift + width + 7) >> 3):
        value |= int(data[i + k]) << (8 * k)
    return (value >> shift) & ((1 << width) - 1)


@numba.njit(cache=True, inline="always")
def _signed_difference(new: int, old: int, width: int) -> int:
    """(new - old) modulo 2**width, as the signed value nearest zero."""
    size = 1 << width
    d = (new - old) & (size - 1)
    if d >= size >> 1:
        d -= size
    return d


@numba.njit(cache=True, inline="always")
def _delta_class(d: int, width: int) -> int:
    if d == 0:
        return 0
    if -_SMALL_HALF <= d < _SMALL_HALF and _SMALL_BITS < width:
        return 1
    if -_MEDIUM_HALF <= d < _MEDIUM_HALF and _MEDIUM_BITS < width:
        return 2
    return 3


@numba.njit(cache=True)
def write_record(
    out: np.ndarray,
    at: int,
    entity: int,
    new: np.ndarray,
    old: np.ndarray,
    has_old: bool,
    bits: np.ndarray,
) -> int:
    """One player's record at byte-aligned bit ``at``: a delta against ``old`` when
    ``has_old``, else full. Returns the byte-aligned end."""
    at = _put(out, at, entity, _ID_BITS)
    fields = len(bits)
    if not has_old:
        at = _put(out, at, KIND_FULL, _KIND_BITS)
        for f in range(fields):
            at = _put(out, at, new[f], bits[f])
        return (at + 7) & ~7
    at = _put(out, at, KIND_DELTA, _KIND_BITS)
    mask = 0
    for g in range(_GROUPS):
        for f in range(GROUP_STARTS[g], GROUP_STARTS[g + 1]):
            if new[f] != old[f]:
                mask |= 1 << g
    at = _put(out, at, mask, _MASK_BITS)
    for g in range(_GROUPS):
        if not mask >> g & 1:
            continue
        for f in range(GROUP_STARTS[g], GROUP_STARTS[g + 1]):
            d = _signed_difference(new[f], old[f], bits[f])
            kind = _delta_class(d, bits[f])
            at = _put(out, at, kind, _CLASS_BITS)
            if kind == 1:
                at = _put(out, at, d & ((1 << _SMALL_BITS) - 1), _SMALL_BITS)
            elif kind == 2:
                at = _put(out, at, d & ((1 << _MEDIUM_BITS) - 1), _MEDIUM_BITS)
            elif kind == 3:
                at = _put(out, at, new[f], bits[f])
    return (at + 7) & ~7


@numba.njit(cache=True)
def write_gone(out: np.ndarray, at: int, entity: int) -> int:
    """The record saying player ``entity`` left (the client forgets it); the end."""
    at = _put(out, at, entity, _ID_BITS)
    return (_put(out, at, KIND_GONE, _KIND_BITS) + 7) & ~7


@numba.njit(cache=True)
def encode_records(
    ids: np.ndarray,
    kinds: np.ndarray,
    new: np.ndarray,
    old: np.ndarray,
    bits: np.ndarray,
    out: np.ndarray,
) -> int:
    """Records for ``ids`` (ascending), each of ``kinds`` (delta, full, gone), the new and
    the baseline values ``(K, 10)`` row by row, into ``out`` (zeroed, long enough:
    ``len(ids) * max_record_bytes``). Returns the bytes written."""
    at = 0
    for row in range(len(ids)):
        if kinds[row] == KIND_GONE:
            at = write_gone(out, at, ids[row])
        else:
            at = write_record(out, at, ids[row], new[row], old[row], kinds[row] == KIND_DELTA, bits)
    return at >> 3


@numba.njit(cache=True, inline="always")
def _dequantise(
    record: np.ndarray, entity: int, v: np.ndarray, origin: np.ndarray, velocity_half: int
) -> None:
    """One player's quantised values ``v`` as the record a client draws."""
    record["id"] = entity
    record["x"] = origin[0] + v[0] * POSITION_STEP_M
    record["y"] = origin[1] + v[1] * POSITION_STEP_M
    record["z"] = origin[2] + v[2] * POSITION_STEP_M
    record["vx"] = (v[3] - velocity_half) * VELOCITY_STEP_MS
    record["vy"] = (v[4] - velocity_half) * VELOCITY_STEP_MS
    record["vz"] = (v[5] - velocity_half) * VELOCITY_STEP_MS
    record["yaw"] = v[6]
    record["pitch"] = v[7] - _PITCH_ZERO
    record["health"] = v[8]
    record["flags"] = v[9]


@numba.njit(cache=True)
def _fill_records(
    ids: np.ndarray, values: np.ndarray, origin: np.ndarray, velocity_half: int, records: np.ndarray
) -> None:
    for r in range(len(ids)):
        _dequantise(records[r], ids[r], values[r], origin, velocity_half)


_DECODED, _BAD, _TOO_SMALL, _MISSING = 0, 1, 2, 3


@numba.njit(cache=True, inline="always")
def _read_records(
    data: np.ndarray,
    base: np.ndarray,
    store_values: np.ndarray,
    store_ticks: np.ndarray,
    interval: int,
    bits: np.ndarray,
    ids: np.ndarray,
    kinds: np.ndarray,
    values: np.ndarray,
) -> tuple[int, int]:
    """Read ``data``'s records, deltas against ``base`` (per id, the tick of the value
    held, -1 none) with the values in the store, into the caller's ``ids``, ``kinds`` and
    ``values`` (room for :func:`most_records` of ``data``). Nothing is written to the
    store. Returns (``_DECODED`` and the count read; ``_BAD``/``_MISSING`` and the bad
    record's index; ``_TOO_SMALL`` and the highest id, for a good blob naming ids beyond
    the store)."""
    players = store_values.shape[1]
    ring = store_values.shape[0]
    fields = len(bits)
    end = len(data) * 8
    at = 0
    count = 0
    full_width = 0
    for f in range(fields):
        full_width += bits[f]
    previous = -1
    while at < end:
        if at + _ID_BITS + _KIND_BITS > end:
            return _BAD, count
        entity = _get(data, at, _ID_BITS)
        kind = _get(data, at + _ID_BITS, _KIND_BITS)
        at += _ID_BITS + _KIND_BITS
        if entity <= previous or kind > KIND_GONE:
            return _BAD, count
        previous = entity
        ids[count], kinds[count] = entity, kind
        if kind == KIND_FULL:
            if at + full_width > end:
                return _BAD, count
            for f in range(fields):
                values[count, f] = _get(data, at, bits[f])
                at += bits[f]
        elif kind == KIND_DELTA:
            kt = base[entity] if entity < len(base) else -1
            if kt < 0 or at + _MASK_BITS > end:
                return _BAD, count
            old = (kt // interval) % ring
            if entity >= players or store_ticks[old, entity] != kt:  # gone from the store
                return _MISSING, count
            mask = _get(data, at, _MASK_BITS)
            at += _MASK_BITS
            for f in range(fields):
                values[count, f] = store_values[old, entity, f]
            for g in range(_GROUPS):
                if not mask >> g & 1:
                    continue
                for f in range(GROUP_STARTS[g], GROUP_STARTS[g + 1]):
                    if at + _CLASS_BITS > end:
                        return _BAD, count
                    klass = _get(data, at, _CLASS_BITS)
                    at += _CLASS_BITS
                    if klass == 0:
                        continue
                    width = _SMALL_BITS if klass == 1 else _MEDIUM_BITS if klass == 2 else bits[f]
                    if at + width > end:
                        return _BAD, count
                    raw = _get(data, at, width)
                    at += width
                    if klass == 3:
                        values[count, f] = raw
                    else:
                        if raw >= 1 << (width - 1):
                            raw -= 1 << width
                        values[count, f] = (values[count, f] + raw) & ((1 << bits[f]) - 1)
        at = (at + 7) & ~7
        count += 1
    if count and ids[count - 1] >= players:
        return _TOO_SMALL, ids[count - 1]
    return _DECODED, count


@numba.njit(cache=True, inline="always")
def most_records(data_bytes: int) -> int:
    """The most records ``data_bytes`` bytes of players can hold (a record takes at least
    its header, :data:`~shared.protocol.layout.MIN_RECORD_BYTES`): the room
    :func:`_read_records` needs."""
    return data_bytes // MIN_RECORD_BYTES + 1


@numba.njit(cache=True, inline="always")
def read_room(data: np.ndarray, fields: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Scratch ids, kinds and values for :func:`_read_records` of ``data``, for a kernel
    that allocates its own."""
    most = most_records(len(data))
    return np.empty(most, np.int64), np.empty(most, np.int64), np.empty((most, fields), np.int32)


@numba.njit(cache=True, inline="always")
def _commit_records(
    count: int,
    ids: np.ndarray,
    kinds: np.ndarray,
    values: np.ndarray,
    tick: int,
    slot: int,
    store_values: np.ndarray,
    store_ticks: np.ndarray,
    origin: np.ndarray,
    velocity_half: int,
    held: np.ndarray,
    records: np.ndarray,
    first: int,
) -> int:
    """Write the ``count`` records read by :func:`_read_records` to the store (at
    ``slot``, this tick's) and to ``held`` (the ticks held, already holding the base's),
    and the records shown to ``records`` from ``first`` on (room for ``count``); returns
    how many are shown."""
    fields = store_values.shape[2]
    shown = 0
    for r in range(count):
        entity = ids[r]
        if kinds[r] == KIND_GONE:
            held[entity] = -1
            continue
        for f in range(fields):
            store_values[slot, entity, f] = values[r, f]
        store_ticks[slot, entity] = tick
        held[entity] = tick
        _dequantise(records[first + shown], entity, values[r], origin, velocity_half)
        shown += 1
    return shown


@numba.njit(cache=True)
def _decode_shared(
    data: np.ndarray,
    base: np.ndarray,
    tick: int,
    slot: int,
    store_values: np.ndarray,
    store_ticks: np.ndarray,
    interval: int,
    bits: np.ndarray,
    origin: np.ndarray,
    velocity_half: int,
) -> tuple[int, int, np.ndarray, np.ndarray]:
    """Decode ``data`` against ``base`` (the tick of the value held per player id, -1
    none) with the values in a store shared by many clients of one world (``store_*``:
    per ring slot of snapshot ticks and player id, the value and its tick). Only a blob
    that decodes whole is written to the store (at ``slot``, this tick's): a bad one leaves
    it as it was. Returns (the status and its number, as :func:`_read_records`; the ticks
    held after this snapshot, per id; the records shown)."""
    ids, kinds, values = read_room(data, len(bits))
    status, count = _read_records(
        data, base, store_values, store_ticks, interval, bits, ids, kinds, values
    )
    if status != _DECODED:
        return status, count, base[:0], np.empty(0, dtype=ENTITY_DTYPE)
    # The whole blob decoded: commit its values and build what is held and shown.
    top = len(base)
    if count:
        top = max(top, ids[count - 1] + 1)
    held = np.full(top, -1, dtype=np.int64)
    held[: len(base)] = base
    records = np.empty(count, dtype=ENTITY_DTYPE)
    shown = _commit_records(
        count, ids, kinds, values, tick, slot, store_values, store_ticks, origin,
        velocity_half, held, records, 0,
    )  # fmt: skip
    return _DECODED, count, held, records[:shown]


class PlayerValues:
    """The players' values of one world (a node's match, an epoch) as its clients decoded
    them, per ring slot of snapshot ticks: shared by every client of a process that plays
    in that world, since a player's value at a tick is the same for every client told it.
    So a client keeps only, per snapshot, the tick of each value it holds (see
    :class:`~shared.protocol.baselines.EntityBaselines`), and a swarm keeps each value
    once. A value the node still codes against (:data:`VALUE_RING` snapshots back) is still
    here unless another client of the process decoded a snapshot more than ``ring`` minus
    that many snapshots newer first: :meth:`ring_for` sizes the ring for a stall of
    :data:`STALL_TOLERANCE_S`; the default suits a test or a single client."""

    RING = 2 * VALUE_RING

    def __init__(
        self,
        codec: EntityCodec,
        snapshot_interval: int,
        players: int = 256,
        ring: int = RING,
    ) -> None:
        if ring <= VALUE_RING:
            raise ValueError(f"a ring of {ring} snapshots holds no more than the node's")
        self.codec = codec
        self.interval = snapshot_interval
        self.ring = ring
        self.values = np.zeros((ring, players, len(FIELDS)), dtype=np.int32)
        self.ticks = np.full((ring, players), -1, dtype=np.int64)

    @staticmethod
    def ring_for(snapshot_rate: float) -> int:
        """The ring that keeps every value the node may code against through a backlog of
        :data:`STALL_TOLERANCE_S` at ``snapshot_rate`` snapshots a second (365 at 30): the
        oldest value and the newest snapshot, that many snapshots apart, in distinct slots."""
        return VALUE_RING + math.ceil(STALL_TOLERANCE_S * snapshot_rate) + 1

    def decode(self, tick: int, base: np.ndarray, data: bytes) -> tuple[np.ndarray, np.ndarray]:
        """Snapshot ``tick``'s ``entities`` against ``base`` (per id, the tick of each
        value held): (the ticks held after it; the records shown). InvalidField for a blob
        that does not decode against it."""
        blob = np.frombuffer(data, dtype=np.uint8)
        slot = (tick // self.interval) % self.ring
        codec = self.codec
        while True:
            status, at, held, records = _decode_shared(
                blob, base, tick, slot, self.values, self.ticks, self.interval, codec.bits,
                codec.origin, codec.velocity_half,
            )  # fmt: skip
            if status != _TOO_SMALL:
                break
            self.grow(at + 1)  # a good blob naming ids beyond the store: room, once more
        if status == _MISSING:
            raise MissingBaseline(f"snapshot {tick}: the base value of record {at} is gone")
        if status == _BAD:
            raise InvalidField(f"snapshot.entities: record {at} does not decode")
        return held, records

    def held(self, ticks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """What a client holds whose held ticks are ``ticks`` (per id, -1 none): (ids,
        their values ``(K, 10)``) of the values still in the store (a value a newer tick
        took the place of is left out)."""
        ids = np.flatnonzero(ticks >= 0)
        ids = ids[ids < self.values.shape[1]]
        slots = (ticks[ids] // self.interval) % self.ring
        ids = ids[self.ticks[slots, ids] == ticks[ids]]
        slots = (ticks[ids] // self.interval) % self.ring
        return ids, self.values[slots, ids]

    def grow(self, players: int) -> None:
        """Room for ids below ``players`` (at least twice the room there was)."""
        size = max(players, 2 * self.values.shape[1])
        values = np.zeros((self.ring, size, len(FIELDS)), dtype=np.int32)
        ticks = np.full((self.ring, size), -1, dtype=np.int64)
        values[:, : self.values.shape[1]] = self.values
        ticks[:, : self.ticks.shape[1]] = self.ticks
        self.values, self.ticks = values, ticks
