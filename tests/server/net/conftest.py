"""What the node's edge tests share: the lines ``arena.server`` logged."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest


class LogLines(logging.Handler):
    """Every line logged, kept; ``events(name)`` the ``event=name`` ones."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())

    def events(self, name: str) -> list[str]:
        return [line for line in self.lines if line.startswith(f"event={name} ")]


@pytest.fixture
def logs() -> Iterator[LogLines]:
    """What ``arena.server`` logged (attached directly: configure_logging may stop
    propagation to the root logger that caplog listens on)."""
    handler = LogLines()
    logger = logging.getLogger("arena.server")
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
