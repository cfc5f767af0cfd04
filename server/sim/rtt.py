"""The server's own estimate of each client's round-trip time (sans-I/O).

Every input names the newest snapshot tick the client had received (``ack_tick``). The
server remembers when it sent each tick, so ``arrival - sent[ack_tick]`` is one round trip
plus however long the client held the snapshot before its next input (up to one client
frame). Queueing and retransmissions only ever add delay, so the minimum over a recent
window is the estimate (the approach of Quake-era servers, made robust to spikes).
"""

from __future__ import annotations

import numpy as np

__all__ = ["TickSendLog"]


class TickSendLog:
    """When each recent tick was published, by tick number (a ring)."""

    def __init__(self, capacity: int = 512) -> None:
        self.capacity = capacity
        self._ticks = np.full(capacity, -1, dtype=np.int64)
        self._times = np.zeros(capacity, dtype=np.float64)

    def record(self, tick: int, sent_at: float) -> None:
        self._ticks[tick % self.capacity] = tick
        self._times[tick % self.capacity] = sent_at

    def sent_at_each(self, ticks: np.ndarray) -> np.ndarray:
        """When each tick went out; NaN where unknown (overwritten, never sent, or -1)."""
        index = ticks % self.capacity
        known = (self._ticks[index] == ticks) & (ticks >= 0)
        return np.where(known, self._times[index], np.nan)
