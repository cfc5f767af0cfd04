"""numba CPU kernels for hit registration, and the per-shot math the CUDA kernels share.

Everything here computes exactly what ``reference.py`` specifies, with the same floating-point
operations in the same order (see the arithmetic contract in :mod:`shared.hitbox`), so the
results are bit-identical. Two things make the kernels fast without changing a result:

* a bounding-sphere early-out per player (padded by a millimetre, so rounding can never turn
  a true hit into a rejection), and
* an optional broad phase: a uniform x/y grid per match built once per call from every
  position a player held in the history (padded by the hitbox radius), walked along each
  ray with a 2D DDA that stops once the next cell starts beyond the best hit so far. Ties are
  resolved by comparing ``(distance, slot, hitbox id)`` lexicographically, which does not
  depend on the order in which the grid hands out candidates.

The functions marked ``@device_function`` are plain Python compiled inline into the CPU
kernels; ``cuda.py`` compiles the same function objects for the GPU, one thread per shot.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
from numba import prange

from server.sim.hitreg.batches import (
    History,
    HitscanResults,
    HitscanShots,
    ProjectileResults,
    ProjectileShots,
    World,
)
from server.sim.hitreg.jit import cpu_helper, cpu_kernel, device_function
from shared.hitbox import (
    BOUNDING_SPHERE_CENTRE,
    BOUNDING_SPHERE_RADIUS,
    HIT_NONE,
    HIT_PLAYER,
    HIT_WORLD,
    HITBOX_RADIAL_EXTENT,
    hitbox_arrays,
)
from shared.raygeometry import cylinder_entry, hitbox_entry, sphere_entry, world_entry

__all__ = [
    "DEVICE_FUNCTIONS",
    "hitbox_kernel_args",
    "hitscan_inputs",
    "player_grid",
    "projectile_inputs",
    "resolve_hitscan",
    "resolve_projectiles",
]

#: Grid padding around every position a player held: the hitbox radius plus a centimetre,
#: far above any rounding in the DDA, so a ray that touches a hitbox always visits a cell
#: that lists its player.
_GRID_PAD = HITBOX_RADIAL_EXTENT + 0.01
#: Cell edge relative to the mean spacing of players (about one player per cell; measured on
#: bench/hitreg.py scenes of 1,000 and 10,000 players, 1x to 2x the spacing are within a few
#: per cent of each other, 4x is 15-25 % slower).
_GRID_CELL_SCALE = 1.0
#: Smallest cell edge, metres: smaller cells cost more DDA steps than they save tests.
_GRID_MIN_CELL = 2.0
#: Early-out padding of the bounding sphere, metres.
_BOUNDING_PAD = 1e-3


# --------------------------------------------------------------------------------------------
# Per-shot math shared with cuda.py (the entries into a hitbox and into the map are
# shared/raygeometry.py's, which the bots' kernel calls too). Keep the operation order
# identical to shared/hitbox.py.
# --------------------------------------------------------------------------------------------


@device_function
def _bracket(times, start, count, m, t):
    """(before, after, weight) of the snapshots around ``t``; see reference.snapshot_bracket."""
    n = count[m]
    if n <= 0:
        return -1, -1, 0.0
    capacity = times.shape[1]
    first = start[m]
    oldest = first
    newest = (first + n - 1) % capacity
    if t <= times[m, oldest]:
        return oldest, oldest, 0.0
    if t >= times[m, newest]:
        return newest, newest, 0.0
    low = 0  # invariant: times[low] <= t < times[high] (logical indices)
    high = n - 1
    while high - low > 1:
        middle = (low + high) // 2
        if times[m, (first + middle) % capacity] <= t:
            low = middle
        else:
            high = middle
    before = (first + low) % capacity
    after = (first + high) % capacity
    t0 = times[m, before]
    if t0 == t:
        return before, before, 0.0
    return before, after, (t - t0) / (times[m, after] - t0)


@device_function
def _exact_player(
    ox, oy, oz, dx, dy, dz, dd, dxy, max_t, p, px, py, pz, bottom, top, radius,
    best_d, best_p, best_k,
):  # fmt: skip
    """Fold slot ``p``'s hitbox entries into the best (distance, slot, id) so far.

    The comparison is lexicographic on (distance, slot, id), so the result does not depend
    on the order in which candidates arrive (the grid hands them out in ray order).
    """
    for k in range(bottom.shape[0]):
        e = hitbox_entry(ox, oy, oz, dx, dy, dz, dd, dxy, max_t, px, py, pz, bottom, top, radius, k)
        if e < best_d or (
            e == best_d and e < math.inf and (p < best_p or (p == best_p and k + 1 < best_k))
        ):
            best_d = e
            best_p = p
            best_k = k + 1
    return best_d, best_p, best_k


@device_function
def _nearest_player(
    positions,
    alive,
    m,
    before,
    after,
    weight,
    shooter,
    ox,
    oy,
    oz,
    dx,
    dy,
    dz,
    max_t,
    bound,
    bottom,
    top,
    radius,
    sphere_z,
    sphere_r,
    use_grid,
    grid_origin,
    grid_cell,
    grid_nx,
    grid_ny,
    grid_base,
    cell_start,
    cell_players,
):
    """Nearest hitbox entry among present players other than the shooter.

    ``bound`` (at most ``max_t``) is where a player hit stops mattering (the world is hit
    there); returns (distance, slot, hitbox id, hitbox tests), slot -1 when none.
    """
    best_d = math.inf
    best_p = -1
    best_k = 0
    tests = 0
    if before < 0:
        return best_d, best_p, best_k, tests
    dd = dx * dx + dy * dy + dz * dz
    dxy = dx * dx + dy * dy
    reach = math.sqrt(dd) * bound + sphere_r
    reach2 = reach * reach
    sphere_r2 = sphere_r * sphere_r
    hitboxes = bottom.shape[0]
    players = alive.shape[2]
    # Candidates come in spans: without the grid one span of every slot; with it, the cells
    # the ray crosses in x/y, nearest first (2D DDA), until a cell starts beyond the best.
    nx = 0
    ny = 0
    ix = 0
    iy = 0
    step_x = 1
    step_y = 1
    cell = 1.0
    gx0 = 0.0
    gy0 = 0.0
    base = 0
    if use_grid:
        nx = grid_nx[m]
        ny = grid_ny[m]
        if nx == 0:
            return best_d, best_p, best_k, tests
        cell = grid_cell[m]
        gx0 = grid_origin[m, 0]
        gy0 = grid_origin[m, 1]
        gx1 = gx0 + nx * cell
        gy1 = gy0 + ny * cell
        # Clip [0, bound] to the grid's rectangle.
        t_lo = 0.0
        t_hi = bound
        if dx == 0.0:
            if ox < gx0 or ox > gx1:
                return best_d, best_p, best_k, tests
        else:
            t1 = (gx0 - ox) / dx
            t2 = (gx1 - ox) / dx
            t_lo = max(t_lo, min(t1, t2))
            t_hi = min(t_hi, max(t1, t2))
        if dy == 0.0:
            if oy < gy0 or oy > gy1:
                return best_d, best_p, best_k, tests
        else:
            t1 = (gy0 - oy) / dy
            t2 = (gy1 - oy) / dy
            t_lo = max(t_lo, min(t1, t2))
            t_hi = min(t_hi, max(t1, t2))
        if t_lo > t_hi:
            return best_d, best_p, best_k, tests
        # int(): on the CUDA target math.floor/ceil return floats.
        ix = int(math.floor((ox + dx * t_lo - gx0) / cell))  # noqa: RUF046
        iy = int(math.floor((oy + dy * t_lo - gy0) / cell))  # noqa: RUF046
        ix = min(max(ix, 0), nx - 1)
        iy = min(max(iy, 0), ny - 1)
        step_x = 1 if dx > 0.0 else -1
        step_y = 1 if dy > 0.0 else -1
        base = grid_base[m]
    feet_before = positions[m, before]
    feet_after = positions[m, after]
    alive_before = alive[m, before]
    alive_after = alive[m, after]
    while True:
        first = 0
        last = players
        if use_grid:
            first = cell_start[base + iy * nx + ix]
            last = cell_start[base + iy * nx + ix + 1]
        for j in range(first, last):
            p = cell_players[j] if use_grid else j
            # The hot part, inline and branch-free (a call or a mispredicted branch per
            # candidate costs more than the test): rewind, then the bounding-sphere
            # early-out, which keeps a slot only if it is present, is not the shooter, is
            # within the ray's reach and is either around the origin or ahead of it and
            # not passed wide. The sphere is padded: rounding never rejects a true hit.
            x0 = feet_before[p, 0]
            y0 = feet_before[p, 1]
            z0 = feet_before[p, 2]
            px = x0 + (feet_after[p, 0] - x0) * weight
            py = y0 + (feet_after[p, 1] - y0) * weight
            pz = z0 + (feet_after[p, 2] - z0) * weight
            ex = ox - px
            ey = oy - py
            ez = oz - (pz + sphere_z)
            ee = ex * ex + ey * ey + ez * ez
            c = ee - sphere_r2
            b = dx * ex + dy * ey + dz * ez
            present = (alive_before[p] != 0) & (alive_after[p] != 0) & (p != shooter)
            tests += hitboxes * present
            near = (ee <= reach2) & ((c <= 0.0) | ((b <= 0.0) & (b * b - dd * c >= 0.0)))
            if not (present & near):
                continue
            best_d, best_p, best_k = _exact_player(
                ox, oy, oz, dx, dy, dz, dd, dxy, max_t, p, px, py, pz, bottom, top, radius,
                best_d, best_p, best_k,
            )  # fmt: skip
        if not use_grid:
            break
        # Parameter at which the ray leaves this cell through an x or a y edge.
        t_x = math.inf
        if dx > 0.0:
            t_x = (gx0 + (ix + 1) * cell - ox) / dx
        elif dx < 0.0:
            t_x = (gx0 + ix * cell - ox) / dx
        t_y = math.inf
        if dy > 0.0:
            t_y = (gy0 + (iy + 1) * cell - oy) / dy
        elif dy < 0.0:
            t_y = (gy0 + iy * cell - oy) / dy
        limit = min(bound, best_d)
        if min(t_x, t_y) > limit + 1e-9 * (1.0 + limit):
            break
        if t_x < t_y:
            ix += step_x
            if ix < 0 or ix >= nx:
                break
        else:
            iy += step_y
            if iy < 0 or iy >= ny:
                break
    return best_d, best_p, best_k, tests


@device_function
def _hitscan_one(
    i,
    times,
    positions,
    alive,
    start,
    count,
    box_min,
    box_max,
    bottom,
    top,
    radius,
    sphere_z,
    sphere_r,
    shot_match,
    shot_shooter,
    shot_origin,
    shot_dir,
    shot_range,
    shot_time,
    use_grid,
    grid_origin,
    grid_cell,
    grid_nx,
    grid_ny,
    grid_base,
    cell_start,
    cell_players,
    out_kind,
    out_victim,
    out_hitbox,
    out_distance,
    out_tests,
):
    """Resolve shot ``i``; writes only index ``i`` of the outputs."""
    m = shot_match[i]
    ox = shot_origin[i, 0]
    oy = shot_origin[i, 1]
    oz = shot_origin[i, 2]
    dx = shot_dir[i, 0]
    dy = shot_dir[i, 1]
    dz = shot_dir[i, 2]
    max_t = shot_range[i]
    t_world = world_entry(ox, oy, oz, dx, dy, dz, max_t, box_min, box_max)
    before, after, weight = _bracket(times, start, count, m, shot_time[i])
    best_d, best_p, best_k, tests = _nearest_player(
        positions, alive, m, before, after, weight, shot_shooter[i],
        ox, oy, oz, dx, dy, dz, max_t, min(max_t, t_world),
        bottom, top, radius, sphere_z, sphere_r, use_grid,
        grid_origin, grid_cell, grid_nx, grid_ny, grid_base, cell_start, cell_players,
    )  # fmt: skip
    if best_p >= 0 and best_d < t_world:
        out_kind[i] = HIT_PLAYER
        out_victim[i] = best_p
        out_hitbox[i] = best_k
        out_distance[i] = best_d
    elif t_world <= max_t:
        out_kind[i] = HIT_WORLD
        out_victim[i] = -1
        out_hitbox[i] = 0
        out_distance[i] = t_world
    else:
        out_kind[i] = HIT_NONE
        out_victim[i] = -1
        out_hitbox[i] = 0
        out_distance[i] = max_t
    out_tests[i] = tests


@device_function
def _projectile_one(
    i,
    times,
    positions,
    alive,
    start,
    count,
    box_min,
    box_max,
    bottom,
    top,
    radius,
    sphere_z,
    sphere_r,
    proj_match,
    proj_shooter,
    proj_origin,
    proj_velocity,
    proj_gravity,
    proj_spawn_time,
    proj_end_time,
    proj_expire_time,
    proj_step_time,
    max_substeps,
    use_grid,
    grid_origin,
    grid_cell,
    grid_nx,
    grid_ny,
    grid_base,
    cell_start,
    cell_players,
    out_kind,
    out_victim,
    out_hitbox,
    out_time,
    out_position,
    out_velocity,
    out_expired,
    out_tests,
):
    """Re-simulate projectile ``i``; see reference.resolve_projectiles."""
    m = proj_match[i]
    shooter = proj_shooter[i]
    ox = proj_origin[i, 0]
    oy = proj_origin[i, 1]
    oz = proj_origin[i, 2]
    vx = proj_velocity[i, 0]
    vy = proj_velocity[i, 1]
    vz = proj_velocity[i, 2]
    g = proj_gravity[i]
    spawn = proj_spawn_time[i]
    end = proj_end_time[i]
    expire = proj_expire_time[i]
    step = proj_step_time[i]
    # The chords this call flies: reference.flight_chords.
    whole = (min(end, expire) - spawn) / step
    expires = expire <= end
    if whole >= max_substeps:
        chords = max_substeps
        flown = max_substeps * step
        expires = False
    else:
        chords = max(0, int(math.floor(whole)))  # noqa: RUF046 (float on CUDA)
        flown = chords * step
        if expires and expire - spawn > flown:
            chords += 1
            flown = expire - spawn
    tests = 0
    kind = HIT_NONE
    victim = -1
    hitbox = 0
    hit_tau = flown
    ax = ox
    ay = oy
    az = oz
    tau_before = 0.0
    for k in range(1, chords + 1):
        tau = flown if k == chords else k * step
        bx = ox + vx * tau
        by = oy + vy * tau
        bz = oz + vz * tau - 0.5 * g * tau * tau
        sx = bx - ax
        sy = by - ay
        sz = bz - az
        t_world = world_entry(ax, ay, az, sx, sy, sz, 1.0, box_min, box_max)
        before, after, weight = _bracket(times, start, count, m, spawn + tau)
        best_d, best_p, best_k, n_tests = _nearest_player(
            positions, alive, m, before, after, weight, shooter,
            ax, ay, az, sx, sy, sz, 1.0, min(1.0, t_world),
            bottom, top, radius, sphere_z, sphere_r, use_grid,
            grid_origin, grid_cell, grid_nx, grid_ny, grid_base, cell_start, cell_players,
        )  # fmt: skip
        tests += n_tests
        u = -1.0
        if best_p >= 0 and best_d < t_world:
            kind = HIT_PLAYER
            victim = best_p
            hitbox = best_k
            u = best_d
        elif t_world <= 1.0:
            kind = HIT_WORLD
            u = t_world
        if u >= 0.0:
            hit_tau = tau_before + u * (tau - tau_before)
            ax = ax + u * sx
            ay = ay + u * sy
            az = az + u * sz
            break
        ax = bx
        ay = by
        az = bz
        tau_before = tau
    out_kind[i] = kind
    out_victim[i] = victim
    out_hitbox[i] = hitbox
    out_time[i] = spawn + hit_tau
    out_position[i, 0] = ax  # where it hit, or the end of its last chord
    out_position[i, 1] = ay
    out_position[i, 2] = az
    out_velocity[i, 0] = vx
    out_velocity[i, 1] = vy
    out_velocity[i, 2] = vz - g * hit_tau
    out_expired[i] = 1 if kind == HIT_NONE and expires else 0
    out_tests[i] = tests


#: The device functions, in dependency order, for cuda.py to register for the GPU target.
DEVICE_FUNCTIONS = (
    _bracket,
    sphere_entry,
    cylinder_entry,
    hitbox_entry,
    world_entry,
    _exact_player,
    _nearest_player,
    _hitscan_one,
    _projectile_one,
)


# --------------------------------------------------------------------------------------------
# Broad phase: a uniform x/y grid per match.
# --------------------------------------------------------------------------------------------


@device_function
def _cell_span(extent, origin, cell, nx, ny, m, p):
    """Inclusive column and row ranges of the cells that slot ``p``'s padded extent touches."""
    size = cell[m]
    ix0 = math.floor((extent[m, p, 0] - origin[m, 0]) / size)
    ix1 = math.floor((extent[m, p, 1] - origin[m, 0]) / size)
    iy0 = math.floor((extent[m, p, 2] - origin[m, 1]) / size)
    iy1 = math.floor((extent[m, p, 3] - origin[m, 1]) / size)
    last_x = nx[m] - 1
    last_y = ny[m] - 1
    return (
        min(max(ix0, 0), last_x),
        min(max(ix1, 0), last_x),
        min(max(iy0, 0), last_y),
        min(max(iy1, 0), last_y),
    )


@cpu_helper
def _fill_player_grid(
    times, positions, alive, start, count, pad, cell_scale, min_cell,
    extent, held, origin, cell, nx, ny, base,
):  # fmt: skip
    """Bin every player slot of every match into the x/y cells its hitboxes can occupy.

    A slot's extent is the bounding rectangle of all positions it held while alive in the
    valid snapshots, padded by ``pad``: any position interpolated between two snapshots in
    which it was alive lies inside. Fills the per-match ``origin (Mt, 2)``, ``cell (Mt,)``,
    ``nx (Mt,)``, ``ny (Mt,)``, ``base (Mt,)`` (first global cell), given zeroed (``cell``
    ones) with the scratch ``extent (Mt, P, 4)`` and ``held (Mt, P)`` zeroed, and returns the
    cells' CSR lists ``cell_start (C + 1,)`` / ``cell_players (N,) int32`` (slots ascending
    in each cell). The per-match arrays come from the caller: numba's allocation overloads
    were a third of this helper's cold compile.
    """
    matches = alive.shape[0]
    capacity = alive.shape[1]
    players = alive.shape[2]
    total = 0
    for m in range(matches):
        for i in range(count[m]):
            h = (start[m] + i) % capacity
            for p in range(players):
                if alive[m, h, p] == 0:
                    continue
                x = positions[m, h, p, 0]
                y = positions[m, h, p, 1]
                if held[m, p] == 0:
                    held[m, p] = 1
                    extent[m, p, 0] = x
                    extent[m, p, 1] = x
                    extent[m, p, 2] = y
                    extent[m, p, 3] = y
                else:
                    extent[m, p, 0] = min(extent[m, p, 0], x)
                    extent[m, p, 1] = max(extent[m, p, 1], x)
                    extent[m, p, 2] = min(extent[m, p, 2], y)
                    extent[m, p, 3] = max(extent[m, p, 3], y)
        x0 = math.inf
        x1 = -math.inf
        y0 = math.inf
        y1 = -math.inf
        occupied = 0
        for p in range(players):
            if held[m, p] == 0:
                continue
            occupied += 1
            extent[m, p, 0] -= pad
            extent[m, p, 1] += pad
            extent[m, p, 2] -= pad
            extent[m, p, 3] += pad
            x0 = min(x0, extent[m, p, 0])
            x1 = max(x1, extent[m, p, 1])
            y0 = min(y0, extent[m, p, 2])
            y1 = max(y1, extent[m, p, 3])
        base[m] = total
        if occupied == 0:
            continue
        width = x1 - x0
        depth = y1 - y0
        size = max(math.sqrt(width * depth / occupied) * cell_scale, min_cell)
        cols = max(1, math.ceil(width / size))
        rows = max(1, math.ceil(depth / size))
        while cols * rows > 4 * occupied + 64:  # keep memory linear in players
            size *= 1.5
            cols = max(1, math.ceil(width / size))
            rows = max(1, math.ceil(depth / size))
        origin[m, 0] = x0
        origin[m, 1] = y0
        cell[m] = size
        nx[m] = cols
        ny[m] = rows
        total += cols * rows
    # Counting sort of (cell, slot) pairs: count, prefix-sum, fill (slots stay ascending).
    cell_start = np.zeros(total + 1, dtype=np.int64)
    for m in range(matches):
        for p in range(players):
            if held[m, p] == 0:
                continue
            ix0, ix1, iy0, iy1 = _cell_span(extent, origin, cell, nx, ny, m, p)
            for iy in range(iy0, iy1 + 1):
                for ix in range(ix0, ix1 + 1):
                    cell_start[base[m] + iy * nx[m] + ix + 1] += 1
    cursor = np.empty(total, dtype=np.int64)
    for c in range(total):
        cursor[c] = cell_start[c]
        cell_start[c + 1] += cell_start[c]
    cell_players = np.empty(cell_start[total], dtype=np.int32)
    for m in range(matches):
        for p in range(players):
            if held[m, p] == 0:
                continue
            ix0, ix1, iy0, iy1 = _cell_span(extent, origin, cell, nx, ny, m, p)
            for iy in range(iy0, iy1 + 1):
                for ix in range(ix0, ix1 + 1):
                    c = base[m] + iy * nx[m] + ix
                    cell_players[cursor[c]] = p
                    cursor[c] += 1
    return cell_start, cell_players


def _build_player_grid(
    history: History, pad: float, cell_scale: float, min_cell: float
) -> tuple[np.ndarray, ...]:
    """The broad-phase grid of every match: ``origin, cell, nx, ny, base, cell_start,
    cell_players`` (see :func:`_fill_player_grid`)."""
    matches, _, players = history.alive.shape
    per_match = (
        np.zeros((matches, 2)),
        np.ones(matches),
        np.zeros(matches, dtype=np.int64),
        np.zeros(matches, dtype=np.int64),
        np.zeros(matches, dtype=np.int64),
    )
    cells = _fill_player_grid(
        *history.arrays(), pad, cell_scale, min_cell,
        np.empty((matches, players, 4)), np.zeros((matches, players), dtype=np.uint8),
        *per_match,
    )  # fmt: skip
    return (*per_match, *cells)


@functools.cache  # (read-only to the kernels: one per match count, not one per call)
def _empty_player_grid(matches: int) -> tuple[np.ndarray, ...]:
    """A grid with no cells, of the kernels' argument types, for ``broad_phase=False``."""
    return (
        np.zeros((matches, 2)),
        np.ones(matches),
        np.zeros(matches, dtype=np.int64),
        np.zeros(matches, dtype=np.int64),
        np.zeros(matches, dtype=np.int64),
        np.zeros(1, dtype=np.int64),
        np.zeros(0, dtype=np.int32),
    )


def player_grid(history: History, broad_phase: bool) -> tuple[np.ndarray, ...]:
    """The broad-phase grid for this call, or an empty one when the broad phase is off."""
    if not broad_phase:
        return _empty_player_grid(history.matches)
    return _build_player_grid(history, _GRID_PAD, _GRID_CELL_SCALE, _GRID_MIN_CELL)


@functools.cache  # (constants, read-only to the kernels: built once, not every call)
def hitbox_kernel_args() -> tuple[np.ndarray, np.ndarray, np.ndarray, float, float]:
    """Hitbox axis bottoms, tops, radii, bounding-sphere height and padded radius."""
    bottom, top, radius = hitbox_arrays()
    return bottom, top, radius, BOUNDING_SPHERE_CENTRE[2], BOUNDING_SPHERE_RADIUS + _BOUNDING_PAD


# --------------------------------------------------------------------------------------------
# Kernels (private), their arguments (shared with cuda.py) and their wrappers (public, the
# same batches as reference.py).
# --------------------------------------------------------------------------------------------


@cpu_kernel
def _hitscan_kernel(
    times, positions, alive, start, count, box_min, box_max,
    bottom, top, radius, sphere_z, sphere_r,
    shot_match, shot_shooter, shot_origin, shot_dir, shot_range, shot_time,
    use_grid, grid_origin, grid_cell, grid_nx, grid_ny, grid_base, cell_start, cell_players,
    out_kind, out_victim, out_hitbox, out_distance, out_tests,
):  # fmt: skip
    for i in prange(shot_match.shape[0]):
        _hitscan_one(
            i, times, positions, alive, start, count, box_min, box_max,
            bottom, top, radius, sphere_z, sphere_r,
            shot_match, shot_shooter, shot_origin, shot_dir, shot_range, shot_time,
            use_grid, grid_origin, grid_cell, grid_nx, grid_ny, grid_base, cell_start,
            cell_players, out_kind, out_victim, out_hitbox, out_distance, out_tests,
        )  # fmt: skip


@cpu_kernel
def _projectile_kernel(
    times, positions, alive, start, count, box_min, box_max,
    bottom, top, radius, sphere_z, sphere_r,
    proj_match, proj_shooter, proj_origin, proj_velocity, proj_gravity,
    proj_spawn_time, proj_end_time, proj_expire_time, proj_step_time, max_substeps,
    use_grid, grid_origin, grid_cell, grid_nx, grid_ny, grid_base, cell_start, cell_players,
    out_kind, out_victim, out_hitbox, out_time, out_position, out_velocity, out_expired,
    out_tests,
):  # fmt: skip
    for i in prange(proj_match.shape[0]):
        _projectile_one(
            i, times, positions, alive, start, count, box_min, box_max,
            bottom, top, radius, sphere_z, sphere_r,
            proj_match, proj_shooter, proj_origin, proj_velocity, proj_gravity,
            proj_spawn_time, proj_end_time, proj_expire_time, proj_step_time, max_substeps,
            use_grid, grid_origin, grid_cell, grid_nx, grid_ny, grid_base, cell_start,
            cell_players, out_kind, out_victim, out_hitbox, out_time, out_position,
            out_velocity, out_expired, out_tests,
        )  # fmt: skip


def hitscan_inputs(
    history: History, world: World, shots: HitscanShots, broad_phase: bool
) -> tuple[Any, ...]:
    """The hitscan kernels' arguments before the outputs, in their parameter order: the one
    place the batches are spread (the CPU and the CUDA kernel take the same parameters)."""
    return (
        *history.arrays(), world.box_min, world.box_max, *hitbox_kernel_args(),
        *shots.arrays(), broad_phase, *player_grid(history, broad_phase),
    )  # fmt: skip


def projectile_inputs(
    history: History,
    world: World,
    projectiles: ProjectileShots,
    max_substeps: int,
    broad_phase: bool,
) -> tuple[Any, ...]:
    """The projectile kernels' arguments before the outputs (see :func:`hitscan_inputs`)."""
    return (
        *history.arrays(), world.box_min, world.box_max, *hitbox_kernel_args(),
        *projectiles.arrays(), int(max_substeps),
        broad_phase, *player_grid(history, broad_phase),
    )  # fmt: skip


def resolve_hitscan(
    history: History,
    world: World,
    shots: HitscanShots,
    out: HitscanResults,
    *,
    broad_phase: bool,
) -> None:
    """:func:`reference.resolve_hitscan` on the CPU cores (the batches come validated from
    the facade in ``backend.py``)."""
    if len(shots) == 0:
        return
    _hitscan_kernel(*hitscan_inputs(history, world, shots, broad_phase), *out.arrays())


def resolve_projectiles(
    history: History,
    world: World,
    projectiles: ProjectileShots,
    out: ProjectileResults,
    *,
    max_substeps: int,
    broad_phase: bool,
) -> None:
    """:func:`reference.resolve_projectiles` on the CPU cores."""
    if len(projectiles) == 0:
        return
    inputs = projectile_inputs(history, world, projectiles, max_substeps, broad_phase)
    _projectile_kernel(*inputs, *out.arrays())
