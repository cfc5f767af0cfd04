"""The protocol's limits and its field validators: each takes a decoded value and returns
it (normalised) or raises :class:`~shared.protocol.errors.InvalidField` naming the field."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from shared.protocol.errors import InvalidField

__all__ = [
    "MAX_ARRAY_LEN",
    "MAX_CLIENT_FRAME_BYTES",
    "MAX_EPOCH",
    "MAX_MAP_LEN",
    "MAX_SEQ",
    "MAX_SERVER_FRAME_BYTES",
    "MAX_TICK",
    "PROTOCOL_VERSION",
    "U32_MAX",
    "Validator",
    "WireType",
    "binary",
    "described",
    "flag",
    "integer",
    "integers",
    "maps",
    "number",
    "numbers",
    "optional",
    "text",
    "texts",
    "wire_type",
]

PROTOCOL_VERSION = 2
MAX_CLIENT_FRAME_BYTES = 1024  # an input is ~120 bytes; anything near this is abuse
MAX_SERVER_FRAME_BYTES = 1 << 20  # 1 MiB: ~40,000 entities; a node caps players far below
#: The most keys a decoded map and the most elements a decoded array may hold (either way).
MAX_MAP_LEN = 64
MAX_ARRAY_LEN = 4096

U32_MAX = 2**32 - 1
#: An input's highest ``seq``; numbers never wrap (a client there rejoins, for a new seat:
#: 414 days of inputs at 60 Hz). Kept within int32, so every language's client counts it.
MAX_SEQ = 2**31 - 1
MAX_TICK = 2**53  # exact in a float64, so tick / rate stays exact enough for centuries
MAX_EPOCH = 2**63 - 1


@dataclass(frozen=True, slots=True)
class WireType:
    """What a validator accepts, stated as data: the message tables of ``docs/protocol.md``
    and ``docs/protocol.json`` are generated from it (:mod:`shared.protocol.spec`), so the
    documented type and range of a field are the ones its decoder checks.

    ``kind``: ``int``, ``float`` (an integer is taken too; finite), ``str``, ``bool``,
    ``bin``, or a list of one of them (``float[]``, ``int[]``, ``str[]``, ``map[]``,
    ``event[]``); ``low``/``high``: inclusive bounds of the value (of each element of a
    list), None for none; ``length``: a list's exact length; ``max_chars``: a string's most
    characters; ``choices``: the strings allowed; ``nullable``: nil is allowed too."""

    kind: str
    low: float | None = None
    high: float | None = None
    length: int | None = None
    max_chars: int | None = None
    choices: tuple[str, ...] = ()
    nullable: bool = False


Validator = Callable[[str, object], Any]


def described(check: Validator, wire: WireType) -> Validator:
    """``check`` carrying what it accepts (:func:`wire_type`)."""
    setattr(check, "wire", wire)  # noqa: B010 (a function's attribute: mypy knows no other way)
    return check


def wire_type(check: Validator) -> WireType:
    """What the validator ``check`` accepts; TypeError for one that does not say."""
    wire = getattr(check, "wire", None)
    if not isinstance(wire, WireType):
        raise TypeError(f"validator {check!r} does not state what it accepts")
    return wire


def _bound(value: float) -> float | None:
    return value if math.isfinite(value) else None


def integer(lo: int, hi: int) -> Callable[[str, object], int]:
    def check(name: str, value: object) -> int:
        if type(value) is int and lo <= value <= hi:  # the common case, checked first
            return value
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidField(f"{name}: expected an integer")
        if not lo <= value <= hi:
            raise InvalidField(f"{name}: {value} is outside [{lo}, {hi}]")
        return value

    return described(check, WireType("int", lo, hi))


def integers(count: int, lo: int, hi: int) -> Callable[[str, object], tuple[int, ...]]:
    element = integer(lo, hi)

    def check(name: str, value: object) -> tuple[int, ...]:
        if not isinstance(value, list | tuple) or len(value) != count:
            raise InvalidField(f"{name}: expected a list of {count} integers")
        return tuple(element(f"{name}[{i}]", v) for i, v in enumerate(value))

    return described(check, WireType("int[]", lo, hi, length=count))


def number(lo: float = -math.inf, hi: float = math.inf) -> Callable[[str, object], float]:
    def check(name: str, value: object) -> float:
        # Fast path: ``v - v == 0`` is false exactly for NaN and infinities.
        if type(value) is float and lo <= value <= hi and value - value == 0.0:
            return value
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InvalidField(f"{name}: expected a number")
        result = float(value)
        if not math.isfinite(result):
            raise InvalidField(f"{name}: must be finite")
        if not lo <= result <= hi:
            raise InvalidField(f"{name}: {result} is outside [{lo}, {hi}]")
        return result

    return described(check, WireType("float", _bound(lo), _bound(hi)))


def text(max_len: int) -> Callable[[str, object], str]:
    def check(name: str, value: object) -> str:
        if not isinstance(value, str):
            raise InvalidField(f"{name}: expected a string")
        if len(value) > max_len:
            raise InvalidField(f"{name}: longer than {max_len} characters")
        return value

    return described(check, WireType("str", max_chars=max_len))


def flag(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise InvalidField(f"{name}: expected true or false")
    return value


def optional(inner: Callable[[str, object], Any]) -> Callable[[str, object], Any]:
    def check(name: str, value: object) -> Any:
        return None if value is None else inner(name, value)

    return described(check, dataclasses.replace(wire_type(inner), nullable=True))


def numbers(count: int, bound: float) -> Callable[[str, object], tuple[float, ...]]:
    element = number(-bound, bound)

    def check(name: str, value: object) -> tuple[float, ...]:
        if (
            type(value) is list
            and len(value) == count
            and all(type(v) is float and -bound <= v <= bound and v - v == 0.0 for v in value)
        ):
            return tuple(value)
        if not isinstance(value, list | tuple) or len(value) != count:
            raise InvalidField(f"{name}: expected a list of {count} numbers")
        return tuple(element(f"{name}[{i}]", v) for i, v in enumerate(value))

    return described(check, WireType("float[]", -bound, bound, length=count))


def binary(name: str, value: object) -> bytes:
    if not isinstance(value, bytes):
        raise InvalidField(f"{name}: expected binary data")
    return value


def maps(name: str, value: object) -> tuple[dict[str, Any], ...]:
    if not isinstance(value, list | tuple) or not all(isinstance(e, dict) for e in value):
        raise InvalidField(f"{name}: expected a list of maps")
    return tuple(value)


def texts(name: str, value: object) -> tuple[str, ...]:
    if not isinstance(value, list | tuple) or not all(isinstance(e, str) for e in value):
        raise InvalidField(f"{name}: expected a list of strings")
    return tuple(value)


described(flag, WireType("bool"))
described(binary, WireType("bin"))
described(maps, WireType("map[]"))
described(texts, WireType("str[]"))
