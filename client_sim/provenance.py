"""Where a report came from: the command line, the seed, the code and the machine's load.

A figure without its circumstances cannot be compared with the next one: the same seed
and arguments on the same version make the same bots, and the load average at both ends
says whether the machine was busy with something else meanwhile. Every JSON report that
``arena-bots``, ``arena-demo`` and ``arena-chaos`` write carries this block as
``provenance``.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from shared.commandline import arena_version

__all__ = ["REPORT_VERSION", "RunStart", "provenance", "run_start"]

#: The reports' schema version: raised when a field changes meaning or goes away (new
#: fields alone leave it).
REPORT_VERSION = 1


@dataclass(frozen=True, slots=True)
class RunStart:
    """What is known of a run when it starts (the rest is read when it ends)."""

    arguments: tuple[str, ...]
    seed: int | None
    started_at: float  # wall clock, seconds since the epoch
    load_at_start: tuple[float, float, float]


def _load() -> tuple[float, float, float]:
    one, five, fifteen = os.getloadavg()
    return round(one, 2), round(five, 2), round(fifteen, 2)


def run_start(arguments: list[str], seed: int | None, now: float | None = None) -> RunStart:
    """Note the run's start: its command-line arguments (without the program's name) and
    seed, the time (``now``, else the wall clock) and the load average."""
    return RunStart(tuple(arguments), seed, time.time() if now is None else now, _load())


def provenance(start: RunStart) -> dict[str, Any]:
    """The ``provenance`` block of a report whose run began at ``start`` and ends now."""
    return {
        "report_version": REPORT_VERSION,
        "arguments": list(start.arguments),
        "seed": start.seed,
        "version": arena_version(),
        "started_at": datetime.fromtimestamp(start.started_at, UTC).isoformat(
            timespec="milliseconds"
        ),
        "cores": os.cpu_count(),
        "cores_usable": len(os.sched_getaffinity(0)),
        # 1, 5 and 15 minutes, as uptime(1) shows them.
        "load_average_at_start": list(start.load_at_start),
        "load_average_at_end": list(_load()),
    }
