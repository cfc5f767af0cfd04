"""Distributions of durations (seconds): frozen, validated, sampled from a given RNG (sans-I/O).

Each one describes itself in the ``--latency`` grammar (:mod:`client_sim.latency.grammar`)
such that the text parses back to an equal object, bit for bit; that is why the formatting
of numbers lives here, next to ``describe``.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

__all__ = [
    "Constant",
    "Distribution",
    "FieldError",
    "LogNormal",
    "Mix",
    "Normal",
    "Uniform",
    "format_duration",
]


class FieldError(ValueError):
    """Invalid constructor argument; ``field`` is its grammar name, so the parser can point.

    The grammar turns it into a :class:`~client_sim.latency.grammar.LatencySpecError` at
    the column of that argument; code that builds a distribution directly sees a ValueError.
    """

    def __init__(self, field: str | None, message: str) -> None:
        super().__init__(message)
        self.field = field


# --------------------------------------------------------------------------------------------
# Formatting: describe() must parse back to an equal object, bit for bit.


def _shortest(value: float, scale: float) -> str | None:
    """Shortest plain decimal ``t`` with ``float(t) / scale == value``, if one is short."""
    scaled = value * scale
    for places in range(21):
        text = f"{scaled:.{places}f}"
        if "." in text:
            text = text.rstrip("0").rstrip(".")
        if text == "-0":
            text = "0"
        if len(text) > 24:
            return None
        if float(text) / scale == value:
            return text
    return None


def format_duration(seconds: float) -> str:
    """Shortest ``<n>ms`` that parses back to exactly ``seconds``, else an exact ``<n>s``."""
    text = _shortest(seconds, 1000.0)
    return f"{text}ms" if text is not None else f"{seconds!r}s"


def _format_number(value: float) -> str:
    text = _shortest(value, 1.0)
    return text if text is not None else repr(float(value))


def _finite(field: str | None, what: str, value: float) -> float:
    value = float(value)
    if not math.isfinite(value):
        raise FieldError(field, f"{what} must be a finite number, got {value!r}")
    return value


# --------------------------------------------------------------------------------------------
# Distributions


class Distribution(ABC):
    """A distribution of durations in seconds; immutable, hashable, comparable."""

    __slots__ = ()

    @abstractmethod
    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """Draw ``n`` values (seconds, float64) from ``rng``; deterministic for its state."""

    @abstractmethod
    def describe(self) -> str:
        """Canonical spec text: ``parse_distribution(d.describe(), signed=True) == d``."""

    @property
    @abstractmethod
    def positive(self) -> bool:
        """Whether every value drawn is > 0, as a round-trip time must be."""

    def __str__(self) -> str:
        return self.describe()


def _check_n(n: int) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"sample size must be a non-negative integer, got {n!r}")
    return int(n)


@dataclass(frozen=True, slots=True)
class Constant(Distribution):
    """Every bot gets the same value."""

    value: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "value", _finite("value", "constant", self.value))

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return np.full(_check_n(n), self.value, dtype=np.float64)

    def describe(self) -> str:
        return f"constant({format_duration(self.value)})"

    @property
    def positive(self) -> bool:
        return self.value > 0


@dataclass(frozen=True, slots=True)
class Uniform(Distribution):
    """Uniform on ``[low, high]`` (``min``/``max`` in the grammar)."""

    low: float
    high: float

    def __post_init__(self) -> None:
        low = _finite("min", "uniform min", self.low)
        high = _finite("max", "uniform max", self.high)
        if low > high:
            raise FieldError(
                "max",
                f"uniform min {format_duration(low)} is greater than max {format_duration(high)}",
            )
        object.__setattr__(self, "low", low)
        object.__setattr__(self, "high", high)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return rng.uniform(self.low, self.high, _check_n(n))

    def describe(self) -> str:
        return f"uniform(min={format_duration(self.low)}, max={format_duration(self.high)})"

    @property
    def positive(self) -> bool:
        return self.low > 0


@dataclass(frozen=True, slots=True)
class Normal(Distribution):
    """Normal, truncated below at ``floor`` when set (redrawn, not clipped: no spike at it).

    The floor must lie below the mean, so at least half the mass survives and redrawing
    terminates quickly.
    """

    mean: float
    sd: float
    floor: float | None = None

    def __post_init__(self) -> None:
        mean = _finite("mean", "normal mean", self.mean)
        sd = _finite("sd", "normal sd", self.sd)
        if sd <= 0:
            raise FieldError("sd", f"normal sd must be > 0, got {format_duration(sd)}")
        object.__setattr__(self, "mean", mean)
        object.__setattr__(self, "sd", sd)
        if self.floor is not None:
            floor = _finite("min", "normal min", self.floor)
            if floor >= mean:
                raise FieldError(
                    "mean",
                    f"normal mean {format_duration(mean)} must be greater than "
                    f"its floor min={format_duration(floor)}",
                )
            object.__setattr__(self, "floor", floor)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        out = rng.normal(self.mean, self.sd, _check_n(n))
        if self.floor is not None:
            redo = np.flatnonzero(out < self.floor)
            while redo.size:
                fresh = rng.normal(self.mean, self.sd, redo.size)
                out[redo] = fresh
                redo = redo[fresh < self.floor]
        return out

    def describe(self) -> str:
        text = f"normal(mean={format_duration(self.mean)}, sd={format_duration(self.sd)}"
        if self.floor is not None:
            text += f", min={format_duration(self.floor)}"
        return text + ")"

    @property
    def positive(self) -> bool:
        return self.floor is not None and self.floor > 0


@dataclass(frozen=True, slots=True)
class LogNormal(Distribution):
    """Log-normal with the given median; ``sigma`` is the sd of the underlying normal.

    The usual shape of internet RTTs: a floor-ish body and a long right tail.
    """

    median: float
    sigma: float

    def __post_init__(self) -> None:
        median = _finite("median", "lognormal median", self.median)
        sigma = _finite("sigma", "lognormal sigma", self.sigma)
        if median <= 0:
            raise FieldError(
                "median", f"lognormal median must be > 0, got {format_duration(median)}"
            )
        if sigma <= 0:
            raise FieldError("sigma", f"lognormal sigma must be > 0, got {sigma!r}")
        object.__setattr__(self, "median", median)
        object.__setattr__(self, "sigma", sigma)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return rng.lognormal(math.log(self.median), self.sigma, _check_n(n))

    def describe(self) -> str:
        median, sigma = format_duration(self.median), _format_number(self.sigma)
        return f"lognormal(median={median}, sigma={sigma})"

    @property
    def positive(self) -> bool:
        return True


@dataclass(frozen=True, slots=True)
class Mix(Distribution):
    """Weighted mixture, e.g. two regions' populations.

    Weights are kept as written (so ``describe`` round-trips exactly) and normalised when
    sampling: any positive weights are accepted. A mix may not contain a mix: one flat mix
    says the same thing and keeps the canonical form unique.
    """

    components: tuple[tuple[float, Distribution], ...]

    def __post_init__(self) -> None:
        components = tuple(self.components)
        if not components:
            raise FieldError(None, "mix needs at least one weighted component")
        checked = []
        for weight, part in components:
            w = _finite(None, "mix weight", weight)
            if w <= 0:
                raise FieldError(None, f"mix weight must be > 0, got {w!r}")
            if not isinstance(part, Distribution):
                raise TypeError(f"mix component must be a Distribution, got {part!r}")
            if isinstance(part, Mix):
                raise FieldError(None, "a mix cannot contain a mix; flatten it into one")
            checked.append((w, part))
        object.__setattr__(self, "components", tuple(checked))

    @property
    def probabilities(self) -> np.ndarray:
        weights = np.array([w for w, _ in self.components], dtype=np.float64)
        return weights / weights.sum()

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        n = _check_n(n)
        which = rng.choice(len(self.components), size=n, p=self.probabilities)
        out = np.empty(n, dtype=np.float64)
        for j, (_, part) in enumerate(self.components):
            chosen = np.flatnonzero(which == j)
            if chosen.size:
                out[chosen] = part.sample(rng, chosen.size)
        return out

    def describe(self) -> str:
        inner = ", ".join(f"{_format_number(w)}*{p.describe()}" for w, p in self.components)
        return f"mix({inner})"

    @property
    def positive(self) -> bool:
        return all(part.positive for _, part in self.components)
