"""The fog-of-war kernels: the sight test of :mod:`server.sim.fog.reference`, compiled,
and the account of what was sent while hidden.

:func:`fog_sight` gives exactly what the reference gives (same slab arithmetic, same
corners, same rule); it is faster by leaving out the boxes away from both regions (no line
between them can reach those), by deciding most pairs with one clear line, and by testing
the 64 corner lines only against the boxes that block the eye's line to the player's first
sight point (a box that hides the pair must block that line too). It allocates nothing
(``scratch`` comes from the caller), so it runs without numba's runtime
(:mod:`shared.kernel_options`).
"""

from __future__ import annotations

import numpy as np

from server.sim.fog.jit import fog_kernel
from shared.sightlines import sees_player, segment_blocked

__all__ = ["candidates_for", "fog_sight", "scratch_for", "withhold"]


@fog_kernel
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
    scratch: np.ndarray,
    bodies: np.ndarray,
    seen: np.ndarray,
    shown: np.ndarray,
) -> None:
    """:func:`server.sim.fog.reference.fog_sight` into ``seen`` and ``shown`` (``(C, N)``
    bool, overwritten). ``scratch``: ``(21 + 4 M, 3)`` room (:func:`scratch_for`);
    ``bodies``: ``(N, 2, 3)`` room for every player's region."""
    eye_height, body_low, body_high, rise, radius = (
        shape[0], shape[1], shape[2], shape[3], shape[4],
    )  # fmt: skip
    boxes = len(box_min)
    eye, point, joint_high = scratch[0], scratch[1], scratch[2]
    eye_lo, eye_hi = scratch[3], scratch[4]
    eye_corners, body_corners = scratch[5:13], scratch[13:21]
    near_min, near_max = scratch[21 : 21 + boxes], scratch[21 + boxes : 21 + 2 * boxes]
    near_inner_min = scratch[21 + 2 * boxes : 21 + 3 * boxes]
    near_inner_max = scratch[21 + 3 * boxes : 21 + 4 * boxes]
    for e in range(feet.shape[0]):
        _region(
            feet[e], body_reach, body_low, body_high, rise, radius, box_min, box_max,
            bodies[e, 0], bodies[e, 1],
        )  # fmt: skip
    for c in range(len(viewers)):
        s = viewers[c]
        eye[0], eye[1], eye[2] = feet[s, 0] + 0.0, feet[s, 1] + 0.0, feet[s, 2] + eye_height
        _region(
            feet[s], eye_reach[c], eye_height, eye_height, rise, radius, box_min, box_max,
            eye_lo, eye_hi,
        )  # fmt: skip
        _corners(eye_lo, eye_hi, eye_corners)
        for e in range(feet.shape[0]):
            seen[c, e] = shown[c, e] = False
            if not candidates[c, e] or e == s:
                continue
            ex, ey, ez = feet[e, 0], feet[e, 1], feet[e, 2]
            _corners(bodies[e, 0], bodies[e, 1], body_corners)
            # Only a box that overlaps the bounds of both regions can block a line between
            # them (a line stays inside them): the others are left out, which changes no
            # answer of the slab test and spares most of them.
            for k in range(3):
                point[k] = min(eye_corners[0, k], body_corners[0, k])  # (the bounds' low
                joint_high[k] = max(eye_corners[7, k], body_corners[7, k])  # and high)
            near = 0
            for b in range(boxes):
                if _overlaps(point, joint_high, box_min[b], box_max[b]):
                    for k in range(3):
                        near_min[near, k], near_max[near, k] = box_min[b, k], box_max[b, k]
                        near_inner_min[near, k] = inner_min[b, k]
                        near_inner_max[near, k] = inner_max[b, k]
                    near += 1
            point[0], point[1], point[2] = ex + 0.0, ey + 0.0, ez + heights[0]
            if not segment_blocked(eye, point, near_min[:near], near_max[:near]):
                seen[c, e] = shown[c, e] = True
                continue
            bottom = min(eye_corners[0, 2], body_corners[0, 2])
            top = max(eye_corners[7, 2], body_corners[7, 2])
            hidden = False
            for b in range(near):
                one_min, one_max = near_inner_min[b : b + 1], near_inner_max[b : b + 1]
                if not segment_blocked(eye, point, one_min, one_max):
                    continue
                # A wall (it spans both regions' heights): the floor's corners decide.
                step = 2 if one_min[0, 2] <= bottom and one_max[0, 2] >= top else 1
                hidden = True
                for i in range(0, 8, step):
                    for j in range(0, 8, step):
                        if not segment_blocked(eye_corners[i], body_corners[j], one_min, one_max):
                            hidden = False
                            break
                    if not hidden:
                        break
                if hidden:
                    break
            if hidden:
                continue
            shown[c, e] = True
            seen[c, e] = sees_player(
                eye, feet[e], heights[1:], near_min[:near], near_max[:near], point
            )


def scratch_for(boxes: int) -> np.ndarray:
    """Room for :func:`fog_sight` over ``boxes`` boxes."""
    return np.empty((21 + 4 * boxes, 3))


@fog_kernel
def _overlaps(low: np.ndarray, high: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> bool:
    """Whether the box ``lo``..``hi`` meets the box ``low``..``high``."""
    return not (
        hi[0] < low[0] or lo[0] > high[0] or hi[1] < low[1] or lo[1] > high[1]
        or hi[2] < low[2] or lo[2] > high[2]
    )  # fmt: skip


@fog_kernel
def _region(
    feet: np.ndarray,
    reach: float,
    low: float,
    high: float,
    rise: float,
    radius: float,
    box_min: np.ndarray,
    box_max: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
) -> None:
    """:func:`server.sim.fog.reference.movement_region` into ``lo`` and ``hi``."""
    fx, fy, fz = feet[0], feet[1], feet[2]
    lo[0], lo[1], lo[2] = fx - reach, fy - reach, min(fz, 0.0) + low
    hi[0], hi[1], hi[2] = fx + reach, fy + reach, fz + rise + high
    for b in range(len(box_min)):
        if not (box_min[b, 2] <= min(fz, 0.0) and box_max[b, 2] > fz + rise):
            continue  # he may pass over it (or under)
        for axis in range(2):  # the face's axis; the other runs along the face
            side = 1 - axis
            along = feet[side]
            start, end = box_min[b, side] - radius, box_max[b, side] + radius
            if not (start < along < end and min(along - start, end - along) > reach):
                continue
            at = feet[axis]
            near_face, far_face = box_min[b, axis] - radius, box_max[b, axis] + radius
            if at <= near_face:
                hi[axis] = min(hi[axis], near_face)
            elif at >= far_face:
                lo[axis] = max(lo[axis], far_face)


@fog_kernel
def _corners(lo: np.ndarray, hi: np.ndarray, out: np.ndarray) -> None:
    """The 8 corners of the box ``lo``..``hi`` into ``out``: x slowest, z fastest."""
    n = 0
    for i in range(2):
        for j in range(2):
            for k in range(2):
                out[n, 0] = lo[0] if i == 0 else hi[0]
                out[n, 1] = lo[1] if j == 0 else hi[1]
                out[n, 2] = lo[2] if k == 0 else hi[2]
                n += 1


@fog_kernel
def candidates_for(
    viewers: np.ndarray, selected: np.ndarray, pending: np.ndarray, out: np.ndarray
) -> None:
    """The pairs :func:`fog_sight` tests, into ``out``: those selected, and those whose
    records wait to be judged (:func:`withhold`), a viewer and itself apart."""
    for c in range(len(viewers)):
        s = viewers[c]
        for e in range(selected.shape[1]):
            out[c, e] = (selected[c, e] or pending[s, e] != 0) and e != s


@fog_kernel
def withhold(
    viewers: np.ndarray,
    selected: np.ndarray,
    kept: np.ndarray,
    seen: np.ndarray,
    shown: np.ndarray,
    present: np.ndarray,
    horizon: np.ndarray,
    pending: np.ndarray,
    counts: np.ndarray,
) -> None:
    """Take out of ``selected`` every other player not ``shown`` nor ``kept``, and account
    for the records left: each record of another player sent to a viewer waits (a bit of
    ``pending[viewer, player]``, the newest lowest) until the pair is ``seen`` (judged
    seen within its margin) or until it is older than ``horizon[c]`` snapshots, the
    viewer's margin (judged hidden for the whole margin). ``counts``, added to: records
    sent, judged seen, judged hidden, withheld. A player gone takes his waiting records
    with him, unjudged."""
    for c in range(len(viewers)):
        s = viewers[c]
        keep = np.uint64((1 << (horizon[c] + 1)) - 1)
        for e in range(selected.shape[1]):
            if e == s:
                continue
            sent = selected[c, e]
            if sent and not shown[c, e] and not kept[c, e]:
                selected[c, e] = sent = False
                counts[3] += 1
            waiting = pending[s, e]
            if waiting == 0 and not sent:
                continue
            if not present[e]:
                pending[s, e] = 0
                continue
            waiting = waiting << np.uint64(1)
            if sent:
                waiting |= np.uint64(1)
                counts[0] += 1
            counts[2] += _bits(waiting & ~keep)
            waiting &= keep
            if seen[c, e]:
                counts[1] += _bits(waiting)
                waiting = np.uint64(0)
            pending[s, e] = waiting


@fog_kernel
def _bits(word: np.uint64) -> int:
    n = 0
    while word:
        word &= word - np.uint64(1)
        n += 1
    return n
