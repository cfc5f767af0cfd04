"""Which players the segments of a bot's projectile flight may touch, for many segments at
once: the exact test (:func:`shared.rayhits.first_hit`) then runs only on the chords
that may hit someone. The padded bounding sphere is the server kernel's early-out, so a
player dropped here is never hit.
"""

from __future__ import annotations

import numpy as np

from shared.hitbox import BOUNDING_SPHERE_CENTRE
from shared.rayhits import REACH

__all__ = ["segments_within_reach"]

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
