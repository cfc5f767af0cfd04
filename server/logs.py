"""Structured logs: one event a line, ``key=value`` pairs, with a UTC timestamp."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable

__all__ = ["Throttle", "configure_logging"]


class _KeyValueFormatter(logging.Formatter):
    converter = time.gmtime  # type: ignore[assignment]  # UTC timestamps

    def format(self, record: logging.LogRecord) -> str:
        stamp = self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}Z"
        return f"ts={stamp} level={record.levelname.lower()} {record.getMessage()}"


def configure_logging(level: str = "info") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_KeyValueFormatter())
    root = logging.getLogger("arena")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False


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
