"""The bots' batched sight and shot tests give the answers of the one-at-a-time tests.

Each fast path here is checked against the plain version it replaced: the shared ray tests
of :mod:`shared.hitbox` for one ray, a sort for the nearest enemies (and the NumPy glance
the glance kernel replaced), one bot at a time for perception, and a projectile flight that
tests every sub-step.
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from client_sim.brain import CHEST_HEIGHT, GLANCE_HEIGHTS, GLANCES, Brain
from client_sim.interpolation import Bracket, drawn, seen
from client_sim.marksman import fly_projectile
from client_sim.sight import segments_within_reach
from shared.arena_map import default_map
from shared.hitbox import (
    BOUNDING_SPHERE_CENTRE,
    BOUNDING_SPHERE_RADIUS,
    HIT_PLAYER,
    ray_hit_player,
    ray_hitbox_entries,
    ray_world_entry,
)
from shared.protocol.snapshots import ENTITY_DTYPE
from shared.rayhits import first_hit
from shared.sightlines import first_in_sight, sight_blocked
from shared.weapons import EYE_HEIGHT, LAUNCHER
from tests.client_sim.glances import perceive

ARENA = default_map()
BOX_MIN = np.ascontiguousarray(ARENA.box_min, dtype=np.float64)
BOX_MAX = np.ascontiguousarray(ARENA.box_max, dtype=np.float64)
# Rounded to 0.1 mm: scenes, not float corner cases (denormal directions and the like).
coordinate = st.floats(-29.0, 29.0).map(lambda v: round(v, 4))
height = st.floats(0.05, 3.5).map(lambda v: round(v, 4))


def point() -> st.SearchStrategy[tuple[float, float, float]]:
    return st.tuples(coordinate, coordinate, height)


def reference_blocked(start: np.ndarray, end: np.ndarray) -> bool:
    span = end - start
    length = float(np.linalg.norm(span))
    if length == 0.0:
        return False
    entry = ray_world_entry(start, span / length, length, ARENA.box_min, ARENA.box_max)
    return entry < length


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(point(), point()), min_size=1, max_size=20))
def test_sight_blocked_agrees_with_the_shared_world_ray_test(
    segments: list[tuple[tuple[float, ...], tuple[float, ...]]],
) -> None:
    starts = np.array([s for s, _ in segments])
    ends = np.array([e for _, e in segments])
    batched = sight_blocked(starts, ends, ARENA.box_min, ARENA.box_max)
    for k in range(len(segments)):
        expected = reference_blocked(starts[k], ends[k])
        if batched[k] != expected:
            # Only a graze may differ (the two parametrise the segment differently):
            # then a box face lies within a hair of the segment's end or its surface.
            grown = sight_blocked(
                starts[k : k + 1], ends[k : k + 1], ARENA.box_min - 1e-9, ARENA.box_max + 1e-9
            )[0]
            shrunk = sight_blocked(
                starts[k : k + 1], ends[k : k + 1], ARENA.box_min + 1e-9, ARENA.box_max - 1e-9
            )[0]
            assert grown != shrunk, (starts[k], ends[k])


def reference_sight_blocked(
    starts: np.ndarray, ends: np.ndarray, box_min: np.ndarray, box_max: np.ndarray
) -> np.ndarray:
    """The sight-line kernel's spec in NumPy: the slab method for all segments against
    all boxes at once, over each segment's own parameter ``t`` in [0, 1]."""
    box_min = np.asarray(box_min, dtype=np.float64).reshape(-1, 3)
    box_max = np.asarray(box_max, dtype=np.float64).reshape(-1, 3)
    if not len(starts) or not len(box_min):
        return np.zeros(len(starts), dtype=bool)
    start = starts[:, None, :]
    span = (ends - starts)[:, None, :]
    flat = span == 0.0  # parallel to a slab: inside it for every t, or never
    safe = np.where(flat, 1.0, span)
    t1 = (box_min - start) / safe
    t2 = (box_max - start) / safe
    inside = (start >= box_min) & (start <= box_max)
    enter = np.where(flat, np.where(inside, -np.inf, np.inf), np.minimum(t1, t2))
    leave = np.where(flat, np.where(inside, np.inf, -np.inf), np.maximum(t1, t2))
    entry = np.maximum(enter.max(axis=2), 0.0)
    exit_ = np.minimum(leave.min(axis=2), 1.0)
    blocked = ((entry <= exit_) & (entry < 1.0)).any(axis=1)
    return blocked & (ends != starts).any(axis=1)  # a point sees itself


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(point(), point()), min_size=0, max_size=20),
    st.sampled_from(["map", "axis-aligned"]),
)
def test_the_sight_kernel_is_the_numpy_reference(
    segments: list[tuple[tuple[float, ...], tuple[float, ...]]], scene: str
) -> None:
    """Bit for bit, grazes and segments parallel to a slab included (the second scene's
    segments run along box faces)."""
    starts = np.array([s for s, _ in segments]).reshape(-1, 3)
    ends = np.array([e for _, e in segments]).reshape(-1, 3)
    if scene == "axis-aligned":
        ends[:, 1:] = starts[:, 1:]  # along x only: two slabs are parallel
        starts[:, 1] = ends[:, 1] = np.round(starts[:, 1])  # on whole-metre faces
    assert np.array_equal(
        sight_blocked(starts, ends, ARENA.box_min, ARENA.box_max),
        reference_sight_blocked(starts, ends, ARENA.box_min, ARENA.box_max),
    )


def test_sight_blocked_cases() -> None:
    wall_min, wall_max = np.array([[4.0, 8.0, 0.0]]), np.array([[12.0, 9.0, 3.0]])
    start = np.array([[8.0, 0.0, 1.6], [8.0, 0.0, 1.6], [8.0, 0.0, 1.6], [0.0, 8.5, 1.0]])
    end = np.array([[8.0, 15.0, 1.2], [8.0, 7.0, 1.2], [8.0, 8.0, 1.2], [20.0, 8.5, 1.0]])
    # Through the wall; short of it; ending on its face (touching does not block);
    # along the inside of the slab parallel to two axes.
    assert sight_blocked(start, end, wall_min, wall_max).tolist() == [True, False, False, True]
    assert sight_blocked(np.zeros((0, 3)), np.zeros((0, 3)), wall_min, wall_max).shape == (0,)


players = st.lists(st.tuples(coordinate, coordinate, st.floats(0.0, 2.0)), min_size=0, max_size=12)


@settings(max_examples=300, deadline=None)
@given(
    origin=point(),
    yaw=st.floats(-math.pi, math.pi).map(lambda a: round(a, 6)),
    pitch=st.floats(-0.6, 0.6).map(lambda p: round(p, 6)),  # (no denormal directions)
    feet=players,
    present_bits=st.integers(0, 2**12 - 1),
)
def test_first_hit_is_the_shared_ray_test_on_every_player(
    origin: tuple[float, float, float],
    yaw: float,
    pitch: float,
    feet: list[tuple[float, float, float]],
    present_bits: int,
) -> None:
    direction = np.array(
        [math.cos(pitch) * math.cos(yaw), math.cos(pitch) * math.sin(yaw), math.sin(pitch)]
    )
    positions = np.array(feet).reshape(-1, 3)
    present = np.array([bool(present_bits >> k & 1) for k in range(len(feet))], dtype=bool)
    o = np.array(origin)
    expected = ray_hit_player(o, direction, 80.0, positions, ARENA.box_min, ARENA.box_max, present)
    got = first_hit(o, direction, 80.0, positions, present, ARENA.box_min, ARENA.box_max)
    assert got == expected


@settings(max_examples=200, deadline=None)
@given(start=point(), end=point(), feet=players)
def test_within_reach_never_drops_a_player_the_segment_enters(
    start: tuple[float, ...], end: tuple[float, ...], feet: list[tuple[float, float, float]]
) -> None:
    s, e = np.array(start), np.array(end)
    length = float(np.linalg.norm(e - s))
    if length == 0.0:
        return
    direction = (e - s) / length
    positions = np.array(feet).reshape(-1, 3)
    reach = segments_within_reach(s[None], direction[None], np.array([length]), positions)[0]
    entered = np.isfinite(ray_hitbox_entries(s, direction, length, positions)).any(axis=1)
    assert not (entered & ~reach).any()
    # And it is tight: a player whose sphere is far from the segment is out of reach.
    centre = positions + BOUNDING_SPHERE_CENTRE
    far = np.linalg.norm(centre - s, axis=1) > length + BOUNDING_SPHERE_RADIUS + 0.01
    assert not (far & reach).any()


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    lookers=st.integers(1, 12),
    crowd=st.integers(0, 30),
)
def test_perceiving_as_a_group_is_perceiving_one_by_one(
    seed: int, lookers: int, crowd: int
) -> None:
    rng = np.random.default_rng(seed)
    own = np.column_stack((rng.uniform(-28, 28, (lookers, 2)), np.zeros(lookers)))
    ids = rng.permutation(100)[:crowd]
    # The same players, drawn a little apart by each looker (its own render time).
    base = np.column_stack((rng.uniform(-28, 28, (crowd, 2)), np.zeros(crowd)))
    feet = base[None] + rng.normal(0.0, 0.3, (lookers, crowd, 3)) * [1, 1, 0]
    visible = rng.random((lookers, crowd)) < 0.8
    together = Brain(lookers, ARENA, np.random.default_rng(0), cover_seeking=0.0)
    alone = Brain(lookers, ARENA, np.random.default_rng(0), cover_seeking=0.0)
    together.perceive_group(np.arange(lookers), own, feet, ids, visible, now=1.0)
    for bot in range(lookers):
        perceive(alone, bot, own[bot], feet[bot][visible[bot]], ids[visible[bot]], now=1.0)
    for name in ("has_threat", "threat_id", "threat", "threat_since", "in_cover_mode"):
        assert getattr(together, name).tolist() == getattr(alone, name).tolist(), name


def reference_first_in_sight(
    own: np.ndarray, feet: np.ndarray, visible: np.ndarray, engage_range: float
) -> list[int]:
    """The glance kernel's spec in NumPy (the code it replaced): per bot, the visible
    players within range ordered by distance then index, the first :data:`GLANCES` of
    them, and of those the first whose chest the bot's eye sees; -1 none."""
    distance = np.hypot(feet[:, :, 0] - own[:, None, 0], feet[:, :, 1] - own[:, None, 1])
    distance = np.where(visible & (distance <= engage_range), distance, np.inf)
    spotted = []
    for b in range(len(own)):
        order = np.lexsort((np.arange(distance.shape[1]), distance[b]))[:GLANCES]
        order = order[np.isfinite(distance[b, order])]
        eyes = np.repeat(own[b : b + 1] + (0.0, 0.0, EYE_HEIGHT), len(order), axis=0)
        chests = feet[b, order] + (0.0, 0.0, CHEST_HEIGHT)
        clear = np.flatnonzero(~sight_blocked(eyes, chests, ARENA.box_min, ARENA.box_max))
        spotted.append(int(order[clear[0]]) if len(clear) else -1)
    return spotted


@settings(max_examples=200, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    lookers=st.integers(0, 8),
    crowd=st.integers(0, 12),
    grid=st.sampled_from([0.0, 1.0, 4.0]),
)
def test_the_glance_kernel_is_the_numpy_reference(
    seed: int, lookers: int, crowd: int, grid: float
) -> None:
    """Bit for bit, ties in distance included (on a coarse grid many players stand equally
    far from a bot: the lower index comes first)."""
    rng = np.random.default_rng(seed)
    own = np.column_stack((rng.uniform(-28, 28, (lookers, 2)), np.zeros(lookers)))
    feet = np.concatenate(
        (rng.uniform(-28, 28, (lookers, crowd, 2)), rng.uniform(0, 2, (lookers, crowd, 1))),
        axis=2,
    )
    if grid:
        own[:, :2] = np.round(own[:, :2] / grid) * grid
        feet[:, :, :2] = np.round(feet[:, :, :2] / grid) * grid
    visible = rng.random((lookers, crowd)) < 0.8
    spotted = np.empty(lookers, dtype=np.int64)
    first_in_sight(own, feet, visible, 25.0, GLANCES, GLANCE_HEIGHTS, BOX_MIN, BOX_MAX, spotted)
    assert spotted.tolist() == reference_first_in_sight(own, feet, visible, 25.0)


def snapshot_records(rng: np.random.Generator, crowd: int, grid: float) -> np.ndarray:
    """A snapshot's records: some of ``crowd`` players (ascending ids), most alive."""
    ids = np.flatnonzero(rng.random(crowd) < 0.8)
    records = np.zeros(len(ids), dtype=ENTITY_DTYPE)
    records["id"] = ids
    for axis in ("x", "y"):
        values = rng.uniform(-28, 28, len(ids))
        records[axis] = np.round(values / grid) * grid if grid else values
    records["z"] = rng.uniform(0, 2, len(ids))
    records["flags"] = rng.random(len(ids)) < 0.9  # ENTITY_FLAG_ALIVE
    return records


@settings(max_examples=150, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    lookers=st.integers(1, 10),
    crowd=st.integers(0, 16),
    grid=st.sampled_from([0.0, 2.0]),
    team=st.booleans(),
)
def test_perceiving_what_each_draws_is_perceiving_the_group_view(
    seed: int, lookers: int, crowd: int, grid: float, team: bool
) -> None:
    """The swarm's fused path (each looker's own records, :func:`drawn`) notes exactly what
    the union view (:func:`seen`, then :meth:`Brain.perceive_group`) notes: lookers that
    share snapshots, hold one, stand at equal distances, and ignore themselves and their
    teammates."""
    rng = np.random.default_rng(seed)
    snapshots = [snapshot_records(rng, crowd, grid) for _ in range(4)]
    brackets = []
    for _ in range(lookers):
        before, after = rng.integers(0, 4, 2)
        weight = float(rng.choice([0.0, rng.uniform(0, 1)]))
        held = weight == 0.0 and rng.random() < 0.5
        brackets.append(
            Bracket(1.0, 1.0, snapshots[before], None if held else snapshots[after], weight, True)
        )
    own = np.column_stack((rng.uniform(-28, 28, (lookers, 2)), np.zeros(lookers)))
    if grid:
        own[:, :2] = np.round(own[:, :2] / grid) * grid
    selves = rng.integers(0, max(crowd, 1), lookers)
    friends = rng.random(max(crowd, 1)) < 0.3 if team else np.zeros(0, dtype=bool)
    bots = rng.permutation(lookers)
    fused = Brain(lookers, ARENA, np.random.default_rng(1))
    union = Brain(lookers, ARENA, np.random.default_rng(1))
    fused.perceive_drawn(bots, own, *drawn(brackets), selves, friends, now=2.0)
    ids, feet, visible = seen(brackets)
    visible &= ids[None] != selves[:, None]
    if team:
        visible &= ~np.isin(ids, np.flatnonzero(friends))[None]
    union.perceive_group(bots, own, feet, ids, visible, now=2.0)
    for name in ("has_threat", "threat_id", "threat", "threat_since", "in_cover_mode", "goal"):
        assert getattr(fused, name).tolist() == getattr(union, name).tolist(), name
    assert fused.sightings == union.sightings


def fly_every_step(
    origin: np.ndarray,
    velocity: np.ndarray,
    gravity: float,
    start: float,
    expire: float,
    times: np.ndarray,
    positions: np.ndarray,
    alive: np.ndarray,
) -> tuple[int, int]:
    """The plain flight: the shared ray test on every chord of the server's grid, in
    order; each chord's end computed from the spawn, as the rules define it."""
    end = min(expire, float(times[-1])) if len(times) else start
    step = LAUNCHER.flight_step
    taus = [0.0]
    while start + (len(taus)) * step <= end:
        taus.append(len(taus) * step)
    if expire <= end and taus[-1] < expire - start:
        taus.append(expire - start)  # the last, shorter chord: up to the expiry
    points = [
        np.asarray(origin) + np.asarray(velocity) * tau - (0.0, 0.0, 0.5 * gravity * tau * tau)
        for tau in taus
    ]
    for tau, a, b in zip(taus[1:], points, points[1:], strict=False):
        segment = b - a
        length = float(np.sqrt(segment @ segment))
        if length == 0.0:
            continue
        at = start + tau
        f = min(max(int(np.searchsorted(times, at, side="left")), 1), len(times) - 1)
        t0, t1 = times[f - 1], times[f]
        weight = 0.0 if t1 == t0 else min(max((at - t0) / (t1 - t0), 0.0), 1.0)
        rendered = positions[f - 1] + (positions[f] - positions[f - 1]) * weight
        hit = ray_hit_player(
            a, segment / length, length, rendered, ARENA.box_min, ARENA.box_max,
            alive[f - 1] & alive[f],
        )  # fmt: skip
        if hit.kind == HIT_PLAYER:
            return int(hit.victim), int(hit.hitbox)
        if hit.kind != 0:
            return -1, 0
    return -1, 0


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    candidates=st.integers(1, 6),
    frames=st.integers(2, 40),
)
def test_a_flight_tested_where_it_may_hit_ends_as_one_tested_everywhere(
    seed: int, candidates: int, frames: int
) -> None:
    rng = np.random.default_rng(seed)
    origin = np.array([*rng.uniform(-20, 20, 2), 1.6])
    target = rng.uniform(-20, 20, 2)
    heading = np.append(target - origin[:2], rng.uniform(-3.0, 3.0))
    velocity = heading / np.linalg.norm(heading) * LAUNCHER.speed
    times = np.sort(rng.uniform(0.0, 1.5, frames))
    # Candidates near the path, walking a little between frames; some die.
    start = np.column_stack((target + rng.normal(0.0, 2.0, (candidates, 2)), np.zeros(candidates)))
    walk = np.cumsum(rng.normal(0.0, 0.05, (frames, candidates, 3)) * [1, 1, 0], axis=0)
    positions = start[None] + walk
    alive = rng.random((frames, candidates)) < 0.9
    args = (origin, velocity, LAUNCHER.gravity, float(times[0]), float(times[0]) + 1.2)
    expected = fly_every_step(*args, times, positions, alive)
    assert fly_projectile(*args, times, positions, alive, ARENA, LAUNCHER.flight_step) == expected
