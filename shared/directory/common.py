"""What every directory message shares: the error answer, the limits of the API and the
checks of its common fields, each stated once.

The checks are :mod:`shared.schema`'s, the vocabulary of every message family; a bad
message raises its :class:`~shared.schema.MessageError` (``code``: ``malformed`` for a
body that is not a JSON object, ``invalid_field`` with one line that names the field), so
a message can check itself in ``__post_init__`` and a refusal can be sent back to the peer
as it is.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from shared.schema import (
    MAX_JSON_INTEGER,
    InvalidField,
    MessageError,
    flag,
    integer,
    matching,
    number,
    optional,
    text,
    url,
)

__all__ = [
    "AMOUNT",
    "COUNT",
    "EPOCH",
    "MAX_CLAIMED",
    "MAX_COUNT",
    "MAX_EPOCH",
    "MAX_PLAYER_CHARS",
    "MAX_RTT_ENTRIES",
    "MAX_RTT_MS",
    "MAX_URL_CHARS",
    "NODE_ID",
    "OPTIONAL_TEXT",
    "REGION_NAME",
    "RESERVATION_ID",
    "ROLES",
    "STATUSES",
    "TEXT",
    "ErrorAnswer",
    "MessageError",
    "NodeStatus",
    "Role",
    "directory_urls",
    "flag",
    "invalid",
    "is_amount",
    "is_count",
    "matching",
    "object_of",
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
MAX_URL_CHARS = 256
MAX_COUNT = 10_000_000  # players, matches, capacity, reserved seats
MAX_EPOCH = MAX_JSON_INTEGER  # exact in a float64, so any JSON reader keeps it
#: The most reservation ids one heartbeat may claim.
MAX_CLAIMED = 4096
MAX_PLAYER_CHARS = 32
MAX_RTT_ENTRIES = 64
MAX_RTT_MS = 10_000.0


#: The checks of the fields every message here has (the vocabulary is :mod:`shared.schema`).
COUNT = integer(0, MAX_COUNT)
EPOCH = integer(0, MAX_EPOCH)
AMOUNT = number(0.0)  # a finite number >= 0: seconds, milliseconds, a load
TEXT = text()
OPTIONAL_TEXT = optional(TEXT)


def invalid(message: str) -> MessageError:
    """A refusal of one field (``invalid_field``)."""
    return InvalidField(message)


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
        raise MessageError(f"{what} must be a JSON object", code="malformed")
    missing = [name for name in required if name not in document]
    if missing:
        raise invalid(f"missing field(s): {', '.join(missing)}")
    if allowed is not None and not document.keys() <= allowed:
        unknown = sorted(str(k)[:32] for k in document if k not in allowed)
        raise invalid(f"unknown field(s): {', '.join(unknown[:8])}")
    return document


def is_count(value: object, hi: int) -> bool:
    """Fast test: a plain int in ``[0, hi]`` (false is not an answer: ask :data:`COUNT`)."""
    return type(value) is int and 0 <= value <= hi


def is_amount(value: object) -> bool:
    """Fast test: a plain finite float or int >= 0 (false: ask :data:`AMOUNT`)."""
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
        TEXT("error", self.error)
        TEXT("message", self.message)
        OPTIONAL_TEXT("best_region", self.best_region)
        if self.best_rtt_ms is not None:
            AMOUNT("best_rtt_ms", self.best_rtt_ms)

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
    for base in urls:
        scheme, sep, rest = base.partition("://")
        if scheme not in ("http", "https") or not sep or not rest or " " in base:
            raise ValueError(f"--directory: {base!r} is not an http(s):// URL")
    return urls
