"""Fog of war: the kernel equals its NumPy reference exactly, the rule never hides a player
someone could see from where the pair may be within the margin, small exact scenes, and
the account of records sent while hidden."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from server.sim.fog import Fog
from server.sim.fog.kernel import fog_sight, scratch_for, withhold
from server.sim.fog.reference import fog_sight as reference_sight
from server.sim.fog.reference import movement_region, region_corners, segments_blocked
from shared.arena_map import default_map
from shared.movement import BUTTON_JUMP, MovementParams, step
from shared.sightlines import SIGHT_HEIGHTS, sight_blocked

PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ARENA = default_map()
PERIOD = 1 / 30


def fog(peek_s: float = 0.1) -> Fog:
    return Fog(ARENA, MovementParams(), PERIOD, peek_s)


def random_scene(rng: np.random.Generator, players: int, boxes: int):
    """Feet near and among a few walls (some players on a box's top or mid-jump), every
    pair a candidate or not at random, reaches from nothing to several metres."""
    lo = rng.uniform(-8, 8, (boxes, 3)).round(2)
    lo[:, 2] = 0.0
    size = rng.uniform(0.2, 6.0, (boxes, 3)).round(2)
    size[:, 2] = rng.choice([1.5, 3.0, 0.7], boxes)
    feet = rng.uniform(-10, 10, (players, 3)).round(3)
    feet[:, 2] = rng.choice([0.0, 0.0, 0.4, 1.5], players)
    if players and rng.random() < 0.3:  # exact ties: players on one axis-parallel line
        feet[:, 1] = feet[0, 1]
    viewers = rng.permutation(players)[: rng.integers(0, players + 1)]
    candidates = rng.random((len(viewers), players)) < 0.8
    reach = rng.choice([0.0, 0.5, 1.7, 4.0], len(viewers))
    return viewers, feet, reach, candidates, lo, lo + size


@PROPERTY
@given(
    seed=st.integers(0, 2**32 - 1),
    players=st.integers(1, 12),
    boxes=st.integers(0, 6),
    body_reach=st.sampled_from([0.0, 0.8, 2.5]),
)
def test_kernel_equals_reference(seed, players, boxes, body_reach):
    rng = np.random.default_rng(seed)
    viewers, feet, reach, candidates, box_min, box_max = random_scene(rng, players, boxes)
    shape = fog().shape
    inner_min, inner_max = box_min + 0.001, box_max - 0.001
    args = (viewers, feet, reach, body_reach, candidates, box_min, box_max, inner_min, inner_max,
            SIGHT_HEIGHTS, shape)  # fmt: skip
    seen, shown = reference_sight(*args)
    got_seen, got_shown = np.ones_like(seen), np.ones_like(shown)
    fog_sight(*args, scratch_for(len(box_min)), np.empty((players, 2, 3)), got_seen, got_shown)
    np.testing.assert_array_equal(got_seen, seen)
    np.testing.assert_array_equal(got_shown, shown)
    assert not (seen & ~shown).any()  # what is seen now is always shown
    assert not (shown & ~candidates).any()


def test_reference_slab_test_equals_the_shared_one():
    rng = np.random.default_rng(7)
    box_min = rng.uniform(-5, 5, (6, 3))
    box_max = box_min + rng.uniform(0.1, 3, (6, 3))
    starts = rng.uniform(-8, 8, (400, 3)).round(1)
    ends = rng.uniform(-8, 8, (400, 3)).round(1)
    ends[::7] = starts[::7]  # zero length
    ends[1::5, 2] = starts[1::5, 2]  # flat along z
    expected = sight_blocked(starts, ends, box_min, box_max)
    np.testing.assert_array_equal(segments_blocked(starts, ends, box_min, box_max).any(1), expected)


@PROPERTY
@given(seed=st.integers(0, 2**32 - 1))
def test_a_hidden_pair_is_hidden_from_everywhere_it_may_be(seed):
    """Soundness: when the rule hides a pair, every line from a point of the viewer's eye
    region to a sight point of the player anywhere in his region crosses a box."""
    rng = np.random.default_rng(seed)
    f = fog()
    viewers, feet, reach, candidates, box_min, box_max = random_scene(rng, 6, 3)
    if not len(viewers):
        return
    _, shown = reference_sight(
        viewers, feet, reach, f.body_reach, candidates, box_min, box_max, box_min + 0.001,
        box_max - 0.001, SIGHT_HEIGHTS, f.shape,
    )  # fmt: skip
    eye_height, low, high, rise, radius = f.shape
    for c, e in zip(*np.nonzero(candidates & ~shown), strict=True):
        s = viewers[c]
        if s == e:
            continue
        n = 200
        eye_lo, eye_hi = movement_region(
            feet[s], reach[c], eye_height, eye_height, rise, radius, box_min, box_max
        )
        body_lo, body_hi = movement_region(
            feet[e], f.body_reach, low, high, rise, radius, box_min, box_max
        )
        eyes = rng.uniform(eye_lo, eye_hi, (n, 3))
        bodies = rng.uniform(body_lo, body_hi, (n, 3))
        bodies[:8] = region_corners(body_lo, body_hi)  # (the extremes too)
        eyes[:8] = region_corners(eye_lo, eye_hi)[::-1]
        assert sight_blocked(eyes, bodies, box_min, box_max).all()


@PROPERTY
@given(seed=st.integers(0, 2**32 - 1))
def test_a_player_stays_in_his_region_whatever_he_does(seed):
    """Soundness of the regions: players started near the walls' ends, moved by the
    movement model (runs along one compass direction, then turns to another at a random
    tick: round a wall's end if they can; jumps), never leave the region of the distance
    they could have run."""
    rng = np.random.default_rng(seed)
    params = MovementParams()
    n, dt, ticks = 64, 1 / 60, 30
    ends = np.array([(x, y) for x in (-12.0, -4.0, 4.0, 12.0) for y in (8.0, 9.0, -8.0, -9.0)])
    pos = np.zeros((n, 3))
    pos[:, :2] = ends[rng.integers(0, len(ends), n)] + rng.uniform(-3, 3, (n, 2))
    pos, vel = step(pos, np.zeros((n, 3)), np.zeros((n, 2)), np.zeros(n, np.int64), dt, ARENA)
    start = pos.copy()
    vel[:, :2] = rng.uniform(-1, 1, (n, 2)) * 4.0
    compass = np.array([(np.cos(a), np.sin(a)) for a in np.arange(8) * np.pi / 4])
    first, then = compass[rng.integers(0, 8, n)], compass[rng.integers(0, 8, n)]
    turn = rng.integers(0, ticks, n)
    _, _, _, rise, radius = fog().shape
    for tick in range(1, ticks + 1):
        move = np.where((tick < turn)[:, None], first, then)
        pos, vel = step(pos, vel, move, rng.choice([0, BUTTON_JUMP], n), dt, ARENA, params)
        reach = params.max_speed * tick * dt
        for p in range(n):
            lo, hi = movement_region(
                start[p], reach, 0.0, 0.0, rise, radius, ARENA.box_min, ARENA.box_max
            )
            assert (lo[:2] <= pos[p, :2]).all() and (pos[p, :2] <= hi[:2]).all()
            assert lo[2] <= pos[p, 2] <= hi[2]


def test_a_wall_hides_a_player_until_the_viewer_could_step_past_it():
    # The wall from x -12 to -4 at y 8..9, 3 m high: a viewer south of its middle, an
    # enemy north of it.
    f = fog()
    feet = np.array([[-8.0, 6.0, 0.0], [-8.0, 11.0, 0.0], [0.0, 11.0, 0.0]])
    selected = np.ones((1, 3), dtype=np.bool_)
    kept = np.zeros((1, 3), dtype=np.bool_)
    present = np.ones(3, dtype=np.bool_)
    f.withhold(np.array([0]), np.array([0.2]), feet, present, selected, kept)
    # Hidden behind the wall: withheld; the one past the wall's end, in the open: sent.
    assert selected.tolist() == [[True, False, True]]
    # A margin long enough to walk to the wall's end: sent.
    selected[:] = True
    f.withhold(np.array([0]), np.array([1.0]), feet, present, selected, kept)
    assert selected.tolist() == [[True, True, True]]
    # In a fight: sent, hidden or not.
    selected[:] = True
    kept[0, 1] = True
    f.withhold(np.array([0]), np.array([0.2]), feet, present, selected, kept)
    assert selected.tolist() == [[True, True, True]]


def test_low_cover_does_not_hide_a_standing_player():
    f = fog()
    # The crate at the centre is 1.5 m high: the head shows over it.
    feet = np.array([[-3.0, 0.0, 0.0], [3.0, 0.0, 0.0]])
    selected = np.ones((2, 2), dtype=np.bool_)
    f.withhold(np.arange(2), np.full(2, 0.2), feet, np.ones(2, dtype=np.bool_), selected,
               np.zeros((2, 2), dtype=np.bool_))  # fmt: skip
    assert selected.all()


def test_records_are_judged_seen_within_the_margin_or_hidden_after_it():
    viewers = np.array([0])
    pending = np.zeros((2, 2), dtype=np.uint64)
    counts = np.zeros(4, dtype=np.int64)
    present = np.ones(2, dtype=np.bool_)
    horizon = np.array([2])  # the margin: 2 snapshots
    either = np.ones((1, 2), dtype=np.bool_)

    def snapshot(sent: bool, seen: bool) -> None:
        selected = np.array([[True, sent]])
        withhold(viewers, selected, ~either, np.array([[False, seen]]), either, present,
                 horizon, pending, counts)  # fmt: skip
        assert selected.tolist() == [[True, sent]]

    snapshot(True, False)
    snapshot(True, False)
    snapshot(False, True)  # seen 2 snapshots after the first: both judged seen
    assert counts.tolist() == [2, 2, 0, 0]
    for _ in range(4):
        snapshot(True, False)  # never seen: each judged hidden once past the margin
    assert counts.tolist() == [6, 2, 1, 0]
    snapshot(False, False)
    snapshot(False, False)
    assert counts.tolist() == [6, 2, 3, 0]
    present[1] = False
    snapshot(False, False)  # the player left: his last record is not judged
    assert counts.tolist() == [6, 2, 3, 0] and pending[0, 1] == 0


def test_a_player_not_shown_is_withheld_unless_kept():
    viewers = np.array([1])
    pending = np.zeros((3, 3), dtype=np.uint64)
    counts = np.zeros(4, dtype=np.int64)
    selected = np.ones((1, 3), dtype=np.bool_)
    shown = np.zeros((1, 3), dtype=np.bool_)
    kept = np.array([[False, False, True]])
    withhold(viewers, selected, kept, shown, shown, np.ones(3, dtype=np.bool_), np.array([5]),
             pending, counts)  # fmt: skip
    # Player 0 withheld; the viewer itself and the one in a fight with it sent.
    assert selected.tolist() == [[False, True, True]]
    assert counts.tolist() == [1, 0, 0, 1]


def test_the_node_flags_switch_the_fog_and_set_its_allowance():
    import pytest

    from server.net.cli import build_parser, config_from_args
    from server.sim.match import Match, MatchConfig

    default = config_from_args(build_parser().parse_args([]))
    assert default.interest.fog and default.interest.fog_peek_s == 0.1
    off = config_from_args(build_parser().parse_args(["--fog", "off", "--fog-peek-ms", "50"]))
    assert not off.interest.fog and off.interest.fog_peek_s == 0.05
    assert Match(MatchConfig(arena=ARENA, interest=off.interest)).deltas.fog is None
    assert Match(MatchConfig(arena=ARENA, interest=default.interest)).deltas.fog is not None
    with pytest.raises(ValueError, match="--fog-peek-ms"):
        config_from_args(build_parser().parse_args(["--fog-peek-ms", "2000"]))


def test_a_match_withholds_a_player_behind_a_wall_and_judges_nothing_differently():
    """Through a match: the player behind the wall is not in the snapshot of the one
    south of it (nor the reverse), the one in the open is in both; with fog off, all are."""
    from server.sim.interest import InterestConfig
    from server.sim.match import Match, MatchConfig
    from tests.server.frames import players_shown

    def shown(fog_on: bool) -> dict[int, list[int]]:
        match = Match(MatchConfig(arena=ARENA, interest=InterestConfig(fog=fog_on)))
        seats = [match.join(f"p{i}", 0.1) for i in range(3)]
        # South of the wall from x -12 to -4 (y 8..9), north of its middle, and in the
        # open past its east end.
        match.world.pos[:3] = [(-8.0, 6.5, 0.0), (-8.0, 10.5, 0.0), (8.0, 0.0, 0.0)]
        result = match.tick()
        return {s.slot: players_shown(match, result, s.slot)["id"].tolist() for s in seats}

    assert shown(True) == {0: [0, 2], 1: [1, 2], 2: [0, 1, 2]}
    assert shown(False) == {0: [0, 1, 2], 1: [0, 1, 2], 2: [0, 1, 2]}
