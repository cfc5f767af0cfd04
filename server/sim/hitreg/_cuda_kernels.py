"""The numba.cuda kernels themselves; imported by ``cuda._load_kernels`` only, never eagerly.

They live in their own module because the CUDA simulator swaps the ``cuda`` module global of
kernel functions for its fake one: the kernels must see ``cuda`` as a module global. The body
of each kernel is one call into the per-shot device math of ``cpu.py``.
"""

from __future__ import annotations

from numba import cuda

from server.sim.hitreg.cpu import _hitscan_one, _projectile_one

__all__ = ["hitscan_kernel", "projectile_kernel"]


@cuda.jit(fastmath=False)
def hitscan_kernel(
    times, positions, alive, start, count, box_min, box_max,
    bottom, top, radius, sphere_z, sphere_r,
    shot_match, shot_shooter, shot_origin, shot_dir, shot_range, shot_time,
    use_grid, grid_origin, grid_cell, grid_nx, grid_ny, grid_base, cell_start, cell_players,
    out_kind, out_victim, out_hitbox, out_distance, out_tests,
):  # fmt: skip
    i: int = cuda.grid(1)  # type: ignore[call-arg]
    if i < shot_match.shape[0]:
        _hitscan_one(
            i, times, positions, alive, start, count, box_min, box_max,
            bottom, top, radius, sphere_z, sphere_r,
            shot_match, shot_shooter, shot_origin, shot_dir, shot_range, shot_time,
            use_grid, grid_origin, grid_cell, grid_nx, grid_ny, grid_base, cell_start,
            cell_players, out_kind, out_victim, out_hitbox, out_distance, out_tests,
        )  # fmt: skip


@cuda.jit(fastmath=False)
def projectile_kernel(
    times, positions, alive, start, count, box_min, box_max,
    bottom, top, radius, sphere_z, sphere_r,
    proj_match, proj_shooter, proj_origin, proj_velocity, proj_gravity,
    proj_spawn_time, proj_end_time, proj_expire_time, proj_step_time, max_substeps,
    use_grid, grid_origin, grid_cell, grid_nx, grid_ny, grid_base, cell_start, cell_players,
    out_kind, out_victim, out_hitbox, out_time, out_position, out_velocity, out_expired,
    out_tests,
):  # fmt: skip
    i: int = cuda.grid(1)  # type: ignore[call-arg]
    if i < proj_match.shape[0]:
        _projectile_one(
            i, times, positions, alive, start, count, box_min, box_max,
            bottom, top, radius, sphere_z, sphere_r,
            proj_match, proj_shooter, proj_origin, proj_velocity, proj_gravity,
            proj_spawn_time, proj_end_time, proj_expire_time, proj_step_time, max_substeps,
            use_grid, grid_origin, grid_cell, grid_nx, grid_ny, grid_base, cell_start,
            cell_players, out_kind, out_victim, out_hitbox, out_time, out_position,
            out_velocity, out_expired, out_tests,
        )  # fmt: skip
