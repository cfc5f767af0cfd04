"""Sight lines against the map's boxes, many at once: a kernel, because every bot looks
around several times a second and weighs cover when it spots an enemy (at 300 bots, some
150 sight lines a tick against every box).

The slab method over each segment's own parameter ``t`` in [0, 1], one segment and box at
a time with an early exit, where the NumPy version it replaced (kept as the reference in
``tests/client_sim/test_sight.py``, which checks the two agree bit for bit) built
``(segments, boxes, 3)`` arrays a dozen times over.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["segment_blocked", "sight_blocked", "warm_up"]


def sight_blocked(
    starts: np.ndarray, ends: np.ndarray, box_min: np.ndarray, box_max: np.ndarray
) -> np.ndarray:
    """Whether a box stands between each pair of points, ``(M, 3)`` each -> ``(M,)`` bool:
    blocked when some box is entered before the end point (a box the end point only
    touches does not block; nor does anything block a segment of length zero). The points
    are above the floor."""
    box_min = np.ascontiguousarray(box_min, dtype=np.float64).reshape(-1, 3)
    box_max = np.ascontiguousarray(box_max, dtype=np.float64).reshape(-1, 3)
    starts = np.ascontiguousarray(starts, dtype=np.float64).reshape(-1, 3)
    ends = np.ascontiguousarray(ends, dtype=np.float64).reshape(-1, 3)
    blocked = np.zeros(len(starts), dtype=np.bool_)
    _blocked(starts, ends, box_min, box_max, blocked)
    return blocked


@numba.njit(cache=True, nogil=True)
def _blocked(
    starts: np.ndarray,
    ends: np.ndarray,
    box_min: np.ndarray,
    box_max: np.ndarray,
    out: np.ndarray,
) -> None:
    for i in range(len(starts)):
        out[i] = segment_blocked(starts[i], ends[i], box_min, box_max)


@numba.njit(cache=True, nogil=True, inline="always")
def segment_blocked(
    start: np.ndarray, end: np.ndarray, box_min: np.ndarray, box_max: np.ndarray
) -> bool:
    """:func:`sight_blocked` for one segment (``(3,)`` points), inside a kernel."""
    if end[0] == start[0] and end[1] == start[1] and end[2] == start[2]:
        return False  # a point sees itself
    for b in range(len(box_min)):
        entry, exit_ = 0.0, 1.0
        for k in range(3):
            span = end[k] - start[k]
            if span == 0.0:  # parallel to the slab: inside it for every t, or never
                if start[k] >= box_min[b, k] and start[k] <= box_max[b, k]:
                    continue
                entry, exit_ = np.inf, -np.inf
                break
            t1 = (box_min[b, k] - start[k]) / span
            t2 = (box_max[b, k] - start[k]) / span
            entry = max(entry, min(t1, t2))
            exit_ = min(exit_, max(t1, t2))
        if entry <= exit_ and entry < 1.0:
            return True
    return False


def warm_up() -> None:
    """Compile (or load from the cache) the kernel before any bot looks around."""
    point = np.zeros((1, 3))
    sight_blocked(point, point + 1.0, point, point + 0.5)
