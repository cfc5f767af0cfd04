"""The project's commands share one argparse rule: a user's mistake is one line.

argparse prints the whole usage block before its error; for a command with twenty options
that hides the one line that matters. Here the error is that line, naming ``--help``,
with exit status 2 as argparse has it.
"""

from __future__ import annotations

import argparse
from typing import NoReturn

__all__ = ["OneLineParser"]


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a mistake is ``PROG: error: MESSAGE (see --help)`` and exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")
