"""When a standby calls its primary gone: a silence detector that learns the records' rhythm.

A fixed timeout cannot tell a dead primary from a slow one: on a busy machine a tick of
600 ms happens, and a standby that waits 200 ms promotes itself over a primary that was
only starved. This is phi accrual (Hayashibara et al., the detector of Cassandra and Akka)
reduced to its normal form: from the gaps between the records that arrived lately, the
wait is the gap that would be exceeded with probability 10**-phi, ``mean + z * std``.

It never waits *less* than the standby's promise to the primary (the failover timeout the
primary's lease is cut from, ``docs/failover.md``): waiting longer is always safe, it only
delays a takeover. It waits at most ``cap`` times the promise, so a real freeze is still
found in bounded time; a killed primary's link ends at once and needs no waiting at all.
"""

from __future__ import annotations

import math
from collections import deque

__all__ = ["PHI_Z", "SilenceDetector"]

#: phi = 8 (a false alarm once in 10**8 gaps) for normally distributed gaps.
PHI_Z = 5.6


class SilenceDetector:
    """Feed it the arrival times of the primary's records; ask it how long to wait."""

    def __init__(self, promise: float, *, cap: float = 4.0, window: int = 256) -> None:
        if not (math.isfinite(promise) and promise > 0):
            raise ValueError("the promise must be a positive number of seconds")
        self.promise = promise
        self.cap = cap
        self._gaps: deque[float] = deque(maxlen=window)
        self._last: float | None = None

    def arrived(self, now: float) -> None:
        if self._last is not None and now >= self._last:
            self._gaps.append(now - self._last)
        self._last = now

    def reset(self) -> None:
        """A new link: its rhythm is learnt anew (the old one's gaps say nothing of it)."""
        self._gaps.clear()
        self._last = None

    def wait(self) -> float:
        """Seconds of silence after the last record before the primary counts as gone."""
        gaps = self._gaps
        if len(gaps) < 8:
            return self.promise
        mean = sum(gaps) / len(gaps)
        spread = math.sqrt(sum((g - mean) ** 2 for g in gaps) / (len(gaps) - 1))
        return min(self.cap * self.promise, max(self.promise, mean + PHI_Z * spread))
