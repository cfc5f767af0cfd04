"""The fog-of-war kernels: the sight test of :mod:`server.sim.fog.reference`, compiled,
and the account of what was sent while hidden.

:func:`fog_sight` gives exactly what the reference gives (same slab arithmetic, same
corners, same rule); it is faster by deciding most pairs with one clear line and by
testing the 64 corner lines only against the boxes that block the eye's line to the
player's first sight point (a box that hides the pair must block that line too).
"""

from __future__ import annotations

import numpy as np

from server.sim.fog.jit import fog_kernel
from shared.sightlines import sees_player, segment_blocked

__all__ = ["fog_sight", "judge_sent"]


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
    seen: np.ndarray,
    shown: np.ndarray,
) -> None:
    """:func:`server.sim.fog.reference.fog_sight` into ``seen`` and ``shown`` (``(C, N)``
    bool, overwritten)."""
    eye_height, body_low, body_high, body_radius, rise = (
        shape[0], shape[1], shape[2], shape[3], shape[4],
    )  # fmt: skip
    eye = np.empty(3)
    point = np.empty(3)
    eye_corners = np.empty((8, 3))
    body_corners = np.empty((8, 3))
    for c in range(len(viewers)):
        s = viewers[c]
        fx, fy, fz = feet[s, 0], feet[s, 1], feet[s, 2]
        eye[0], eye[1], eye[2] = fx + 0.0, fy + 0.0, fz + eye_height
        r = eye_reach[c]
        _corners(
            fx - r, fy - r, eye_height + min(fz, 0.0), fx + r, fy + r, fz + rise + eye_height,
            eye_corners,
        )  # fmt: skip
        for e in range(feet.shape[0]):
            seen[c, e] = shown[c, e] = False
            if not candidates[c, e] or e == s:
                continue
            if sees_player(eye, feet[e], heights, box_min, box_max, point):
                seen[c, e] = shown[c, e] = True
                continue
            ex, ey, ez = feet[e, 0], feet[e, 1], feet[e, 2]
            half = body_radius + body_reach
            _corners(
                ex - half, ey - half, min(ez, 0.0) + body_low,
                ex + half, ey + half, ez + rise + body_high, body_corners,
            )  # fmt: skip
            point[0], point[1], point[2] = ex + 0.0, ey + 0.0, ez + heights[0]
            hidden = False
            for b in range(len(inner_min)):
                one_min, one_max = inner_min[b : b + 1], inner_max[b : b + 1]
                if not segment_blocked(eye, point, one_min, one_max):
                    continue
                hidden = True
                for i in range(8):
                    for j in range(8):
                        if not segment_blocked(eye_corners[i], body_corners[j], one_min, one_max):
                            hidden = False
                            break
                    if not hidden:
                        break
                if hidden:
                    break
            shown[c, e] = not hidden


@fog_kernel
def _corners(
    x0: float, y0: float, z0: float, x1: float, y1: float, z1: float, out: np.ndarray
) -> None:
    """The 8 corners of the box ``(x0, y0, z0)``..``(x1, y1, z1)`` into ``out``."""
    n = 0
    for x in (x0, x1):
        for y in (y0, y1):
            for z in (z0, z1):
                out[n, 0], out[n, 1], out[n, 2] = x, y, z
                n += 1


@fog_kernel
def judge_sent(
    viewers: np.ndarray,
    sent: np.ndarray,
    seen: np.ndarray,
    present: np.ndarray,
    horizon: np.ndarray,
    pending: np.ndarray,
    counts: np.ndarray,
) -> None:
    """Account for one snapshot's records: each record of another player sent to a viewer
    waits (a bit of ``pending[viewer, player]``, the newest lowest) until the pair is
    ``seen`` (judged seen within its margin) or until it is older than ``horizon[c]``
    snapshots, the viewer's margin (judged hidden for the whole margin). ``counts``,
    added to: records sent, judged seen, judged hidden. A player gone takes his waiting
    records with him, unjudged."""
    for c in range(len(viewers)):
        s = viewers[c]
        keep = np.uint64((1 << (horizon[c] + 1)) - 1)
        for e in range(sent.shape[1]):
            waiting = pending[s, e]
            if e == s or (waiting == 0 and not sent[c, e]):
                continue
            if not present[e]:
                pending[s, e] = 0
                continue
            waiting = waiting << np.uint64(1)
            if sent[c, e]:
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
