"""The one vocabulary every message family of ours is checked with: the players' protocol
(``shared/protocol``), the replication link (``server/replication/messages.py``) and the
directory's API (``shared/directory``).

A validator takes a field's name and its decoded value and returns the value (normalised:
a list becomes a tuple) or raises :class:`InvalidField` with one line that names the
field. Each states what it accepts as a :class:`WireType`, so a generated document
(``docs/protocol.md``, from :mod:`shared.protocol.spec`) says what its decoder checks.

Every bad message of every family is a :class:`MessageError` (a ``ValueError``): its
``code`` is the one the peer is answered with. The players' ``ProtocolError`` subclasses
it with its own codes.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "MAX_EPOCH",
    "MAX_JSON_INTEGER",
    "InvalidField",
    "MessageError",
    "Validator",
    "WireType",
    "binary",
    "described",
    "flag",
    "integer",
    "integers",
    "maps",
    "matching",
    "number",
    "numbers",
    "optional",
    "text",
    "texts",
    "url",
    "wire_type",
]

#: An epoch on a msgpack link (players, replication): what a signed 64-bit integer holds.
MAX_EPOCH = 2**63 - 1
#: The largest integer a JSON document of ours carries (the directory's epochs and counts):
#: exact in a float64, so any JSON reader keeps it.
MAX_JSON_INTEGER = 2**53


class MessageError(ValueError):
    """A message that breaks its schema; the text is one line that says what is wrong.

    ``code``: what the peer is answered with (``invalid_field`` unless said otherwise; the
    directory also answers ``malformed``, the players' protocol has its own codes)."""

    code: str = "invalid_field"

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code


class InvalidField(MessageError):
    """A field of the wrong type or out of range (what every validator raises)."""

    code = "invalid_field"


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


def _kind(value: object) -> str:
    return type(value).__name__


def integer(lo: int, hi: int) -> Callable[[str, object], int]:
    """An int (never a bool) in ``[lo, hi]``."""

    def check(name: str, value: object) -> int:
        if type(value) is int and lo <= value <= hi:  # the common case, checked first
            return value
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidField(f"{name}: expected an integer, got {_kind(value)}")
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
    """A finite int or float (never a bool) in ``[lo, hi]``, as a float."""

    def check(name: str, value: object) -> float:
        # Fast path: ``v - v == 0`` is false exactly for NaN and infinities.
        if type(value) is float and lo <= value <= hi and value - value == 0.0:
            return value
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InvalidField(f"{name}: expected a number, got {_kind(value)}")
        result = float(value)
        if not math.isfinite(result):
            raise InvalidField(f"{name}: {result} is not a finite number")
        if not lo <= result <= hi:
            raise InvalidField(f"{name}: {result} is outside [{lo}, {hi}]")
        return result

    return described(check, WireType("float", _bound(lo), _bound(hi)))


def text(max_len: int | None = None, min_len: int = 0) -> Callable[[str, object], str]:
    """A string of ``min_len`` to ``max_len`` characters (no most when None)."""

    def check(name: str, value: object) -> str:
        if not isinstance(value, str):
            raise InvalidField(f"{name}: expected a string, got {_kind(value)}")
        if max_len is not None and len(value) > max_len:
            raise InvalidField(f"{name}: longer than {max_len} characters")
        if len(value) < min_len:
            raise InvalidField(f"{name}: expected a non-empty string")
        return value

    return described(check, WireType("str", max_chars=max_len))


def matching(pattern: re.Pattern[str], rule: str) -> Callable[[str, object], str]:
    """A string that ``pattern`` matches whole (``rule`` says how, in the refusal)."""

    def check(name: str, value: object) -> str:
        if not isinstance(value, str) or not pattern.fullmatch(value):
            raise InvalidField(f"{name}: {rule}")
        return value

    return described(check, WireType("str"))


def url(schemes: tuple[str, ...], max_chars: int) -> Callable[[str, object], str]:
    """A printable URL of at most ``max_chars`` with one of ``schemes`` and a host."""

    def check(name: str, value: object) -> str:
        if (
            not isinstance(value, str)
            or len(value) > max_chars
            or not value.startswith(schemes)
            or not value.split("://", 1)[1].split("/", 1)[0]
            or any(c.isspace() or not c.isprintable() for c in value)
        ):
            raise InvalidField(
                f"{name}: expected a {'/'.join(schemes)} URL of at most {max_chars} chars"
            )
        return value

    return described(check, WireType("str", max_chars=max_chars))


def flag(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise InvalidField(f"{name}: expected true or false, got {_kind(value)}")
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
