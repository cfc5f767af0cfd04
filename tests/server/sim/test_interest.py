"""Interest management: exact small scenes for who each client is sent, and the background
budget's fairness (bounded, starvation-free, nearer players more often)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from server.sim.interest import InterestConfig, select_players


def scene_config(**overrides: Any) -> InterestConfig:
    """The config these scenes were drawn for: near 12 m, view 30 m, no nearest-N rule
    (tested on its own below), 6 background places; ``overrides`` change any of it."""
    values: dict[str, Any] = {"near_m": 12.0, "view_m": 30.0, "nearest": 0, "background": 6}
    values.update(overrides)
    return InterestConfig(**values)


FAR = scene_config(background=0)  # only the relevant players: the scenes read exactly


def scene(
    xy: list[tuple[float, float]],
    yaw: list[float] | None = None,
    present: list[bool] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Positions (z 0), yaws (default 0: facing +x) and presence of a few players."""
    n = len(xy)
    pos = np.zeros((n, 3))
    pos[:, :2] = xy
    yaws = np.zeros(n) if yaw is None else np.array(yaw, dtype=np.float64)
    shown = np.ones(n, dtype=np.bool_) if present is None else np.array(present, dtype=np.bool_)
    return pos, yaws, shown


def sent(
    config: InterestConfig,
    xy: list[tuple[float, float]],
    yaw: list[float] | None = None,
    present: list[bool] | None = None,
    fight_until: np.ndarray | None = None,
    now: float = 0.0,
    priority: np.ndarray | None = None,
    viewer: int = 0,
) -> list[int]:
    """The players ``viewer`` is sent in one selection."""
    pos, yaws, shown = scene(xy, yaw, present)
    n = len(xy)
    fights = np.full((n, n), -np.inf) if fight_until is None else fight_until
    accumulator = np.zeros((n, n)) if priority is None else priority
    selected = select_players(
        config, np.array([viewer]), pos, yaws, shown, fights, now, accumulator
    )
    assert selected.shape == (1, n)
    return np.flatnonzero(selected[0]).tolist()


def at(distance: float, degrees: float) -> tuple[float, float]:
    """A point ``distance`` from the origin, ``degrees`` counter-clockwise from +x."""
    a = math.radians(degrees)
    return (distance * math.cos(a), distance * math.sin(a))


# -- relevance ---------------------------------------------------------------------------


def test_players_within_the_near_radius_are_sent_whichever_way_the_viewer_looks() -> None:
    """Near is a circle: behind the viewer counts as much as in front."""
    xy = [(0.0, 0.0), at(11.9, 180.0), at(12.0, 90.0), at(12.5, 180.0), at(11.0, -45.0)]
    assert sent(FAR, xy) == [0, 1, 2, 4]


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        (at(20.0, 0.0), True),  # straight ahead
        (at(29.0, 55.0), True),  # inside the 60 degree half angle, inside the range
        (at(29.0, -55.0), True),  # the cone is symmetric
        (at(20.0, 65.0), False),  # outside the half angle
        (at(20.0, -65.0), False),
        (at(20.0, 180.0), False),  # behind
        (at(20.0, 90.0), False),  # abeam
        (at(31.0, 0.0), False),  # ahead but beyond the view range
    ],
)
def test_the_view_cone_covers_what_is_ahead_within_the_half_angle_and_range(
    target: tuple[float, float], expected: bool
) -> None:
    """Beyond the near radius, a player is relevant only inside the cone of view."""
    assert sent(FAR, [(0.0, 0.0), target]) == ([0, 1] if expected else [0])


def test_yaw_turns_the_cone_counter_clockwise_from_plus_x() -> None:
    """Yaw pi/2 faces +y; the cone follows the viewer's yaw, not the target's."""
    xy = [(0.0, 0.0), (0.0, 20.0), (20.0, 0.0), (0.0, -20.0)]
    assert sent(FAR, xy, yaw=[math.pi / 2, 0.0, 0.0, 0.0]) == [0, 1]
    assert sent(FAR, xy, yaw=[-math.pi / 2, math.pi, math.pi, math.pi]) == [0, 3]
    assert sent(FAR, xy, yaw=[0.0, math.pi, math.pi, math.pi]) == [0, 2]


def test_the_view_cone_is_measured_from_the_viewer_wherever_it_stands() -> None:
    xy = [(100.0, -50.0), (120.0, -50.0), (80.0, -50.0)]
    assert sent(FAR, xy) == [0, 1]
    assert sent(FAR, xy, viewer=2) == [0, 2]  # 2 looks +x: 0 at 20 m, 1 at 40 m ahead
    assert sent(scene_config(background=0, view_m=40.0), xy, viewer=2) == [0, 1, 2]
    assert sent(scene_config(background=0, view_m=39.0), xy, viewer=2) == [0, 2]


def test_a_fight_keeps_a_far_player_relevant_until_its_memory_ends() -> None:
    """``fight_until[s, e] > now`` makes e relevant to s, strictly before the end; it is
    one-sided in the array (the encoder sets both directions)."""
    xy = [(0.0, 0.0), at(100.0, 180.0)]
    fights = np.full((2, 2), -np.inf)
    fights[0, 1] = 5.0
    assert sent(FAR, xy, fight_until=fights, now=4.99) == [0, 1]
    assert sent(FAR, xy, fight_until=fights, now=5.0) == [0]
    assert sent(FAR, xy, fight_until=fights, now=7.0) == [0]
    assert sent(FAR, xy, fight_until=fights, now=4.0, viewer=1) == [1]


def test_the_viewer_itself_is_always_sent() -> None:
    """Even with no budget, everything else far away, and a huge priority elsewhere."""
    config = scene_config(background=0, near_m=0.0, view_m=0.0)
    xy = [(0.0, 0.0), at(50.0, 0.0), at(50.0, 180.0)]
    assert sent(config, xy) == [0]
    assert sent(config, xy, viewer=2) == [2]
    assert sent(config, [(0.0, 0.0)]) == [0]


def test_absent_players_are_never_sent_and_lose_their_priority() -> None:
    """An empty seat is never sent, however near, fought or long waiting."""
    xy = [(0.0, 0.0), at(1.0, 0.0), at(20.0, 0.0), at(100.0, 180.0), at(5.0, 180.0)]
    fights = np.full((5, 5), -np.inf)
    fights[0, 3] = 10.0
    priority = np.full((5, 5), 50.0)
    present = [True, False, False, False, True]
    config = scene_config(background=6)
    assert sent(config, xy, present=present, fight_until=fights, priority=priority) == [0, 4]
    assert priority[0, 1:4].tolist() == [0.0, 0.0, 0.0]
    disabled = scene_config(enabled=False)
    assert sent(disabled, xy, present=present) == [0, 4]


def test_disabled_interest_sends_every_present_player_to_every_viewer() -> None:
    rng = np.random.default_rng(7)
    n = 20
    pos = np.zeros((n, 3))
    pos[:, :2] = rng.uniform(-500.0, 500.0, (n, 2))
    present = rng.random(n) < 0.7
    viewers = np.flatnonzero(present)
    priority = np.zeros((n, n))
    selected = select_players(
        scene_config(enabled=False, background=0), viewers, pos, rng.uniform(-3, 3, n),
        present, np.full((n, n), -np.inf), 0.0, priority,
    )  # fmt: skip
    assert selected.shape == (len(viewers), n)
    assert (selected == present[None, :]).all()
    assert not priority.any()


def test_each_viewer_has_its_own_row_and_accumulator() -> None:
    """Rows follow ``viewers``' order; a viewer's priority row is the only one touched."""
    xy = [(0.0, 0.0), at(40.0, 180.0), (200.0, 0.0), at(40.0, 180.0)]
    pos, yaws, present = scene(xy)
    priority = np.zeros((4, 4))
    selected = select_players(
        scene_config(background=0), np.array([2, 0]), pos, yaws, present,
        np.full((4, 4), -np.inf), 0.0, priority,
    )  # fmt: skip
    assert np.flatnonzero(selected[0]).tolist() == [2]
    assert np.flatnonzero(selected[1]).tolist() == [0]
    assert not priority[[1, 3]].any()
    assert priority[0, 1] == pytest.approx(1.0 / (1.0 + 40.0 / 12.0))
    assert priority[2, 0] == pytest.approx(1.0 / (1.0 + 200.0 / 12.0))


# -- the background budget ---------------------------------------------------------------


def far_ring(count: int, rng: np.random.Generator) -> list[tuple[float, float]]:
    """The viewer at the origin looking +x, ``count`` players behind it, 13-200 m away."""
    distances = rng.uniform(13.0, 200.0, count)
    angles = rng.uniform(100.0, 260.0, count)
    return [(0.0, 0.0)] + [at(float(d), float(a)) for d, a in zip(distances, angles, strict=True)]


def run_selections(
    config: InterestConfig, xy: list[tuple[float, float]], snapshots: int, **kwargs: Any
) -> np.ndarray:
    """``(snapshots, N)`` bool: viewer 0's selections over still players."""
    pos, yaws, present = scene(xy)
    n = len(xy)
    priority = np.zeros((n, n))
    fights = np.full((n, n), -np.inf)
    rows = [
        select_players(config, np.array([0]), pos, yaws, present, fights, 0.0, priority)[0]
        for _ in range(snapshots)
    ]
    return np.array(rows)


def test_the_background_budget_is_never_exceeded() -> None:
    """Relevant players do not use the budget; the rest get exactly ``background`` slots
    each snapshot (or all of them, when fewer)."""
    rng = np.random.default_rng(1)
    relevant = [at(5.0, 180.0), at(20.0, 10.0), at(8.0, 90.0)]  # near, cone, near
    xy = far_ring(40, rng) + relevant
    n = len(xy)
    for background in (0, 1, 6, 50):
        rows = run_selections(scene_config(background=background), xy, 30)
        assert rows[:, 0].all() and rows[:, n - 3 :].all()
        far_sent = rows[:, 1 : n - 3].sum(axis=1)
        assert (far_sent == min(background, 40)).all()


def test_every_far_player_is_sent_within_a_bounded_number_of_snapshots() -> None:
    """Starvation-free: a player's priority grows every snapshot it waits, so however far
    (and however many nearer ones compete) it is sent within a bound; with 40 waiting and
    6 slots, the farthest (growing ~0.06 a snapshot against the nearest's ~0.5) waits no
    more than a few dozen snapshots."""
    rng = np.random.default_rng(2)
    xy = far_ring(40, rng)
    rows = run_selections(scene_config(background=6), xy, 400)
    growth = np.array([1.0 / (1.0 + math.hypot(x, y) / 12.0) for x, y in xy[1:]])
    # In steady state player e is sent every ~ sum(growth) / (background * growth[e]).
    bound = 2.0 * growth.sum() / (6 * growth.min()) + 2
    for e in range(1, len(xy)):
        times = np.flatnonzero(rows[:, e])
        gaps = np.diff(np.concatenate(([-1], times, [len(rows)])))
        assert gaps.max() <= bound, (e, gaps.max(), bound)


def test_nearer_far_players_are_sent_more_often() -> None:
    """The accumulator grows 1 / (1 + d / near): the send rate falls with the distance."""
    distances = [15.0, 30.0, 60.0, 120.0, 240.0]
    xy = [(0.0, 0.0)] + [at(d, 180.0 + 5.0 * i) for i, d in enumerate(distances)] * 4
    rows = run_selections(scene_config(background=2), xy, 600)
    counts = rows[:, 1:].sum(axis=0).reshape(4, len(distances)).sum(axis=0)
    assert (np.diff(counts) < 0).all(), counts
    assert counts[0] > 3 * counts[-1]
    growth = np.array([1.0 / (1.0 + d / 12.0) for d in distances])
    shares = counts / counts.sum()
    np.testing.assert_allclose(shares, growth / growth.sum(), rtol=0.15)


def test_ties_go_to_the_lower_index_and_then_rotate() -> None:
    """Equal priorities: the lower index first, so equal players take turns in order."""
    xy = [(0.0, 0.0)] + [at(50.0, 180.0)] * 4
    rows = run_selections(scene_config(background=1), xy, 8)
    assert [int(np.flatnonzero(row[1:])[0]) + 1 for row in rows] == [1, 2, 3, 4] * 2


def test_a_player_that_becomes_near_is_in_the_very_next_selection() -> None:
    """Even while the budget goes to others with more priority: relevance is not budgeted."""
    rng = np.random.default_rng(3)
    xy = far_ring(30, rng)
    pos, yaws, present = scene(xy)
    n = len(xy)
    priority = np.zeros((n, n))
    fights = np.full((n, n), -np.inf)
    config = scene_config(background=2)
    viewers = np.array([0])
    farthest = int(np.argmax(np.hypot(pos[1:, 0], pos[1:, 1]))) + 1
    for _ in range(3):
        selected = select_players(config, viewers, pos, yaws, present, fights, 0.0, priority)
        assert not selected[0, farthest]  # the farthest is not yet due
    pos[farthest, :2] = at(11.0, 200.0)
    selected = select_players(config, viewers, pos, yaws, present, fights, 0.0, priority)
    assert selected[0, farthest] and priority[0, farthest] == 0.0
    assert selected[0, 1:].sum() == 3  # it, and the two background slots as before
    pos[farthest, :2] = at(25.0, 20.0)  # into the cone instead
    selected = select_players(config, viewers, pos, yaws, present, fights, 0.0, priority)
    assert selected[0, farthest]


# -- the configuration -------------------------------------------------------------------


@pytest.mark.parametrize(
    "fields",
    [
        {"near_m": -1.0},
        {"view_m": -0.1},
        {"fight_memory_s": -1.0},
        {"near_m": math.nan},
        {"view_half_angle_deg": 0.0},
        {"view_half_angle_deg": 90.0},
        {"view_half_angle_deg": -30.0},
        {"view_half_angle_deg": math.nan},
        {"background": -1},
        {"nearest": -1},
    ],
)
def test_interest_config_rejects_bad_values(fields: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        InterestConfig(**fields)  # type: ignore[arg-type]


def test_interest_config_accepts_its_edges() -> None:
    config = scene_config(near_m=0.0, view_m=0.0, fight_memory_s=0.0, background=0)
    assert (config.near_m, config.background) == (0.0, 0)
    assert scene_config(view_half_angle_deg=89.9).view_half_angle_deg == 89.9
    assert InterestConfig() == InterestConfig(True, 8.0, 12, 20.0, 60.0, 4, 3.0)


def test_a_clients_nearest_players_are_sent_however_far() -> None:
    """A sparse match: the few nearest are near, whatever the radius says."""
    xy = [(0.0, 0.0), (50.0, 0.0), (0.0, 55.0), (-58.0, 0.0), (0.0, -59.5)]
    config = scene_config(near_m=1.0, view_m=0.0, nearest=2, background=0)
    assert sent(config, xy, viewer=0) == [0, 1, 2]
    assert sent(scene_config(near_m=1.0, view_m=0.0, nearest=9, background=0), xy, viewer=0) == [
        0, 1, 2, 3, 4
    ]  # fmt: skip


# -- the kernel against a plain NumPy statement of the rules -----------------------------


def reference_selection(
    config: InterestConfig,
    viewers: np.ndarray,
    pos: np.ndarray,
    yaw: np.ndarray,
    present: np.ndarray,
    fight_until: np.ndarray,
    now: float,
    priority: np.ndarray,
) -> np.ndarray:
    """The module's rules, one viewer at a time over whole rows (the spec the compiled
    kernel must equal bit for bit, priorities included)."""
    n = len(present)
    selected = np.zeros((len(viewers), n), dtype=np.bool_)
    near2, view2 = config.near_m * config.near_m, config.view_m * config.view_m
    cos_half = math.cos(math.radians(config.view_half_angle_deg))
    growth_scale = 1.0 / max(config.near_m, 1.0)
    for c, s in enumerate(viewers.tolist()):
        dx, dy = pos[:, 0] - pos[s, 0], pos[:, 1] - pos[s, 1]
        d2 = dx * dx + dy * dy
        ahead = dx * math.cos(yaw[s]) + dy * math.sin(yaw[s])
        itself = np.arange(n) == s
        others = np.sort(d2[present & ~itself])
        bound = near2
        if config.nearest:
            fewer = len(others) < config.nearest
            bound = math.inf if fewer else max(near2, others[config.nearest - 1])
        seen = (d2 <= view2) & (ahead > 0.0) & (ahead * ahead >= cos_half * cos_half * d2)
        relevant = (d2 <= bound) | (fight_until[s] > now) | seen
        waits = present & ~itself & ~relevant
        selected[c] = present & (itself | relevant)
        grown = priority[s] + 1.0 / (1.0 + np.sqrt(d2) * growth_scale)
        priority[s] = np.where(waits, grown, np.where(itself & present, priority[s], 0.0))
        waiting = np.flatnonzero(waits)
        # The highest first; equal ones in index order (a stable sort).
        best = waiting[np.argsort(-priority[s, waiting], kind="stable")][: config.background]
        selected[c, best] = True
        priority[s, best] = 0.0
    return selected


@pytest.mark.parametrize("seed", range(6))
def test_the_kernel_equals_the_reference_over_many_snapshots(seed: int) -> None:
    """Random dense and sparse scenes, fights, empty seats, stacked players, viewers in
    any order; the players move between snapshots and the accumulators carry over."""
    rng = np.random.default_rng(seed)
    for _ in range(25):
        n = int(rng.integers(1, 90))
        pos = np.zeros((n, 3))
        pos[:, :2] = rng.uniform(-1.0, 1.0, (n, 2)) * float(rng.choice([5.0, 40.0, 600.0]))
        pos[: n // 4, :2] = pos[0, :2]  # some stand on one spot
        yaw = rng.uniform(-4.0, 4.0, n)
        present = rng.random(n) < 0.85
        fights = np.full((n, n), -np.inf)
        fought = rng.random((n, n)) < 0.05
        fights[fought] = rng.uniform(0.0, 5.0, int(fought.sum()))
        config = InterestConfig(
            near_m=float(rng.choice([0.0, 1.0, 8.0, 12.0])),
            nearest=int(rng.choice([0, 1, 3, 12, 200])),
            view_m=float(rng.choice([0.0, 20.0, 50.0])),
            view_half_angle_deg=float(rng.uniform(1.0, 89.0)),
            background=int(rng.choice([0, 1, 4, 10])),
        )
        viewers = rng.permutation(np.flatnonzero(present))
        kernel_priority, reference_priority = np.zeros((n, n)), np.zeros((n, n))
        for _ in range(5):
            now = float(rng.uniform(0.0, 5.0))
            got = select_players(config, viewers, pos, yaw, present, fights, now, kernel_priority)
            expected = reference_selection(
                config, viewers, pos, yaw, present, fights, now, reference_priority
            )
            assert np.array_equal(got, expected), config
            assert np.array_equal(kernel_priority, reference_priority), config
            pos[:, :2] += rng.normal(0.0, 1.0, (n, 2))
