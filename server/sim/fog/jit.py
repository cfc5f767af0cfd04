"""The JIT policy of the fog-of-war kernels, in one place (as :mod:`server.sim.hitreg.jit`).

* ``cache=True``: a restarted node loads the machine code from disk (the warm-up fills it).
* ``fastmath=False``: the kernel must give exactly what the NumPy reference gives; a
  contraction into FMAs would move the last bits of a slab's entry and with them a
  verdict on a line that grazes a box.
* ``error_model="numpy"``: a division is plain IEEE (the slab test divides only by a
  non-zero span, and the Python error model would add a branch to each).
* ``nogil=True``: a node that runs it from a thread does not hold the others up.
* Serial, not ``parallel``: one call per snapshot tick tests only the pairs interest
  management selected (a few dozen per client), most of them decided by one clear line;
  at 300 players a call took well under a millisecond on one core, less than the
  threads' start-up would cost on the 2-core machines the node shares with its bots.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numba

__all__ = ["FOG_KERNEL_OPTIONS", "fog_kernel"]

FOG_KERNEL_OPTIONS: dict[str, Any] = {
    "cache": True,
    "fastmath": False,
    "error_model": "numpy",
    "nogil": True,
}


def fog_kernel(function: Callable[..., Any]) -> Callable[..., Any]:
    """Compile ``function`` as a fog-of-war kernel (a numba dispatcher)."""
    return numba.njit(**FOG_KERNEL_OPTIONS)(function)
