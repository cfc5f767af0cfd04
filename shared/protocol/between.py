"""What a client draws between two snapshots: the players both hold, moved along.

Used by every bot at every look and every shot (:mod:`client_sim.interpolation`), so it is
a kernel: with interest management the two snapshots around a render time often hold
different players, and matching them took a dozen small NumPy operations a view.
"""

from __future__ import annotations

import numba
import numpy as np

from shared.protocol.snapshots import ENTITY_DTYPE, ENTITY_FLAG_ALIVE

__all__ = ["players_between", "warm_up"]


@numba.njit(cache=True, nogil=True)
def players_between(
    before: np.ndarray, after: np.ndarray, weights: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ids ``(K,)``, feet ``(W, K, 3)`` float64 at each of ``weights``, alive ``(K,)``) of
    the players present in both snapshots (records sorted by id, as the server sends them),
    each moved ``weight`` of the way along its segment; ``before`` twice with weight 0
    holds a snapshot. A player in only one of them is not drawn: where it was between the
    two is not known (interest management sent it in one only, or it came or went), and a
    client must never aim at a place the server did not show it. One pass, where the
    NumPy reference (``tests/client_sim/test_interpolation.py``) takes a dozen small array
    operations."""
    n, m = len(before), len(after)
    pairs = np.empty((n, 2), dtype=np.int64)  # (row in before, row in after) per player
    count = 0
    j = 0
    for i in range(n):
        entity = before[i].id
        while j < m and after[j].id < entity:
            j += 1
        if j < m and after[j].id == entity:
            pairs[count, 0], pairs[count, 1] = i, j
            count += 1
    ids = np.empty(count, dtype=np.int64)
    feet = np.empty((len(weights), count, 3))
    alive = np.empty(count, dtype=np.bool_)
    for k in range(count):
        start, end = before[pairs[k, 0]], after[pairs[k, 1]]
        x0, y0, z0 = np.float64(start.x), np.float64(start.y), np.float64(start.z)
        dx, dy, dz = np.float64(end.x) - x0, np.float64(end.y) - y0, np.float64(end.z) - z0
        for w in range(len(weights)):
            feet[w, k, 0] = x0 + dx * weights[w]
            feet[w, k, 1] = y0 + dy * weights[w]
            feet[w, k, 2] = z0 + dz * weights[w]
        ids[k] = start.id
        alive[k] = (start.flags & ENTITY_FLAG_ALIVE) != 0 and (end.flags & ENTITY_FLAG_ALIVE) != 0
    return ids, feet, alive


def warm_up() -> None:
    """Compile (or load from the cache) the kernel: a swarm calls this before its bots
    connect, so no bot's first view waits for a compile."""
    records = np.zeros(1, dtype=ENTITY_DTYPE)
    players_between(records, records, np.zeros(1))
