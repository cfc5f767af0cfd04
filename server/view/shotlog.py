"""The judged shots the live view shows, each with its target twice: where the server
rewound it to judge the shot, and where the shooter said it drew it (sans-I/O).

A shot is traced by :class:`~server.sim.combat.Combat` once judged. Its target is the
victim for a hit; for any other verdict, the player its shooter named in a ``sighting``
(sent right after the input that fired: it usually arrives before the shot is judged, so
sightings wait here by ``(match, shooter, seq)``). A shot waits up to :data:`SIGHTING_WAIT_S`
of server time for a late sighting, then is shown with what is known. Positions are feet
positions: the hitboxes stand on them (:data:`shared.hitbox.HITBOXES`).
"""

from __future__ import annotations

import collections
import itertools
from dataclasses import dataclass

import numpy as np

from server.sim.combat import ShotTrace
from server.sim.hitreg.backend import History
from server.sim.hitreg.reference import rewound_feet

__all__ = ["SIGHTING_WAIT_S", "ShotLog", "ViewedShot"]

#: Server seconds a judged shot waits for its shooter's sighting before it is shown.
SIGHTING_WAIT_S = 0.25
#: Server seconds a sighting waits for its shot (an input is judged within the rewind cap).
_SIGHTING_TTL_S = 2.0
_MAX_SIGHTINGS = 1024
_MAX_WAITING = 1024

_Key = tuple[int, int, int]
_Sighting = tuple[int, np.ndarray, float]


@dataclass(slots=True)
class ViewedShot:
    """One judged shot as the view shows it."""

    id: int
    match: int
    trace: ShotTrace
    target: int = -1  # the victim of a hit, else the sighting's target; -1: unknown
    server_feet: np.ndarray | None = None  # (3,) the target rewound to the view time
    seen_feet: np.ndarray | None = None  # (3,) the target where its shooter drew it

    @property
    def offset(self) -> float | None:
        """Metres between the two boxes: the error a "client box vs server box" shows."""
        if self.server_feet is None or self.seen_feet is None:
            return None
        return float(np.linalg.norm(self.server_feet - self.seen_feet))


class ShotLog:
    """Shots waiting for their sightings, and the ones ready to be shown."""

    def __init__(self) -> None:
        self._ids = itertools.count(1)
        # (match, shooter, seq) -> (target, seen feet, server time it arrived)
        self._sightings: collections.OrderedDict[_Key, _Sighting] = collections.OrderedDict()
        self._waiting: collections.deque[ViewedShot] = collections.deque(maxlen=_MAX_WAITING)

    def __len__(self) -> int:
        return len(self._waiting)

    def sighting(
        self, match: int, shooter: int, seq: int, target: int, seen: np.ndarray, now: float
    ) -> None:
        """The shooter's report of what it drew when input ``seq`` fired."""
        key = (match, shooter, seq)
        self._sightings[key] = (target, np.asarray(seen, dtype=np.float64), now)
        self._sightings.move_to_end(key)
        while len(self._sightings) > _MAX_SIGHTINGS:
            self._sightings.popitem(last=False)

    def add(self, match: int, traces: list[ShotTrace], history: History) -> None:
        """Shots ``match`` judged."""
        for trace in traces:
            event = trace.event
            shot = ViewedShot(next(self._ids), match, trace)
            if event.result == "hit":
                shot.target = event.victim
                shot.server_feet = rewound_feet(history, match, event.view_time, event.victim)
            self._waiting.append(shot)

    def due(self, now: float, history: History) -> list[ViewedShot]:
        """The shots to show now: those whose sighting came, and those that waited long
        enough without one (oldest first); each is shown once."""
        self._expire(now)
        shown: list[ViewedShot] = []
        kept: collections.deque[ViewedShot] = collections.deque(maxlen=_MAX_WAITING)
        for shot in self._waiting:
            event = shot.trace.event
            sighting = self._sightings.get((shot.match, event.shooter, event.seq))
            if sighting is not None:
                self._pair(shot, sighting, history)
                shown.append(shot)
            elif now - shot.trace.time >= SIGHTING_WAIT_S:
                shown.append(shot)
            else:
                kept.append(shot)
        self._waiting = kept
        return shown

    def _pair(self, shot: ViewedShot, sighting: _Sighting, history: History) -> None:
        target, seen, _ = sighting
        if shot.target < 0:  # not a hit: the player its shooter aimed at
            shot.target = target
            shot.server_feet = rewound_feet(history, shot.match, shot.trace.event.view_time, target)
        if target == shot.target:
            shot.seen_feet = seen

    def _expire(self, now: float) -> None:
        while self._sightings:
            key, (_, _, at) = next(iter(self._sightings.items()))
            if now - at <= _SIGHTING_TTL_S:
                break
            del self._sightings[key]
