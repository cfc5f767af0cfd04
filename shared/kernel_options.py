"""numba options shared by kernels that allocate nothing.

Inside a kernel compiled with numba's runtime, every view of an array (``pos[i]``, a
slice) and every call that passes an array takes and drops a reference count: a call
into the runtime's atomic add, which numba's pruning does not remove there. In a loop
over players or inputs that was a third of the input decoder's time. A kernel whose
arrays all come from its caller (scratch space included) needs no runtime: compiled
without it (``_nrt``, a numba flag the type stubs do not list), it counts nothing, and a
kernel that does allocate fails to compile rather than misbehave.
"""

from __future__ import annotations

from typing import Any

__all__ = ["NO_RUNTIME"]

#: ``@numba.njit(**NO_RUNTIME)``: cached, compiled without numba's runtime.
NO_RUNTIME: dict[str, Any] = {"cache": True, "_nrt": False}
