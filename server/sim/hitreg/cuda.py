"""numba.cuda kernels for hit registration: one GPU thread per shot.

The per-shot math is the very code of ``cpu.py`` (its ``@device_function`` functions),
compiled for the GPU target here, so both backends share one implementation of the ray
tests, the rewind and the tie rules. Importing this module does not import ``numba.cuda``:
:func:`load_kernels` does, on first use, so a node without numba-cuda or without a GPU can
still import the package and run on the CPU.

Exactness on real GPUs: NVVM contracts multiply-adds into FMAs unless told otherwise, so a
distance may differ from the CPU's in its last bits, and an exact tie on the CPU may not be
one on the GPU. The simulator runs the Python code itself and matches bit for bit.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from server.sim.hitreg import cpu
from server.sim.hitreg.jit import CUDA_THREADS_PER_BLOCK
from server.sim.hitreg.reference import DEFAULT_MAX_SUBSTEPS

__all__ = [
    "CudaKernels",
    "cuda_available",
    "load_kernels",
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
class CudaKernels:
    """The compiled kernels and the ``numba.cuda`` module that launches them."""

    cuda: Any
    hitscan: Any
    projectiles: Any


@functools.cache
def load_kernels() -> CudaKernels:
    """Import numba.cuda, register the shared device math for the GPU and define the kernels.

    Kernels compile lazily, on their first launch for a given set of argument types.
    """
    from numba import cuda

    if not simulator_enabled():
        from numba.cuda.extending import register_jitable  # type: ignore[attr-defined]

        for function in cpu.DEVICE_FUNCTIONS:
            register_jitable(function)
    from server.sim.hitreg import _cuda_kernels

    return CudaKernels(
        cuda=cuda, hitscan=_cuda_kernels.hitscan_kernel, projectiles=_cuda_kernels.projectile_kernel
    )


def _blocks(n: int) -> int:
    return max(1, (n + CUDA_THREADS_PER_BLOCK - 1) // CUDA_THREADS_PER_BLOCK)


def resolve_hitscan(
    times: np.ndarray,
    positions: np.ndarray,
    alive: np.ndarray,
    start: np.ndarray,
    count: np.ndarray,
    box_min: np.ndarray,
    box_max: np.ndarray,
    shot_match: np.ndarray,
    shot_shooter: np.ndarray,
    shot_origin: np.ndarray,
    shot_dir: np.ndarray,
    shot_range: np.ndarray,
    shot_time: np.ndarray,
    out_kind: np.ndarray,
    out_victim: np.ndarray,
    out_hitbox: np.ndarray,
    out_distance: np.ndarray,
    out_tests: np.ndarray,
    *,
    broad_phase: bool = True,
) -> None:
    """:func:`reference.resolve_hitscan` on the GPU: copies in, one launch, copies out.

    The broad-phase grid is built on the host (it is linear in players and cheap) and copied.
    """
    if shot_match.shape[0] == 0:
        return
    kernels = load_kernels()
    to_device = kernels.cuda.to_device
    grid = cpu.player_grid(times, positions, alive, start, count, broad_phase)
    bottom, top, radius, sphere_z, sphere_r = cpu.hitbox_kernel_args()
    host_inputs = (
        times, positions, alive, start, count, box_min, box_max, bottom, top, radius,
        shot_match, shot_shooter, shot_origin, shot_dir, shot_range, shot_time, *grid,
    )  # fmt: skip
    inputs = [to_device(a) for a in host_inputs]
    outputs = [
        kernels.cuda.device_array_like(a)
        for a in (out_kind, out_victim, out_hitbox, out_distance, out_tests)
    ]
    history_and_world, shots, grid_device = inputs[:10], inputs[10:16], inputs[16:]
    kernels.hitscan[_blocks(shot_match.shape[0]), CUDA_THREADS_PER_BLOCK](
        *history_and_world, sphere_z, sphere_r, *shots, broad_phase, *grid_device, *outputs
    )
    for host, device in zip(
        (out_kind, out_victim, out_hitbox, out_distance, out_tests), outputs, strict=True
    ):
        device.copy_to_host(host)


def resolve_projectiles(
    times: np.ndarray,
    positions: np.ndarray,
    alive: np.ndarray,
    start: np.ndarray,
    count: np.ndarray,
    box_min: np.ndarray,
    box_max: np.ndarray,
    proj_match: np.ndarray,
    proj_shooter: np.ndarray,
    proj_origin: np.ndarray,
    proj_velocity: np.ndarray,
    proj_gravity: np.ndarray,
    proj_spawn_time: np.ndarray,
    proj_end_time: np.ndarray,
    proj_expire_time: np.ndarray,
    out_kind: np.ndarray,
    out_victim: np.ndarray,
    out_hitbox: np.ndarray,
    out_time: np.ndarray,
    out_position: np.ndarray,
    out_velocity: np.ndarray,
    out_expired: np.ndarray,
    out_tests: np.ndarray,
    max_step: float,
    max_substeps: int = DEFAULT_MAX_SUBSTEPS,
    *,
    broad_phase: bool = True,
) -> None:
    """:func:`reference.resolve_projectiles` on the GPU."""
    if proj_match.shape[0] == 0:
        return
    kernels = load_kernels()
    to_device = kernels.cuda.to_device
    grid = cpu.player_grid(times, positions, alive, start, count, broad_phase)
    bottom, top, radius, sphere_z, sphere_r = cpu.hitbox_kernel_args()
    host_inputs = (
        times, positions, alive, start, count, box_min, box_max, bottom, top, radius,
        proj_match, proj_shooter, proj_origin, proj_velocity, proj_gravity,
        proj_spawn_time, proj_end_time, proj_expire_time, *grid,
    )  # fmt: skip
    inputs = [to_device(a) for a in host_inputs]
    host_outputs = (
        out_kind, out_victim, out_hitbox, out_time, out_position, out_velocity, out_expired,
        out_tests,
    )  # fmt: skip
    outputs = [kernels.cuda.device_array_like(a) for a in host_outputs]
    history_and_world, shots, grid_device = inputs[:10], inputs[10:18], inputs[18:]
    kernels.projectiles[_blocks(proj_match.shape[0]), CUDA_THREADS_PER_BLOCK](
        *history_and_world, sphere_z, sphere_r, *shots, float(max_step), int(max_substeps),
        broad_phase, *grid_device, *outputs,
    )  # fmt: skip
    for host, device in zip(host_outputs, outputs, strict=True):
        device.copy_to_host(host)
