"""Exact, analytic cases of lag-compensated hit registration.

Each case runs on the NumPy reference (the specification) and on the numba CPU kernel with
and without the broad phase, through the public facade.
"""

from __future__ import annotations

import math
import os

import numpy as np
import pytest

from server.sim.hitreg import (
    BackendUnavailable,
    History,
    HitscanResults,
    HitscanShots,
    HitValidator,
    ProjectileShots,
    make_validator,
)
from server.sim.hitreg.reference import (
    flight_chords,
    interpolate_positions,
    snapshot_bracket,
)
from shared.hitbox import (
    HIT_NONE,
    HIT_PLAYER,
    HIT_WORLD,
    HITBOX_HEAD,
    HITBOX_LEGS,
    HITBOX_MIN_RADIUS,
    HITBOX_TORSO,
)
from shared.weapons import flight_step

DT = 1.0 / 60.0
NO_BOXES = np.zeros((0, 3))


def ring(times, feet, alive=None, *, capacity=None, start=0) -> History:
    """One match's history: logical snapshot i (time ``times[i]``, feet ``feet[i]``, P x 3)
    stored at physical index ``(start + i) % capacity``."""
    feet = np.asarray(feet, dtype=np.float64)
    n, players = feet.shape[:2]
    capacity = capacity or n
    alive = np.ones((n, players), dtype=np.uint8) if alive is None else np.asarray(alive)
    times_ring = np.zeros((1, capacity))
    feet_ring = np.zeros((1, capacity, players, 3))
    alive_ring = np.zeros((1, capacity, players), dtype=np.uint8)
    for i in range(n):
        h = (start + i) % capacity
        times_ring[0, h] = times[i]
        feet_ring[0, h] = feet[i]
        alive_ring[0, h] = alive[i]
    return History(
        times=times_ring,
        positions=feet_ring,
        alive=alive_ring,
        start=np.array([start]),
        count=np.array([n]),
    )


def standing(*xy: tuple[float, float], snapshots: int = 2, t0: float = 0.0) -> History:
    """Players standing still at the given x/y over ``snapshots`` ticks from ``t0``."""
    feet = [[(x, y, 0.0) for x, y in xy]] * snapshots
    return ring([t0 + i * DT for i in range(snapshots)], feet)


def hitscan(origin, direction, view_time, *, shooter=0, max_range=100.0, match=0):
    direction = np.asarray(direction, dtype=np.float64)
    return HitscanShots(
        match=np.array([match]),
        shooter=np.array([shooter]),
        origin=np.array([origin], dtype=np.float64),
        direction=np.array([direction / np.linalg.norm(direction)]),
        max_range=max_range,
        view_time=np.array([view_time]),
    )


def projectile(origin, velocity, spawn, end, *, gravity=0.0, expire=10.0, shooter=0, step=None):
    """One projectile; its chords (``step``) by default as the rules cut a flight launched
    here (a flight continued from an earlier call passes the launch's own)."""
    if step is None:
        step = flight_step(np.linalg.norm(velocity), gravity, expire - spawn)
    return ProjectileShots(
        match=np.array([0]),
        shooter=np.array([shooter]),
        origin=np.array([origin], dtype=np.float64),
        velocity=np.array([velocity], dtype=np.float64),
        gravity=gravity,
        spawn_time=np.array([spawn]),
        end_time=end,
        expire_time=expire,
        step_time=step,
    )


class Backend:
    """A validator plus the broad-phase setting to call it with."""

    def __init__(self, validator: HitValidator, broad_phase: bool) -> None:
        self.validator = validator
        self.broad_phase = broad_phase

    def shoot(self, history, shots, boxes=(NO_BOXES, NO_BOXES)):
        validator = make_validator(self.validator.backend, box_min=boxes[0], box_max=boxes[1])
        result = validator.resolve_hitscan(history, shots, broad_phase=self.broad_phase)
        return (
            int(result.kind[0]),
            int(result.victim[0]),
            int(result.hitbox[0]),
            float(result.distance[0]),
        )

    def fly(self, history, shots, boxes=(NO_BOXES, NO_BOXES)):
        validator = make_validator(self.validator.backend, box_min=boxes[0], box_max=boxes[1])
        return validator.resolve_projectiles(history, shots, broad_phase=self.broad_phase)


@pytest.fixture(
    scope="module",
    params=[("reference", False), ("cpu", False), ("cpu", True)],
    ids=["reference", "cpu", "cpu-broad-phase"],
)
def backend(request) -> Backend:
    name, broad_phase = request.param
    return Backend(make_validator(name), broad_phase)


# -- rewinding -------------------------------------------------------------------------------


def test_bracket_interpolates_clamps_and_prefers_exact_snapshots():
    history = ring([1.0, 1.1, 1.2], np.zeros((3, 1, 3)), capacity=5, start=3)  # wraps around
    assert snapshot_bracket(history, 0, 0.5) == (3, 3, 0.0)  # before the oldest: oldest alone
    assert snapshot_bracket(history, 0, 9.0) == (0, 0, 0.0)  # after the newest: newest alone
    assert snapshot_bracket(history, 0, 1.1) == (4, 4, 0.0)  # exactly a snapshot: that one
    before, after, weight = snapshot_bracket(history, 0, 1.175)
    assert (before, after) == (4, 0) and weight == pytest.approx(0.75)
    empty = ring([1.0], np.zeros((1, 1, 3)))
    empty.count[0] = 0
    assert snapshot_bracket(empty, 0, 1.0) == (-1, -1, 0.0)


def test_interpolate_positions_is_linear_and_needs_both_snapshots_alive():
    feet = [[(0.0, 0.0, 0.0), (5.0, 0.0, 0.0)], [(1.0, 2.0, 0.0), (5.0, 0.0, 0.0)]]
    history = ring([0.0, DT], feet, alive=[[1, 1], [1, 0]])
    rewound, present = interpolate_positions(history, 0, 0.25 * DT)
    np.testing.assert_allclose(rewound[0], (0.25, 0.5, 0.0))
    assert present.tolist() == [True, False]  # slot 1 died at the second snapshot
    _, present = interpolate_positions(history, 0, -1.0)  # clamped to the first snapshot
    assert present.tolist() == [True, True]


# -- hitscan ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("z", "hitbox", "distance"),
    [(1.62, HITBOX_HEAD, 9.86), (1.2, HITBOX_TORSO, 9.78), (0.5, HITBOX_LEGS, 9.84)],
)
def test_head_torso_legs(backend, z, hitbox, distance):
    history = standing((0.0, 0.0), (10.0, 0.0))
    hit = backend.shoot(history, hitscan((0.0, 0.0, z), (1, 0, 0), 0.5 * DT))
    assert hit == (HIT_PLAYER, 1, hitbox, pytest.approx(distance, abs=1e-12))


def test_miss_over_the_head_reports_the_range(backend):
    history = standing((0.0, 0.0), (10.0, 0.0))
    assert backend.shoot(history, hitscan((0, 0, 1.9), (1, 0, 0), 0.0, max_range=60.0)) == (
        HIT_NONE, -1, 0, 60.0,
    )  # fmt: skip


def test_wall_blocks_the_shot(backend):
    history = standing((0.0, 0.0), (10.0, 0.0))
    wall = (np.array([[5.0, -2.0, 0.0]]), np.array([[5.5, 2.0, 3.0]]))
    hit = backend.shoot(history, hitscan((0, 0, 1.2), (1, 0, 0), 0.0), wall)
    assert hit == (HIT_WORLD, -1, 0, 5.0)


def test_low_cover_blocks_legs_not_head(backend):
    history = standing((0.0, 0.0), (10.0, 0.0))
    cover = (np.array([[5.0, -1.0, 0.0]]), np.array([[6.0, 1.0, 1.2]]))
    assert backend.shoot(history, hitscan((0, 0, 0.5), (1, 0, 0), 0.0), cover)[0] == HIT_WORLD
    head = backend.shoot(history, hitscan((0, 0, 1.62), (1, 0, 0), 0.0), cover)
    assert head[:3] == (HIT_PLAYER, 1, HITBOX_HEAD)


def test_sub_tick_interpolation_decides_a_target_stepping_aside(backend):
    # Slot 1 steps 0.6 m sideways between tick 0 and tick 1; the ray passes where it stood.
    feet = [[(0.0, 5.0, 0.0), (10.0, 0.0, 0.0)], [(0.0, 5.0, 0.0), (10.0, 0.6, 0.0)]]
    history = ring([0.0, DT], feet)
    early = backend.shoot(history, hitscan((0, 0, 1.2), (1, 0, 0), 0.25 * DT))
    # At a quarter tick it is 0.15 m off the ray: the torso (0.22) is still in the way.
    expected = 10.0 - math.sqrt(0.22**2 - 0.15**2)
    assert early == (HIT_PLAYER, 1, HITBOX_TORSO, pytest.approx(expected, abs=1e-12))
    late = backend.shoot(history, hitscan((0, 0, 1.2), (1, 0, 0), 0.75 * DT))
    assert late[0] == HIT_NONE  # 0.45 m off: gone


def test_rewinding_outside_the_history_clamps(backend):
    feet = [[(0.0, 9.0, 0.0), (10.0, 0.0, 0.0)], [(0.0, 9.0, 0.0), (10.0, 5.0, 0.0)]]
    history = ring([1.0, 1.0 + DT], feet)
    at_old_spot = hitscan((0, 0, 1.2), (1, 0, 0), 0.2)  # long before the oldest snapshot
    assert backend.shoot(history, at_old_spot)[:2] == (HIT_PLAYER, 1)
    too_late = hitscan((0, 0, 1.2), (1, 0, 0), 5.0)  # after the newest: it stands at y = 5
    assert backend.shoot(history, too_late)[0] == HIT_NONE
    at_new_spot = hitscan((0, 5, 1.2), (1, 0, 0), 5.0)
    assert backend.shoot(history, at_new_spot)[:2] == (HIT_PLAYER, 1)


def test_the_shooter_never_hits_himself(backend):
    # The muzzle is inside the shooter's own head; the shot must reach the target.
    history = standing((0.0, 0.0), (10.0, 0.0))
    hit = backend.shoot(history, hitscan((0, 0, 1.6), (1, 0, 0), 0.0, shooter=0))
    assert hit[:3] == (HIT_PLAYER, 1, HITBOX_HEAD)
    other = backend.shoot(history, hitscan((0, 0, 1.6), (1, 0, 0), 0.0, shooter=1))
    assert other == (HIT_PLAYER, 0, HITBOX_HEAD, 0.0)  # someone else's muzzle: hit at 0


def test_dead_or_absent_slots_are_not_hit(backend):
    feet = [[(0.0, 5.0, 0.0), (10.0, 0.0, 0.0), (20.0, 0.0, 0.0)]] * 2
    history = ring([0.0, DT], feet, alive=[[1, 0, 1], [1, 1, 1]])
    shot = hitscan((0, 0, 1.2), (1, 0, 0), 0.5 * DT)  # slot 1 is alive in only one bracket
    assert backend.shoot(history, shot)[:2] == (HIT_PLAYER, 2)
    on_second = hitscan((0, 0, 1.2), (1, 0, 0), DT)  # exactly the snapshot it is alive in
    assert backend.shoot(history, on_second)[:2] == (HIT_PLAYER, 1)


def test_exact_tie_goes_to_the_lower_slot(backend):
    history = standing((0.0, 5.0), (10.0, 0.0), (10.0, 0.0))
    assert backend.shoot(history, hitscan((0, 0, 1.2), (1, 0, 0), 0.0))[:2] == (HIT_PLAYER, 1)


def test_floor_stops_a_downward_shot(backend):
    history = standing((0.0, 0.0), (10.0, 0.0))
    hit = backend.shoot(history, hitscan((0, 0, 1.0), (1, 0, -1), 0.0))
    assert hit == (HIT_WORLD, -1, 0, pytest.approx(math.sqrt(2.0)))


# -- projectiles -----------------------------------------------------------------------------


def sidestep_history(step_at: float) -> History:
    """Slot 1 stands at x = 20 until ``step_at`` and is 3 m to the side one tick later;
    snapshots every tick over 0.2 s."""
    times = [i * DT for i in range(13)]
    feet = [[(0.0, 0.0, 0.0), (20.0, 0.0 if t <= step_at + 1e-12 else 3.0, 0.0)] for t in times]
    return ring(times, feet)


def test_projectile_hits_in_the_past(backend):
    history = sidestep_history(step_at=0.1)
    result = backend.fly(history, projectile((0, 0, 1.2), (400, 0, 0), 0.0, 0.2))
    assert (result.kind[0], result.victim[0], result.hitbox[0]) == (HIT_PLAYER, 1, HITBOX_TORSO)
    assert result.time[0] == pytest.approx((20.0 - 0.22) / 400.0, abs=1e-12)
    np.testing.assert_allclose(result.position[0], (19.78, 0.0, 1.2), atol=1e-12)
    assert result.expired[0] == 0


def test_projectile_misses_a_target_that_dodged_and_keeps_flying(backend):
    history = sidestep_history(step_at=0.0)  # gone one tick after the shot
    flight = projectile((0, 0, 1.2), (400, 0, 0), 0.0, 0.2)
    result = backend.fly(history, flight)
    assert (result.kind[0], result.expired[0]) == (HIT_NONE, 0)
    # Flown up to its last whole chord before the end: it goes on from there next call.
    step = float(flight.step_time[0])
    assert 0.2 - step < result.time[0] <= 0.2
    assert result.time[0] == pytest.approx(math.floor(0.2 / step) * step, abs=1e-12)
    np.testing.assert_allclose(result.position[0], (400.0 * result.time[0], 0.0, 1.2))
    np.testing.assert_allclose(result.velocity[0], (400.0, 0.0, 0.0))
    # A hitscan shot at the same view time still finds it: only the projectile is dodged.
    assert backend.shoot(history, hitscan((0, 0, 1.2), (1, 0, 0), 0.0))[0] == HIT_PLAYER


def test_fast_projectile_does_not_tunnel_through_a_crossing_target(backend):
    # The target crosses the line of fire at 30 m/s; at 3000 m/s the projectile reaches it
    # after 3.3 ms, when it is 0.1 m off the line. Testing only at the end (y = 3) would miss.
    history = ring([0.0, 0.1], [[(0, 5, 0), (10, 0, 0)], [(0, 5, 0), (10, 3, 0)]])
    result = backend.fly(history, projectile((0, 0, 1.2), (3000, 0, 0), 0.0, 0.1))
    assert (result.kind[0], result.victim[0], result.hitbox[0]) == (HIT_PLAYER, 1, HITBOX_TORSO)
    assert result.time[0] == pytest.approx(9.8 / 3000.0, abs=1e-5)


def test_fast_projectile_does_not_tunnel_through_a_thin_wall(backend):
    history = standing((0.0, 5.0), (80.0, 0.0))
    wall = (np.array([[50.0, -2.0, 0.0]]), np.array([[50.05, 2.0, 3.0]]))
    result = backend.fly(history, projectile((0, 0, 1.2), (3000, 0, 0), 0.0, 2 * DT), wall)
    assert result.kind[0] == HIT_WORLD
    np.testing.assert_allclose(result.position[0], (50.0, 0.0, 1.2), atol=1e-9)


def test_gravity_drops_a_projectile_onto_the_floor(backend):
    history = standing((0.0, 50.0), snapshots=2)
    result = backend.fly(history, projectile((0, 0, 1.5), (10, 0, 0), 0.0, 1.0, gravity=9.81))
    fall = math.sqrt(2 * 1.5 / 9.81)
    assert result.kind[0] == HIT_WORLD and result.victim[0] == -1
    assert result.time[0] == pytest.approx(fall, abs=1e-3)
    np.testing.assert_allclose(result.position[0], (10 * fall, 0.0, 0.0), atol=1e-2)
    assert abs(result.position[0, 2]) < 1e-9  # on the floor, not above or below it
    assert result.velocity[0, 2] == pytest.approx(-9.81 * fall, abs=1e-2)


def test_projectile_expires_at_the_end_of_its_life(backend):
    history = standing((0.0, 50.0))
    result = backend.fly(history, projectile((0, 0, 5), (20, 0, 0), 0.0, 1.0, expire=0.05))
    assert (result.kind[0], result.expired[0]) == (HIT_NONE, 1)
    assert result.time[0] == pytest.approx(0.05)
    np.testing.assert_allclose(result.position[0], (1.0, 0.0, 5.0), atol=1e-12)


def fly_in_pieces(backend, history, flight, ends):
    """Fly ``flight`` (one projectile) to each of ``ends`` in turn, going on from where
    each call left it, as the server does tick by tick; the last call's result."""
    result = None
    for end in ends:
        result = backend.fly(
            history,
            projectile(
                flight.origin[0], flight.velocity[0], flight.spawn_time[0], end,
                gravity=float(flight.gravity[0]), expire=float(flight.expire_time[0]),
                step=float(flight.step_time[0]),
            ),
        )  # fmt: skip
        if result.kind[0] != HIT_NONE or result.expired[0]:
            break
        flight = projectile(
            result.position[0], result.velocity[0], result.time[0], end,
            gravity=float(flight.gravity[0]), expire=float(flight.expire_time[0]),
            step=float(flight.step_time[0]),
        )  # fmt: skip
    return result


def test_a_projectile_continued_tick_by_tick_hits_like_one_flight(backend):
    history = sidestep_history(step_at=1.0)  # never steps aside
    flight = projectile((0, 0, 1.3), (150, 0, 1), 0.0, 0.2, gravity=9.81)
    whole = backend.fly(history, flight)
    pieces = fly_in_pieces(backend, history, flight, [0.1, 0.2])
    assert (pieces.kind[0], pieces.victim[0]) == (whole.kind[0], whole.victim[0]) == (1, 1)
    assert pieces.hitbox[0] == whole.hitbox[0]
    assert pieces.time[0] == pytest.approx(whole.time[0], abs=1e-9)


def test_pieces_cut_the_same_chords_as_one_flight_so_a_graze_is_judged_alike(backend):
    """A target that crosses the line of fire at the moment the projectile passes: whether
    it is hit depends on where it stands at each chord's end. Flown in ticks that end at
    arbitrary times (the newest snapshot's), the projectile is tested on the same chords
    as flown in one go (as a client flies it), so both verdicts agree, hit or miss."""
    rng = np.random.default_rng(7)
    times = [i * DT for i in range(31)]
    arrive = 20.0 / 45.0
    for trial in range(30):
        # Walking off the line at 10 m/s, its torso's edge (0.22 m) within millimetres of
        # the line when the projectile arrives: cut per piece as before (equal chords
        # between each call's spawn and end), 10 of these 30 verdicts differed.
        lead = 0.22 + rng.uniform(-0.006, 0.002)
        feet = [[(0.0, 0.0, 0.0), (20.0, lead + 10.0 * (t - arrive), 0.0)] for t in times]
        history = ring(times, feet)
        flight = projectile((0, 0, 1.2), (45.0, 0, 0), 0.0, times[-1], gravity=0.0, expire=3.0)
        whole = backend.fly(history, flight)
        ends = np.sort(rng.uniform(0.0, times[-1], size=8)).tolist() + [times[-1]]
        pieces = fly_in_pieces(backend, history, flight, ends)
        assert (pieces.kind[0], pieces.victim[0], pieces.hitbox[0]) == (
            whole.kind[0], whole.victim[0], whole.hitbox[0]
        ), trial  # fmt: skip
        assert pieces.time[0] == pytest.approx(whole.time[0], abs=1e-9)


def test_a_flight_past_the_chord_cap_goes_on_next_call_on_the_same_chords():
    history = sidestep_history(step_at=1.0)
    flight = projectile((0, 0, 1.3), (150, 0, 1), 0.0, 0.2, gravity=9.81)
    whole = make_validator("reference", box_min=NO_BOXES, box_max=NO_BOXES).resolve_projectiles(
        history, flight
    )
    capped = make_validator("reference", box_min=NO_BOXES, box_max=NO_BOXES, max_substeps=10)
    result = capped.resolve_projectiles(history, flight)
    assert (result.kind[0], result.expired[0]) == (HIT_NONE, 0)
    assert result.time[0] == pytest.approx(10 * float(flight.step_time[0]), abs=1e-15)
    calls = 1
    while result.kind[0] == HIT_NONE:
        result = capped.resolve_projectiles(
            history,
            projectile(
                result.position[0], result.velocity[0], result.time[0], 0.2, gravity=9.81,
                step=float(flight.step_time[0]),
            ),
        )  # fmt: skip
        calls += 1
    assert calls > 1
    assert (result.victim[0], result.hitbox[0]) == (whole.victim[0], whole.hitbox[0])
    assert result.time[0] == pytest.approx(whole.time[0], abs=1e-9)


def test_flight_chords():
    step = 0.01
    # Whole chords that end by the end; the rest waits for the next call.
    chords, flown, expires = flight_chords(1.0, 1.055, 9.0, step, 100)
    assert (chords, expires) == (5, False) and flown == pytest.approx(0.05)
    # Nothing flown yet: the end is within the first chord (or before the spawn).
    assert flight_chords(1.0, 1.005, 9.0, step, 100) == (0, 0.0, False)
    assert flight_chords(1.0, 0.9, 9.0, step, 100) == (0, 0.0, False)
    # The expiry comes first: one shorter chord more, up to it.
    chords, flown, expires = flight_chords(1.0, 2.0, 1.025, step, 100)
    assert (chords, expires) == (3, True) and flown == pytest.approx(0.025)
    assert flight_chords(1.0, 2.0, 0.5, step, 100) == (0, 0.0, True)
    # The cap: at most so many chords a call, and no expiry when cut short.
    chords, flown, expires = flight_chords(1.0, 2.0, 1.5, step, 20)
    assert (chords, expires) == (20, False) and flown == pytest.approx(0.2)


def test_chords_never_span_more_than_the_smallest_hitbox_radius():
    for speed, gravity, life in ((45.0, 9.81, 3.0), (300.0, 9.81, 1.0), (3000.0, 0.0, 0.5)):
        step = flight_step(speed, gravity, life)
        for tau in np.linspace(0.0, life, 50):
            fastest = math.hypot(speed, gravity * tau)  # launched level: slowest case
            assert fastest * step <= HITBOX_MIN_RADIUS
            # launched straight down, the fastest any launch direction goes at tau:
            assert (speed + gravity * tau) * step <= HITBOX_MIN_RADIUS * (1 + 1e-12)


# -- the facade ------------------------------------------------------------------------------


def test_auto_falls_back_to_the_cpu_without_a_gpu():
    from server.sim.hitreg import cuda

    if cuda.cuda_available() and not cuda.simulator_enabled():
        pytest.skip("a GPU is present: auto picks it")
    assert make_validator("auto").backend == "cpu"
    with pytest.raises(BackendUnavailable, match="backend 'cuda' is unavailable"):
        make_validator("cuda")


def test_a_tick_s_small_grid_raises_no_low_occupancy_warning(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A tick's few shots launch a grid of one block: numba's warning of grids under 128
    blocks is switched off, in its config and in the environment it reloads that from,
    unless the environment asked for it."""
    from server.sim.hitreg import cuda

    configs = cuda._occupancy_configs()
    assert configs  # (numba 0.68 has the switch; numba-cuda reads numba's)
    for config in configs:
        monkeypatch.setattr(config, "CUDA_LOW_OCCUPANCY_WARNINGS", 1)
    monkeypatch.setenv(cuda.OCCUPANCY_SWITCH, "1")
    cuda._quiet_small_grids()
    assert [config.CUDA_LOW_OCCUPANCY_WARNINGS for config in configs] == [1] * len(configs)
    monkeypatch.delenv(cuda.OCCUPANCY_SWITCH)
    cuda._quiet_small_grids()
    assert [config.CUDA_LOW_OCCUPANCY_WARNINGS for config in configs] == [0] * len(configs)
    assert os.environ[cuda.OCCUPANCY_SWITCH] == "0"


def test_unknown_backend_and_bad_inputs_are_refused_with_one_line():
    with pytest.raises(ValueError, match="unknown backend 'gpu'"):
        make_validator("gpu")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unit vector"):
        HitscanShots(
            match=[0], shooter=[0], origin=[[0, 0, 1]], direction=[[2, 0, 0]],
            max_range=1.0, view_time=[0.0],
        )  # fmt: skip
    with pytest.raises(ValueError, match=r"history.positions: expected shape \(1, 2, n, 3\)"):
        History(
            times=np.zeros((1, 2)), positions=np.zeros((1, 2, 3)),
            alive=np.zeros((1, 2, 1)), start=[0], count=[1],
        )  # fmt: skip
    validator = make_validator("cpu")
    with pytest.raises(ValueError, match="match indices"):
        validator.resolve_hitscan(standing((0, 0)), hitscan((0, 0, 1), (1, 0, 0), 0.0, match=3))


def test_a_validator_refuses_bad_boxes_and_steps_with_one_line():
    with pytest.raises(ValueError, match=r"box_max: expected shape \(1, 3\), got \(2, 3\)"):
        make_validator("cpu", box_min=np.zeros((1, 3)), box_max=np.ones((2, 3)))
    with pytest.raises(ValueError, match="every box needs min <= max"):
        make_validator("cpu", box_min=np.ones((1, 3)), box_max=np.zeros((1, 3)))
    with pytest.raises(ValueError, match="max_substeps must be at least 1"):
        make_validator("reference", max_substeps=0)
    with pytest.raises(ValueError, match="step_time: every chord must last a positive time"):
        projectile((0, 0, 1), (10, 0, 0), 0.0, 1.0, step=0.0)


def test_results_are_written_into_caller_buffers():
    validator = make_validator("cpu", box_min=NO_BOXES, box_max=NO_BOXES)
    validator.warm_up()
    out = HitscanResults.allocate(1)
    history = standing((0.0, 0.0), (10.0, 0.0))
    returned = validator.resolve_hitscan(history, hitscan((0, 0, 1.2), (1, 0, 0), 0.0), out)
    assert returned is out and out.victim[0] == 1 and out.hitbox_tests[0] == 3
    wrong_size = HitscanResults.allocate(2)
    with pytest.raises(ValueError, match=r"out.kind: expected a writable C-contiguous int32"):
        validator.resolve_hitscan(history, hitscan((0, 0, 1.2), (1, 0, 0), 0.0), wrong_size)
