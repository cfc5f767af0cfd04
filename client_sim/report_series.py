"""Per-second samples of a swarm, and the report's time series made from them.

A p50 over a whole run hides the second the machine stalled or the primary died; one
sample a second of what the bot process did (ticks run, CPU spent, bytes carried, RTTs
measured, shots judged) shows when. Each process's samples become the seconds of its
tally (:class:`client_sim.tally.SecondTally`, RTTs in a sketch), from which the series is
drawn. Samples are plain counts so that the samples of
several worker processes add up: second ``k`` of every worker is merged into one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from client_sim.tally import SecondTally

__all__ = ["Sample", "merge_samples", "series"]


@dataclass(frozen=True, slots=True)
class Sample:
    """What one swarm did during one interval (about a second) ending at wall time ``at``."""

    at: float  # wall clock (time.time()) at the end of the interval
    seconds: float  # the interval's length
    ticks: int  # bot-loop iterations run
    cpu_s: float  # process CPU spent
    bots: int  # bots playing at the end
    bytes_down: int
    bytes_up: int
    rtts: tuple[float, ...]  # RTTs measured (seconds)
    shots: int  # shots judged (a verdict arrived)
    agreed: int  # of those, where shooter and server agreed


def merge_samples(per_worker: list[list[Sample]]) -> list[Sample]:
    """Second ``k`` of each worker merged into one: counts add, ticks per second are the
    slowest worker's (each worker runs its own loop at the full rate; the slowest one is
    what its bots lived with)."""
    merged: list[Sample] = []
    for k in range(max((len(s) for s in per_worker), default=0)):
        row = [s[k] for s in per_worker if k < len(s)]
        slowest = min(row, key=lambda s: s.ticks / s.seconds if s.seconds > 0 else 0.0)
        merged.append(
            Sample(
                at=max(s.at for s in row),
                seconds=slowest.seconds,
                ticks=slowest.ticks,
                cpu_s=sum(s.cpu_s for s in row),
                bots=sum(s.bots for s in row),
                bytes_down=sum(s.bytes_down for s in row),
                bytes_up=sum(s.bytes_up for s in row),
                rtts=tuple(r for s in row for r in s.rtts),
                shots=sum(s.shots for s in row),
                agreed=sum(s.agreed for s in row),
            )
        )
    return merged


def _round(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)


def series(samples: list[SecondTally], origin: float) -> dict[str, list[Any]]:
    """The report's ``series``: one entry per sample, ``t`` in seconds since ``origin``
    (the run's start, wall clock); ``None`` where a second had nothing to measure."""
    out: dict[str, list[Any]] = {
        key: []
        for key in (
            "t",
            "bot_tick_hz",
            "bot_cpu",
            "bots",
            "rtt_p50_ms",
            "rtt_p99_ms",
            "bytes_per_bot_per_s",
            "bytes_up_per_bot_per_s",
            "shots",
            "agreement",
        )
    }
    for s in samples:
        per_bot = s.bots * s.seconds
        out["t"].append(round(s.at - origin, 3))
        out["bot_tick_hz"].append(_round(s.ticks / s.seconds if s.seconds > 0 else None))
        out["bot_cpu"].append(_round(s.cpu_s / s.seconds if s.seconds > 0 else None, 3))
        out["bots"].append(s.bots)
        for q in (50, 99):
            rtt = s.rtt.quantile(q / 100.0)
            out[f"rtt_p{q}_ms"].append(None if rtt is None else _round(rtt * 1000.0))
        out["bytes_per_bot_per_s"].append(_round(s.bytes_down / per_bot, 1) if per_bot else None)
        out["bytes_up_per_bot_per_s"].append(_round(s.bytes_up / per_bot, 1) if per_bot else None)
        out["shots"].append(s.shots)
        out["agreement"].append(_round(s.agreed / s.shots, 4) if s.shots else None)
    return out
