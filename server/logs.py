"""Structured logs: one event a line, ``key=value`` pairs, with a UTC timestamp."""

from __future__ import annotations

import logging
import sys
import time

__all__ = ["configure_logging"]


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
