"""Input frames held from their arrival until the next tick takes them all at once.

A seated player's input is applied at the next tick in any case (it waits in the jitter
buffer), so nothing is lost by holding its frame until then: each frame keeps the time it
arrived, which is what lag compensation and the RTT estimate use. The tick then decodes the
whole batch in one numba call (:mod:`server.sim.input_frames`) instead of one Python decode per
frame. Only frames that look like one whole input are held (the stream decides); a player's
other frames are read at once, after its held inputs (see :meth:`InputInbox.flush`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["InputInbox"]

Owner = TypeVar("Owner")

#: Frames held before a flush even without a tick (a node that stopped ticking, say).
DEFAULT_LIMIT = 4096


class InputInbox(Generic[Owner]):
    """Frames, their owners and arrival times, in arrival order, until :meth:`flush` hands
    them to ``take(owners, frames, arrivals)``."""

    def __init__(
        self,
        take: Callable[[list[Owner], list[bytes], list[float]], None],
        clock: Callable[[], float],
        limit: int = DEFAULT_LIMIT,
    ) -> None:
        self._take = take
        self._clock = clock
        self._limit = limit
        self._owners: list[Owner] = []
        self._frames: list[bytes] = []
        self._arrivals: list[float] = []
        #: Counts the flushes: a holder that remembers it can tell whether a frame it held
        #: is still here (see PlayerStream).
        self.generation = 0

    def __len__(self) -> int:
        return len(self._frames)

    def hold(self, owner: Owner, frame: bytes) -> int:
        """Hold ``frame`` (arrived now) for the next flush; returns that flush's generation."""
        self._owners.append(owner)
        self._frames.append(frame)
        self._arrivals.append(self._clock())
        if len(self._frames) >= self._limit:
            self.flush()
            return self.generation - 1
        return self.generation

    def flush(self) -> None:
        """Hand every held frame over, oldest first, and start afresh."""
        if not self._frames:
            return
        owners, frames, arrivals = self._owners, self._frames, self._arrivals
        self._owners, self._frames, self._arrivals = [], [], []
        self.generation += 1
        self._take(owners, frames, arrivals)
