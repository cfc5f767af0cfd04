"""Pass/fail thresholds on the report, as k6 has them: ``--fail-if 'ticks.p99_ms>16.7'``.

A threshold is a dotted path into the JSON report, an operator and a number. It is parsed
when the command line is read (a typo fails before the run, not after twenty seconds of
it) and checked against the finished report; a path the report does not have is a
mistake of the user's, said in one line. A figure that is ``null`` in the report (nothing
was measured) breaches every threshold on it: a check that cannot be made did not pass.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["Threshold", "ThresholdError", "breaches", "check_known", "parse_threshold", "resolve"]

_OPERATORS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    ">": operator.gt,
}
_SYNTAX = re.compile(r"^\s*([A-Za-z_][\w-]*(?:\.[\w+-]+)*)\s*(<=|>=|==|!=|<|>)\s*(\S+)\s*$")


class ThresholdError(ValueError):
    """A threshold that cannot be read, or names a figure the report does not have."""


@dataclass(frozen=True, slots=True)
class Threshold:
    """``path op value``: the run fails when it holds."""

    path: str
    op: str
    value: float

    def __str__(self) -> str:
        return f"{self.path}{self.op}{self.value:g}"

    def holds(self, measured: float) -> bool:
        return _OPERATORS[self.op](measured, self.value)


def parse_threshold(text: str) -> Threshold:
    """``'shots.fair_agreement<0.99'`` -> a :class:`Threshold`; ThresholdError otherwise."""
    match = _SYNTAX.match(text)
    if match is None:
        raise ThresholdError(
            f"--fail-if {text!r}: expected PATH OP NUMBER, e.g. 'ticks.p99_ms>16.7' "
            f"(OP one of {', '.join(_OPERATORS)})"
        )
    path, op, number = match.groups()
    try:
        value = float(number)
    except ValueError:
        raise ThresholdError(f"--fail-if {text!r}: {number!r} is not a number") from None
    if not math.isfinite(value):
        raise ThresholdError(f"--fail-if {text!r}: the number must be finite")
    return Threshold(path, op, value)


def resolve(report: dict[str, Any], path: str) -> float | None:
    """The figure at ``path`` (None: the report has it but measured nothing)."""
    node: Any = report
    for key in path.split("."):
        if not isinstance(node, dict) or key not in node:
            raise ThresholdError(f"--fail-if {path}: the report has no {key!r} there")
        node = node[key]
    if node is None:
        return None
    if not isinstance(node, int | float):  # (a bool is an int: valid==0 works)
        raise ThresholdError(f"--fail-if {path}: not a number in the report ({node!r})")
    return float(node)


def check_known(skeleton: dict[str, Any], path: str) -> None:
    """Whether ``path`` can name a figure of a report shaped like ``skeleton`` (one built
    from an empty run): ThresholdError when not. A path into a table the skeleton has
    empty (``shots.by_rtt``: its buckets appear with the shots) is taken on trust."""
    node: Any = skeleton
    for key in path.split("."):
        if isinstance(node, dict) and not node:
            return
        if not isinstance(node, dict) or key not in node:
            raise ThresholdError(f"--fail-if {path}: the report has no figure {key!r} there")
        node = node[key]
    if node is not None and not isinstance(node, int | float):
        raise ThresholdError(f"--fail-if {path}: not a number in the report")


def breaches(report: dict[str, Any], thresholds: list[Threshold]) -> list[str]:
    """One line per threshold the report breaches, with the measured value."""
    lines = []
    for threshold in thresholds:
        try:
            measured = resolve(report, threshold.path)
        except ThresholdError:  # a table entry this run did not have (checked at start)
            measured = None
        if measured is None:
            lines.append(f"threshold {threshold} breached: {threshold.path} is n/a")
        elif threshold.holds(measured):
            lines.append(f"threshold {threshold} breached: {threshold.path} = {measured:g}")
    return lines
