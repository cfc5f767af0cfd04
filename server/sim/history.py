"""The history ring: timestamped snapshots of every player, for lag compensation (sans-I/O).

The ring keeps the last ``capacity`` snapshots sent to clients (feet where the clients
decoded them, alive flags) as dense NumPy arrays laid out for the hit kernels: logical
snapshot ``i`` (oldest first) lives at physical index ``(start + i) % capacity``. Times are
server times (``tick / tick_rate``), so they strictly increase along the logical order.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from server.sim.replica import ArrayState, StateMismatch

__all__ = ["HistoryRing", "HistoryStore"]


class HistoryStore:
    """The rings of every match of a node in one set of arrays, ``(matches, capacity, ...)``,
    so that the hit kernels judge all matches' shots in one call without copying."""

    def __init__(self, matches: int, capacity: int, max_players: int) -> None:
        if capacity < 2:
            raise ValueError("a history ring needs room for at least two snapshots")
        self.times = np.zeros((matches, capacity), dtype=np.float64)
        self.ticks = np.zeros((matches, capacity), dtype=np.int64)
        self.positions = np.zeros((matches, capacity, max_players, 3), dtype=np.float64)
        self.alive = np.zeros((matches, capacity, max_players), dtype=np.uint8)


class HistoryRing(ArrayState):
    """One match's ring: views of its rows of the node's :class:`HistoryStore`."""

    REPLICATED = ("times", "ticks", "positions", "alive")

    def __init__(
        self, capacity: int, max_players: int, store: HistoryStore | None = None, index: int = 0
    ) -> None:
        store = store or HistoryStore(1, capacity, max_players)
        self.capacity = capacity
        # Views into the store: this ring's slice of the node's arrays.
        self.times = store.times[index]
        self.ticks = store.ticks[index]
        self.positions = store.positions[index]
        self.alive = store.alive[index]
        self.start = 0
        self.count = 0

    def __len__(self) -> int:
        return self.count

    def export_state(self) -> dict[str, Any]:
        """The ring for a standby that starts following: its arrays and where it starts."""
        return {**self.array_state(), "start": self.start, "count": self.count}

    def import_state(self, state: Mapping[str, Any]) -> None:
        arrays = {name: value for name, value in state.items() if name not in ("start", "count")}
        start, count = int(state.get("start", -1)), int(state.get("count", -1))
        if not (0 <= start < self.capacity and 0 <= count <= self.capacity):
            raise StateMismatch(f"history ring start {start} / count {count} out of range")
        self.restore_arrays(arrays)
        if not (np.isfinite(self.times).all() and np.isfinite(self.positions).all()):
            raise StateMismatch("history ring holds a time or position that is not finite")
        self.start, self.count = start, count

    def append(self, tick: int, time: float, positions: np.ndarray, alive: np.ndarray) -> None:
        """Record the world after ``tick``; the oldest snapshot goes when the ring is full."""
        if self.count and tick <= self.newest_tick:
            raise ValueError(f"tick {tick} is not after the newest snapshot {self.newest_tick}")
        # Checked here, once a snapshot, the kernels' reads need not scan every ring again.
        if not (np.isfinite(time) and np.isfinite(positions).all()):
            raise ValueError(f"tick {tick}: a snapshot's time and positions must be finite")
        if self.count < self.capacity:
            index = (self.start + self.count) % self.capacity
            self.count += 1
        else:
            index = self.start
            self.start = (self.start + 1) % self.capacity
        self.ticks[index] = tick
        self.times[index] = time
        self.positions[index] = positions
        self.alive[index] = alive

    def mark_newest_alive(self, alive: np.ndarray) -> None:
        """Correct the newest snapshot's alive flags (deaths resolved after it was taken)."""
        self.alive[self._physical(self.count - 1)] = alive

    def _physical(self, logical: int) -> int:
        return (self.start + logical) % self.capacity

    @property
    def newest_tick(self) -> int:
        return int(self.ticks[self._physical(self.count - 1)])
