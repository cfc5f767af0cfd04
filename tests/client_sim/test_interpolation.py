"""The snapshot buffer: interpolation at render time, holding, misses and ordering.

Positions travel as float32 in snapshots, so every coordinate here is a binary fraction and
the times are powers-of-two fractions: interpolated positions are exact.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from client_sim.interpolation import SnapshotBuffer, seen
from tests.records import entity_records


def records(
    ids: list[int], positions: list[list[float]], alive: list[bool] | None = None
) -> np.ndarray:
    n = len(ids)
    pos = np.array(positions, dtype=np.float64).reshape(n, 3)
    return entity_records(
        np.array(ids),
        pos,
        np.zeros((n, 3)),
        np.zeros(n),
        np.zeros(n),
        np.full(n, 100),
        np.array([True] * n if alive is None else alive),
    )


A = records([0, 1], [[0.0, 0.0, 0.0], [4.0, 8.0, 0.0]])
B = records([0, 1], [[2.0, 0.0, 0.0], [4.0, 4.0, 2.0]])


def buffer(*snapshots: tuple[float, np.ndarray]) -> SnapshotBuffer:
    buf = SnapshotBuffer()
    for time, recs in snapshots:
        buf.push(time, recs)
    return buf


def test_an_empty_buffer_has_no_view() -> None:
    buf = SnapshotBuffer()
    assert buf.view(1.0) is None
    assert buf.newest_time is None and len(buf) == 0


@pytest.mark.parametrize(
    ("render_time", "expected"),
    [
        (1.125, [[0.5, 0.0, 0.0], [4.0, 7.0, 0.5]]),
        (1.25, [[1.0, 0.0, 0.0], [4.0, 6.0, 1.0]]),
        (1.375, [[1.5, 0.0, 0.0], [4.0, 5.0, 1.5]]),
    ],
)
def test_render_time_between_two_snapshots_interpolates_exactly(
    render_time: float, expected: list[list[float]]
) -> None:
    buf = buffer((1.0, A), (1.5, B))
    view = buf.view(render_time)
    assert view is not None
    assert view.positions.tolist() == expected
    assert view.ids.tolist() == [0, 1]
    assert view.alive.tolist() == [True, True]
    assert (view.render_time, view.shown_time, view.exact) == (render_time, render_time, True)
    assert buf.misses == 0


def test_interpolation_uses_the_two_snapshots_around_render_time() -> None:
    C = records([0, 1], [[2.0, 2.0, 0.0], [0.0, 4.0, 2.0]])
    buf = buffer((1.0, A), (1.5, B), (2.0, C))
    view = buf.view(1.75)
    assert view is not None
    assert view.positions.tolist() == [[2.0, 1.0, 0.0], [2.0, 4.0, 2.0]]


def test_a_player_in_only_one_of_the_two_snapshots_is_not_drawn_between_them() -> None:
    """Where it was between the two is not known (interest management sent it in one only,
    or it came or went): a bot must never aim at a place the server did not show it."""
    before = records([0, 1, 2], [[0.0, 0.0, 0.0], [4.0, 4.0, 0.0], [8.0, 0.0, 0.0]])
    after = records([0, 2, 3], [[2.0, 0.0, 0.0], [8.0, 2.0, 0.0], [16.0, 16.0, 0.0]])
    view = buffer((1.0, before), (1.5, after)).view(1.25)
    assert view is not None
    assert view.ids.tolist() == [0, 2]  # neither 1 (gone) nor the newcomer 3
    assert view.positions.tolist() == [[1.0, 0.0, 0.0], [8.0, 1.0, 0.0]]
    assert view.alive.tolist() == [True, True]


def test_a_player_who_dies_between_the_snapshots_is_drawn_dead() -> None:
    before = records([0, 1], [[0.0, 0.0, 0.0], [4.0, 4.0, 0.0]])
    after = records([0, 1], [[0.0, 0.0, 0.0], [4.0, 4.0, 0.0]], alive=[True, False])
    view = buffer((1.0, before), (1.5, after)).view(1.25)
    assert view is not None
    assert view.alive.tolist() == [True, False]


def test_past_the_newest_snapshot_the_newest_is_held_and_counted_as_a_miss() -> None:
    buf = buffer((1.0, A), (1.5, B))
    view = buf.view(1.75)
    assert view is not None
    assert view.shown_time == 1.5 and view.render_time == 1.75
    assert view.positions.tolist() == [[2.0, 0.0, 0.0], [4.0, 4.0, 2.0]]
    assert not view.exact
    assert buf.misses == 1
    buf.view(2.0)
    assert buf.misses == 2


def test_exactly_at_the_newest_snapshot_is_exact_and_not_a_miss() -> None:
    buf = buffer((1.0, A), (1.5, B))
    view = buf.view(1.5)
    assert view is not None
    assert view.exact and view.shown_time == 1.5
    assert view.positions.tolist() == [[2.0, 0.0, 0.0], [4.0, 4.0, 2.0]]
    assert buf.misses == 0


def test_before_the_oldest_snapshot_the_oldest_is_shown_and_counted_as_a_miss() -> None:
    buf = buffer((1.0, A), (1.5, B))
    view = buf.view(0.5)
    assert view is not None
    assert view.shown_time == 1.0 and not view.exact
    assert view.positions.tolist() == [[0.0, 0.0, 0.0], [4.0, 8.0, 0.0]]
    assert buf.misses == 1


def test_exactly_at_the_oldest_snapshot_is_exact_and_not_a_miss() -> None:
    buf = buffer((1.0, A), (1.5, B))
    view = buf.view(1.0)
    assert view is not None
    assert view.shown_time == 1.0
    assert view.positions.tolist() == [[0.0, 0.0, 0.0], [4.0, 8.0, 0.0]]
    assert view.exact
    assert buf.misses == 0


def test_a_single_snapshot_is_held_for_any_other_render_time() -> None:
    buf = buffer((1.0, A))
    for render_time in (0.5, 1.5):
        view = buf.view(render_time)
        assert view is not None and view.shown_time == 1.0 and not view.exact
    assert buf.misses == 2
    view = buf.view(1.0)
    assert view is not None and view.exact and buf.misses == 2


def test_out_of_order_and_repeated_snapshots_are_ignored() -> None:
    buf = buffer((1.0, A), (1.5, B))
    buf.push(1.25, records([0, 1], [[64.0, 64.0, 0.0]] * 2))
    buf.push(1.5, records([0, 1], [[64.0, 64.0, 0.0]] * 2))
    assert len(buf) == 2 and buf.newest_time == 1.5
    view = buf.view(1.25)
    assert view is not None
    assert view.positions.tolist() == [[1.0, 0.0, 0.0], [4.0, 6.0, 1.0]]


def test_the_buffer_keeps_only_its_capacity_newest_snapshots() -> None:
    buf = SnapshotBuffer(capacity=3)
    for i in range(5):
        buf.push(float(i), records([0], [[float(i), 0.0, 0.0]]))
    assert len(buf) == 3
    assert [t for t, _ in buf.since(-1.0)] == [2.0, 3.0, 4.0]


def test_since_starts_at_the_snapshot_at_or_before_the_time() -> None:
    buf = SnapshotBuffer()
    for i in range(1, 5):
        buf.push(float(i), records([0], [[float(i), 0.0, 0.0]]))
    assert [t for t, _ in buf.since(2.5)] == [2.0, 3.0, 4.0]
    assert [t for t, _ in buf.since(2.0)] == [2.0, 3.0, 4.0]
    assert [t for t, _ in buf.since(0.5)] == [1.0, 2.0, 3.0, 4.0]
    assert [t for t, _ in buf.since(9.0)] == [4.0]
    ((_, recs),) = buf.since(9.0)
    assert recs["x"].tolist() == [4.0]


@given(weight=st.integers(0, 64), x0=st.integers(-512, 512), x1=st.integers(-512, 512))
def test_interpolated_positions_lie_on_the_segment(weight: int, x0: int, x1: int) -> None:
    before = records([3], [[x0 / 4, 0.0, 0.0]])
    after = records([3], [[x1 / 4, 0.0, 0.0]])
    buf = buffer((2.0, before), (3.0, after))
    view = buf.view(2.0 + weight / 64)
    assert view is not None
    expected = x0 / 4 + (x1 / 4 - x0 / 4) * (weight / 64)
    assert view.positions[0, 0] == pytest.approx(expected, abs=1e-12)
    assert min(x0, x1) / 4 <= view.positions[0, 0] <= max(x0, x1) / 4


C = records([0, 2], [[1.0, 1.0, 0.0], [6.0, 6.0, 0.0]], alive=[True, False])


D = records([1, 2, 5], [[3.0, 3.0, 0.0], [6.0, 6.0, 0.0], [1.0, 2.0, 3.0]])


@given(
    looks=st.lists(
        st.tuples(st.sampled_from([0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5]), st.integers(0, 2)),
        max_size=12,
    )
)
def test_what_many_brackets_show_is_each_bracket_s_view(looks: list[tuple[float, int]]) -> None:
    """Brackets of three clients' buffers (each its own snapshots, some sharing records,
    some players in one snapshot only): each row is that bracket's view, its players in
    the columns of their ids; a player it does not draw is not alive in its row."""
    snapshots = [((1.0, A), (1.5, B), (2.0, C)), ((1.0, C), (1.5, D)), ((1.0, B), (2.0, D))]
    buffers = [buffer(*s) for s in snapshots]
    brackets = [buffers[client].bracket(t) for t, client in looks]
    assert all(b is not None for b in brackets)
    ids, feet, alive = seen([b for b in brackets if b is not None])
    singles = [buffer(*s) for s in snapshots]
    drawn: set[int] = set()
    assert feet.shape == (len(looks), len(ids), 3) and alive.shape == (len(looks), len(ids))
    for row, (t, client) in enumerate(looks):
        view = singles[client].view(t)
        assert view is not None
        columns = np.searchsorted(ids, view.ids)
        assert ids[columns].tolist() == view.ids.tolist()
        assert feet[row, columns].tolist() == view.positions.tolist()
        assert alive[row, columns].tolist() == view.alive.tolist()
        others = np.setdiff1d(np.arange(len(ids)), columns)
        assert not alive[row, others].any()
        drawn |= set(view.ids.tolist())
    assert ids.tolist() == sorted(drawn)
    assert [b.misses for b in buffers] == [b.misses for b in singles]  # held ones count


def test_a_snapshot_with_nobody_in_it_shows_nobody() -> None:
    """A freshly promoted primary may publish before anyone has rejoined it."""
    empty = records([], [])
    buf = buffer((1.0, empty), (1.5, empty), (2.0, A))
    for time in (1.0, 1.25, 1.75, 3.0):
        view = buf.view(time)
        assert view is not None
    for t in (1.0, 1.25):
        view = buf.view(t)
        assert view is not None and view.positions.shape == (0, 3) and len(view.ids) == 0
    bracket = buf.bracket(1.25)
    assert bracket is not None
    ids, feet, alive = seen([bracket])
    assert ids.shape == (0,) and feet.shape == (1, 0, 3) and alive.shape == (1, 0)
    assert [x.shape for x in seen([])] == [(0,), (0, 0, 3), (0, 0)]


def reference_view(
    before: np.ndarray, after: np.ndarray, weight: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The view kernel's spec in NumPy: (ids, feet, alive) of the players in both
    snapshots, moved ``weight`` of the way from ``before`` to ``after``."""
    ids = before["id"].astype(np.int64)
    both = np.isin(ids, after["id"])
    index = np.searchsorted(after["id"], ids[both])
    start = np.column_stack([before[axis][both] for axis in "xyz"]).astype(np.float64)
    end = np.column_stack([after[axis][index] for axis in "xyz"]).astype(np.float64)
    alive = (before["flags"][both] & 1 != 0) & (after["flags"][index] & 1 != 0)
    return ids[both], start + (end - start) * weight, alive


@given(
    before_ids=st.sets(st.integers(0, 40), max_size=20),
    after_ids=st.sets(st.integers(0, 40), max_size=20),
    weight=st.floats(0.0, 1.0),
    seed=st.integers(0, 2**16),
)
def test_the_view_kernel_is_the_numpy_reference_bit_for_bit(
    before_ids: set[int], after_ids: set[int], weight: float, seed: int
) -> None:
    """Interest management sends each bot its own players: the two snapshots around a
    render time often hold different ones, and only those in both are drawn."""
    rng = np.random.default_rng(seed)

    def random_records(ids: set[int]) -> np.ndarray:
        n = len(ids)
        alive = (rng.random(n) < 0.8).tolist()
        return records(sorted(ids), rng.uniform(-500, 500, (n, 3)).tolist(), alive)

    before, after = random_records(before_ids), random_records(after_ids)
    buf = buffer((2.0, before), (3.0, after))
    view = buf.view(2.0 + weight)
    assert view is not None
    weight = (2.0 + weight) - 2.0  # (the weight the buffer finds between 2 and 3 s)
    if weight in (0.0, 1.0):  # (a snapshot's own time: that snapshot, exactly)
        shown = before if weight == 0.0 else after
        ids, feet, alive = reference_view(shown, shown, 0.0)
    else:
        ids, feet, alive = reference_view(before, after, weight)
    assert view.ids.dtype == np.int64 and view.positions.flags.c_contiguous
    assert np.array_equal(view.ids, ids) and np.array_equal(view.alive, alive)
    assert np.array_equal(view.positions, feet)
