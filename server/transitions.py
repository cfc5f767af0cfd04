"""A state machine whose moves are a table (sans-I/O): the shape of :mod:`server.replication.roles`.

The states are an enum, what can happen is an enum, and a dict says which state each event
leads to from each state. The edge applies events and never assigns a state by hand, so
every move the code can make is a row someone can read and a test can walk. An event a
state does not expect is a bug on our side, raised as :class:`TransitionError`.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Generic, TypeVar

__all__ = ["Machine", "TransitionError"]

S = TypeVar("S", bound=enum.Enum)
E = TypeVar("E", bound=enum.Enum)


class TransitionError(RuntimeError):
    """An event its state does not expect (a bug in the caller, not a peer's fault)."""


class Machine(Generic[S, E]):
    """The current state of one thing; :meth:`apply` moves it along ``table``."""

    def __init__(self, what: str, table: Mapping[tuple[S, E], S], initial: S) -> None:
        self.what = what
        self.table = table
        self.state = initial

    def __repr__(self) -> str:
        return f"Machine({self.what}: {self.state.value})"

    def apply(self, event: E) -> S:
        """Take ``event``; the new state. :class:`TransitionError` if it is not expected."""
        try:
            self.state = self.table[self.state, event]
        except KeyError:
            raise TransitionError(
                f"{self.what}: {event.value} is not expected in {self.state.value}"
            ) from None
        return self.state
