"""Where a ray first enters a hitbox, and where it first meets the map (the floor and the
boxes): the one definition every kernel of ours calls (the node's hit registration on the
CPU and the GPU, ``server/sim/hitreg/cpu.py``, and the bots' own verdicts,
``shared/rayhits.py``).

The functions are plain Python registered with :func:`numba.extending.register_jitable`:
a CPU kernel compiles them inline, ``server/sim/hitreg/cuda.py`` registers the very same
function objects for the GPU target, and numba's CUDA simulator runs them as Python. They
perform the operations of :func:`shared.hitbox.ray_hitbox_entries` and
:func:`shared.hitbox.ray_world_entry` (the NumPy references, which stay the spec) in the
same order, so the kernels agree with them bit for bit. (:func:`world_entry` passes over
the boxes apart from the segment's bounds first, which changes no answer.)

A ray is ``origin + t * direction`` for ``t`` in ``[0, max_t]``; every function answers the
first such ``t`` inside the shape, or ``inf``. ``dd`` is ``|direction|²`` and ``dxy`` its
horizontal part, computed once per ray by the caller.

numba's on-disk cache keys a kernel by its own source file only: an edit here reaches the
kernels that inline these functions because :mod:`shared.jitcache` forgets the compiled
kernels of a checkout whenever any of its kernel sources (this file included) changes.
"""

from __future__ import annotations

import math

import numpy as np
from numba.extending import register_jitable

__all__ = ["BOX_PAD", "cylinder_entry", "hitbox_entry", "sphere_entry", "world_entry"]

#: Padding of a segment's bounding box when boxes apart from it are passed over, metres:
#: far above any rounding of the slab test, so no box it could enter is passed over.
BOX_PAD = 1e-6


@register_jitable(error_model="numpy")
def sphere_entry(
    ox: float, oy: float, oz: float, dx: float, dy: float, dz: float, dd: float,
    max_t: float, cx: float, cy: float, cz: float, radius: float,
) -> float:  # fmt: skip
    """Entry into the ball of ``radius`` around ``(cx, cy, cz)``."""
    ex = ox - cx
    ey = oy - cy
    ez = oz - cz
    c = ex * ex + ey * ey + ez * ez - radius * radius
    if dd == 0.0:  # a degenerate segment: only "already inside" counts
        return 0.0 if c <= 0.0 else math.inf
    b = dx * ex + dy * ey + dz * ez
    h = b * b - dd * c
    if h < 0.0:
        return math.inf
    s = math.sqrt(h)
    lo = max((-b - s) / dd, 0.0)
    hi = min((-b + s) / dd, max_t)
    return lo if lo <= hi else math.inf


@register_jitable(error_model="numpy")
def cylinder_entry(
    ox: float, oy: float, oz: float, dx: float, dy: float, dz: float, dxy: float,
    max_t: float, px: float, py: float, z_bottom: float, z_top: float, radius: float,
) -> float:  # fmt: skip
    """Entry into the upright cylinder of ``radius`` around ``(px, py)`` from ``z_bottom``
    to ``z_top`` (the slab method on its height)."""
    ex = ox - px
    ey = oy - py
    c = ex * ex + ey * ey - radius * radius
    lo = 0.0
    hi = max_t
    if dxy == 0.0:  # parallel to the axis: inside the circle for all t, or never
        if c > 0.0:
            return math.inf
    else:
        b = dx * ex + dy * ey
        h = b * b - dxy * c
        if h < 0.0:
            return math.inf
        s = math.sqrt(h)
        lo = max(lo, (-b - s) / dxy)
        hi = min(hi, (-b + s) / dxy)
    if dz == 0.0:
        if oz < z_bottom or oz > z_top:
            return math.inf
    else:
        t1 = (z_bottom - oz) / dz
        t2 = (z_top - oz) / dz
        lo = max(lo, min(t1, t2))
        hi = min(hi, max(t1, t2))
    return lo if lo <= hi else math.inf


@register_jitable(error_model="numpy")
def hitbox_entry(
    ox: float, oy: float, oz: float, dx: float, dy: float, dz: float, dd: float,
    dxy: float, max_t: float, px: float, py: float, pz: float,
    bottom: np.ndarray, top: np.ndarray, radius: np.ndarray, k: int,
) -> float:  # fmt: skip
    """Entry into hitbox ``k`` (a capsule from ``bottom[k]`` to ``top[k]`` above the feet
    ``(px, py, pz)``, a ball when they are equal; :func:`shared.hitbox.hitbox_arrays`)."""
    r = radius[k]
    z_bottom = pz + bottom[k]
    best = sphere_entry(ox, oy, oz, dx, dy, dz, dd, max_t, px, py, z_bottom, r)
    if top[k] > bottom[k]:
        z_top = pz + top[k]
        best = min(best, sphere_entry(ox, oy, oz, dx, dy, dz, dd, max_t, px, py, z_top, r))
        best = min(
            best, cylinder_entry(ox, oy, oz, dx, dy, dz, dxy, max_t, px, py, z_bottom, z_top, r)
        )
    return best


@register_jitable(error_model="numpy")
def world_entry(
    ox: float, oy: float, oz: float, dx: float, dy: float, dz: float, max_t: float,
    box_min: np.ndarray, box_max: np.ndarray,
) -> float:  # fmt: skip
    """Entry into the floor (``z <= 0``) or the nearest box (the slab method), or inf."""
    best = math.inf
    if dz < 0.0:
        t = max(-oz / dz, 0.0)
        if t <= max_t:
            best = t
    elif oz <= 0.0:
        best = 0.0
    # The segment's bounding box lets most boxes be skipped without a slab test.
    ex = ox + dx * max_t
    ey = oy + dy * max_t
    ez = oz + dz * max_t
    seg_x0 = min(ox, ex) - BOX_PAD
    seg_x1 = max(ox, ex) + BOX_PAD
    seg_y0 = min(oy, ey) - BOX_PAD
    seg_y1 = max(oy, ey) + BOX_PAD
    seg_z0 = min(oz, ez) - BOX_PAD
    seg_z1 = max(oz, ez) + BOX_PAD
    for j in range(box_min.shape[0]):
        bx0 = box_min[j, 0]
        bx1 = box_max[j, 0]
        by0 = box_min[j, 1]
        by1 = box_max[j, 1]
        bz0 = box_min[j, 2]
        bz1 = box_max[j, 2]
        if seg_x1 < bx0 or seg_x0 > bx1 or seg_y1 < by0 or seg_y0 > by1:
            continue
        if seg_z1 < bz0 or seg_z0 > bz1:
            continue
        lo = 0.0
        hi = max_t
        if dx == 0.0:
            if ox < bx0 or ox > bx1:
                continue
        else:
            t1 = (bx0 - ox) / dx
            t2 = (bx1 - ox) / dx
            lo = max(lo, min(t1, t2))
            hi = min(hi, max(t1, t2))
        if dy == 0.0:
            if oy < by0 or oy > by1:
                continue
        else:
            t1 = (by0 - oy) / dy
            t2 = (by1 - oy) / dy
            lo = max(lo, min(t1, t2))
            hi = min(hi, max(t1, t2))
        if dz == 0.0:
            if oz < bz0 or oz > bz1:
                continue
        else:
            t1 = (bz0 - oz) / dz
            t2 = (bz1 - oz) / dz
            lo = max(lo, min(t1, t2))
            hi = min(hi, max(t1, t2))
        if lo <= hi and lo < best:
            best = lo
    return best
