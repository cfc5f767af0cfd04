"""Lag-compensated hit registration (sans-I/O): rewind the history, test rays and projectiles.

``reference`` is the readable NumPy specification; ``cpu`` (numba, parallel) and ``cuda``
(numba.cuda, imported lazily) must agree with it; each takes the validated batches of
``batches``. Use :func:`make_validator` rather than the backend modules directly.
"""

from __future__ import annotations

from server.sim.hitreg.backend import (
    BackendName,
    BackendUnavailable,
    History,
    HitscanResults,
    HitscanShots,
    HitValidator,
    ProjectileResults,
    ProjectileShots,
    make_validator,
)

__all__ = [
    "BackendName",
    "BackendUnavailable",
    "History",
    "HitValidator",
    "HitscanResults",
    "HitscanShots",
    "ProjectileResults",
    "ProjectileShots",
    "make_validator",
]
