"""numba.cuda kernels for hit registration: one GPU thread per shot.

The per-shot math is the very code of ``cpu.py`` (its ``@device_function`` functions),
compiled for the GPU target here, so both backends share one implementation of the ray
tests, the rewind and the tie rules. Importing this module does not import ``numba.cuda``:
:func:`_load_kernels` does, on first use, so a node without numba-cuda or without a GPU can
still import the package and run on the CPU.

Exactness on real GPUs: NVVM contracts multiply-adds into FMAs unless told otherwise, so a
distance may differ from the CPU's in its last bits, and an exact tie on the CPU may not be
one on the GPU. The simulator runs the Python code itself and matches bit for bit.
"""

from __future__ import annotations

import functools
import importlib
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from server.sim.hitreg import cpu
from server.sim.hitreg.batches import (
    History,
    HitscanResults,
    HitscanShots,
    ProjectileResults,
    ProjectileShots,
    World,
)
from server.sim.hitreg.jit import CUDA_THREADS_PER_BLOCK

__all__ = [
    "cuda_available",
    "resolve_hitscan",
    "resolve_projectiles",
    "simulator_enabled",
]


def simulator_enabled() -> bool:
    """Whether numba runs CUDA kernels in its Python simulator (set before numba's import)."""
    return os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")


def cuda_available() -> bool:
    """True when numba.cuda can be imported and sees a usable device (or the simulator)."""
    try:
        from numba import cuda
    except ImportError:
        return False
    try:
        return bool(cuda.is_available())
    except Exception:  # a broken driver install reports here rather than at import
        return False


@dataclass(frozen=True, slots=True)
class _CudaKernels:
    """The compiled kernels and the ``numba.cuda`` module that launches them."""

    cuda: Any
    hitscan: Any
    projectiles: Any


@functools.cache
def _load_kernels() -> _CudaKernels:
    """Import numba.cuda, register the shared device math for the GPU and define the kernels.

    Kernels compile lazily, on their first launch for a given set of argument types.
    """
    from numba import cuda

    if not simulator_enabled():
        from numba.cuda.extending import register_jitable  # type: ignore[attr-defined]

        for function in cpu.DEVICE_FUNCTIONS:
            register_jitable(function)
        _quiet_small_grids()
    from server.sim.hitreg import _cuda_kernels

    return _CudaKernels(
        cuda=cuda, hitscan=_cuda_kernels.hitscan_kernel, projectiles=_cuda_kernels.projectile_kernel
    )


#: numba's environment switch for its warning of grids under 128 blocks.
OCCUPANCY_SWITCH = "NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS"


def _occupancy_configs() -> list[Any]:
    """numba's config modules that hold the low-occupancy switch (numba-cuda's, or older
    numba's; numba-cuda's is numba's own where both are installed)."""
    configs: dict[int, Any] = {}  # (modules, whose switch mypy cannot see)
    for name in ("numba.cuda.core.config", "numba.core.config"):
        try:
            config = importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(config, "CUDA_LOW_OCCUPANCY_WARNINGS"):
            configs[id(config)] = config
    return list(configs.values())


def _quiet_small_grids() -> None:
    """Turn off numba's warning of a grid under 128 blocks, unless the environment asks for
    it. A tick's shots are few, so a grid of one block is the rule here, not the beginner's
    mistake the warning is for; on a GPU it fired at every launch (and failed the tests,
    which make warnings errors). The environment is set too: numba reloads its config
    from the environment whenever a NUMBA_ variable changed."""
    if os.environ.setdefault(OCCUPANCY_SWITCH, "0") != "0":
        return
    for config in _occupancy_configs():
        config.CUDA_LOW_OCCUPANCY_WARNINGS = 0


def _blocks(n: int) -> int:
    return max(1, (n + CUDA_THREADS_PER_BLOCK - 1) // CUDA_THREADS_PER_BLOCK)


def _launch(
    kernel: Any,
    cuda: Any,
    n: int,
    inputs: tuple[Any, ...],
    out: HitscanResults | ProjectileResults,
) -> None:
    """Copy the arrays among ``inputs`` to the device (scalars go as they are), run ``kernel``
    with one thread per shot, and copy the outputs back into ``out``'s arrays."""
    device_inputs = [cuda.to_device(a) if isinstance(a, np.ndarray) else a for a in inputs]
    host_outputs = out.arrays()
    device_outputs = [cuda.device_array_like(a) for a in host_outputs]
    kernel[_blocks(n), CUDA_THREADS_PER_BLOCK](*device_inputs, *device_outputs)
    for host, device in zip(host_outputs, device_outputs, strict=True):
        device.copy_to_host(host)


def resolve_hitscan(
    history: History,
    world: World,
    shots: HitscanShots,
    out: HitscanResults,
    *,
    broad_phase: bool,
) -> None:
    """:func:`reference.resolve_hitscan` on the GPU: copies in, one launch, copies out.

    The broad-phase grid is built on the host (it is linear in players and cheap) and copied.
    """
    if len(shots) == 0:
        return
    kernels = _load_kernels()
    inputs = cpu.hitscan_inputs(history, world, shots, broad_phase)
    _launch(kernels.hitscan, kernels.cuda, len(shots), inputs, out)


def resolve_projectiles(
    history: History,
    world: World,
    projectiles: ProjectileShots,
    out: ProjectileResults,
    *,
    max_substeps: int,
    broad_phase: bool,
) -> None:
    """:func:`reference.resolve_projectiles` on the GPU."""
    if len(projectiles) == 0:
        return
    kernels = _load_kernels()
    inputs = cpu.projectile_inputs(history, world, projectiles, max_substeps, broad_phase)
    _launch(kernels.projectiles, kernels.cuda, len(projectiles), inputs, out)
