"""What every directory message shares: the error a bad one raises, the error answer, the
limits of the API and the field checks, each stated once.

The checks return the value they were given (no copies, no coercion) and raise
:class:`MessageError` with one line that names the field, so a message can check itself in
``__post_init__`` and a refusal can be sent back to the peer as it is.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "MAX_CLAIMED",
    "MAX_COUNT",
    "MAX_EPOCH",
    "MAX_PLAYER_CHARS",
    "MAX_RTT_ENTRIES",
    "MAX_RTT_MS",
    "NODE_ID",
    "REGION_NAME",
    "RESERVATION_ID",
    "ROLES",
    "STATUSES",
    "ErrorAnswer",
    "MessageError",
    "NodeStatus",
    "Role",
    "directory_urls",
    "flag",
    "integer",
    "invalid",
    "is_amount",
    "is_count",
    "number",
    "object_of",
    "optional_text",
    "text",
    "url",
]

Role = Literal["primary", "standby"]
#: What the directory makes of a node's heartbeat (``docs/routing.md``).
NodeStatus = Literal["routable", "standby", "fenced"]
ROLES: tuple[Role, ...] = ("primary", "standby")
STATUSES: tuple[NodeStatus, ...] = ("routable", "standby", "fenced")

#: A node id or replication group: 1-64 of ``A-Za-z0-9._-``, starting alphanumeric.
NODE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
#: A region name: 1-32 of ``a-z0-9_-``, starting with a letter.
REGION_NAME = re.compile(r"[a-z][a-z0-9_-]{0,31}")
#: A reservation id (``Reservation.id``): 16 lowercase hex digits.
RESERVATION_ID = re.compile(r"[0-9a-f]{16}")
_MAX_URL_CHARS = 256
MAX_COUNT = 10_000_000  # players, matches, capacity, reserved seats
MAX_EPOCH = 2**53  # exact in a float64, so any JSON reader keeps it
#: The most reservation ids one heartbeat may claim.
MAX_CLAIMED = 4096
MAX_PLAYER_CHARS = 32
MAX_RTT_ENTRIES = 64
MAX_RTT_MS = 10_000.0


class MessageError(ValueError):
    """A directory message that breaks the schema. ``code``: ``malformed`` (not a JSON
    object) or ``invalid_field`` (the one-line message names the field). The directory
    answers a bad request with exactly these (400); a node or bot reading a bad answer
    reports it."""

    def __init__(self, code: Literal["malformed", "invalid_field"], message: str) -> None:
        super().__init__(message)
        self.code = code


def invalid(message: str) -> MessageError:
    return MessageError("invalid_field", message)


def integer(name: str, value: object, lo: int, hi: int) -> int:
    """An int (never a bool) in ``[lo, hi]``."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise invalid(f"{name}: expected an integer, got {type(value).__name__}")
    if not lo <= value <= hi:
        raise invalid(f"{name}: {value} is outside [{lo}, {hi}]")
    return value


def number(name: str, value: object, lo: float = 0.0, hi: float = math.inf) -> float:
    """A finite int or float (never a bool) in ``[lo, hi]``."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise invalid(f"{name}: expected a number, got {type(value).__name__}")
    if not (math.isfinite(value) and lo <= value <= hi):
        raise invalid(f"{name}: {value} is not a finite number in [{lo:g}, {hi:g}]")
    return value


def flag(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise invalid(f"{name}: expected true or false, got {type(value).__name__}")
    return value


def text(name: str, value: object, pattern: re.Pattern[str] | None = None, rule: str = "") -> str:
    """A string; with ``pattern``, one that matches it whole (``rule`` says how)."""
    if not isinstance(value, str) or (pattern is not None and not pattern.fullmatch(value)):
        raise invalid(f"{name}: {rule or 'expected a string'}")
    return value


def optional_text(name: str, value: object) -> str | None:
    return None if value is None else text(name, value)


def url(name: str, value: object, schemes: tuple[str, ...]) -> str:
    """A printable URL of at most :data:`_MAX_URL_CHARS` with one of ``schemes`` and a host."""
    if (
        not isinstance(value, str)
        or len(value) > _MAX_URL_CHARS
        or not value.startswith(schemes)
        or not value.split("://", 1)[1].split("/", 1)[0]
        or any(c.isspace() or not c.isprintable() for c in value)
    ):
        raise invalid(
            f"{name}: expected a {'/'.join(schemes)} URL of at most {_MAX_URL_CHARS} chars"
        )
    return value


def object_of(
    document: object,
    what: str,
    required: tuple[str, ...],
    allowed: frozenset[str] | None = None,
) -> Mapping[str, Any]:
    """``document`` as a JSON object with every ``required`` field. With ``allowed`` (a
    request: decoded strictly), fields outside it are refused; without (an answer), they
    are ignored, so a newer peer may add one."""
    if not isinstance(document, dict):
        raise MessageError("malformed", f"{what} must be a JSON object")
    missing = [name for name in required if name not in document]
    if missing:
        raise invalid(f"missing field(s): {', '.join(missing)}")
    if allowed is not None and not document.keys() <= allowed:
        unknown = sorted(str(k)[:32] for k in document if k not in allowed)
        raise invalid(f"unknown field(s): {', '.join(unknown[:8])}")
    return document


def is_count(value: object, hi: int) -> bool:
    """Fast test: a plain int in ``[0, hi]`` (false is not an answer: ask :func:`integer`)."""
    return type(value) is int and 0 <= value <= hi


def is_amount(value: object) -> bool:
    """Fast test: a plain finite float or int >= 0 (false: ask :func:`number`)."""
    return (type(value) is float or type(value) is int) and 0 <= value < math.inf


@dataclass(frozen=True, slots=True)
class ErrorAnswer:
    """Every refusal the directory sends: ``{"error": code, "message": one line}``; a
    ``no_capacity`` one adds the best region and its RTT (ms)."""

    error: str
    message: str
    best_region: str | None = None
    best_rtt_ms: float | None = None

    def __post_init__(self) -> None:
        text("error", self.error)
        text("message", self.message)
        optional_text("best_region", self.best_region)
        if self.best_rtt_ms is not None:
            number("best_rtt_ms", self.best_rtt_ms)

    @classmethod
    def parse(cls, document: object) -> ErrorAnswer:
        body = object_of(document, "an error answer", _ERROR_FIELDS)
        return cls(body["error"], body["message"], body.get("best_region"), body.get("best_rtt_ms"))

    def to_json(self) -> dict[str, object]:
        body: dict[str, object] = {"error": self.error, "message": self.message}
        if self.best_region is not None:
            body["best_region"] = self.best_region
            body["best_rtt_ms"] = self.best_rtt_ms
        return body


_ERROR_FIELDS = ("error", "message")


def directory_urls(spec: str) -> tuple[str, ...]:
    """The base URLs in a ``--directory`` value (comma-separated, in order of preference:
    directories sharing one registry); ValueError with one line when one is not an
    http(s) URL."""
    urls = tuple(part.strip().rstrip("/") for part in spec.split(","))
    for url in urls:
        scheme, sep, rest = url.partition("://")
        if scheme not in ("http", "https") or not sep or not rest or " " in url:
            raise ValueError(f"--directory: {url!r} is not an http(s):// URL")
    return urls
