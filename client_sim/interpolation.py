"""Rendering remote players: interpolate between the two snapshots around render time.

Render time is the client's estimate of server time minus the interpolation delay (100 ms
by default, Source's ``cl_interp``): far enough in the past that, despite jitter, two
snapshots usually bracket it, so remote players move smoothly and exactly along the path
the server simulated. When the buffer runs dry the newest snapshot is held (no
extrapolation) and the miss is counted; the view then says which time it really shows
(``shown_time``), because that, not the time asked for, is the world the player saw.
"""

from __future__ import annotations

import bisect
from collections import deque
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from shared.protocol.between import players_between, players_seen
from shared.protocol.snapshots import ENTITY_DTYPE

__all__ = ["Bracket", "InterpolatedView", "SnapshotBuffer", "drawn", "seen"]


@dataclass(frozen=True, slots=True)
class InterpolatedView:
    """What a client draws at ``render_time``: remote players' ids and feet positions."""

    render_time: float  # the time asked for
    shown_time: float  # the server time of the world drawn: render_time unless held
    ids: np.ndarray  # (K,) int
    positions: np.ndarray  # (K, 3) float64
    alive: np.ndarray  # (K,) bool
    exact: bool  # False when render time fell outside the buffered snapshots


class SnapshotBuffer:
    def __init__(self, capacity: int = 32) -> None:
        self._times: deque[float] = deque(maxlen=capacity)
        self._records: deque[np.ndarray] = deque(maxlen=capacity)
        self.misses = 0

    def __len__(self) -> int:
        return len(self._times)

    def push(self, server_time: float, records: np.ndarray) -> None:
        """Add a snapshot's entity records; out-of-order or repeated times are ignored."""
        if self._times and server_time <= self._times[-1]:
            return
        self._times.append(server_time)
        self._records.append(records)

    def since(self, time: float) -> list[tuple[float, np.ndarray]]:
        """The buffered snapshots from the one at or before ``time`` onwards, oldest first."""
        first = max(0, sum(1 for t in self._times if t <= time) - 1)
        return list(zip(self._times, self._records, strict=True))[first:]

    @property
    def newest_time(self) -> float | None:
        return self._times[-1] if self._times else None

    @property
    def newest(self) -> tuple[float, np.ndarray] | None:
        """The newest snapshot's time and records (None: none yet)."""
        return (self._times[-1], self._records[-1]) if self._times else None

    def bracket(self, render_time: float) -> Bracket | None:
        """The two snapshots around ``render_time`` and the weight between them (a held
        snapshot when the buffer runs dry, which counts as a miss); None when empty."""
        if not self._times:
            return None
        times = self._times
        if render_time >= times[-1] or len(times) == 1:
            exact = render_time == times[-1]
            self.misses += not exact
            return Bracket(render_time, times[-1], self._records[-1], None, 0.0, exact)
        if render_time <= times[0]:
            exact = render_time == times[0]
            self.misses += not exact
            return Bracket(render_time, times[0], self._records[0], None, 0.0, exact)
        upper = bisect.bisect_right(times, render_time)  # times[upper - 1] <= render < times[upper]
        t0, t1 = times[upper - 1], times[upper]
        weight = (render_time - t0) / (t1 - t0)
        return Bracket(
            render_time, render_time, self._records[upper - 1], self._records[upper], weight, True
        )

    def view(self, render_time: float) -> InterpolatedView | None:
        bracket = self.bracket(render_time)
        return None if bracket is None else _view(*bracket)


class Bracket(NamedTuple):
    """Where a render time falls in a buffer: ``before``/``after`` records and the weight
    (``after`` None: ``before`` is held)."""

    render_time: float
    shown_time: float
    before: np.ndarray
    after: np.ndarray | None
    weight: float
    exact: bool


_NO_BYTES = np.empty(0, dtype=np.uint8)


def seen(brackets: list[Bracket]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What :meth:`SnapshotBuffer.view` shows for many brackets, in one kernel call: every
    player any of them draws (ids ``(K,)``), feet ``(B, K, 3)`` with a row per bracket,
    and ``(B, K)`` whether that bracket draws the player alive."""
    return players_seen(*drawn(brackets))


def drawn(brackets: list[Bracket]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Many brackets as one kernel takes them: their snapshots' records joined (each
    snapshot once), each bracket's spans in them (before ``[0]:[1]``, after ``[2]:[3]``;
    a held snapshot twice) and its weight (0 held)."""
    parts: list[np.ndarray] = []
    starts: dict[int, int] = {}  # id() of a snapshot's records -> where they start
    at = 0
    spans = np.empty((len(brackets), 4), dtype=np.int64)
    weights = np.zeros(len(brackets))
    for row, bracket in enumerate(brackets):
        after = bracket.after
        if after is None or bracket.weight <= 0.0:
            after = bracket.before  # held: drawn where the snapshot shows it
        else:
            weights[row] = bracket.weight
        for side, records in enumerate((bracket.before, after)):
            first = starts.get(id(records))
            if first is None:
                first = starts[id(records)] = at
                parts.append(records)
                at += len(records)
            spans[row, 2 * side], spans[row, 2 * side + 1] = first, first + len(records)
    # (Joined as bytes: NumPy's concatenation of records spends its time matching fields.)
    joined = np.concatenate([part.view(np.uint8) for part in parts]) if parts else _NO_BYTES
    return joined.view(ENTITY_DTYPE), spans, weights


def _view(
    render_time: float,
    shown_time: float,
    before: np.ndarray,
    after: np.ndarray | None,
    weight: float,
    exact: bool,
) -> InterpolatedView:
    if after is None or weight <= 0.0:
        after, weight = before, 0.0
    ids, feet, alive = players_between(before, after, np.array((weight,)))
    return InterpolatedView(render_time, shown_time, ids, feet[0], alive, exact)
