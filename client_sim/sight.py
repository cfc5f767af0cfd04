"""Line-of-sight and shot tests on what a bot renders, for many rays at once.

The bots' own verdicts must come from the shared hitbox model (:mod:`shared.hitbox`), so
that client and server are judged by one definition. What this module adds is speed
without changing an answer: players a ray cannot reach are dropped before the exact test
(the same padded bounding sphere as the server kernel's early-out). Sight lines against
the map's boxes are :func:`shared.sightlines.sight_blocked`, a kernel.
"""

from __future__ import annotations

import numpy as np

from shared.arena_map import ArenaMap
from shared.hitbox import (
    BOUNDING_SPHERE_CENTRE,
    BOUNDING_SPHERE_RADIUS,
    HIT_PLAYER,
    RayHit,
    ray_hit_player,
)

__all__ = ["first_hit", "segments_within_reach"]

#: The bounding sphere, padded as the server kernel pads it: beyond it no hitbox is touched.
REACH = BOUNDING_SPHERE_RADIUS + 1e-3
_CENTRE = np.array(BOUNDING_SPHERE_CENTRE)


def segments_within_reach(
    starts: np.ndarray, directions: np.ndarray, lengths: np.ndarray, feet: np.ndarray
) -> np.ndarray:
    """Which players each segment may touch: ``(S, 3)`` starts, unit directions and
    ``(S,)`` lengths against feet ``(S, P, 3)`` (or ``(P, 3)``, the same for every
    segment) -> ``(S, P)`` bool. Conservative: a False is never hit."""
    relative = feet + _CENTRE - starts[:, None, :]
    along = np.einsum("spk,sk->sp", relative, directions)
    along = np.clip(along, 0.0, lengths[:, None])
    gap = relative - along[:, :, None] * directions[:, None, :]
    return np.einsum("spk,spk->sp", gap, gap) <= REACH * REACH


def first_hit(
    origin: np.ndarray,
    direction: np.ndarray,
    length: float,
    feet: np.ndarray,
    present: np.ndarray,
    arena: ArenaMap,
) -> RayHit:
    """:func:`shared.hitbox.ray_hit_player` (unit ``direction``), with the exact hitbox
    test run only on the present players within reach: the same answer, victim included
    (candidates keep their order, so ties still go to the lower slot)."""
    near = np.flatnonzero(
        present & segments_within_reach(origin[None], direction[None], np.array([length]), feet)[0]
    )
    hit = ray_hit_player(origin, direction, length, feet[near], arena.box_min, arena.box_max)
    if hit.kind == HIT_PLAYER:
        return hit._replace(victim=int(near[hit.victim]))
    return hit
