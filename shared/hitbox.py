"""The player hitbox model and exact ray tests, shared by the server and the bots.

The server's hit kernels (``server/sim/hitreg``) compute authoritative verdicts with exactly these
shapes and this arithmetic; a bot calls :func:`ray_hit_player` on what it rendered to record
its own "what I saw" verdict. Keeping one definition is what makes the two comparable.

Geometry: metres, z up, the floor is the half-space ``z <= 0``. A player's position is the
centre of its feet. Hitboxes are vertical and rotationally symmetric, so yaw never matters:
every hitbox is a vertical capsule given by the heights of its axis segment above the feet
and a radius; a sphere is a capsule whose segment has zero length.

Arithmetic contract (why the code below looks the way it does): the NumPy reference in
``server/sim/hitreg/reference.py`` and the numba kernels must agree bit for bit on random scenes,
so every quantity is computed with the same operations in the same order (sums of products
written out left to right, never ``np.dot``, which may reorder or fuse), divisions are only
taken where the divisor is non-zero, and ties are broken by rules rather than by luck:

* a ray "enters" a solid at ``max(t_in, 0)``; an origin inside a solid hits it at 0;
* the nearest entry along the ray wins; between the world (floor, boxes) and a player at the
  same distance, the world wins (cover that touches a player still covers him);
* between players at the same distance the lower slot wins, then the lower hitbox id.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

__all__ = [
    "BOUNDING_SPHERE_CENTRE",
    "BOUNDING_SPHERE_RADIUS",
    "HITBOXES",
    "HITBOX_DAMAGE_MULTIPLIER",
    "HITBOX_HEAD",
    "HITBOX_LEGS",
    "HITBOX_MIN_RADIUS",
    "HITBOX_NAMES",
    "HITBOX_NONE",
    "HITBOX_RADIAL_EXTENT",
    "HITBOX_TORSO",
    "HIT_NONE",
    "HIT_PLAYER",
    "HIT_WORLD",
    "Hitbox",
    "RayHit",
    "hitbox_arrays",
    "ray_hit_player",
    "ray_hitbox_entries",
    "ray_world_entry",
]

HITBOX_NONE = 0
HITBOX_HEAD = 1
HITBOX_TORSO = 2
HITBOX_LEGS = 3
HITBOX_NAMES = ("none", "head", "torso", "legs")

#: Kinds of a shot's outcome, as the kernels write them into ``out_kind``.
HIT_NONE = 0
HIT_PLAYER = 1
HIT_WORLD = 2


@dataclass(frozen=True, slots=True)
class Hitbox:
    """A vertical capsule: the segment ``bottom``-``top`` (offsets from the feet) swept by
    ``radius``; a sphere when ``bottom == top``."""

    id: int
    name: str
    bottom: tuple[float, float, float]
    top: tuple[float, float, float]
    radius: float
    damage_multiplier: float

    def __post_init__(self) -> None:
        if self.bottom[:2] != (0.0, 0.0) or self.top[:2] != (0.0, 0.0):
            raise ValueError(f"hitbox {self.name}: the axis must be vertical through the feet")
        if not (self.bottom[2] <= self.top[2] and self.radius > 0.0):
            raise ValueError(f"hitbox {self.name}: need bottom <= top and a positive radius")


#: Ordered by id; ids are 1-based so that 0 can mean "no hitbox".
HITBOXES: tuple[Hitbox, ...] = (
    Hitbox(HITBOX_HEAD, "head", (0.0, 0.0, 1.62), (0.0, 0.0, 1.62), 0.14, 2.0),
    Hitbox(HITBOX_TORSO, "torso", (0.0, 0.0, 1.0), (0.0, 0.0, 1.38), 0.22, 1.0),
    Hitbox(HITBOX_LEGS, "legs", (0.0, 0.0, 0.12), (0.0, 0.0, 0.85), 0.16, 0.75),
)
assert [h.id for h in HITBOXES] == [HITBOX_HEAD, HITBOX_TORSO, HITBOX_LEGS]

#: Damage multiplier indexed by hitbox id (index 0: no hitbox, no damage).
HITBOX_DAMAGE_MULTIPLIER: tuple[float, ...] = (0.0, *(h.damage_multiplier for h in HITBOXES))

#: Smallest radius: no chord of a projectile's flight is longer than this (Weapon.flight_step).
HITBOX_MIN_RADIUS = min(h.radius for h in HITBOXES)
#: Largest horizontal distance of any hitbox point from the feet axis (broad-phase padding).
HITBOX_RADIAL_EXTENT = max(h.radius for h in HITBOXES)


def _bounding_sphere() -> tuple[tuple[float, float, float], float]:
    # The shapes are stacked on one vertical axis, so the sphere centred half-way between the
    # lowest and highest point, with half that span as radius, encloses them all (each capsule
    # point is within |z_end - c| + r of the centre, which is at most the half-span).
    low = min(h.bottom[2] - h.radius for h in HITBOXES)
    high = max(h.top[2] + h.radius for h in HITBOXES)
    return (0.0, 0.0, (low + high) / 2.0), (high - low) / 2.0


#: A sphere (offset from the feet, radius) enclosing all three hitboxes: a cheap early-out.
BOUNDING_SPHERE_CENTRE, BOUNDING_SPHERE_RADIUS = _bounding_sphere()


def hitbox_arrays() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The hitboxes as struct-of-arrays for kernels: axis bottom height, top height, radius.

    Kernels take these as arguments (rather than baking constants in) so that a cached
    compiled kernel can never disagree with this module.
    """
    bottom = np.array([h.bottom[2] for h in HITBOXES], dtype=np.float64)
    top = np.array([h.top[2] for h in HITBOXES], dtype=np.float64)
    radius = np.array([h.radius for h in HITBOXES], dtype=np.float64)
    return bottom, top, radius


class RayHit(NamedTuple):
    """What a ray hit first: ``kind`` is HIT_NONE, HIT_PLAYER or HIT_WORLD; ``victim`` is a
    player index or -1; ``hitbox`` a hitbox id or 0; ``distance`` the ray parameter of the hit
    (metres for a unit direction), or ``max_range`` on a miss."""

    kind: int
    victim: int
    hitbox: int
    distance: float


def _sphere_entries(
    origin: np.ndarray,
    direction: np.ndarray,
    dd: float,
    max_t: float,
    cx: np.ndarray,
    cy: np.ndarray,
    cz: np.ndarray,
    radius: float,
) -> np.ndarray:
    """Entry parameter of the ray into each ball, or inf (array over players)."""
    ox, oy, oz = float(origin[0]), float(origin[1]), float(origin[2])
    dx, dy, dz = float(direction[0]), float(direction[1]), float(direction[2])
    ex = ox - cx
    ey = oy - cy
    ez = oz - cz
    c = ex * ex + ey * ey + ez * ez - radius * radius
    if dd == 0.0:  # a degenerate segment: only "already inside" counts
        return np.where(c <= 0.0, 0.0, np.inf)
    b = dx * ex + dy * ey + dz * ez
    h = b * b - dd * c
    s = np.sqrt(np.maximum(h, 0.0))
    lo = np.maximum((-b - s) / dd, 0.0)
    hi = np.minimum((-b + s) / dd, max_t)
    return np.where((h >= 0.0) & (lo <= hi), lo, np.inf)


def _cylinder_entries(
    origin: np.ndarray,
    direction: np.ndarray,
    dxy: float,
    max_t: float,
    px: np.ndarray,
    py: np.ndarray,
    z_bottom: np.ndarray,
    z_top: np.ndarray,
    radius: float,
) -> np.ndarray:
    """Entry into each solid vertical cylinder between ``z_bottom`` and ``z_top``, or inf."""
    ox, oy, oz = float(origin[0]), float(origin[1]), float(origin[2])
    dx, dy, dz = float(direction[0]), float(direction[1]), float(direction[2])
    ex = ox - px
    ey = oy - py
    c = ex * ex + ey * ey - radius * radius
    lo = np.zeros_like(px)
    hi = np.full_like(px, max_t)
    ok = np.ones(px.shape, dtype=bool)
    if dxy == 0.0:  # parallel to the axis: inside the circle for all t, or never
        ok &= c <= 0.0
    else:
        b = dx * ex + dy * ey
        h = b * b - dxy * c
        s = np.sqrt(np.maximum(h, 0.0))
        ok &= h >= 0.0
        lo = np.maximum(lo, (-b - s) / dxy)
        hi = np.minimum(hi, (-b + s) / dxy)
    if dz == 0.0:
        ok &= (oz >= z_bottom) & (oz <= z_top)
    else:
        t1 = (z_bottom - oz) / dz
        t2 = (z_top - oz) / dz
        lo = np.maximum(lo, np.minimum(t1, t2))
        hi = np.minimum(hi, np.maximum(t1, t2))
    return np.where(ok & (lo <= hi), lo, np.inf)


def ray_hitbox_entries(
    origin: np.ndarray, direction: np.ndarray, max_t: float, feet: np.ndarray
) -> np.ndarray:
    """Entry parameter of the ray into every hitbox of every player, shape ``(P, 3)``.

    Column ``k`` is hitbox id ``k + 1``; ``inf`` where the ray misses it within ``[0, max_t]``.
    The ray is ``origin + t * direction``; ``direction`` need not be unit length (projectile
    segments use the segment vector with ``max_t = 1``). A capsule is the union of a solid
    cylinder and two balls, so its entry is the smallest of their entries.
    """
    origin = np.asarray(origin, dtype=np.float64)
    direction = np.asarray(direction, dtype=np.float64)
    feet = np.asarray(feet, dtype=np.float64).reshape(-1, 3)
    dx, dy, dz = float(direction[0]), float(direction[1]), float(direction[2])
    dxy = dx * dx + dy * dy
    dd = dx * dx + dy * dy + dz * dz
    px, py, pz = feet[:, 0], feet[:, 1], feet[:, 2]
    bottom, top, radius = hitbox_arrays()
    entries = np.full((feet.shape[0], len(HITBOXES)), np.inf)
    # A direction component like 1e-309 makes some quotients overflow to ±inf, which the
    # slab and quadratic tests take as meant (never crossed, or crossed at once).
    with np.errstate(over="ignore"):
        for k in range(len(HITBOXES)):
            r = float(radius[k])
            z_bottom = pz + bottom[k]
            best = _sphere_entries(origin, direction, dd, max_t, px, py, z_bottom, r)
            if top[k] > bottom[k]:
                z_top = pz + top[k]
                top_ball = _sphere_entries(origin, direction, dd, max_t, px, py, z_top, r)
                cylinder = _cylinder_entries(
                    origin, direction, dxy, max_t, px, py, z_bottom, z_top, r
                )
                best = np.minimum(best, np.minimum(top_ball, cylinder))
            entries[:, k] = best
    return entries


def ray_world_entry(
    origin: np.ndarray,
    direction: np.ndarray,
    max_t: float,
    box_min: np.ndarray,
    box_max: np.ndarray,
) -> float:
    """Entry parameter of the ray into the floor (``z <= 0``) or any box, or inf (slab method)."""
    ox, oy, oz = float(origin[0]), float(origin[1]), float(origin[2])
    o = (ox, oy, oz)
    d = (float(direction[0]), float(direction[1]), float(direction[2]))
    best = np.inf
    # Floor: the half-space z <= 0.
    if d[2] < 0.0:
        t = max(-oz / d[2], 0.0)
        if t <= max_t:
            best = t
    elif oz <= 0.0:
        best = 0.0
    box_min = np.asarray(box_min, dtype=np.float64).reshape(-1, 3)
    box_max = np.asarray(box_max, dtype=np.float64).reshape(-1, 3)
    if box_min.shape[0] == 0:
        return best
    lo = np.zeros(box_min.shape[0])
    hi = np.full(box_min.shape[0], max_t)
    ok = np.ones(box_min.shape[0], dtype=bool)
    for axis in range(3):
        if d[axis] == 0.0:
            ok &= (o[axis] >= box_min[:, axis]) & (o[axis] <= box_max[:, axis])
        else:
            # A component like 1e-309 overflows to ±inf, which the slab method takes as
            # meant: that slab is crossed at infinity, or was entered at once.
            with np.errstate(over="ignore"):
                t1 = (box_min[:, axis] - o[axis]) / d[axis]
                t2 = (box_max[:, axis] - o[axis]) / d[axis]
            lo = np.maximum(lo, np.minimum(t1, t2))
            hi = np.minimum(hi, np.maximum(t1, t2))
    entries = np.where(ok & (lo <= hi), lo, np.inf)
    return min(best, float(entries.min()))


def ray_hit_player(
    origin: np.ndarray,
    direction: np.ndarray,
    max_range: float,
    player_feet_positions: np.ndarray,
    box_min: np.ndarray,
    box_max: np.ndarray,
    present: np.ndarray | None = None,
) -> RayHit:
    """What one shot hits first among players (feet positions ``(P, 3)``) and the map.

    ``present`` (``(P,)`` bool) masks out slots that cannot be hit: absent or dead players
    and the shooter himself. A bot calls this once per shot on the positions it rendered; the
    server's reference calls it on positions rewound to the shot's view time.
    """
    feet = np.asarray(player_feet_positions, dtype=np.float64).reshape(-1, 3)
    max_range = float(max_range)
    world = ray_world_entry(origin, direction, max_range, box_min, box_max)
    entries = ray_hitbox_entries(origin, direction, max_range, feet)
    if present is not None:
        entries[~np.asarray(present, dtype=bool)] = np.inf
    if entries.size:
        # argmin returns the first minimum in row-major order: lowest slot, then lowest id.
        flat = int(np.argmin(entries))
        nearest = float(entries.flat[flat])
        if nearest < world:
            victim, column = divmod(flat, entries.shape[1])
            return RayHit(HIT_PLAYER, victim, column + 1, nearest)
    if world <= max_range:
        return RayHit(HIT_WORLD, -1, HITBOX_NONE, world)
    return RayHit(HIT_NONE, -1, HITBOX_NONE, max_range)
