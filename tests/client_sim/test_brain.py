"""What the bots press: bounded moves, the target behaviours, perception and cover."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from client_sim.brain import BEHAVIOURS, PACE_SPEED, Brain
from shared.arena_map import default_map
from shared.hitbox import ray_world_entry
from shared.protocol.inputs import quantize_angle, quantize_move
from tests.client_sim.glances import perceive

ARENA = default_map()
RATE = 60
DT = 1.0 / RATE


def brain(count: int = 1, behaviour: str = "play", seed: int = 0, **kw: float) -> Brain:
    return Brain(count, ARENA, np.random.default_rng(seed), behaviour=behaviour, **kw)


def feet(*points: tuple[float, float]) -> np.ndarray:
    return np.array([[x, y, 0.0] for x, y in points])


def test_an_unknown_behaviour_is_refused() -> None:
    with pytest.raises(ValueError, match="behaviour"):
        brain(behaviour="camp")


xy = st.floats(-29.0, 29.0)


@settings(max_examples=60, deadline=None)
@given(
    data=st.data(),
    behaviour=st.sampled_from(BEHAVIOURS),
    n=st.integers(1, 8),
    now=st.floats(0.0, 100.0),
    seed=st.integers(0, 2**16),
)
def test_moves_never_exceed_unit_length(
    data: st.DataObject, behaviour: str, n: int, now: float, seed: int
) -> None:
    bots = brain(n, behaviour, seed)
    pos = np.array(
        [[data.draw(xy), data.draw(xy), data.draw(st.floats(0.0, 2.0))] for _ in range(n)]
    )
    bots.threat[:] = [[data.draw(xy), data.draw(xy), 0.0] for _ in range(n)]
    bots.has_threat[:] = data.draw(st.lists(st.booleans(), min_size=n, max_size=n))
    bots.in_cover_mode[:] = data.draw(st.lists(st.booleans(), min_size=n, max_size=n))
    for tick in range(3):
        intent = bots.decide(pos, now + tick * DT, DT)
        length = np.sqrt(intent.move[:, 0] ** 2 + intent.move[:, 1] ** 2)
        assert np.all(length <= 1.0)
        assert np.all(np.isfinite(intent.yaw)) and np.all(np.isfinite(intent.pitch))
        assert np.all(np.abs(intent.yaw) <= math.pi)
        assert np.all(np.abs(intent.pitch) <= math.pi / 2)


def engaged(behaviour: str, n: int = 4) -> tuple[Brain, np.ndarray]:
    """Bots with an enemy in sight, so "play" would strafe."""
    bots = brain(n, behaviour, seed=3)
    pos = feet(*[(-20.0 + 5 * i, -20.0) for i in range(n)])
    bots.threat[:] = feet(*[(-20.0 + 5 * i, -10.0) for i in range(n)])
    bots.has_threat[:] = True
    return bots, pos


def test_still_targets_never_move() -> None:
    bots, pos = engaged("still")
    for tick in range(120):
        assert bots.decide(pos, tick * DT, DT).move.tolist() == [[0.0, 0.0]] * 4


def test_pacing_targets_move_only_along_x_at_pace_speed() -> None:
    bots, pos = engaged("pace")
    directions = set()
    for tick in range(600):
        move = bots.decide(pos, tick * DT, DT).move
        assert move[:, 1].tolist() == [0.0] * 4
        assert set(np.abs(move[:, 0]).tolist()) <= {quantize_move(PACE_SPEED), 0.0}
        directions.update(np.sign(move[:, 0]).tolist())
    assert {-1.0, 1.0} <= directions  # to and fro


def test_strafing_targets_dodge_along_x_reversing_often() -> None:
    bots, pos = engaged("strafe")
    previous, reversals = None, 0
    for tick in range(600):  # ten seconds
        move = bots.decide(pos, tick * DT, DT).move
        assert move[:, 1].tolist() == [0.0] * 4
        assert set(np.abs(move[:, 0]).tolist()) <= {quantize_move(PACE_SPEED), 0.0}
        sign = np.sign(move[:, 0])
        if previous is not None:
            reversals += int(np.sum(sign * previous < 0))
        previous = sign
    # Each of the 4 reverses every 0.3-0.8 s: 12-33 times in ten seconds.
    assert 4 * 12 <= reversals <= 4 * 34


def test_marksmen_never_move() -> None:
    bots, pos = engaged("marksman")
    for tick in range(120):
        assert bots.decide(pos, tick * DT, DT).move.tolist() == [[0.0, 0.0]] * 4


def test_players_look_at_their_threat_and_strafe_across_its_line() -> None:
    bots, pos = engaged("play")
    calm, _ = engaged("play")  # the same bots (same seed), with nobody in sight
    calm.has_threat[:] = False
    intent = bots.decide(pos, 0.0, DT)
    north = quantize_angle(math.pi / 2, math.pi)
    assert intent.yaw.tolist() == [north] * 4  # the threats are due north
    assert intent.pitch.tolist() == [0.0] * 4
    calm_intent = calm.decide(pos, 0.0, DT)
    heading = calm_intent.move.copy()
    # Along its move (both kept to their steps: a move's step turns it by a milliradian).
    assert np.allclose(calm_intent.yaw, np.arctan2(heading[:, 1], heading[:, 0]), atol=2e-3)
    # Strafing adds a sideways (east-west) push to the walk towards the goal.
    strafed = intent.move - heading
    assert np.all(np.abs(strafed[:, 0]) > 1e-3)


def test_targets_never_jump() -> None:
    for behaviour in ("still", "pace", "marksman"):
        bots, pos = engaged(behaviour, n=50)
        for tick in range(100):
            assert not bots.decide(pos, tick * DT, DT).buttons.any()


# -- perception -------------------------------------------------------------------------------


def test_perceive_notes_the_nearest_visible_enemy_in_range() -> None:
    bots = brain(cover_seeking=0.0)
    me = np.array([-26.0, -20.0, 0.0])
    enemies = feet((-26.0, -5.0), (-26.0, -12.0))
    perceive(bots, 0, me, enemies, np.array([11, 12]), now=2.0)
    assert bots.has_threat[0] and bots.threat_id[0] == 12
    assert bots.threat[0].tolist() == [-26.0, -12.0, 0.0]
    assert bots.threat_since[0] == 2.0


def test_perceive_keeps_the_time_a_threat_was_first_seen() -> None:
    bots = brain(cover_seeking=0.0)
    me = np.array([-26.0, -20.0, 0.0])
    perceive(bots, 0, me, feet((-26.0, -12.0)), np.array([12]), now=2.0)
    perceive(bots, 0, me, feet((-25.0, -12.0)), np.array([12]), now=2.5)
    assert bots.threat_since[0] == 2.0
    assert bots.threat[0].tolist() == [-25.0, -12.0, 0.0]  # but follows it
    perceive(bots, 0, me, feet((-25.0, -12.0)), np.array([13]), now=3.0)
    assert bots.threat_since[0] == 3.0  # somebody else


def test_perceive_ignores_enemies_behind_a_wall() -> None:
    # The wall from x 4 to 12 at y 8..9 stands between y = 0 and y = 15.
    bots = brain(cover_seeking=0.0)
    me = np.array([8.0, 0.0, 0.0])
    perceive(bots, 0, me, feet((8.0, 15.0)), np.array([5]), now=1.0)
    assert not bots.has_threat[0] and bots.threat_id[0] == -1
    # The nearest is hidden, a farther one in the open is seen.
    perceive(bots, 0, me, feet((8.0, 15.0), (20.0, 5.0)), np.array([5, 6]), now=1.0)
    assert bots.has_threat[0] and bots.threat_id[0] == 6


def test_perceive_ignores_enemies_out_of_range() -> None:
    bots = brain(cover_seeking=0.0, engage_range=25.0)
    me = np.array([-26.0, -26.0, 0.0])
    perceive(bots, 0, me, feet((-26.0, -0.5)), np.array([5]), now=1.0)  # 25.5 m
    assert not bots.has_threat[0]
    perceive(bots, 0, me, feet((-26.0, -1.0)), np.array([5]), now=1.0)  # 25 m exactly
    assert bots.has_threat[0]


def test_perceive_only_glances_at_the_three_nearest() -> None:
    bots = brain(cover_seeking=0.0)
    me = np.array([8.0, 0.0, 0.0])
    hidden = [(7.0, 15.0), (8.0, 15.0), (9.0, 15.0)]  # behind the wall, nearer
    enemies = feet(*hidden, (8.0, -16.0))  # in the open, farther
    perceive(bots, 0, me, enemies, np.array([1, 2, 3, 4]), now=1.0)
    assert not bots.has_threat[0]


def test_each_first_sight_of_an_enemy_is_noted_once() -> None:
    bots = brain(cover_seeking=0.0)
    me = np.array([-26.0, -20.0, 0.0])
    perceive(bots, 0, me, feet((-26.0, -12.0)), np.array([12]), now=2.0)
    perceive(bots, 0, me, feet((-25.0, -12.0)), np.array([12]), now=2.5)  # still in sight
    perceive(bots, 0, me, np.zeros((0, 3)), np.zeros(0, dtype=np.int64), now=3.0)  # lost
    perceive(bots, 0, me, feet((-25.0, -12.0)), np.array([12]), now=3.5)  # seen again
    perceive(bots, 0, me, feet((-25.0, -12.0)), np.array([13]), now=4.0)  # somebody else
    assert bots.sightings == [(0, 12, 2.0), (0, 12, 3.5), (0, 13, 4.0)]


def test_losing_sight_clears_the_threat_and_cover_mode() -> None:
    bots = brain(cover_seeking=1.0)
    me = np.array([0.0, -3.0, 0.0])
    perceive(bots, 0, me, feet((0.0, -10.0)), np.array([5]), now=1.0)
    assert bots.has_threat[0] and bots.in_cover_mode[0]
    perceive(bots, 0, me, np.zeros((0, 3)), np.zeros(0, dtype=np.int64), now=2.0)
    assert not bots.has_threat[0] and not bots.in_cover_mode[0]
    assert bots.threat_id[0] == -1


# -- cover ------------------------------------------------------------------------------------


def crate_between(point: np.ndarray, threat: np.ndarray) -> bool:
    """Whether a box blocks the threat's eye from a crouching bot's chest at ``point``."""
    chest = np.array([point[0], point[1], 1.2])
    eye = threat + (0.0, 0.0, 1.6)
    span = chest - eye
    length = float(np.linalg.norm(span))
    return ray_world_entry(eye, span / length, length, ARENA.box_min, ARENA.box_max) < length


def test_a_new_threat_sends_a_cover_seeker_behind_the_nearest_crate() -> None:
    bots = brain(cover_seeking=1.0)
    me = np.array([0.0, -3.0, 0.0])
    threat = np.array([0.0, -10.0, 0.0])
    perceive(bots, 0, me, threat[None], np.array([5]), now=1.0)
    assert bots.in_cover_mode[0]
    # The crate at the centre (-1..1 square): its far face from the threat.
    assert bots.goal[0].tolist() == [0.0, 1.8]
    assert crate_between(bots.goal[0], threat)


def test_bots_that_do_not_seek_cover_keep_their_goal() -> None:
    bots = brain(cover_seeking=0.0)
    goal = bots.goal.copy()
    perceive(bots, 0, np.array([0.0, -3.0, 0.0]), feet((0.0, -10.0)), np.array([5]), now=1.0)
    assert bots.goal.tolist() == goal.tolist() and not bots.in_cover_mode[0]


def test_a_bot_in_cover_stays_put_while_its_goal_lasts() -> None:
    bots = brain(cover_seeking=1.0)
    bots.decide(feet((0.0, -3.0)), 0.0, DT)  # the first decision sets a wander deadline
    deadline = float(bots.goal_deadline[0])
    assert 3.0 <= deadline <= 8.0
    perceive(bots, 0, np.array([0.0, -3.0, 0.0]), feet((0.0, -10.0)), np.array([5]), now=1.0)
    at_cover = feet((0.0, 1.8))
    ticks = int((deadline - 1.0) * RATE) - 1
    for tick in range(ticks):
        intent = bots.decide(at_cover, 1.0 + tick * DT, DT)
        assert intent.move.tolist() == [[0.0, 0.0]]
        south = quantize_angle(-math.pi / 2, math.pi)
        assert intent.yaw.tolist() == [south]  # still watching the threat due south


def test_cover_against_a_threat_at_a_grazing_angle_is_behind_a_crate() -> None:
    bots = brain(cover_seeking=1.0)
    me = np.array([3.0, 2.0, 0.0])
    threat = np.array([15.0, -0.3, 0.0])
    perceive(bots, 0, me, threat[None], np.array([5]), now=1.0)
    assert bots.has_threat[0] and bots.in_cover_mode[0]
    assert crate_between(bots.goal[0], threat), bots.goal[0].tolist()
