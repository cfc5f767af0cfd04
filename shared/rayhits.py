"""What one ray hits first, as a kernel: a bot's own verdict on every shot it fires and
every chord of its projectiles that may hit something.

It gives exactly :func:`shared.hitbox.ray_hit_player` (the NumPy reference, which stays
the spec; ``tests/client_sim/test_rayhits.py`` checks the two agree on random scenes),
with the same operations in the same order per player and hitbox, and two things the
reference does not do that change no answer:

* a player is tested only when the segment passes within the bounding sphere of its
  hitboxes (padded by a millimetre, as the server kernel pads it), and
* the players are walked in slot order with strict "nearer" comparisons, which is the
  reference's first-minimum ``argmin`` (lowest slot, then lowest hitbox id).

The reference built a dozen ``(players,)`` arrays per hitbox per ray: some 40 µs a shot.
The entry into a hitbox is :func:`shared.raygeometry.hitbox_entry`, the function the
server's kernels (``server/sim/hitreg/cpu.py``) call too.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from shared.hitbox import (
    BOUNDING_SPHERE_CENTRE,
    BOUNDING_SPHERE_RADIUS,
    HIT_NONE,
    HIT_PLAYER,
    HIT_WORLD,
    HITBOX_NONE,
    RayHit,
    hitbox_arrays,
)
from shared.raygeometry import hitbox_entry, world_entry

__all__ = ["REACH", "first_hit", "warm_up"]

_BOTTOM, _TOP, _RADIUS = hitbox_arrays()
#: Beyond this distance from the bounding sphere's centre no hitbox is touched (the
#: sphere padded by a millimetre, as the server kernel pads it).
REACH = BOUNDING_SPHERE_RADIUS + 1e-3
_CENTRE_HEIGHT = BOUNDING_SPHERE_CENTRE[2]


def first_hit(
    origin: np.ndarray,
    direction: np.ndarray,
    max_range: float,
    feet: np.ndarray,
    present: np.ndarray,
    box_min: np.ndarray,
    box_max: np.ndarray,
) -> RayHit:
    """``ray_hit_player(origin, direction, max_range, feet, box_min, box_max, present)``:
    what the ray hits first among the present players (feet ``(P, 3)``, ``present``
    ``(P,)`` bool) and the map's boxes and floor."""
    kind, victim, hitbox, distance = _first_hit(
        float(origin[0]), float(origin[1]), float(origin[2]),
        float(direction[0]), float(direction[1]), float(direction[2]),
        float(max_range),
        np.ascontiguousarray(feet, dtype=np.float64).reshape(-1, 3),
        np.ascontiguousarray(present, dtype=np.bool_),
        box_min, box_max, _BOTTOM, _TOP, _RADIUS, _CENTRE_HEIGHT, REACH,
    )  # fmt: skip
    return RayHit(kind, victim, hitbox, distance)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _first_hit(
    ox, oy, oz, dx, dy, dz, max_t, feet, present, box_min, box_max,
    bottom, top, radius, centre_height, reach,
):  # fmt: skip
    dxy = dx * dx + dy * dy
    dd = dx * dx + dy * dy + dz * dz
    world = world_entry(ox, oy, oz, dx, dy, dz, max_t, box_min, box_max)
    best, victim, hitbox = math.inf, -1, HITBOX_NONE
    for p in range(feet.shape[0]):
        if not present[p]:
            continue
        px, py, pz = feet[p, 0], feet[p, 1], feet[p, 2]
        # The point of the segment nearest the bounding sphere's centre: farther than the
        # padded radius, and no hitbox of this player is touched.
        rx, ry, rz = px - ox, py - oy, pz + centre_height - oz
        along = 0.0
        if dd > 0.0:
            along = min(max((rx * dx + ry * dy + rz * dz) / dd, 0.0), max_t)
        gx, gy, gz = rx - along * dx, ry - along * dy, rz - along * dz
        if gx * gx + gy * gy + gz * gz > reach * reach:
            continue
        for k in range(bottom.shape[0]):
            entry = hitbox_entry(
                ox, oy, oz, dx, dy, dz, dd, dxy, max_t, px, py, pz, bottom, top, radius, k
            )
            if entry < best:  # (strict: a tie stays with the lower slot, the lower id)
                best, victim, hitbox = entry, p, k + 1
    if best < world:  # (the world wins a tie: cover that touches a player covers him)
        return HIT_PLAYER, victim, hitbox, best
    if world <= max_t:
        return HIT_WORLD, -1, HITBOX_NONE, world
    return HIT_NONE, -1, HITBOX_NONE, max_t


def warm_up() -> None:
    """Compile (or load from the cache) the kernel before any bot fires."""
    feet = np.zeros((1, 3))
    boxes = np.zeros((1, 3))
    first_hit(
        np.array([0.0, -5.0, 1.0]), np.array([0.0, 1.0, 0.0]), 10.0,
        feet, np.ones(1, dtype=np.bool_), boxes - 9.0, boxes - 8.0,
    )  # fmt: skip
