"""Each logged input as its difference from the same seat's previous one (sans-I/O).

A player's inputs repeat from tick to tick (the same move and aim until it changes its
mind), and its times advance by about a tick. XORing each row's bits with that seat's row
before it turns a repeat into zero bytes and a time into a few, which a block's zlib
shrinks several times over; the values themselves are exact (it is a bit-for-bit XOR, not
a float difference). The chain starts again at every block, so each block decodes alone.
"""

from __future__ import annotations

import numpy as np

__all__ = ["SeatDeltas"]


class SeatDeltas:
    """The last row of every seat of one match, as 64-bit words (``columns``: of a row)."""

    def __init__(self, capacity: int, columns: int) -> None:
        self._last = np.zeros((capacity, columns), dtype=np.uint64)

    def reset(self) -> None:
        """A new block: every chain starts from zeros."""
        self._last[:] = 0

    def encode(self, slots: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """``rows`` (64-bit values, in slot order, a seat's in sequence order) XORed with
        each one's predecessor of the same seat; remembers the last of each."""
        if not len(slots):
            return rows.copy()
        words = np.ascontiguousarray(rows).view(np.uint64)
        previous = self._last[slots]
        same = np.flatnonzero(slots[1:] == slots[:-1]) + 1
        previous[same] = words[same - 1]
        self._remember(slots, words)
        return (words ^ previous).view(rows.dtype)

    def decode(self, slots: np.ndarray, deltas: np.ndarray) -> np.ndarray:
        """The rows :meth:`encode` was given, from what it returned."""
        if not len(slots):
            return deltas.copy()
        words = np.ascontiguousarray(deltas).view(np.uint64).copy()
        follows = np.zeros(len(slots), dtype=bool)
        follows[1:] = slots[1:] == slots[:-1]
        first = ~follows
        words[first] ^= self._last[slots[first]]
        # A seat's later rows (catch-up): each follows the one before, level by level.
        runs = np.cumsum(first) - 1
        position = np.arange(len(slots)) - np.flatnonzero(first)[runs]
        for level in range(1, int(position.max()) + 1):
            at = np.flatnonzero(position == level)
            words[at] ^= words[at - 1]
        self._remember(slots, words)
        return words.view(deltas.dtype)

    def _remember(self, slots: np.ndarray, words: np.ndarray) -> None:
        last = np.ones(len(slots), dtype=bool)
        last[:-1] = slots[1:] != slots[:-1]
        self._last[slots[last]] = words[last]
