"""The JIT policy of the hit kernels, in one place (as numba-stats does).

* CPU kernels: ``parallel=True`` over shots (each iteration writes only its own shot's
  outputs, so there are no races), ``cache=True`` so a restarted node loads machine code from
  disk, ``fastmath=False`` because the kernels must agree bit for bit with the NumPy reference
  (reassociation or contraction into FMAs would change the last bits, and with them ties),
  ``error_model="numpy"`` so a float division yields IEEE results (the code never divides by
  zero, but the Python error model would add a branch to every division).
* Device functions (the per-shot math shared by the CPU and CUDA kernels) are plain Python
  functions registered with :func:`numba.extending.register_jitable`: the CPU kernels compile
  them inline, ``cuda.py`` registers the very same function objects for the GPU target, and
  the CUDA simulator simply runs them as Python.
* The device functions and CPU kernels live in ``cpu.py``, but for the entry into a
  hitbox, which is ``shared/raygeometry.py`` (the bots' kernel calls it too). numba's
  on-disk cache notices edits of the cached function's own file only; ``shared.jitcache``
  forgets a checkout's compiled kernels when any kernel source changes
  (``KERNEL_SOURCES``), so an edit of a shared helper recompiles every kernel that uses it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import numba
from numba.extending import register_jitable

__all__ = [
    "CPU_HELPER_OPTIONS",
    "CPU_KERNEL_OPTIONS",
    "CUDA_THREADS_PER_BLOCK",
    "cpu_helper",
    "cpu_kernel",
    "device_function",
]

F = TypeVar("F", bound=Callable[..., Any])

CPU_KERNEL_OPTIONS: dict[str, Any] = {
    "parallel": True,
    "cache": True,
    "fastmath": False,
    "nogil": True,
    "error_model": "numpy",
}
#: Serial host-side helpers (the broad-phase grid build).
CPU_HELPER_OPTIONS: dict[str, Any] = {**CPU_KERNEL_OPTIONS, "parallel": False}

#: One thread per shot; 128 keeps occupancy high with the kernels' register use.
CUDA_THREADS_PER_BLOCK = 128


def cpu_kernel(function: Callable[..., Any]) -> Callable[..., Any]:
    """Compile ``function`` as a parallel CPU kernel (a numba dispatcher)."""
    return numba.njit(**CPU_KERNEL_OPTIONS)(function)


def cpu_helper(function: Callable[..., Any]) -> Callable[..., Any]:
    """Compile ``function`` as a serial CPU helper (a numba dispatcher)."""
    return numba.njit(**CPU_HELPER_OPTIONS)(function)


def device_function(function: F) -> F:
    """Mark ``function`` as per-shot math callable from CPU kernels (and, via cuda.py, GPU)."""
    register_jitable(error_model="numpy")(function)
    return function
