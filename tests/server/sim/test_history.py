"""The history ring: wrap-around, order, refusals and copies. (How the hit kernels bracket
and interpolate its snapshots is specified and tested in the hitreg reference's tests.)"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from server.sim.history import HistoryRing
from server.sim.hitreg import History
from server.sim.replica import StateMismatch

RATE = 64  # a power of two: tick / RATE and the blends below are exact in float64
PLAYERS = 3


def positions_of(tick: int) -> np.ndarray:
    """A recognisable, exactly representable position per player for each tick."""
    return np.array([[tick, 10.0 * p, -float(tick)] for p in range(PLAYERS)], dtype=np.float64)


def filled(capacity: int, ticks: range | list[int], alive=None) -> HistoryRing:
    ring = HistoryRing(capacity, PLAYERS)
    for tick in ticks:
        mask = np.ones(PLAYERS, dtype=bool) if alive is None else alive(tick)
        ring.append(tick, tick / RATE, positions_of(tick), mask)
    return ring


def logical_ticks(ring: HistoryRing) -> list[int]:
    return [int(ring.ticks[(ring.start + i) % ring.capacity]) for i in range(len(ring))]


def index_of(ring: HistoryRing, tick: int) -> int | None:
    """The physical index that holds ``tick``, if the ring holds it."""
    held = [(ring.start + i) % ring.capacity for i in range(len(ring))]
    return next((i for i in held if int(ring.ticks[i]) == tick), None)


def test_a_ring_needs_room_for_two_snapshots() -> None:
    with pytest.raises(ValueError):
        HistoryRing(1, PLAYERS)


@given(st.integers(2, 12), st.integers(1, 40), st.integers(0, 1000))
def test_wrap_around_keeps_the_newest_capacity_snapshots_in_order(
    capacity: int, appended: int, first: int
) -> None:
    ring = filled(capacity, range(first, first + appended))
    kept = list(range(first, first + appended))[-capacity:]
    assert len(ring) == len(kept)
    assert logical_ticks(ring) == kept
    assert ring.newest_tick == kept[-1]
    for tick in kept:
        index = index_of(ring, tick)
        assert index is not None
        assert int(ring.ticks[index]) == tick
        assert ring.times[index] == tick / RATE
        assert np.array_equal(ring.positions[index], positions_of(tick))


def test_ticks_may_leave_gaps_and_the_oldest_go_first() -> None:
    ring = filled(4, [3, 4, 9, 10, 12])  # holds 4, 9, 10, 12
    assert logical_ticks(ring) == [4, 9, 10, 12]


@pytest.mark.parametrize("tick", [5, 4, 0])
def test_appending_a_tick_that_is_not_after_the_newest_raises(tick: int) -> None:
    ring = filled(4, range(6))
    before = (ring.ticks.copy(), ring.positions.copy(), ring.start, len(ring))
    with pytest.raises(ValueError):
        ring.append(tick, tick / RATE, positions_of(tick), np.ones(PLAYERS, dtype=bool))
    assert np.array_equal(ring.ticks, before[0])
    assert np.array_equal(ring.positions, before[1])
    assert (ring.start, len(ring)) == before[2:]


@pytest.mark.parametrize("bad", ["time", "position"])
def test_a_snapshot_that_is_not_finite_is_refused_as_it_is_written(bad: str) -> None:
    """The kernels trust the node's rings without scanning them each call: a NaN never
    gets in, by append or by a standby's import."""
    ring = filled(4, range(3))
    positions = positions_of(3)
    if bad == "position":
        positions[1, 2] = np.nan
    with pytest.raises(ValueError, match="finite"):
        ring.append(3, np.inf if bad == "time" else 3 / RATE, positions, np.ones(PLAYERS, bool))
    assert logical_ticks(ring) == [0, 1, 2]
    state = filled(4, range(3)).export_state()
    positions = np.frombuffer(state["positions"]).copy()
    positions[0] = np.nan
    state["positions"] = positions.tobytes()
    with pytest.raises(StateMismatch, match="finite"):
        HistoryRing(4, PLAYERS).import_state(state)


def test_the_ring_copies_what_it_is_given() -> None:
    ring = HistoryRing(4, PLAYERS)
    pos = positions_of(1)
    ring.append(1, 1 / RATE, pos, np.ones(PLAYERS, dtype=bool))
    pos[:] = 99.0
    assert np.array_equal(ring.positions[index_of(ring, 1)], positions_of(1))


def test_the_kernels_history_names_each_match_s_newest_snapshot_time() -> None:
    """Through a wrap-around, and -inf for a match with no snapshot yet."""
    full, empty = HistoryRing(3, 2), HistoryRing(3, 2)
    for tick in range(1, 6):  # the ring wraps: it holds ticks 3, 4, 5
        full.append(tick, tick / 60, np.zeros((2, 3)), np.ones(2, dtype=bool))
    history = History(
        times=np.stack([full.times, empty.times]),
        positions=np.stack([full.positions, empty.positions]),
        alive=np.stack([full.alive, empty.alive]),
        start=np.array([full.start, empty.start]),
        count=np.array([full.count, empty.count]),
    )
    assert history.newest_times().tolist() == [5 / 60, -np.inf]
