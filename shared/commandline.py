"""The project's commands share one argparse rule: a user's mistake is one line.

argparse prints the whole usage block before its error; for a command with twenty options
that hides the one line that matters. Here the error is that line, naming ``--help``,
with exit status 2 as argparse has it. Every command also answers ``--version`` (the
installed distribution's, so a report or a bug names the code that ran).

Every duration flag takes one spelling: a number with a unit (``30s``, ``250ms``, ``2m``)
or a bare number in the flag's own unit (its name says which: ``--seat-grace-s 30``,
``--ack-timeout-ms 100``), so the flags that took bare numbers take them as before.
"""

from __future__ import annotations

import argparse
import math
import re
from importlib import metadata
from typing import Any, NoReturn

__all__ = [
    "Duration",
    "OneLineParser",
    "arena_version",
    "milliseconds",
    "parse_duration",
    "seconds",
]

#: The words --help and the errors use for a flag's unit.
UNIT_WORDS = {"s": "seconds", "ms": "milliseconds"}
#: Seconds in one of each unit a duration may name.
UNIT_SECONDS = {"us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}
_WITH_UNIT = re.compile(
    r"\s*([+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:e[+-]?\d+)?)\s*(us|µs|ms|s|min|m|h)\s*", re.IGNORECASE
)


def arena_version() -> str:
    """The installed distribution's version, or ``unknown`` when run from a bare source tree."""
    try:
        return metadata.version("arena")
    except metadata.PackageNotFoundError:
        return "unknown"


def parse_duration(text: str, unit: str) -> float:
    """``text`` as a number of ``unit`` (``s`` or ``ms``): ``30s``, ``250ms``, ``2m`` or
    ``1h`` are converted; a bare number is taken as ``unit`` already, as ``float`` reads it
    (the caller checks the range: ``inf`` or a negative value is its to refuse).
    :class:`ValueError` when it is neither."""
    try:
        return float(text)
    except ValueError:
        pass
    found = _WITH_UNIT.fullmatch(text)
    if found is None:
        word = UNIT_WORDS.get(unit, unit)
        raise ValueError(f"{text!r} is not a duration (30s, 250ms, 2m; a bare number is {word})")
    number, name = found.groups()
    value = float(number) * UNIT_SECONDS[name.lower()] / UNIT_SECONDS[unit]
    if not math.isfinite(value):
        raise ValueError(f"{text!r} is not a finite duration")
    return value


def check_duration(value: float, flag: str, unit: str, most_s: float = 60.0) -> float:
    """``value`` (in ``unit``) when it is from 0 to ``most_s`` seconds; else
    :class:`ValueError` naming ``flag`` in one line."""
    if not value >= 0:  # (NaN too)
        raise ValueError(f"{flag} must be a duration >= 0")
    if value * UNIT_SECONDS[unit] > most_s:
        raise ValueError(f"{flag}: {value:g} {unit} is longer than {most_s:g} s")
    return value


class Duration:
    """An argparse ``type`` for a duration flag whose bare numbers are in ``unit``."""

    def __init__(self, unit: str) -> None:
        if unit not in UNIT_WORDS:
            raise ValueError(f"unknown unit {unit!r}")
        self.unit = unit
        self.__name__ = f"duration in {unit}"  # what argparse names in an error

    def __call__(self, text: str) -> float:
        try:
            return parse_duration(text, self.unit)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    def note(self) -> str:
        """What ``--help`` adds to such a flag's text."""
        return f"[a duration: 30s, 250ms, 2m; a bare number is {UNIT_WORDS[self.unit]}]"


#: The two units the flags use.
seconds = Duration("s")
milliseconds = Duration("ms")


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a mistake is ``PROG: error: MESSAGE (see --help)`` and exit 2;
    ``--version`` on every command; and every duration flag's help says how to write it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.add_argument("--version", action="version", version=f"%(prog)s {arena_version()}")

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")

    def format_help(self) -> str:
        for action in self._actions:
            if (
                isinstance(action.type, Duration)
                and action.help
                and "[a duration" not in action.help
            ):
                action.help = f"{action.help} {action.type.note()}"
        return super().format_help()
