"""The readable NumPy reference of the fog-of-war sight test: the specification.

:func:`server.sim.fog.kernel.fog_sight` must give exactly what :func:`fog_sight` gives on
every input (the property test checks it): the same slab arithmetic
(:func:`shared.sightlines.segment_blocked`), the same corners, the same rule. The
reference favours clarity: one Python iteration per pair, NumPy over segments and boxes.

The rule, for a viewer ``s`` and a player ``e`` (``shape``: :data:`SHAPE_FIELDS`):

* **seen**: a line from the viewer's eye (``eye_height`` above its feet) to one of the
  player's sight points (``heights`` above his feet, :data:`shared.sightlines.SIGHT_HEIGHTS`)
  passes every box (``box_min``/``box_max``). (Taken in this order: the first sight
  point's line; then, when it is blocked, whether a box hides the pair, below; then,
  only when none does, the other points' lines. A hidden pair has no clear line, so the
  order changes no answer, and spares a hidden pair its other lines.)
* **shown** (may be seen within the margin): seen, or no single box hides every line
  between the two regions the pair may occupy meanwhile (:func:`movement_region`): the
  viewer's eye wherever it may be within ``eye_reach`` (at ``eye_height``), the player's
  sight points wherever he may be within ``body_reach`` (``body_low``/``body_high``: the
  lowest and highest sight point), both risen by up to ``rise`` (a jump's height) and
  kept on their side of a box they cannot get round in time. A box hides the pair when
  its inner box (``inner_min``/``inner_max``: the box shrunk by a margin against
  rounding) blocks the line from the viewer's eye to the player's first sight point and
  each of the 64 lines between a corner of one region and a corner of the other; or,
  when the inner box spans the heights of both regions (a wall), each of the 16 lines
  between their lowest corners.

Why one box and corners suffice: for a convex box ``X`` and a fixed end ``a``, the ends
``b`` whose line from ``a`` meets ``X`` form a convex set, so if the lines from ``a`` to
every corner of a region meet ``X``, so do the lines to every point of it; the same holds
with the ends swapped. So a box that blocks the 64 corner lines blocks every line between
the regions, and the rule never hides a player someone could see from there. A box that
spans both regions' heights holds every line between them in height, so only their course
over the ground matters, and the same argument in the plane needs the 4 corners of each
region's floor. It is conservative: cover made of several boxes together hides nothing
here.
"""

from __future__ import annotations

import numpy as np

__all__ = ["SHAPE_FIELDS", "fog_sight", "movement_region", "region_corners", "segments_blocked"]

#: The layout of the ``shape`` argument: heights above the feet (the eye, the lowest and
#: the highest sight point), how far a player's feet may rise within the margin, and the
#: half width of the square a player's body occupies against the boxes (movement's
#: ``PLAYER_RADIUS``).
SHAPE_FIELDS = ("eye_height", "body_low", "body_high", "rise", "player_radius")


def segments_blocked(
    starts: np.ndarray, ends: np.ndarray, box_min: np.ndarray, box_max: np.ndarray
) -> np.ndarray:
    """``(K, M)`` bool: whether segment ``k`` (``starts``/``ends`` ``(K, 3)``) enters box
    ``m`` before its end, by the slab method over the segment's parameter in [0, 1] (a
    box the end only touches does not block; a segment of length zero is never blocked).
    :func:`shared.sightlines.segment_blocked` over one box at a time, all at once."""
    span = (ends - starts)[:, None, :]
    start = starts[:, None, :]
    flat = span == 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        t1 = (box_min[None, :, :] - start) / span
        t2 = (box_max[None, :, :] - start) / span
    # A flat axis (parallel to its slab) constrains nothing when the segment lies inside
    # the slab, and rules the box out when it lies outside.
    entry = np.where(flat, -np.inf, np.minimum(t1, t2)).max(axis=2)
    exit_ = np.where(flat, np.inf, np.maximum(t1, t2)).min(axis=2)
    entry, exit_ = np.maximum(entry, 0.0), np.minimum(exit_, 1.0)
    inside = (start >= box_min[None, :, :]) & (start <= box_max[None, :, :])
    missed = (flat & ~inside).any(axis=2)
    point = flat.all(axis=2)  # (a zero-length segment: every axis flat)
    return (entry <= exit_) & (entry < 1.0) & ~missed & ~point


def movement_region(
    feet: np.ndarray,
    reach: float,
    low: float,
    high: float,
    rise: float,
    radius: float,
    box_min: np.ndarray,
    box_max: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Where a point ``low``..``high`` above the feet of a player standing at ``feet`` may be
    once he has moved at most ``reach`` over the ground and risen at most ``rise``: the box
    ``feet ± reach`` across, from ``low`` above the floor (or his feet, when below it) up
    to ``high`` above his feet risen by ``rise`` -- cut at the face of each box he stands
    before and cannot get round, over or under in time. A box that reaches the floor and
    stands higher than he can rise keeps his axis out of the box widened by ``radius``
    (movement resolves a player as a square of that half width); to cross the line of its
    face he must first get past its side, a distance along the face's axis greater than
    ``reach`` when he stands more than ``reach`` inside the widened box's side. ``(lo,
    hi)``, ``(3,)`` each."""
    fx, fy, fz = (float(v) for v in feet)
    lo = [fx - reach, fy - reach, min(fz, 0.0) + low]
    hi = [fx + reach, fy + reach, fz + rise + high]
    for b in range(len(box_min)):
        if not (box_min[b, 2] <= min(fz, 0.0) and box_max[b, 2] > fz + rise):
            continue  # he may pass over it (or under)
        for axis, side in ((0, 1), (1, 0)):  # the face's axis, and the axis along it
            along = (fx, fy)[side]
            start, end = float(box_min[b, side]) - radius, float(box_max[b, side]) + radius
            if not (start < along < end and min(along - start, end - along) > reach):
                continue
            at = (fx, fy)[axis]
            near_face, far_face = float(box_min[b, axis]) - radius, float(box_max[b, axis]) + radius
            if at <= near_face:
                hi[axis] = min(hi[axis], near_face)
            elif at >= far_face:
                lo[axis] = max(lo[axis], far_face)
    return np.array(lo), np.array(hi)


def region_corners(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The 8 corners of the box ``lo``..``hi`` (``(3,)`` each) as ``(8, 3)``: x slowest, z
    fastest (so the even ones are the floor's)."""
    return np.array(
        [[(lo, hi)[i][0], (lo, hi)[j][1], (lo, hi)[k][2]]
         for i in (0, 1) for j in (0, 1) for k in (0, 1)]
    )  # fmt: skip


def fog_sight(
    viewers: np.ndarray,
    feet: np.ndarray,
    eye_reach: np.ndarray,
    body_reach: float,
    candidates: np.ndarray,
    box_min: np.ndarray,
    box_max: np.ndarray,
    inner_min: np.ndarray,
    inner_max: np.ndarray,
    heights: np.ndarray,
    shape: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """``(seen, shown)``, ``(C, N)`` bool each, for the pairs ``candidates`` marks (False
    elsewhere, and for a viewer and itself): viewer ``c`` is slot ``viewers[c]`` and
    ``eye_reach[c]`` is how far its eye may move within its margin; ``feet`` ``(N, 3)``
    every player's; ``body_reach`` how far a player may move within a snapshot interval
    and the allowance. See the module's docstring for the rule."""
    eye_height, body_low, body_high, rise, radius = (float(v) for v in shape)
    seen = np.zeros(candidates.shape, dtype=np.bool_)
    shown = np.zeros(candidates.shape, dtype=np.bool_)
    for c, s in enumerate(viewers.tolist()):
        fx, fy, fz = (float(v) for v in feet[s])
        eye = np.array([fx + 0.0, fy + 0.0, fz + eye_height])
        eye_lo, eye_hi = movement_region(
            feet[s], float(eye_reach[c]), eye_height, eye_height, rise, radius, box_min, box_max
        )
        eye_corners = region_corners(eye_lo, eye_hi)
        for e in np.flatnonzero(candidates[c]).tolist():
            if e == s:
                continue
            ex, ey, ez = (float(v) for v in feet[e])
            points = np.array([[ex + 0.0, ey + 0.0, ez + h] for h in heights.tolist()])
            lines = segments_blocked(np.repeat(eye[None], len(points), 0), points, box_min, box_max)
            clear = np.asarray(~lines.any(axis=1))
            if clear[0]:
                seen[c, e] = shown[c, e] = True
                continue
            body_lo, body_hi = movement_region(
                feet[e], body_reach, body_low, body_high, rise, radius, box_min, box_max
            )
            body_corners = region_corners(body_lo, body_hi)
            first = (eye[None], points[:1])
            every = (np.repeat(eye_corners, 8, axis=0), np.tile(body_corners, (8, 1)))
            floor = (np.repeat(eye_corners[0::2], 4, axis=0), np.tile(body_corners[0::2], (4, 1)))
            bottom = min(eye_lo[2], body_lo[2])
            top = max(eye_hi[2], body_hi[2])
            hidden = False
            for b in range(len(inner_min)):
                box = inner_min[b : b + 1], inner_max[b : b + 1]
                wall = inner_min[b, 2] <= bottom and inner_max[b, 2] >= top
                starts, ends = floor if wall else every
                starts = np.concatenate([first[0], starts])
                ends = np.concatenate([first[1], ends])
                hidden = hidden or bool(segments_blocked(starts, ends, *box).all())
            shown[c, e] = not hidden
            seen[c, e] = not hidden and bool(clear.any())
    return seen, shown
