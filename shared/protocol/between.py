"""What a client draws between two snapshots: the players both hold, moved along.

Used by every bot at every look and every shot (:mod:`client_sim.interpolation`), so it is
a kernel: with interest management the two snapshots around a render time often hold
different players, and matching them took a dozen small NumPy operations a view.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

from shared.protocol.snapshots import ENTITY_DTYPE, ENTITY_FLAG_ALIVE

__all__ = [
    "alive_in_both",
    "arrivals",
    "pairs_in_both",
    "place_between",
    "players_between",
    "players_seen",
    "warm_up",
]


@numba.njit(cache=True, inline="always")
def place_between(feet: np.ndarray, start: Any, end: Any, weight: float) -> None:
    """A player's feet ``weight`` of the way from its record ``start`` to ``end``."""
    x0, y0, z0 = np.float64(start.x), np.float64(start.y), np.float64(start.z)
    feet[0] = x0 + (np.float64(end.x) - x0) * weight
    feet[1] = y0 + (np.float64(end.y) - y0) * weight
    feet[2] = z0 + (np.float64(end.z) - z0) * weight


@numba.njit(cache=True, inline="always")
def alive_in_both(start: Any, end: Any) -> bool:
    return (start.flags & ENTITY_FLAG_ALIVE) != 0 and (end.flags & ENTITY_FLAG_ALIVE) != 0


@numba.njit(cache=True, inline="always")
def pairs_in_both(before: np.ndarray, after: np.ndarray, pairs: np.ndarray) -> int:
    """The players in both snapshots (records sorted by id), as (row in ``before``, row in
    ``after``) in ``pairs``; how many."""
    count = 0
    j = 0
    for i in range(len(before)):
        entity = before[i].id
        while j < len(after) and after[j].id < entity:
            j += 1
        if j < len(after) and after[j].id == entity:
            pairs[count, 0], pairs[count, 1] = i, j
            count += 1
    return count


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
    pairs = np.empty((len(before), 2), dtype=np.int64)
    count = pairs_in_both(before, after, pairs)
    ids = np.empty(count, dtype=np.int64)
    feet = np.empty((len(weights), count, 3))
    alive = np.empty(count, dtype=np.bool_)
    for k in range(count):
        start, end = before[pairs[k, 0]], after[pairs[k, 1]]
        for w in range(len(weights)):
            place_between(feet[w, k], start, end, weights[w])
        ids[k] = start.id
        alive[k] = alive_in_both(start, end)
    return ids, feet, alive


@numba.njit(cache=True, nogil=True)
def players_seen(
    records: np.ndarray, spans: np.ndarray, weights: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What many clients draw, each between two snapshots of its own, in one pass: the
    players' ids ``(K,)`` (every player any of them draws, ascending), feet ``(B, K, 3)``
    and drawn-and-alive ``(B, K)``. Row ``b``'s snapshots lie in ``records`` at
    ``spans[b]`` (before: ``[0]:[1]``, after: ``[2]:[3]``; the same span twice with weight
    0 holds a snapshot) and it is drawn ``weights[b]`` of the way; each row is what
    :func:`players_between` gives it, and a player a row does not draw is not alive there
    (its feet left at 0)."""
    top = 0
    for i in range(len(records)):
        top = max(top, int(records[i].id) + 1)
    column = np.full(top, -1, dtype=np.int64)
    pairs = np.empty((len(records), 2), dtype=np.int64)
    for b in range(len(spans)):
        before = records[spans[b, 0] : spans[b, 1]]
        for k in range(pairs_in_both(before, records[spans[b, 2] : spans[b, 3]], pairs)):
            column[before[pairs[k, 0]].id] = 0
    players = 0
    for entity in range(top):
        if column[entity] == 0:
            column[entity] = players
            players += 1
    ids = np.empty(players, dtype=np.int64)
    for entity in range(top):
        if column[entity] >= 0:
            ids[column[entity]] = entity
    feet = np.zeros((len(spans), players, 3))
    alive = np.zeros((len(spans), players), dtype=np.bool_)
    for b in range(len(spans)):
        before, after = records[spans[b, 0] : spans[b, 1]], records[spans[b, 2] : spans[b, 3]]
        for k in range(pairs_in_both(before, after, pairs)):
            start, end = before[pairs[k, 0]], after[pairs[k, 1]]
            c = column[start.id]
            place_between(feet[b, c], start, end, weights[b])
            alive[b, c] = alive_in_both(start, end)
    return ids, feet, alive


@numba.njit(cache=True, nogil=True)
def arrivals(before: np.ndarray, after: np.ndarray, me: int, rows: np.ndarray) -> tuple[int, int]:
    """The live players of ``after`` that ``before`` did not hold, ``me`` aside (records
    sorted by id), as rows of ``after`` in ``rows``; returns how many, and how many of
    ``after``'s records are other players'. Every bot runs it on every snapshot it shows
    (fog of war's pop-in watch), where it took a dozen small NumPy operations."""
    count = 0
    others = 0
    j = 0
    for i in range(len(after)):
        entity = after[i].id
        if entity == me:
            continue
        others += 1
        while j < len(before) and before[j].id < entity:
            j += 1
        held = j < len(before) and before[j].id == entity
        if not held and (after[i].flags & ENTITY_FLAG_ALIVE) != 0:
            rows[count] = i
            count += 1
    return count, others


def warm_up() -> None:
    """Compile (or load from the cache) the kernel: a swarm calls this before its bots
    connect, so no bot's first view waits for a compile."""
    records = np.zeros(1, dtype=ENTITY_DTYPE)
    players_between(records, records, np.zeros(1))
    players_seen(records, np.array([[0, 1, 0, 1]]), np.zeros(1))
    arrivals(records, records, 0, np.zeros(1, dtype=np.int64))
