"""Where the live view taps the node: shot tracing switched on only while someone watches,
the traces and sightings gathered into the :class:`~server.view.shotlog.ShotLog` (sans-I/O).

Nothing here runs inside the tick: a watched match only appends one small record per
judged shot (:attr:`server.sim.combat.Combat.traces`); the feed calls :meth:`ViewTap.collect`
a few times a second, between ticks.
"""

from __future__ import annotations

import numpy as np

from server.sim.matchset import MatchSet
from server.view.shotlog import ShotLog, ViewedShot

__all__ = ["ViewTap"]

#: Traces one match keeps between two collections at most (a stalled feed drops the oldest).
_MAX_TRACES = 512


class ViewTap:
    """The matches' shots for the view, while :attr:`watching`."""

    def __init__(self, matches: MatchSet) -> None:
        self.matches = matches
        self.log = ShotLog()
        self._watching = False

    @property
    def watching(self) -> bool:
        return self._watching

    def watch(self, on: bool) -> None:
        """Trace shots from now on (the first viewer came) or stop (the last one left)."""
        self._watching = on
        for match in self.matches.matches:
            match.combat.traces = [] if on else None
        if not on:
            self.log = ShotLog()

    def sighting(
        self, match: int, shooter: int, seq: int, target: int, seen: tuple[float, float, float]
    ) -> None:
        """A shooter's report of what it drew; ignored while nobody watches."""
        if self._watching:
            self.log.sighting(match, shooter, seq, target, np.array(seen), self.matches.server_time)

    def collect(self) -> list[ViewedShot]:
        """Take every match's traces into the log; the shots due to be shown."""
        history = self.matches.history()
        now = self.matches.server_time
        for match in self.matches.matches:
            traces = match.combat.traces
            match.combat.traces = []  # also switches tracing on for a match new since
            if traces:
                self.log.add(match.index, traces[-_MAX_TRACES:], history)
        return self.log.due(now, history)
