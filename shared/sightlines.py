"""Sight lines against the map's boxes, many at once: a kernel, because every bot looks
around several times a second and weighs cover when it spots an enemy (at 300 bots, some
150 sight lines a tick against every box).

The slab method over each segment's own parameter ``t`` in [0, 1], one segment and box at
a time with an early exit, where the NumPy version it replaced (kept as the reference in
``tests/client_sim/test_sight.py``, which checks the two agree bit for bit) built
``(segments, boxes, 3)`` arrays a dozen times over.

Fog of war uses them too: a player is *in sight* of an eye when a line from the eye to one
of the points of his hitbox (:data:`SIGHT_HEIGHTS` above his feet) passes every box
(:func:`sees_player`). The node withholds the enemies a client cannot come to see in time
(``server/sim/fog``) and the bots check, by the same rule, that none was withheld from them
while in sight.

A glance uses them: of the few nearest players a looker draws, the first whose chest its
eye sees (:func:`first_in_sight` over arrays, :func:`spot_drawn` straight from each
looker's own snapshots), for every looker of a tick in one call. Here rather than in the
bots' code, so that the node's warm-up, which fills the cache for the bots too, compiles
them.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from shared.hitbox import HITBOXES
from shared.protocol.between import alive_in_both, pairs_in_both, place_between
from shared.protocol.snapshots import ENTITY_DTYPE

__all__ = [
    "SIGHT_HEIGHTS",
    "first_in_sight",
    "sees_player",
    "segment_blocked",
    "sight_blocked",
    "spot_drawn",
    "warm_up",
]

#: The points of a player's hitbox that sight lines go to, as heights above his feet on
#: the hitboxes' axis: every capsule's ends, highest first (the head shows over low cover
#: most often, so a clear line is usually found first).
SIGHT_HEIGHTS = np.array(
    sorted({end for box in HITBOXES for end in (box.top[2], box.bottom[2])}, reverse=True)
)


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
    """:func:`sight_blocked` for one segment (``(3,)`` points), inside a kernel.

    A box apart from the segment's bounds is passed over before any division: the slab
    test could not say it blocks (a segment below a box's face on some axis reaches it
    only beyond its end or before its start, and rounding keeps those parameters outside
    [0, 1]), so the answer is the same, for a fraction of the cost when most boxes are
    elsewhere."""
    if end[0] == start[0] and end[1] == start[1] and end[2] == start[2]:
        return False  # a point sees itself
    lo0, hi0 = min(start[0], end[0]), max(start[0], end[0])
    lo1, hi1 = min(start[1], end[1]), max(start[1], end[1])
    lo2, hi2 = min(start[2], end[2]), max(start[2], end[2])
    for b in range(len(box_min)):
        if (
            hi0 < box_min[b, 0] or lo0 > box_max[b, 0]
            or hi1 < box_min[b, 1] or lo1 > box_max[b, 1]
            or hi2 < box_min[b, 2] or lo2 > box_max[b, 2]
        ):  # fmt: skip
            continue
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


@numba.njit(cache=True, nogil=True, inline="always")
def sees_player(
    eye: np.ndarray,
    feet: np.ndarray,
    heights: np.ndarray,
    box_min: np.ndarray,
    box_max: np.ndarray,
    point: np.ndarray,
) -> bool:
    """Whether ``eye`` sees the player standing at ``feet``: a line from it to one of his
    points (``heights`` above his feet, :data:`SIGHT_HEIGHTS`) passes every box.
    ``point``: ``(3,)`` room for the point."""
    point[0], point[1] = feet[0] + 0.0, feet[1] + 0.0
    for k in range(len(heights)):
        point[2] = feet[2] + heights[k]
        if not segment_blocked(eye, point, box_min, box_max):
            return True
    return False


@numba.njit(cache=True, inline="always")
def _keep_nearer(d: float, k: int, n: int, near_d: np.ndarray, near_k: np.ndarray) -> int:
    """Candidate ``k`` at distance ``d`` among the nearest so far (``n`` of them in
    ``near_d``/``near_k``, as many as they hold at most, nearest first; an equal distance
    stays behind the earlier candidate). Returns how many are kept now."""
    most = len(near_d)
    if n < most:
        j = n
        n += 1
    elif d < near_d[most - 1]:
        j = most - 1  # (the farthest of the nearest makes room)
    else:
        return n
    while j > 0 and near_d[j - 1] > d:
        near_d[j], near_k[j] = near_d[j - 1], near_k[j - 1]
        j -= 1
    near_d[j], near_k[j] = d, k
    return n


@numba.njit(cache=True, inline="always")
def _first_clear(
    own: np.ndarray,
    spots: np.ndarray,
    n: int,
    heights: np.ndarray,
    box_min: np.ndarray,
    box_max: np.ndarray,
    ends: np.ndarray,
) -> int:
    """The first of the ``n`` feet ``spots`` whose chest a player standing at ``own``
    sees from its eye (``heights``: eye and chest above the feet) past every box; -1
    none. ``ends``: ``(2, 3)`` room for the eye and the chest."""
    eye, chest = ends[0], ends[1]
    eye[0], eye[1], eye[2] = own[0] + 0.0, own[1] + 0.0, own[2] + heights[0]
    for j in range(n):
        chest[0], chest[1] = spots[j, 0] + 0.0, spots[j, 1] + 0.0
        chest[2] = spots[j, 2] + heights[1]
        if not segment_blocked(eye, chest, box_min, box_max):
            return j
    return -1


@numba.njit(cache=True)
def first_in_sight(
    own: np.ndarray,
    feet: np.ndarray,
    visible: np.ndarray,
    reach: float,
    glances: int,
    heights: np.ndarray,
    box_min: np.ndarray,
    box_max: np.ndarray,
    spotted: np.ndarray,
) -> None:
    """Per looker (feet ``own`` ``(B, 3)``), which of the players it draws (feet ``feet``
    ``(B, K, 3)``, ``visible`` ``(B, K)``) it spots, into ``spotted`` (-1 none): of the
    ``glances`` nearest visible ones within ``reach`` on the ground (nearest first, ties
    the lower index), the first whose chest it sees from its eye (``heights``: eye and
    chest above the feet) past every box."""
    count, players = visible.shape
    near_d = np.empty(glances)
    near_k = np.empty(glances, dtype=np.int64)
    spots = np.empty((glances, 3))
    ends = np.empty((2, 3))
    for b in range(count):
        n = 0
        for k in range(players):
            if visible[b, k]:
                d = math.hypot(feet[b, k, 0] - own[b, 0], feet[b, k, 1] - own[b, 1])
                if d <= reach:
                    n = _keep_nearer(d, k, n, near_d, near_k)
        for j in range(n):
            spots[j] = feet[b, near_k[j]]
        j = _first_clear(own[b], spots, n, heights, box_min, box_max, ends)
        spotted[b] = near_k[j] if j >= 0 else -1


@numba.njit(cache=True)
def spot_drawn(
    records: np.ndarray,
    spans: np.ndarray,
    weights: np.ndarray,
    selves: np.ndarray,
    friends: np.ndarray,
    own: np.ndarray,
    reach: float,
    glances: int,
    heights: np.ndarray,
    box_min: np.ndarray,
    box_max: np.ndarray,
    spotted: np.ndarray,
    where: np.ndarray,
) -> None:
    """:func:`first_in_sight` for lookers that each draw the players of their own
    snapshots (``records`` at ``spans``, moved ``weights`` of the way, as
    :func:`~shared.protocol.between.players_seen` draws them): the enemy each spots into
    ``spotted`` (its id; -1 none) and its feet into ``where``. An enemy is drawn alive,
    neither the looker itself (``selves``) nor a teammate (``friends[id]``)."""
    pairs = np.empty((len(records), 2), dtype=np.int64)
    near_d = np.empty(glances)
    near_k = np.empty(glances, dtype=np.int64)
    spots = np.empty((glances, 3))
    ends = np.empty((2, 3))
    feet = np.empty(3)
    for b in range(len(spans)):
        before = records[spans[b, 0] : spans[b, 1]]
        after = records[spans[b, 2] : spans[b, 3]]
        n = 0
        for p in range(pairs_in_both(before, after, pairs)):
            start, end = before[pairs[p, 0]], after[pairs[p, 1]]
            entity = start.id
            if not alive_in_both(start, end) or entity == selves[b]:
                continue
            if entity < len(friends) and friends[entity]:
                continue
            place_between(feet, start, end, weights[b])
            d = math.hypot(feet[0] - own[b, 0], feet[1] - own[b, 1])
            if d <= reach:
                n = _keep_nearer(d, p, n, near_d, near_k)
        for j in range(n):
            place_between(
                spots[j], before[pairs[near_k[j], 0]], after[pairs[near_k[j], 1]], weights[b]
            )
        j = _first_clear(own[b], spots, n, heights, box_min, box_max, ends)
        if j < 0:
            spotted[b] = -1
        else:
            spotted[b] = before[pairs[near_k[j], 0]].id
            where[b] = spots[j]


def warm_up() -> None:
    """Compile (or load from the cache) the kernels before any bot looks around."""
    point = np.zeros((1, 3))
    sight_blocked(point, point + 1.0, point, point + 0.5)
    heights, spotted = np.ones(2), np.empty(1, dtype=np.int64)
    visible = np.ones((1, 1), dtype=np.bool_)
    first_in_sight(point, point[None], visible, 1.0, 3, heights, point, point + 0.5, spotted)
    spot_drawn(
        np.zeros(1, dtype=ENTITY_DTYPE), np.array([[0, 1, 0, 1]]), np.zeros(1),
        np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.bool_), point, 1.0, 3, heights,
        point, point + 0.5, spotted, point.copy(),
    )  # fmt: skip
