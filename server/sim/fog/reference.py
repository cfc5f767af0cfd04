"""The readable NumPy reference of the fog-of-war sight test: the specification.

:func:`server.sim.fog.kernel.fog_sight` must give exactly what :func:`fog_sight` gives on
every input (the property test checks it): the same slab arithmetic
(:func:`shared.sightlines.segment_blocked`), the same corners, the same rule. The
reference favours clarity: one Python iteration per pair, NumPy over segments and boxes.

The rule, for a viewer ``s`` and a player ``e`` (``shape``: :data:`SHAPE_FIELDS`):

* **seen**: a line from the viewer's eye (``eye_height`` above its feet) to one of the
  player's sight points (``heights`` above his feet, :data:`shared.sightlines.SIGHT_HEIGHTS`)
  passes every box (``box_min``/``box_max``).
* **shown** (may be seen within the margin): seen, or no single box hides every line
  between the two regions the pair may occupy meanwhile. The viewer's eye region is the
  box ``feet ± eye_reach`` across, from ``eye_height`` above the floor (or above its feet
  when they are below it) up to ``eye_height`` above its feet risen by ``rise`` (a jump's
  height); the player's body region is his hitbox's bounding box (``body_radius`` around
  his axis, ``body_low``..``body_high`` above his feet) widened by ``body_reach``, from
  the floor up to ``rise`` above his feet likewise. A box hides the pair when its inner
  box (``inner_min``/``inner_max``: the box shrunk by a margin against rounding) blocks
  the line from the viewer's eye to the player's first sight point and each of the 64
  lines between a corner of one region and a corner of the other.

Why one box and corners suffice: for a convex box ``X`` and a fixed end ``a``, the ends
``b`` whose line from ``a`` meets ``X`` form a convex set, so if the lines from ``a`` to
every corner of a region meet ``X``, so do the lines to every point of it; the same holds
with the ends swapped. So a box that blocks the 64 corner lines blocks every line between
the regions, and the rule never hides a player someone could see from there. It is
conservative: cover made of several boxes together hides nothing here.
"""

from __future__ import annotations

import numpy as np

__all__ = ["SHAPE_FIELDS", "fog_sight", "region_corners", "segments_blocked"]

#: The layout of the ``shape`` argument: heights above the feet, the hitbox's radius
#: around its axis, and how far a player's feet may rise within the margin.
SHAPE_FIELDS = ("eye_height", "body_low", "body_high", "body_radius", "rise")


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


def region_corners(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The 8 corners of the box ``lo``..``hi`` (``(3,)`` each) as ``(8, 3)``."""
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
    eye_height, body_low, body_high, body_radius, rise = (float(v) for v in shape)
    seen = np.zeros(candidates.shape, dtype=np.bool_)
    shown = np.zeros(candidates.shape, dtype=np.bool_)
    for c, s in enumerate(viewers.tolist()):
        fx, fy, fz = (float(v) for v in feet[s])
        eye = np.array([fx + 0.0, fy + 0.0, fz + eye_height])
        r = float(eye_reach[c])
        eye_lo = np.array([fx - r, fy - r, eye_height + min(fz, 0.0)])
        eye_hi = np.array([fx + r, fy + r, fz + rise + eye_height])
        eye_corners = region_corners(eye_lo, eye_hi)
        for e in np.flatnonzero(candidates[c]).tolist():
            if e == s:
                continue
            ex, ey, ez = (float(v) for v in feet[e])
            points = np.array([[ex + 0.0, ey + 0.0, ez + h] for h in heights.tolist()])
            lines = segments_blocked(np.repeat(eye[None], len(points), 0), points, box_min, box_max)
            if not lines.any(axis=1).all():
                seen[c, e] = shown[c, e] = True
                continue
            half = body_radius + body_reach
            body_lo = np.array([ex - half, ey - half, min(ez, 0.0) + body_low])
            body_hi = np.array([ex + half, ey + half, ez + rise + body_high])
            body_corners = region_corners(body_lo, body_hi)
            starts = np.concatenate([eye[None], np.repeat(eye_corners, 8, axis=0)])
            ends = np.concatenate([points[:1], np.tile(body_corners, (8, 1))])
            hides = segments_blocked(starts, ends, inner_min, inner_max).all(axis=0)
            shown[c, e] = not hides.any()
    return seen, shown
