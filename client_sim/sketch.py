"""Mergeable distributions: a DDSketch for percentiles, fixed bins for pictures.

Shards of one swarm run on different machines; their percentiles can only be combined if
each shard keeps a summary that merges exactly. A DDSketch (relative accuracy 1 %: every
quantile it returns is within 1 % of a value at that rank) merges bin by bin, so the
merge of the shards' sketches is the sketch one process would have kept. A histogram on
bins fixed in advance (not on the data's range) adds the same way.

DDSketch serialises only through protobuf, which this project does not otherwise need;
:class:`Sketch` reads and writes its stores (bins by key, the zero count, count, sum, min,
max) as JSON here, and nowhere else touches them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from ddsketch import DDSketch

__all__ = ["RELATIVE_ACCURACY", "FixedBins", "Sketch", "SketchFormatError"]

#: Every percentile the report gives is within this relative error of the exact one.
RELATIVE_ACCURACY = 0.01


class SketchFormatError(ValueError):
    """A serialised sketch or histogram that is not one (a damaged report part)."""


class Sketch:
    """A DDSketch of one distribution, added to in bulk and serialised as JSON."""

    __slots__ = ("_sketch",)

    def __init__(self) -> None:
        self._sketch = DDSketch(RELATIVE_ACCURACY)

    @property
    def count(self) -> int:
        return int(self._sketch.count)

    def add(self, values: Any) -> Sketch:
        """Add every value of ``values`` (an array or a sequence; NaNs are skipped): one
        key computation over the array and one store update per distinct key, not a
        Python call per value."""
        array = np.asarray(values, dtype=np.float64).ravel()
        array = array[~np.isnan(array)]
        if not len(array):
            return self
        sketch = self._sketch
        smallest = sketch._mapping.min_possible
        positive, negative = array[array > smallest], -array[array < -smallest]
        self._add_keys(sketch._store, positive)
        self._add_keys(sketch._negative_store, negative)
        sketch._zero_count += float(len(array) - len(positive) - len(negative))
        sketch._count += float(len(array))
        sketch._sum += float(array.sum())
        sketch._min = min(sketch._min, float(array.min()))
        sketch._max = max(sketch._max, float(array.max()))
        return self

    def _add_keys(self, store: Any, magnitudes: np.ndarray) -> None:
        if not len(magnitudes):
            return
        # The logarithmic mapping's key (ceil(log2(v) * multiplier) + offset) over the
        # whole array, then one store update per distinct key. A value within a rounding
        # of a bin's edge may land in the neighbouring bin, which is still within the
        # sketch's relative accuracy of it.
        mapping = self._sketch._mapping
        keys = np.ceil(np.log2(magnitudes) * mapping._multiplier) + mapping._offset
        distinct, counts = np.unique(keys.astype(np.int64), return_counts=True)
        for k, n in zip(distinct.tolist(), counts.tolist(), strict=True):
            store.add(k, float(n))

    def merge(self, other: Sketch) -> Sketch:
        if other.count:
            self._sketch.merge(other._sketch)
        return self

    def quantile(self, q: float) -> float | None:
        """The value at quantile ``q`` (0 to 1), None when empty."""
        if not self.count:
            return None
        value = self._sketch.get_quantile_value(q)
        return None if value is None else float(value)

    def to_json(self) -> dict[str, Any]:
        sketch = self._sketch
        return {
            "relative_accuracy": RELATIVE_ACCURACY,
            "count": sketch.count,
            "sum": sketch.sum,
            "min": sketch._min if sketch.count else None,
            "max": sketch._max if sketch.count else None,
            "zero": sketch._zero_count,
            "positive": _bins_json(sketch._store),
            "negative": _bins_json(sketch._negative_store),
        }

    @classmethod
    def from_json(cls, data: Any) -> Sketch:
        """A sketch from :meth:`to_json`; SketchFormatError (one line) if it is not one."""
        if not isinstance(data, dict):
            raise SketchFormatError("a sketch must be an object")
        if data.get("relative_accuracy") != RELATIVE_ACCURACY:
            raise SketchFormatError(
                f"a sketch of relative accuracy {data.get('relative_accuracy')!r}, "
                f"not {RELATIVE_ACCURACY}"
            )
        out = cls()
        sketch = out._sketch
        try:
            for store, name in ((sketch._store, "positive"), (sketch._negative_store, "negative")):
                bins = data[name]
                offset, counts = int(bins["offset"]), bins["counts"]
                for i, n in enumerate(counts):
                    if float(n) < 0 or not math.isfinite(float(n)):
                        raise SketchFormatError(f"a sketch's {name} bin count {n!r}")
                    if n:
                        store.add(offset + i, float(n))
            sketch._zero_count = float(data["zero"])
            sketch._count = sketch._store.count + sketch._negative_store.count + sketch._zero_count
            if abs(sketch._count - float(data["count"])) > 1e-6 * max(1.0, sketch._count):
                raise SketchFormatError("a sketch whose bins do not add up to its count")
            sketch._sum = float(data["sum"])
            if sketch._count:
                sketch._min, sketch._max = float(data["min"]), float(data["max"])
        except (KeyError, TypeError, ValueError) as error:
            if isinstance(error, SketchFormatError):
                raise
            raise SketchFormatError(
                f"a malformed sketch ({type(error).__name__}: {error})"
            ) from None
        return out


def _bins_json(store: Any) -> dict[str, Any]:
    """A dense store's bins from its lowest to its highest used key."""
    if not store.count:
        return {"offset": 0, "counts": []}
    low, high = store.min_key, store.max_key
    start = low - store.offset
    counts = store.bins[start : start + high - low + 1]
    return {"offset": int(low), "counts": [int(c) if float(c).is_integer() else c for c in counts]}


@dataclass(slots=True)
class FixedBins:
    """Counts on bins of ``width`` from ``low`` (``bins`` of them) plus one overflow bin:
    the same edges in every shard, so their counts add."""

    low: float
    width: float
    bins: int
    counts: list[int] = field(default_factory=list)
    overflow: int = 0

    def __post_init__(self) -> None:
        if not self.counts:
            self.counts = [0] * self.bins

    @property
    def edges(self) -> list[float]:
        return [round(self.low + i * self.width, 6) for i in range(self.bins + 1)]

    def add(self, values: Any) -> FixedBins:
        array = np.asarray(values, dtype=np.float64).ravel()
        array = array[~np.isnan(array)]
        index = np.floor((array - self.low) / self.width).astype(np.int64)
        inside = (index >= 0) & (index < self.bins)
        counted = np.bincount(index[inside], minlength=self.bins)
        self.counts = [a + int(b) for a, b in zip(self.counts, counted, strict=True)]
        self.overflow += int(np.count_nonzero(index >= self.bins))
        return self

    def merge(self, other: FixedBins) -> FixedBins:
        if (other.low, other.width, other.bins) != (self.low, self.width, self.bins):
            raise SketchFormatError(
                f"histograms on different bins ({other.low}+{other.bins}x{other.width} "
                f"against {self.low}+{self.bins}x{self.width})"
            )
        self.counts = [a + b for a, b in zip(self.counts, other.counts, strict=True)]
        self.overflow += other.overflow
        return self

    def to_json(self) -> dict[str, Any]:
        return {
            "low": self.low,
            "width": self.width,
            "bins": self.bins,
            "counts": list(self.counts),
            "overflow": self.overflow,
        }

    @classmethod
    def from_json(cls, data: Any) -> FixedBins:
        try:
            out = cls(float(data["low"]), float(data["width"]), int(data["bins"]))
            counts = [int(c) for c in data["counts"]]
            overflow = int(data["overflow"])
        except (KeyError, TypeError, ValueError) as error:
            raise SketchFormatError(
                f"a malformed histogram ({type(error).__name__}: {error})"
            ) from None
        if len(counts) != out.bins or min(counts, default=0) < 0 or overflow < 0:
            raise SketchFormatError("a histogram whose counts do not match its bins")
        out.counts, out.overflow = counts, overflow
        return out
