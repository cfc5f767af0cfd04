"""Structured logs: one event a line, logfmt or JSON, with a UTC timestamp and the level.

A call site names an event and its fields instead of formatting a string
(``log.info("player_left", match=0, player=3, **node.log_fields)``), so the two formats
(``--log-format logfmt|json``) carry the same fields and neither has to parse the other.
logfmt quotes a value only when it must (a space, ``=``, ``"``, a control character, or
nothing at all) and escapes with backslashes (``\\"``, ``\\n``, ``\\u0007``), as logfmt
parsers (go-logfmt, Loki's) read it; JSON is one object per line. Fields the call site
does not give are taken from the process's context (:func:`set_context`: an
``arena-server`` process is one node, so every line of it, the coordinator's too, says
region, node, role and epoch).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
import time
from collections.abc import Callable, Mapping
from typing import Literal

__all__ = [
    "LOG_FORMATS",
    "Event",
    "EventLogger",
    "LogFormat",
    "Throttle",
    "add_log_arguments",
    "announce",
    "configure_logging",
    "logfmt",
    "set_context",
]

LogFormat = Literal["logfmt", "json"]
LOG_FORMATS: tuple[LogFormat, ...] = ("logfmt", "json")

Fields = Mapping[str, object]


class Event:
    """A record's message: an event and its fields, rendered only if the line is written.
    ``str()`` is its logfmt form (what ``caplog`` and ``record.getMessage()`` show)."""

    __slots__ = ("fields", "name")

    def __init__(self, name: str, fields: Fields) -> None:
        self.name = name
        self.fields = fields

    def __str__(self) -> str:
        return logfmt({"event": self.name, **self.fields})


class EventLogger:
    """A :class:`logging.Logger` that takes an event name and fields, not a format string."""

    def __init__(self, name: str) -> None:
        self.logger = logging.getLogger(name)

    def log(self, level: int, event: str, /, **fields: object) -> None:
        self._log(level, event, fields)

    def debug(self, event: str, /, **fields: object) -> None:
        self._log(logging.DEBUG, event, fields)

    def info(self, event: str, /, **fields: object) -> None:
        self._log(logging.INFO, event, fields)

    def warning(self, event: str, /, **fields: object) -> None:
        self._log(logging.WARNING, event, fields)

    def error(self, event: str, /, **fields: object) -> None:
        self._log(logging.ERROR, event, fields)

    def exception(self, event: str, /, **fields: object) -> None:
        """An error with the exception being handled (its traceback in field ``error``)."""
        self._log(logging.ERROR, event, fields, exc_info=True)

    def _log(self, level: int, event: str, fields: Fields, exc_info: bool = False) -> None:
        if self.logger.isEnabledFor(level):  # (a debug line costs nothing unless enabled)
            self.logger.log(level, Event(event, fields), exc_info=exc_info, stacklevel=3)


# -- rendering ---------------------------------------------------------------------------

_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _unprintable(c: str) -> bool:
    """A control character, or one that ends a line for ``str.splitlines``."""
    return c < " " or "\x7f" <= c <= "\x9f" or c in "\u2028\u2029"


def _text(value: object) -> str:
    if value is None:
        return ""
    if value is True or value is False:
        return "true" if value else "false"
    return str(value)


def _logfmt_value(value: object) -> str:
    text = _text(value)
    if text and not any(c.isspace() or c in '="' or _unprintable(c) for c in text):
        return text  # (a backslash in a bare value is read as it is)
    escaped = "".join(
        _ESCAPES.get(c) or (f"\\u{ord(c):04x}" if _unprintable(c) else c) for c in text
    )
    return f'"{escaped}"'


def logfmt(fields: Fields) -> str:
    """``key=value`` pairs, a value quoted (with ``\\`` escapes) only where it must be."""
    return " ".join(f"{key}={_logfmt_value(value)}" for key, value in fields.items())


def _json_value(value: object) -> object:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # JSON has no inf or nan
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def _json(fields: Fields) -> str:
    return json.dumps(
        {key: _json_value(value) for key, value in fields.items()},
        separators=(",", ":"),  # (ASCII: no character in it can end a line)
    )


class _Formatter(logging.Formatter):
    converter = time.gmtime  # type: ignore[assignment]  # UTC timestamps

    def __init__(self, render: Callable[[Fields], str]) -> None:
        super().__init__()
        self.render = render

    def format(self, record: logging.LogRecord) -> str:
        stamp = self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}Z"
        line: dict[str, object] = {"ts": stamp, "level": record.levelname.lower()}
        message = record.msg
        if isinstance(message, Event):
            line["event"] = message.name
            line.update(message.fields)
        else:  # a plain line from code that is not ours
            line["event"] = "message"
            line["message"] = record.getMessage()
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info)
        for key, value in _setup.context().items():
            line.setdefault(key, value)
        return self.render(line)


_RENDERERS: dict[LogFormat, Callable[[Fields], str]] = {"logfmt": logfmt, "json": _json}


class _Setup:
    """What :func:`configure_logging` and :func:`set_context` chose for the process."""

    def __init__(self) -> None:
        self.formatter = _Formatter(logfmt)
        self.context: Callable[[], Fields] = dict


_setup = _Setup()


def add_log_arguments(parser: argparse.ArgumentParser) -> None:
    """``--log-level`` and ``--log-format``, the same on every command that logs."""
    parser.add_argument(
        "--log-level", default="info", choices=["debug", "info", "warning", "error"]
    )
    parser.add_argument(
        "--log-format",
        default="logfmt",
        choices=LOG_FORMATS,
        help="stderr log lines (and the listening/stopping lines on stdout) as logfmt "
        "key=value pairs or as JSON objects, one a line",
    )


def configure_logging(level: str = "info", fmt: LogFormat = "logfmt") -> None:
    """Log ``arena.*`` to stderr at ``level`` and up, one ``fmt`` line per event."""
    _setup.formatter = _Formatter(_RENDERERS[fmt])
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_setup.formatter)
    root = logging.getLogger("arena")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False


def set_context(context: Callable[[], Fields]) -> None:
    """The fields every line carries unless it gives them itself (read as each line is
    written: the node's role and epoch change)."""
    _setup.context = context


def announce(event: str, /, **fields: object) -> None:
    """A line for launchers on stdout, whatever the level (``listening``, ``stopping``):
    formatted like the log, so ``event=listening url=...`` or ``{"event":"listening",...}``."""
    record = logging.LogRecord("arena", logging.INFO, __file__, 0, Event(event, fields), None, None)
    print(_setup.formatter.format(record), flush=True)


class Throttle:
    """At most one log line per key per ``interval`` seconds; the lines held back are
    counted and reported with the next one (a peer retrying ten times a second, or a
    busy machine overrunning every tick, must not flood the log)."""

    def __init__(self, interval: float = 30.0, clock: Callable[[], float] = time.monotonic):
        self.interval = interval
        self.clock = clock
        self._last: dict[str, float] = {}
        self._held: dict[str, int] = {}

    def allow(self, key: str) -> int | None:
        """None: hold this line back; else log it, with this many held back since the
        last one."""
        now = self.clock()
        last = self._last.get(key)
        if last is not None and now - last < self.interval:
            self._held[key] = self._held.get(key, 0) + 1
            return None
        self._last[key] = now
        return self._held.pop(key, 0)
