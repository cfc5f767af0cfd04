"""The movement model: determinism across batch sizes and modules, walls, bounds, physics."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from client_sim.prediction import SwarmPredictor
from server.sim.match import Match, MatchConfig
from shared.arena_map import ArenaMap, default_map, parse_map
from shared.movement import (
    BUTTON_FIRE,
    BUTTON_JUMP,
    PLAYER_HEIGHT,
    PLAYER_RADIUS,
    MovementParams,
    step,
    step_reference,
)
from shared.protocol import InputMessage, decode_server
from shared.protocol.inputs import quantize_move
from tests.server.frames import snapshot_for

ARENA = default_map()
PARAMS = MovementParams()
TICK_RATE = 60
DT = 1.0 / TICK_RATE
SKIN = 1e-6

# A small room where a second of running reaches a wall, a crate and the bounds.
ROOM = parse_map(
    {
        "name": "room",
        "bounds": {"min": [-5.0, -5.0], "max": [5.0, 5.0]},
        "boxes": [
            {"kind": "wall", "min": [1.5, -5.0, 0.0], "max": [2.0, 1.0, 3.0]},
            {"kind": "cover", "min": [-2.0, 1.5, 0.0], "max": [-1.0, 2.5, 1.2]},
            {"kind": "cover", "min": [-3.0, -3.0, 0.0], "max": [-2.5, -2.5, 0.5]},
        ],
        "spawns": [[0.0, 0.0], [-4.0, 4.0]],
    }
)


def one(x: float, y: float, z: float = 0.0) -> np.ndarray:
    return np.array([[x, y, z]], dtype=np.float64)


def run(
    pos: np.ndarray,
    vel: np.ndarray,
    move: tuple[float, float],
    ticks: int,
    buttons: int = 0,
    arena: ArenaMap = ARENA,
) -> tuple[np.ndarray, np.ndarray]:
    m, b = np.array([move], dtype=np.float64), np.array([buttons])
    for _ in range(ticks):
        pos, vel = step(pos, vel, m, b, DT, arena)
    return pos, vel


def inside_any_box(pos: np.ndarray, arena: ArenaMap) -> np.ndarray:
    """Per player: does its body overlap the interior of any box (strictly)?"""
    lo, hi = arena.box_min[None], arena.box_max[None]
    p = pos[:, None, :]
    return (
        (p[..., 0] + PLAYER_RADIUS > lo[..., 0])
        & (p[..., 0] - PLAYER_RADIUS < hi[..., 0])
        & (p[..., 1] + PLAYER_RADIUS > lo[..., 1])
        & (p[..., 1] - PLAYER_RADIUS < hi[..., 1])
        & (p[..., 2] + PLAYER_HEIGHT > lo[..., 2])
        & (p[..., 2] < hi[..., 2])
    ).any(axis=1)


def random_moves(rng: np.random.Generator, n: int) -> np.ndarray:
    """Move vectors of length <= 1: mostly full-speed unit vectors, some partial, some zero."""
    angle = rng.uniform(-math.pi, math.pi, n)
    length = rng.choice([0.0, 0.3, 1.0, 1.0, 1.0], n)
    move = np.stack((np.cos(angle), np.sin(angle)), axis=1) * length[:, None]
    norm = np.sqrt(move[:, 0] ** 2 + move[:, 1] ** 2)
    return move / np.maximum(norm, 1.0)[:, None]


def random_players(rng: np.random.Generator, n: int, arena: ArenaMap) -> tuple:
    """Players outside every box, some in the air, moving in random directions."""
    lo, hi = arena.bounds_min + PLAYER_RADIUS, arena.bounds_max - PLAYER_RADIUS
    pos = np.zeros((0, 3))
    while len(pos) < n:
        xy = rng.uniform(lo, hi, size=(n, 2))
        z = np.where(rng.random(n) < 0.3, rng.uniform(0.0, 0.8, n), 0.0)
        candidates = np.column_stack((xy, z))
        pos = np.concatenate((pos, candidates[~inside_any_box(candidates, arena)]))[:n]
    vel = np.column_stack((random_moves(rng, n) * 6.0, rng.uniform(-4.0, 4.0, n)))
    vel[:, 2] = np.where(pos[:, 2] > 0.0, vel[:, 2], 0.0)
    return pos, vel


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


# -- determinism ---------------------------------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([ARENA, ROOM]))
def test_a_player_steps_bit_identically_alone_and_inside_a_batch_of_fifty(
    seed: int, arena: ArenaMap
) -> None:
    rng = np.random.default_rng(seed)
    n = 50
    pos, vel = random_players(rng, n, arena)
    me = int(rng.integers(n))
    alone_pos, alone_vel = pos[[me]], vel[[me]]
    for _ in range(40):
        move = random_moves(rng, n)
        buttons = rng.integers(0, 4, n) & (BUTTON_JUMP | BUTTON_FIRE)
        pos, vel = step(pos, vel, move, buttons, DT, arena)
        alone_pos, alone_vel = step(alone_pos, alone_vel, move[[me]], buttons[[me]], DT, arena)
        assert same_bits(pos[[me]], alone_pos)
        assert same_bits(vel[[me]], alone_vel)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([ARENA, ROOM]), st.integers(1, 60))
def test_the_kernel_steps_bit_for_bit_as_the_numpy_reference(
    seed: int, arena: ArenaMap, n: int
) -> None:
    """Players anywhere (inside boxes and outside the bounds too, mid-air, jumping), any
    moves up to full length: the kernel's states are the reference's, bit for bit."""
    rng = np.random.default_rng(seed)
    lo, hi = arena.bounds_min - 1.0, arena.bounds_max + 1.0
    pos = np.column_stack(
        (rng.uniform(lo, hi, size=(n, 2)), rng.choice([0.0, 0.0, 0.3, 1.0, 2.5], n))
    )
    vel = rng.normal(0.0, 5.0, (n, 3))
    for _ in range(30):
        move = random_moves(rng, n)
        buttons = rng.integers(0, 4, n)
        kernel = step(pos, vel, move, buttons, DT, arena)
        reference = step_reference(pos, vel, move, buttons, DT, arena)
        assert same_bits(kernel[0], reference[0]) and same_bits(kernel[1], reference[1])
        pos, vel = kernel


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_every_subset_of_a_batch_steps_like_the_whole_batch(seed: int) -> None:
    rng = np.random.default_rng(seed)
    pos, vel = random_players(rng, 50, ROOM)
    for _ in range(20):
        move = random_moves(rng, 50)
        buttons = rng.integers(0, 2, 50)
        subset = np.sort(rng.choice(50, size=int(rng.integers(1, 50)), replace=False))
        sub_pos, sub_vel = step(pos[subset], vel[subset], move[subset], buttons[subset], DT, ROOM)
        pos, vel = step(pos, vel, move, buttons, DT, ROOM)
        assert same_bits(pos[subset], sub_pos)
        assert same_bits(vel[subset], sub_vel)


def test_step_does_not_modify_its_inputs() -> None:
    pos, vel = one(0.0, 0.0, 0.5), np.array([[1.0, 2.0, 3.0]])
    move, buttons = np.array([[1.0, 0.0]]), np.array([BUTTON_JUMP])
    copies = [a.copy() for a in (pos, vel, move, buttons)]
    step(pos, vel, move, buttons, DT, ARENA)
    for original, copy in zip((pos, vel, move, buttons), copies, strict=True):
        assert same_bits(original, copy)


# -- walls, cover and bounds ------------------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([ARENA, ROOM]))
def test_random_running_never_ends_inside_a_box_or_outside_the_bounds(
    seed: int, arena: ArenaMap
) -> None:
    rng = np.random.default_rng(seed)
    n = 16
    pos, vel = random_players(rng, n, arena)
    move = random_moves(rng, n)
    for tick in range(150):
        if tick % 10 == 0:  # hold a direction for a while so players press into walls
            move = random_moves(rng, n)
        pos, vel = step(pos, vel, move, rng.integers(0, 2, n), DT, arena)
        assert not inside_any_box(pos, arena).any()
        assert np.all(pos[:, :2] >= arena.bounds_min + PLAYER_RADIUS)
        assert np.all(pos[:, :2] <= arena.bounds_max - PLAYER_RADIUS)
        assert np.all(pos[:, 2] >= 0.0)


# The default map's central crate spans x, y in [-1, 1], z in [0, 1.2].
@pytest.mark.parametrize(
    ("start", "move", "axis", "face"),
    [
        ((0.0, -5.0), (0.0, 1.0), 1, -1.0 - PLAYER_RADIUS - SKIN),
        ((0.0, 5.0), (0.0, -1.0), 1, 1.0 + PLAYER_RADIUS + SKIN),
        ((-5.0, 0.0), (1.0, 0.0), 0, -1.0 - PLAYER_RADIUS - SKIN),
        ((5.0, 0.0), (-1.0, 0.0), 0, 1.0 + PLAYER_RADIUS + SKIN),
    ],
)
def test_running_into_a_box_stops_at_its_face(
    start: tuple[float, float], move: tuple[float, float], axis: int, face: float
) -> None:
    pos, vel = run(one(*start), np.zeros((1, 3)), move, 120)
    assert pos[0, axis] == face
    assert vel[0, axis] == 0.0
    assert pos[0, 1 - axis] == start[1 - axis]  # no sideways slip on a head-on hit


def test_running_diagonally_into_a_wall_slides_along_it() -> None:
    # Wall x in [4, 12], y in [8, 9]: running north-east from below it slides east.
    pos, vel = run(one(6.0, 6.0), np.zeros((1, 3)), (math.sqrt(0.5), math.sqrt(0.5)), 60)
    assert pos[0, 1] == 8.0 - PLAYER_RADIUS - SKIN
    assert vel[0, 1] == 0.0
    assert pos[0, 0] > 8.0 and vel[0, 0] > 0.0


def test_low_cover_blocks_horizontally_even_mid_jump() -> None:
    pos, vel = one(0.0, -1.6), np.zeros((1, 3))
    peak = 0.0
    for _ in range(30):  # jump repeatedly while pressing into the crate
        pos, vel = step(pos, vel, np.array([[0.0, 1.0]]), np.array([BUTTON_JUMP]), DT, ARENA)
        peak = max(peak, pos[0, 2])
        assert pos[0, 1] <= -1.0 - PLAYER_RADIUS - SKIN
    assert 0.7 < peak < 1.2  # a hop clears nothing as tall as the crate


@pytest.mark.parametrize(
    ("start", "move", "axis", "limit"),
    [
        ((28.0, 20.0), (1.0, 0.0), 0, 30.0 - PLAYER_RADIUS),
        ((-28.0, 20.0), (-1.0, 0.0), 0, -30.0 + PLAYER_RADIUS),
        ((20.0, 28.0), (0.0, 1.0), 1, 30.0 - PLAYER_RADIUS),
        ((20.0, -28.0), (0.0, -1.0), 1, -30.0 + PLAYER_RADIUS),
    ],
)
def test_bounds_clamp_position_and_stop_velocity(
    start: tuple[float, float], move: tuple[float, float], axis: int, limit: float
) -> None:
    pos, vel = run(one(*start), np.zeros((1, 3)), move, 90)
    assert pos[0, axis] == limit
    assert vel[0, axis] == 0.0


def test_a_player_placed_outside_the_bounds_is_pulled_back_in() -> None:
    pos, _ = step(one(100.0, -100.0), np.zeros((1, 3)), np.zeros((1, 2)), [0], DT, ARENA)
    assert pos[0, :2].tolist() == [30.0 - PLAYER_RADIUS, -30.0 + PLAYER_RADIUS]


# -- ground physics ---------------------------------------------------------------------------


def test_friction_brings_a_player_to_rest_exactly_when_move_is_zero() -> None:
    pos, vel = one(20.0, 20.0), np.array([[6.0, -3.0, 0.0]])
    speeds = []
    for _ in range(60):
        pos, vel = step(pos, vel, np.zeros((1, 2)), np.zeros(1, dtype=np.int64), DT, ARENA)
        speeds.append(math.hypot(vel[0, 0], vel[0, 1]))
    assert speeds[-1] == 0.0
    moving = [s for s in speeds if s > 0.0]
    assert moving == sorted(moving, reverse=True) and len(moving) == len(set(moving))
    rest = pos.copy()
    pos, vel = run(pos, vel, (0.0, 0.0), 10)
    assert same_bits(pos, rest)  # at rest it stays put


def test_holding_a_direction_reaches_max_speed() -> None:
    _, vel = run(one(-25.0, 25.0), np.zeros((1, 3)), (1.0, 0.0), 30)
    assert vel[0, 0] == pytest.approx(PARAMS.max_speed, rel=0.02)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_ground_speed_never_exceeds_max_speed(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 20
    pos, vel = random_players(rng, n, ARENA)
    pos[:, 2] = 0.0
    vel[:, 2] = 0.0
    for _ in range(100):
        pos, vel = step(pos, vel, random_moves(rng, n), np.zeros(n, dtype=np.int64), DT, ARENA)
        speed = np.sqrt(vel[:, 0] ** 2 + vel[:, 1] ** 2)
        assert np.all(speed <= PARAMS.max_speed * (1.0 + 1e-12))


def test_a_jump_rises_and_lands_back_exactly_on_the_floor() -> None:
    pos, vel = one(-25.0, 25.0), np.zeros((1, 3))
    heights = []
    for tick in range(80):
        buttons = np.array([BUTTON_JUMP if tick == 0 else 0])
        pos, vel = step(pos, vel, np.zeros((1, 2)), buttons, DT, ARENA)
        heights.append(pos[0, 2])
    airborne = [h for h in heights if h > 0.0]
    flight = 2 * PARAMS.jump_speed / PARAMS.gravity
    assert abs(len(airborne) - flight * TICK_RATE) <= 2
    assert heights[: len(airborne)] == airborne  # one continuous flight from the first tick
    peak = PARAMS.jump_speed**2 / (2 * PARAMS.gravity)
    assert max(airborne) == pytest.approx(peak, abs=0.05)
    assert heights[-1] == 0.0 and vel[0, 2] == 0.0
    assert pos[0, :2].tolist() == [-25.0, 25.0]


def test_holding_jump_in_the_air_does_not_jump_again() -> None:
    pos, vel = one(-25.0, 25.0), np.zeros((1, 3))
    vertical = []
    for _ in range(40):  # lands after ~49 ticks: the whole window is one flight
        pos, vel = step(pos, vel, np.zeros((1, 2)), np.array([BUTTON_JUMP]), DT, ARENA)
        vertical.append(vel[0, 2])
    assert all(b < a for a, b in itertools.pairwise(vertical))


def test_fire_button_does_not_affect_movement() -> None:
    a = run(one(0.0, -20.0), np.zeros((1, 3)), (0.6, 0.8), 30, buttons=BUTTON_FIRE)
    b = run(one(0.0, -20.0), np.zeros((1, 3)), (0.6, 0.8), 30, buttons=0)
    assert same_bits(a[0], b[0]) and same_bits(a[1], b[1])


# -- server and bot prediction agree --------------------------------------------------------

unit_moves = st.tuples(
    st.floats(-1.0, 1.0, allow_nan=False), st.floats(-1.0, 1.0, allow_nan=False)
).filter(lambda m: math.sqrt(m[0] * m[0] + m[1] * m[1]) <= 1.0)
# What a client that keeps its moves to the protocol's steps sends (the bots do).
unit_moves = unit_moves.map(lambda m: (quantize_move(m[0]), quantize_move(m[1])))
commands = st.lists(
    st.tuples(
        st.one_of(unit_moves, st.sampled_from([(1.0, 0.0), (0.0, -1.0), (0.0, 0.0)])),
        st.sampled_from([0, BUTTON_JUMP, BUTTON_FIRE]),
    ),
    min_size=1,
    max_size=90,
)


def input_message(seq: int, move: tuple[float, float], buttons: int) -> InputMessage:
    return InputMessage(
        seq=seq,
        tick=seq,
        move=move,
        yaw=0.0,
        pitch=0.0,
        buttons=buttons,
        view_time=0.0,
        ack_tick=-1,
    )


@settings(max_examples=30, deadline=None)
@given(commands, st.sampled_from([ARENA, ROOM]), st.integers(0, 3))
def test_server_match_and_bot_prediction_agree_bit_for_bit(
    moves: list[tuple[tuple[float, float], int]], arena: ArenaMap, others: int
) -> None:
    match = Match(MatchConfig(arena=arena, tick_rate=TICK_RATE, max_players=8))
    for i in range(others):  # other players share the server's batch
        match.join(f"other{i}", 0.1)
    seat = match.join("me", 0.1)
    predictor = SwarmPredictor(3, arena, TICK_RATE)
    bot = 1
    predictor.place(bot, match.world.pos[seat.slot].copy(), np.zeros(3))
    for seq, (move, buttons) in enumerate(moves):
        match.receive_input(seat.slot, input_message(seq, move, buttons), arrival=0.0)
        for slot in match.seats:
            if slot != seat.slot:  # others run in circles
                match.receive_input(slot, input_message(seq, (0.0, 1.0), BUTTON_JUMP), 0.0)
        match.tick()
        predictor.apply(np.array([bot]), np.array([move]), np.array([buttons]))
        assert same_bits(match.world.pos[seat.slot], predictor.pos[bot])
        assert same_bits(match.world.vel[seat.slot], predictor.vel[bot])


@settings(max_examples=15, deadline=None)
@given(commands, st.integers(1, 8))
def test_reconciling_with_a_deterministic_server_never_corrects_anything(
    moves: list[tuple[tuple[float, float], int]], delay: int
) -> None:
    """Inputs reach the server ``delay`` ticks late; every replay lands exactly where the
    prediction was, so the measured prediction error is exactly zero."""
    match = Match(MatchConfig(arena=ROOM, tick_rate=TICK_RATE, max_players=2))
    seat = match.join("me", 0.1)
    predictor = SwarmPredictor(1, ROOM, TICK_RATE)
    predictor.place(0, match.world.pos[seat.slot].copy(), np.zeros(3))
    in_flight: list[InputMessage] = []
    for seq, (move, buttons) in enumerate(moves):
        predictor.apply(np.array([0]), np.array([move]), np.array([buttons]))
        in_flight.append(input_message(seq, move, buttons))
        if len(in_flight) > delay:
            match.receive_input(seat.slot, in_flight.pop(0), arrival=0.0)
        result = match.tick()
        snapshot = decode_server(snapshot_for(match, result, seat.slot))
        if snapshot.ack >= 0:
            predicted = predictor.pos[0].copy()
            predictor.authoritative(0, snapshot.ack, snapshot.you)
            predictor.reconcile()
            assert same_bits(predictor.pos[0], predicted)
    errors = predictor.error_samples()
    assert len(errors) == max(0, len(moves) - delay)
    assert np.all(errors == 0.0)
