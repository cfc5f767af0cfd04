"""Property: the numba.cuda kernels give what the NumPy reference gives.

The CUDA simulator must be switched on before numba is imported, so these tests run in their
own pytest invocation::

    NUMBA_ENABLE_CUDASIM=1 .venv/bin/python -m pytest tests/cuda

The simulator runs every thread as Python, so the scenes are tiny. On a real GPU the same
tests run against the hardware; NVVM may fuse multiply-adds there, so distances are compared
to within rounding instead of bit for bit.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from server.sim.hitreg import History, HitscanShots, ProjectileShots, make_validator
from server.sim.hitreg.cuda import cuda_available, simulator_enabled
from server.sim.hitreg.scenes import (
    random_boxes,
    random_history,
    random_hitscan,
    random_projectiles,
)
from shared.weapons import flight_step

pytestmark = pytest.mark.cuda

if not cuda_available():
    pytest.skip(
        "no CUDA device: run with NUMBA_ENABLE_CUDASIM=1 (set before numba is imported)",
        allow_module_level=True,
    )

EXACT = simulator_enabled()
PROPERTY = settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)  # fmt: skip
FLOAT_FIELDS = {"distance", "time", "position", "velocity"}

tiny_scene = {
    "seed": st.integers(0, 2**32 - 1),
    "matches": st.integers(1, 2),
    "capacity": st.integers(1, 4),
    "players": st.integers(1, 5),
    "boxes": st.integers(0, 3),
    "broad_phase": st.booleans(),
}


def assert_same(expected, got) -> None:
    for name in type(expected).__dataclass_fields__:
        if name == "hitbox_tests":
            continue
        want, have = getattr(expected, name), getattr(got, name)
        if EXACT or name not in FLOAT_FIELDS:
            np.testing.assert_array_equal(have, want, err_msg=name)
        else:
            np.testing.assert_allclose(have, want, rtol=1e-9, atol=1e-9, err_msg=name)


def pair(rng: np.random.Generator, boxes: int):
    box_min, box_max = random_boxes(rng, boxes)
    return (
        make_validator("reference", box_min=box_min, box_max=box_max),
        make_validator("cuda", box_min=box_min, box_max=box_max),
    )


@PROPERTY
@given(**tiny_scene, shots=st.integers(1, 8))
def test_hitscan_kernel_equals_reference(
    seed, matches, capacity, players, boxes, broad_phase, shots
):  # fmt: skip
    rng = np.random.default_rng(seed)
    reference, gpu = pair(rng, boxes)
    history = random_history(rng, matches, capacity, players)
    batch = random_hitscan(rng, history, shots)
    expected = reference.resolve_hitscan(history, batch)
    assert_same(expected, gpu.resolve_hitscan(history, batch, broad_phase=broad_phase))


@PROPERTY
@given(**tiny_scene, projectiles=st.integers(1, 3))
def test_projectile_kernel_equals_reference(
    seed, matches, capacity, players, boxes, broad_phase, projectiles
):  # fmt: skip
    rng = np.random.default_rng(seed)
    reference, gpu = pair(rng, boxes)
    history = random_history(rng, matches, capacity, players)
    batch = random_projectiles(rng, history, projectiles, max_speed=30.0)
    expected = reference.resolve_projectiles(history, batch)
    assert_same(expected, gpu.resolve_projectiles(history, batch, broad_phase=broad_phase))


def test_head_shot_and_projectile_through_the_facade():
    dt = 1.0 / 60.0
    feet = np.zeros((1, 2, 2, 3))
    feet[0, :, 1, 0] = 10.0
    history = History(
        times=np.array([[0.0, dt]]),
        positions=feet,
        alive=np.ones((1, 2, 2), dtype=np.uint8),
        start=np.array([0]),
        count=np.array([2]),
    )
    gpu = make_validator("cuda", box_min=np.zeros((0, 3)), box_max=np.zeros((0, 3)))
    gpu.warm_up()
    shot = HitscanShots(
        match=[0], shooter=[0], origin=[[0.0, 0.0, 1.62]], direction=[[1.0, 0.0, 0.0]],
        max_range=100.0, view_time=[0.5 * dt],
    )  # fmt: skip
    result = gpu.resolve_hitscan(history, shot)
    assert (result.kind[0], result.victim[0], result.hitbox[0]) == (1, 1, 1)
    assert result.distance[0] == pytest.approx(9.86)
    flight = ProjectileShots(
        match=[0], shooter=[0], origin=[[0.0, 0.0, 1.2]], velocity=[[600.0, 0.0, 0.0]],
        gravity=9.81, spawn_time=[0.0], end_time=dt, expire_time=1.0,
        step_time=flight_step(600.0, 9.81, 1.0),
    )  # fmt: skip
    result = gpu.resolve_projectiles(history, flight)
    assert (result.kind[0], result.victim[0], result.hitbox[0]) == (1, 1, 2)
    assert result.time[0] == pytest.approx(9.78 / 600.0, abs=1e-4)


@pytest.mark.skipif(not EXACT, reason="only the simulator is never the automatic choice")
def test_auto_never_picks_the_simulator():
    assert make_validator("auto").backend == "cpu"
