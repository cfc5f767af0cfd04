"""The JIT policy of the fog-of-war kernels, in one place (as :mod:`server.sim.hitreg.jit`).

* ``cache=True``: a restarted node loads the machine code from disk (the warm-up fills it).
* Without numba's runtime (:data:`shared.kernel_options.NO_RUNTIME`): the kernels allocate
  nothing, and every view of a box row or a corner would otherwise cost an atomic
  reference count.
* ``fastmath=False``: the kernel must give exactly what the NumPy reference gives; a
  contraction into FMAs would move the last bits of a slab's entry and with them a
  verdict on a line that grazes a box.
* ``error_model="numpy"``: a division is plain IEEE (the slab test divides only by a
  non-zero span, and the Python error model would add a branch to each).
* ``nogil=True``: a node that runs it from a thread does not hold the others up.
* The sight-line math is :func:`shared.sightlines.segment_blocked`, inlined (one slab
  test for the node and the bots): numba's cache notices an edit of ``kernel.py`` only,
  and ``shared.jitcache`` forgets the compiled kernels when any kernel source changes, so
  an edit of that function recompiles the fog kernel too.
* Serial, not ``parallel``: one call per snapshot tick tests only the pairs interest
  management selected, most of them decided by one clear line. Measured on the 2-core
  machine (random players over the default map, every pair interest selects): 0.3 ms a
  snapshot at 40 players, 1.1 ms at 150 (29 selected each), 3.9 ms at 300 (51 each).
  Threads would shorten a snapshot tick on a many-core node, not its CPU, and on the
  2-core machines the node shares its cores with its bots.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numba

from shared.kernel_options import NO_RUNTIME

__all__ = ["FOG_KERNEL_OPTIONS", "fog_kernel"]

FOG_KERNEL_OPTIONS: dict[str, Any] = {
    **NO_RUNTIME,
    "fastmath": False,
    "error_model": "numpy",
    "nogil": True,
}


def fog_kernel(function: Callable[..., Any]) -> Callable[..., Any]:
    """Compile ``function`` as a fog-of-war kernel (a numba dispatcher)."""
    return numba.njit(**FOG_KERNEL_OPTIONS)(function)
