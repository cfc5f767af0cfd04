"""The history ring: wrap-around, lookup by tick, interpolation, clamping and presence."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from server.sim.history import HistoryRing

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
    assert ring.oldest_time == kept[0] / RATE
    assert ring.newest_time == kept[-1] / RATE
    for tick in kept:
        index = ring.index_of_tick(tick)
        assert index is not None
        assert int(ring.ticks[index]) == tick
        assert ring.times[index] == tick / RATE
        assert np.array_equal(ring.positions[index], positions_of(tick))


def test_index_of_tick_is_none_for_ticks_not_held() -> None:
    assert HistoryRing(4, PLAYERS).index_of_tick(0) is None
    ring = filled(4, range(10, 20))  # holds 16..19
    assert [ring.index_of_tick(t) is not None for t in (15, 16, 19, 20)] == [
        False,
        True,
        True,
        False,
    ]
    assert ring.index_of_tick(-1) is None


def test_index_of_tick_finds_ticks_after_a_gap() -> None:
    ring = filled(4, [3, 4, 9, 10, 12])  # holds 4, 9, 10, 12
    for tick in (4, 9, 10, 12):
        index = ring.index_of_tick(tick)
        assert index is not None and int(ring.ticks[index]) == tick
    for tick in (3, 5, 8, 11, 13):
        assert ring.index_of_tick(tick) is None


@pytest.mark.parametrize("tick", [5, 4, 0])
def test_appending_a_tick_that_is_not_after_the_newest_raises(tick: int) -> None:
    ring = filled(4, range(6))
    before = (ring.ticks.copy(), ring.positions.copy(), ring.start, len(ring))
    with pytest.raises(ValueError):
        ring.append(tick, tick / RATE, positions_of(tick), np.ones(PLAYERS, dtype=bool))
    assert np.array_equal(ring.ticks, before[0])
    assert np.array_equal(ring.positions, before[1])
    assert (ring.start, len(ring)) == before[2:]


def test_the_ring_copies_what_it_is_given() -> None:
    ring = HistoryRing(4, PLAYERS)
    pos = positions_of(1)
    ring.append(1, 1 / RATE, pos, np.ones(PLAYERS, dtype=bool))
    pos[:] = 99.0
    assert np.array_equal(ring.positions[ring.index_of_tick(1)], positions_of(1))


# -- bracketing and interpolation ---------------------------------------------------------


def test_an_empty_history_has_no_world() -> None:
    with pytest.raises(LookupError):
        HistoryRing(4, PLAYERS).bracket(0.0)


@pytest.mark.parametrize(("fraction", "weight"), [(0.25, 0.25), (0.5, 0.5), (0.75, 0.75)])
def test_positions_interpolate_exactly_between_ticks(fraction: float, weight: float) -> None:
    ring = filled(8, range(20, 30))  # holds 22..29, wrapped
    time = (25 + fraction) / RATE
    before, after, w = ring.bracket(time)
    assert (int(ring.ticks[before]), int(ring.ticks[after]), w) == (25, 26, weight)
    pos, present = ring.positions_at(time)
    expected = positions_of(25) + (positions_of(26) - positions_of(25)) * weight
    assert np.array_equal(pos, expected)
    assert pos[1].tolist() == [25 + weight, 10.0, -(25 + weight)]
    assert present.tolist() == [True] * PLAYERS


@settings(max_examples=200)
@given(st.integers(2, 10), st.integers(0, 30), st.floats(0.0, 1.0, exclude_max=True))
def test_positions_at_matches_linear_interpolation_everywhere_inside(
    capacity: int, extra: int, fraction: float
) -> None:
    ticks = range(100, 100 + capacity + extra)
    ring = filled(capacity, ticks)
    held = logical_ticks(ring)
    lower = held[0] + int(fraction * (len(held) - 1))
    time = (lower + fraction) / RATE
    pos, present = ring.positions_at(time)
    tick_time = time * RATE  # positions_of is linear in the tick, so this is the truth
    assert pos[2] == pytest.approx([tick_time, 20.0, -tick_time], abs=1e-9)
    assert present.all()


def test_an_exact_snapshot_time_gives_that_snapshot_alone() -> None:
    ring = filled(8, range(10))
    before, after, weight = ring.bracket(5 / RATE)
    assert before == after == ring.index_of_tick(5) and weight == 0.0
    pos, _ = ring.positions_at(5 / RATE)
    assert np.array_equal(pos, positions_of(5))


@pytest.mark.parametrize("time", [-1.0, 0.0, 3.0 / RATE, 4.0 / RATE])
def test_times_before_the_oldest_clamp_to_the_oldest(time: float) -> None:
    ring = filled(6, range(10))  # holds 4..9
    before, after, weight = ring.bracket(time)
    assert before == after == ring.index_of_tick(4) and weight == 0.0
    pos, _ = ring.positions_at(time)
    assert np.array_equal(pos, positions_of(4))


@pytest.mark.parametrize("time", [9.0 / RATE, 9.5 / RATE, 1e9])
def test_times_after_the_newest_clamp_to_the_newest(time: float) -> None:
    ring = filled(6, range(10))
    before, after, weight = ring.bracket(time)
    assert before == after == ring.index_of_tick(9) and weight == 0.0
    pos, _ = ring.positions_at(time)
    assert np.array_equal(pos, positions_of(9))


def test_a_single_snapshot_serves_every_time() -> None:
    ring = filled(4, [7])
    for time in (0.0, 7 / RATE, 1.0):
        assert ring.bracket(time) == (ring.index_of_tick(7), ring.index_of_tick(7), 0.0)


# -- presence ------------------------------------------------------------------------------


def presence(tick: int) -> np.ndarray:
    """Player 0 always alive; player 1 joins at tick 5; player 2 dies at tick 5."""
    return np.array([True, tick >= 5, tick < 5])


def test_presence_between_ticks_requires_alive_in_both_snapshots() -> None:
    ring = filled(16, range(10), alive=presence)
    _, present = ring.positions_at(4.5 / RATE)  # between 4 and 5: only player 0 throughout
    assert present.tolist() == [True, False, False]
    _, present = ring.positions_at(5.5 / RATE)
    assert present.tolist() == [True, True, False]
    _, present = ring.positions_at(3.5 / RATE)
    assert present.tolist() == [True, False, True]


def test_presence_at_an_exact_snapshot_time_is_that_snapshot_s() -> None:
    ring = filled(16, range(10), alive=presence)
    _, present = ring.positions_at(4 / RATE)  # player 2 was alive at tick 4, gone at 5
    assert present.tolist() == [True, False, True]
    _, present = ring.positions_at(5 / RATE)
    assert present.tolist() == [True, True, False]


def test_presence_when_clamped_is_the_end_snapshot_s() -> None:
    ring = filled(16, range(10), alive=presence)
    assert ring.positions_at(-1.0)[1].tolist() == [True, False, True]
    assert ring.positions_at(100.0)[1].tolist() == [True, True, False]
