"""Timing calls in alternation on one clock, so a busy machine slows every contender alike.

The hit-registration bench times the NumPy reference and each kernel this way (R, K, R, K,
... over a fixed number of rounds, each one's median kept). One thread's rows use process
CPU time, which other processes do not inflate; several threads' CPU adds up and a GPU's
work is no CPU time, so those rows use wall time.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = ["Clock", "Timing", "clock_for", "interleave", "median_timing", "speedup", "time_calls"]

Clock = Literal["cpu_seconds", "seconds"]


@dataclass(frozen=True, slots=True)
class Timing:
    """Seconds one call took: process CPU (all threads together) and wall."""

    cpu_seconds: float
    seconds: float

    def on(self, clock: Clock) -> float:
        return self.cpu_seconds if clock == "cpu_seconds" else self.seconds


def clock_for(backend: str, threads: int) -> Clock:
    """Process CPU for one CPU thread: other processes on a busy machine do not add to it.
    Wall time otherwise: several threads' CPU adds up, and a GPU's work is no CPU time."""
    return "cpu_seconds" if threads == 1 and backend != "cuda" else "seconds"


def time_calls(
    run: Callable[[], object],
    min_seconds: float,
    cpu_clock: Callable[[], float] = time.process_time,
    wall_clock: Callable[[], float] = time.perf_counter,
) -> Timing:
    """Per-call time over as many calls (at least one) as fill ``min_seconds`` of wall time,
    so that a call of microseconds is not lost in the clocks' resolution."""
    calls = 0
    cpu_start, wall_start = cpu_clock(), wall_clock()
    while True:
        run()
        calls += 1
        if wall_clock() - wall_start >= min_seconds:
            break
    return Timing(
        (cpu_clock() - cpu_start) / calls,
        (wall_clock() - wall_start) / calls,
    )


def interleave(
    runs: Sequence[Callable[[], object]],
    rounds: int,
    min_seconds: float,
    cpu_clock: Callable[[], float] = time.process_time,
    wall_clock: Callable[[], float] = time.perf_counter,
) -> list[list[Timing]]:
    """One timing of each of ``runs`` per round, in turn (A, B, A, B, ...): a busy spell of the
    machine then slows all of them, not only the one timed at that moment."""
    samples: list[list[Timing]] = [[] for _ in runs]
    for _ in range(rounds):
        for run, timings in zip(runs, samples, strict=True):
            timings.append(time_calls(run, min_seconds, cpu_clock, wall_clock))
    return samples


def median_timing(samples: Sequence[Timing]) -> Timing:
    """Medians of each clock: one slow round moves neither."""
    return Timing(
        statistics.median(t.cpu_seconds for t in samples),
        statistics.median(t.seconds for t in samples),
    )


def speedup(
    reference: Timing, reference_shots: int, kernel: Timing, shots: int, clock: Clock
) -> float:
    """Reference time per shot over kernel time per shot, both on ``clock``."""
    return (reference.on(clock) / reference_shots) / (kernel.on(clock) / shots)
