"""The entity record layout, stated once: every width, kind, class and field of a
snapshot's ``entities``.

The coder and the decoders (:mod:`shared.protocol.deltas`, :mod:`shared.protocol.reader`)
take their constants from here, and ``docs/protocol.md`` and ``docs/protocol.json`` are
generated from it (:mod:`shared.protocol.spec`, ``python -m shared.protocol.doc``), so
what a client writer reads is what the node sends.

A player's public state is :data:`RECORD_FIELDS`, ten unsigned integers. Field ``f``
with ``bits`` bits codes a real value ``r`` as ``clip(round((r - origin) / step) + zero,
0, 2**bits - 1)`` and decodes ``v`` as ``origin + (v - zero) * step``, where ``zero`` is
``2**(bits - 1)`` for a centred field and 0 otherwise; a wrapping field (yaw) is coded
modulo ``2**bits`` instead of clipped. The positions' origin and span on x and y are the
map's bounds (the welcome says them, with every width); every other field's are fixed.
A width follows from a span by :func:`bits_for`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "CLASS_BITS",
    "DELTA_CLASSES",
    "GROUPS",
    "ID_BITS",
    "KINDS",
    "KIND_BITS",
    "KIND_DELTA",
    "KIND_FULL",
    "KIND_GONE",
    "MAP_BOUND_M",
    "MASK_BITS",
    "MAX_FIELD_BITS",
    "MIN_RECORD_BYTES",
    "RECORD_FIELDS",
    "DeltaClass",
    "RecordField",
    "bits_for",
    "field",
    "field_bits",
    "field_origins",
    "full_record_bytes",
    "max_record_bytes",
]

#: A record's header: the player's id, then its kind.
ID_BITS = 16
KIND_BITS = 2
KIND_DELTA, KIND_FULL, KIND_GONE = 0, 1, 2
KINDS = {"delta": KIND_DELTA, "full": KIND_FULL, "gone": KIND_GONE}
#: A delta's mask: a bit per group (:data:`GROUPS`, bit ``g`` for group ``g``).
MASK_BITS = 4
#: A delta's class of one field of a changed group.
CLASS_BITS = 2
#: The widest field a decoder must read (values are held as int32).
MAX_FIELD_BITS = 31
#: The largest coordinate a map's bounds may have, either sign (metres).
MAP_BOUND_M = 1e6


@dataclass(frozen=True, slots=True)
class DeltaClass:
    """How one field of a changed group is sent in a delta: ``payload`` bits of a signed
    (two's complement) difference from the value held, the field at full width
    (``payload`` None), or nothing (``payload`` 0: unchanged)."""

    code: int
    name: str
    payload: int | None
    meaning: str


DELTA_CLASSES = (
    DeltaClass(0, "unchanged", 0, "no payload: the value held"),
    DeltaClass(1, "small", 7, "a 7-bit two's complement difference, -64 to 63"),
    DeltaClass(2, "medium", 13, "a 13-bit two's complement difference, -4096 to 4095"),
    DeltaClass(3, "full", None, "the new value at the field's full width"),
)


@dataclass(frozen=True, slots=True)
class RecordField:
    """One field of a player's record (see the module's docstring for the coding).

    ``axis``: the map axis whose bounds are the field's origin and span (x 0, y 1), or
    None; ``span``: the range a field of no map axis covers (its width follows), or None
    for a field of fixed width ``bits``."""

    name: str
    group: str
    unit: str
    step: float
    origin: float = 0.0
    axis: int | None = None
    span: float | None = None
    bits: int | None = None
    centred: bool = False
    wraps: bool = False
    meaning: str = ""


POSITION_STEP_M = 1.0 / 4096.0
VELOCITY_STEP_MS = 1.0 / 256.0
#: Heights a player's feet can have (the floor is z = 0; boxes and jumps stay well within).
Z_RANGE_M = (-16.0, 48.0)
VELOCITY_LIMIT_MS = 64.0

#: In record order (a full record's order, and the order of a group's fields in a delta).
RECORD_FIELDS = (
    RecordField("x", "position", "m", POSITION_STEP_M, axis=0,
                meaning="feet x, from the map's `bounds_min[0]`"),
    RecordField("y", "position", "m", POSITION_STEP_M, axis=1,
                meaning="feet y, from the map's `bounds_min[1]`"),
    RecordField("z", "position", "m", POSITION_STEP_M, Z_RANGE_M[0],
                span=Z_RANGE_M[1] - Z_RANGE_M[0], meaning="feet z"),
    RecordField("vx", "velocity", "m/s", VELOCITY_STEP_MS, span=2 * VELOCITY_LIMIT_MS,
                centred=True, meaning="velocity x, within 64 m/s either way"),
    RecordField("vy", "velocity", "m/s", VELOCITY_STEP_MS, span=2 * VELOCITY_LIMIT_MS,
                centred=True, meaning="velocity y, within 64 m/s either way"),
    RecordField("vz", "velocity", "m/s", VELOCITY_STEP_MS, span=2 * VELOCITY_LIMIT_MS,
                centred=True, meaning="velocity z, within 64 m/s either way"),
    RecordField("yaw", "look", "rad", 2.0 * math.pi / 65536.0, -math.pi, bits=16,
                wraps=True, meaning="heading, -pi to pi, wrapping"),
    RecordField("pitch", "look", "rad", (math.pi / 2.0) / 32767.0, bits=16, centred=True,
                meaning="elevation, -pi/2 to pi/2 (clamped there first)"),
    RecordField("health", "status", "", 1.0, bits=8, meaning="0 to 255"),
    RecordField("flags", "status", "", 1.0, bits=8, meaning="bit 0: alive; the others 0"),
)  # fmt: skip

#: The groups a delta's mask names, in bit order, each with its fields (in record order).
GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = tuple(
    (group, tuple(f.name for f in RECORD_FIELDS if f.group == group))
    for group in dict.fromkeys(f.group for f in RECORD_FIELDS)
)


def field(name: str) -> RecordField:
    """The field called ``name``."""
    for candidate in RECORD_FIELDS:
        if candidate.name == name:
            return candidate
    raise KeyError(name)


def bits_for(span: float, step: float) -> int:
    """The width that holds every step of ``span``: ``max(1, ceil(log2(span / step + 1)))``."""
    return max(1, math.ceil(math.log2(span / step + 1.0)))


def field_bits(bounds_min: Sequence[float], bounds_max: Sequence[float]) -> tuple[int, ...]:
    """Each field's width on a map whose floor spans ``bounds_min`` to ``bounds_max``."""
    widths = []
    for f in RECORD_FIELDS:
        if f.bits is not None:
            widths.append(f.bits)
        elif f.axis is not None:
            widths.append(bits_for(float(bounds_max[f.axis]) - float(bounds_min[f.axis]), f.step))
        else:
            assert f.span is not None
            widths.append(bits_for(f.span, f.step))
    return tuple(widths)


def field_origins(bounds_min: Sequence[float]) -> tuple[float, ...]:
    """Each field's origin on a map whose floor starts at ``bounds_min``."""
    return tuple(
        float(bounds_min[f.axis]) if f.axis is not None else f.origin for f in RECORD_FIELDS
    )


#: The fewest bytes a record takes (a gone record: its header, byte-aligned).
MIN_RECORD_BYTES = (ID_BITS + KIND_BITS + 7) // 8


def full_record_bytes(bits: Sequence[int]) -> int:
    """The length of a full record with these widths."""
    return (ID_BITS + KIND_BITS + sum(bits) + 7) // 8


def max_record_bytes(bits: Sequence[int]) -> int:
    """The longest record a coder of these widths writes (a delta of every field at
    full width)."""
    widest = ID_BITS + KIND_BITS + MASK_BITS + len(bits) * CLASS_BITS + sum(bits)
    return (widest + 7) // 8
