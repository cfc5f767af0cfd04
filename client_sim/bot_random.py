"""Random numbers per bot, whichever process runs it.

A swarm split over workers or over machines must give bot ``k`` the same behaviour (the
same goals, strafes, reaction draws, aim errors) as one process running the whole swarm
would. A generator shared by a process's bots hands each bot whatever its neighbours left,
so the draws depend on the split. Here every draw is a hash of (seed, the bot's index in
the whole population, how many draws that bot has taken): a counter-based stream per bot,
computed for a batch of bots in a few array operations.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

import numpy as np

__all__ = ["BotStreams", "OneBot", "SharedStreams", "Streams", "as_streams"]

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_DRAW = np.uint64(0xD1B54A32D192ED03)
_MASK = (1 << 64) - 1


def _mix(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser: every input bit reaches every output bit."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


class OneBot(Protocol):
    """What drawing for a single bot needs (a numpy Generator is one)."""

    def random(self) -> float: ...

    def normal(self, loc: float, scale: float) -> float: ...


class Streams(Protocol):
    """Draws for some rows of a swarm's bots: one stream per bot, or one shared."""

    def random(self, rows: np.ndarray, width: int = 1) -> np.ndarray: ...

    def uniform(
        self, low: object, high: object, rows: np.ndarray, width: int = 1
    ) -> np.ndarray: ...

    def one(self, row: int) -> OneBot: ...


class BotStreams:
    """One stream per bot: ``rows`` index the swarm's bots, whose population indices
    (``bots``) and ``seed`` key their streams."""

    def __init__(self, seed: int, bots: Sequence[int]) -> None:
        with np.errstate(over="ignore"):
            self._key = _mix(np.array([seed & _MASK], dtype=np.uint64))[0]
            self._bots = _mix(np.asarray(bots, dtype=np.uint64) * _GOLDEN + self._key)
        self._drawn = np.zeros(len(bots), dtype=np.uint64)

    def random(self, rows: np.ndarray, width: int = 1) -> np.ndarray:
        """Uniform in [0, 1): one value per row (``width`` > 1: a row of them each)."""
        rows = np.asarray(rows, dtype=np.intp)
        draws = self._drawn[rows][:, None] + np.arange(width, dtype=np.uint64)
        np.add.at(self._drawn, rows, np.uint64(width))
        with np.errstate(over="ignore"):
            bits = _mix(self._bots[rows][:, None] ^ (draws * _DRAW))
        values = (bits >> np.uint64(11)).astype(np.float64) * 2.0**-53
        return values[:, 0] if width == 1 else values

    def uniform(self, low: object, high: object, rows: np.ndarray, width: int = 1) -> np.ndarray:
        lo, hi = np.asarray(low, dtype=np.float64), np.asarray(high, dtype=np.float64)
        return lo + (hi - lo) * self.random(rows, width)

    def one(self, row: int) -> OneBot:
        return _Row(self, row)


class _Row:
    """Bot ``row``'s stream, drawn one value at a time."""

    __slots__ = ("_row", "_rows", "_streams")

    def __init__(self, streams: BotStreams, row: int) -> None:
        self._streams = streams
        self._rows = np.array([row], dtype=np.intp)

    def random(self) -> float:
        return float(self._streams.random(self._rows)[0])

    def normal(self, loc: float, scale: float) -> float:
        u, v = self._streams.random(self._rows, 2)[0]
        return loc + scale * math.sqrt(-2.0 * math.log1p(-u)) * math.cos(2.0 * math.pi * v)


class SharedStreams:
    """Every bot drawing from one numpy generator in turn (one process's swarm in tests
    that fix a generator)."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng

    def random(self, rows: np.ndarray, width: int = 1) -> np.ndarray:
        size = (len(rows),) if width == 1 else (len(rows), width)
        return self.rng.random(size)

    def uniform(self, low: object, high: object, rows: np.ndarray, width: int = 1) -> np.ndarray:
        size = (len(rows),) if width == 1 else (len(rows), width)
        return self.rng.uniform(low, high, size=size)  # type: ignore[call-overload]

    def one(self, row: int) -> OneBot:
        return self.rng


def as_streams(rng: np.random.Generator | Streams) -> Streams:
    return SharedStreams(rng) if isinstance(rng, np.random.Generator) else rng
