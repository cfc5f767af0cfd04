"""Property: the numba CPU kernels give exactly what the NumPy reference gives.

Scenes are random (several matches, wrapped rings of several snapshots, dead slots, exact
ties, walls, axis-parallel and vertical rays, view times on, between and outside the
snapshots), and the comparison is bit for bit, with and without the broad phase.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from server.sim.hitreg import make_validator
from server.sim.hitreg.scenes import (
    random_boxes,
    random_history,
    random_hitscan,
    random_projectiles,
)

PROPERTY = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)  # fmt: skip

scene_sizes = {
    "seed": st.integers(0, 2**32 - 1),
    "matches": st.integers(1, 3),
    "capacity": st.integers(1, 6),
    "players": st.integers(1, 10),
    "boxes": st.integers(0, 4),
}


def validators(rng: np.random.Generator, boxes: int):
    box_min, box_max = random_boxes(rng, boxes)
    return (
        make_validator("reference", box_min=box_min, box_max=box_max),
        make_validator("cpu", box_min=box_min, box_max=box_max),
    )


def assert_same(expected, got, *, same_work: bool) -> None:
    for name in type(expected).__dataclass_fields__:
        if name == "hitbox_tests" and not same_work:
            continue  # the broad phase exists to do less work
        np.testing.assert_array_equal(getattr(got, name), getattr(expected, name), err_msg=name)


@PROPERTY
@given(**scene_sizes, shots=st.integers(1, 40))
def test_hitscan_kernel_equals_reference(seed, matches, capacity, players, boxes, shots):
    rng = np.random.default_rng(seed)
    reference, cpu = validators(rng, boxes)
    history = random_history(rng, matches, capacity, players)
    batch = random_hitscan(rng, history, shots)
    expected = reference.resolve_hitscan(history, batch)
    assert_same(expected, cpu.resolve_hitscan(history, batch, broad_phase=False), same_work=True)
    assert_same(expected, cpu.resolve_hitscan(history, batch, broad_phase=True), same_work=False)


@PROPERTY
@given(**scene_sizes, projectiles=st.integers(1, 6))
def test_projectile_kernel_equals_reference(
    seed, matches, capacity, players, boxes, projectiles
):  # fmt: skip
    rng = np.random.default_rng(seed)
    reference, cpu = validators(rng, boxes)
    history = random_history(rng, matches, capacity, players)
    batch = random_projectiles(rng, history, projectiles)
    expected = reference.resolve_projectiles(history, batch)
    got = cpu.resolve_projectiles(history, batch, broad_phase=False)
    assert_same(expected, got, same_work=True)
    got = cpu.resolve_projectiles(history, batch, broad_phase=True)
    assert_same(expected, got, same_work=False)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), spread=st.sampled_from([4.0, 40.0, 400.0]))
def test_broad_phase_changes_no_verdict_in_large_scenes(seed, spread):
    """Hundreds of players, spread thin or packed, many shots: grid or not, same verdicts."""
    rng = np.random.default_rng(seed)
    box_min, box_max = random_boxes(rng, 20, half_width=spread)
    cpu = make_validator("cpu", box_min=box_min, box_max=box_max)
    history = random_history(rng, 2, 8, 300, half_width=spread, speed=8.0)
    batch = random_hitscan(rng, history, 500)
    without = cpu.resolve_hitscan(history, batch, broad_phase=False)
    with_grid = cpu.resolve_hitscan(history, batch, broad_phase=True)
    assert_same(without, with_grid, same_work=False)
    assert with_grid.hitbox_tests.sum() <= without.hitbox_tests.sum() * 2
    flights = random_projectiles(rng, history, 40, max_speed=300.0)
    assert_same(
        cpu.resolve_projectiles(history, flights, broad_phase=False),
        cpu.resolve_projectiles(history, flights, broad_phase=True),
        same_work=False,
    )


@pytest.mark.parametrize(("hitscan", "flights", "grid"), [(1, 1, False), (96, 8, True)])
def test_calls_that_do_not_say_build_the_grid_only_for_batches_that_pay_for_it(
    hitscan: int, flights: int, grid: bool
) -> None:
    """A tick's single bullet is tested against every player (cheaper than building the
    grid); a batch big enough for it takes the grid. Which path ran shows in the work."""
    rng = np.random.default_rng(7)
    cpu = make_validator("cpu")
    history = random_history(rng, 1, 8, 300, half_width=400.0, speed=8.0)
    shots = random_hitscan(rng, history, hitscan)
    chosen = cpu.resolve_hitscan(history, shots)
    assert_same(cpu.resolve_hitscan(history, shots, broad_phase=grid), chosen, same_work=True)
    projectiles = random_projectiles(rng, history, flights, max_speed=300.0)
    chosen_flights = cpu.resolve_projectiles(history, projectiles)
    asked = cpu.resolve_projectiles(history, projectiles, broad_phase=grid)
    assert_same(asked, chosen_flights, same_work=True)
    without = cpu.resolve_hitscan(history, shots, broad_phase=False)
    assert bool(without.hitbox_tests.sum() > chosen.hitbox_tests.sum()) is grid
    never = make_validator("cpu", broad_phase=False).resolve_hitscan(history, shots)
    assert_same(without, never, same_work=True)
