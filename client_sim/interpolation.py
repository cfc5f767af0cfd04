"""Rendering remote players: interpolate between the two snapshots around render time.

Render time is the client's estimate of server time minus the interpolation delay (100 ms
by default, Source's ``cl_interp``): far enough in the past that, despite jitter, two
snapshots usually bracket it, so remote players move smoothly and exactly along the path
the server simulated. When the buffer runs dry the newest snapshot is held (no
extrapolation) and the miss is counted; the view then says which time it really shows
(``shown_time``), because that, not the time asked for, is the world the player saw.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from shared.protocol import ENTITY_FLAG_ALIVE

__all__ = ["InterpolatedView", "SnapshotBuffer"]


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

    def view(self, render_time: float) -> InterpolatedView | None:
        if not self._times:
            return None
        times = self._times
        if render_time >= times[-1] or len(times) == 1:
            exact = render_time == times[-1]
            self.misses += not exact
            return _view(render_time, times[-1], self._records[-1], None, 0.0, exact)
        if render_time <= times[0]:
            exact = render_time == times[0]
            self.misses += not exact
            return _view(render_time, times[0], self._records[0], None, 0.0, exact)
        upper = next(i for i in range(1, len(times)) if times[i] > render_time)
        t0, t1 = times[upper - 1], times[upper]
        weight = (render_time - t0) / (t1 - t0)
        return _view(
            render_time, render_time, self._records[upper - 1], self._records[upper], weight, True
        )


def _positions(records: np.ndarray) -> np.ndarray:
    return np.stack(
        (
            records["x"].astype(np.float64),
            records["y"].astype(np.float64),
            records["z"].astype(np.float64),
        ),
        axis=1,
    )


def _view(
    render_time: float,
    shown_time: float,
    before: np.ndarray,
    after: np.ndarray | None,
    weight: float,
    exact: bool,
) -> InterpolatedView:
    ids = before["id"].astype(np.int64)
    pos = _positions(before)
    alive = (before["flags"] & ENTITY_FLAG_ALIVE) != 0
    if after is not None and weight > 0.0:
        # Players present in both snapshots move along the segment; others stay put.
        # The server sends entities sorted by id, so matching is a binary search.
        after_ids = after["id"].astype(np.int64)
        index = np.minimum(np.searchsorted(after_ids, ids), max(len(after_ids) - 1, 0))
        both = after_ids[index] == ids if len(after_ids) else np.zeros(len(ids), bool)
        index = np.where(both, index, -1)
        pos_after = _positions(after)
        pos[both] += (pos_after[index[both]] - pos[both]) * weight
        alive_after = (after["flags"] & ENTITY_FLAG_ALIVE) != 0
        alive[both] &= alive_after[index[both]]
    return InterpolatedView(render_time, shown_time, ids, pos, alive, exact)
