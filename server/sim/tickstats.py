"""Durations of the recent ticks, for /health and the tick-overrun count."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["TickStats"]


@dataclass(slots=True)
class TickStats:
    """Durations of the recent ticks (a ring) and the overrun counters."""

    period: float
    window: int = 3600
    durations: np.ndarray = field(init=False)
    recorded: int = 0
    overruns: int = 0

    def __post_init__(self) -> None:
        self.durations = np.zeros(self.window, dtype=np.float64)

    def record(self, duration: float) -> None:
        self.durations[self.recorded % self.window] = duration
        self.recorded += 1
        if duration > self.period:
            self.overruns += 1

    def percentile_ms(self, q: float) -> float:
        held = self.durations[: min(self.recorded, self.window)]
        return float(np.percentile(held, q) * 1000.0) if len(held) else 0.0
