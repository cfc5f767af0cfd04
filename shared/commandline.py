"""The project's commands share one argparse rule: a user's mistake is one line.

argparse prints the whole usage block before its error; for a command with twenty options
that hides the one line that matters. Here the error is that line, naming ``--help``,
with exit status 2 as argparse has it. Every command also answers ``--version`` (the
installed distribution's, so a report or a bug names the code that ran).
"""

from __future__ import annotations

import argparse
from importlib import metadata
from typing import Any, NoReturn

__all__ = ["OneLineParser", "arena_version"]


def arena_version() -> str:
    """The installed distribution's version, or ``unknown`` when run from a bare source tree."""
    try:
        return metadata.version("arena")
    except metadata.PackageNotFoundError:
        return "unknown"


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a mistake is ``PROG: error: MESSAGE (see --help)`` and exit 2; and
    ``--version`` on every command."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.add_argument("--version", action="version", version=f"%(prog)s {arena_version()}")

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")
