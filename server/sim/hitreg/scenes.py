"""Synthetic scenes for the kernels' property tests: histories, boxes and shots.

A scene is drawn from a NumPy generator so that a test can replay it from a seed. Shots are
biased towards what breaks kernels: rays aimed at players (so hits are common), directions
along the axes (zero slab divisors, vertical rays), view times exactly on a snapshot, before
the oldest or after the newest (clamping), duplicated players (ties) and dead slots.
"""

from __future__ import annotations

import numpy as np

from server.sim.hitreg.batches import History, HitscanShots, ProjectileShots
from shared.weapons import flight_step

__all__ = [
    "random_boxes",
    "random_history",
    "random_hitscan",
    "random_projectiles",
]


def random_history(
    rng: np.random.Generator,
    matches: int,
    capacity: int,
    players: int,
    *,
    half_width: float = 8.0,
    speed: float = 6.0,
    alive_fraction: float = 0.9,
    tick_rate: float = 60.0,
) -> History:
    """Rings of random length and start, players walking at up to ``speed`` m/s in a square
    of ``half_width``; a few duplicated positions (exact ties) and jumps (z above 0)."""
    count = rng.integers(1, capacity + 1, size=matches).astype(np.int64)
    start = rng.integers(0, capacity, size=matches).astype(np.int64)
    first_tick = rng.integers(0, 600, size=matches)
    times = np.zeros((matches, capacity))
    positions = np.zeros((matches, capacity, players, 3))
    alive = (rng.random((matches, capacity, players)) < alive_fraction).astype(np.uint8)
    for m in range(matches):
        # Tick gaps of one or two (a lost tick) keep times strictly increasing.
        ticks = first_tick[m] + np.cumsum(rng.integers(1, 3, size=capacity))
        feet = np.zeros((players, 3))
        feet[:, :2] = rng.uniform(-half_width, half_width, size=(players, 2))
        if players > 1 and rng.random() < 0.3:
            feet[1] = feet[0]  # two slots in one spot: hits tie exactly
        velocity = rng.uniform(-speed, speed, size=(players, 3))
        velocity[:, 2] = 0.0
        for i in range(capacity):
            h = (start[m] + i) % capacity
            times[m, h] = ticks[i] / tick_rate
            positions[m, h] = feet + velocity * (ticks[i] - ticks[0]) / tick_rate
            if rng.random() < 0.2:
                positions[m, h, rng.integers(0, players), 2] = rng.uniform(0.0, 1.0)
    return History(times=times, positions=positions, alive=alive, start=start, count=count)


def random_boxes(
    rng: np.random.Generator, n: int, half_width: float = 8.0
) -> tuple[np.ndarray, np.ndarray]:
    """``n`` standing boxes: thin walls and low cover, as in the real map."""
    box_min = np.zeros((n, 3))
    box_max = np.zeros((n, 3))
    for j in range(n):
        centre = rng.uniform(-half_width, half_width, size=2)
        size = rng.uniform(0.05, 3.0, size=2)
        box_min[j, :2] = centre - size / 2
        box_max[j, :2] = centre + size / 2
        box_max[j, 2] = rng.choice([1.2, 3.0, rng.uniform(0.3, 3.0)])
    return box_min, box_max


def _history_span(history: History, m: int) -> tuple[float, float]:
    n = int(history.count[m])
    capacity = history.times.shape[1]
    first = int(history.start[m])
    return (
        float(history.times[m, first]),
        float(history.times[m, (first + n - 1) % capacity]),
    )


def _view_times(rng: np.random.Generator, history: History, match: np.ndarray) -> np.ndarray:
    times = np.zeros(match.shape[0])
    capacity = history.times.shape[1]
    for i, m in enumerate(match):
        oldest, newest = _history_span(history, int(m))
        roll = rng.random()
        if roll < 0.15:  # exactly on a snapshot
            logical = rng.integers(0, int(history.count[m]))
            times[i] = history.times[m, (int(history.start[m]) + logical) % capacity]
        elif roll < 0.25:  # outside the history: clamped
            times[i] = rng.choice([oldest - 0.05, newest + 0.05])
        else:
            times[i] = rng.uniform(oldest, newest) if newest > oldest else oldest
    return times


def _unit_directions(
    rng: np.random.Generator, origin: np.ndarray, target: np.ndarray, aim: np.ndarray
) -> np.ndarray:
    n = origin.shape[0]
    direction = rng.normal(size=(n, 3))
    aimed = target - origin + rng.normal(scale=0.25, size=(n, 3))
    direction[aim] = aimed[aim]
    axis = rng.random(n) < 0.15  # along an axis, or with one zero component
    for i in np.flatnonzero(axis):
        direction[i, rng.integers(0, 3)] = 0.0
        if rng.random() < 0.5:
            direction[i, rng.integers(0, 3)] = 0.0
    degenerate = np.linalg.norm(direction, axis=1) == 0.0
    direction[degenerate] = (0.0, 0.0, -1.0)
    return direction / np.linalg.norm(direction, axis=1, keepdims=True)


def _aimed(
    rng: np.random.Generator, history: History, n: int, height: tuple[float, float]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Matches, shooters, origins near the shooter's feet, and targets on other players."""
    match = rng.integers(0, history.matches, size=n).astype(np.int32)
    shooter = rng.integers(-1, history.players, size=n).astype(np.int32)
    newest = [
        (int(history.start[m]) + int(history.count[m]) - 1) % history.times.shape[1] for m in match
    ]
    victim = rng.integers(0, history.players, size=n)
    origin = np.empty((n, 3))
    target = np.empty((n, 3))
    for i in range(n):
        feet = history.positions[match[i], newest[i]]
        origin[i] = feet[max(int(shooter[i]), 0)] if rng.random() < 0.6 else feet[victim[i]]
        origin[i, :2] += rng.normal(scale=3.0, size=2)
        origin[i, 2] = rng.uniform(*height)
        target[i] = feet[victim[i]] + (0.0, 0.0, rng.uniform(0.0, 1.8))
    return match, shooter, origin, target


def random_hitscan(
    rng: np.random.Generator, history: History, n: int, *, aim_fraction: float = 0.7
) -> HitscanShots:
    """``n`` shots, most aimed at a player of their match."""
    match, shooter, origin, target = _aimed(rng, history, n, (0.1, 2.5))
    aim = rng.random(n) < aim_fraction
    direction = _unit_directions(rng, origin, target, aim)
    max_range = rng.choice([5.0, 30.0, 200.0], size=n)
    return HitscanShots(
        match=match,
        shooter=shooter,
        origin=origin,
        direction=direction,
        max_range=max_range,
        view_time=_view_times(rng, history, match),
    )


def random_projectiles(
    rng: np.random.Generator,
    history: History,
    n: int,
    *,
    max_speed: float = 60.0,
    aim_fraction: float = 0.7,
) -> ProjectileShots:
    """``n`` projectiles, most aimed at a player, flying until the match's newest snapshot
    (or up to 0.25 s beyond), some expiring on the way, with or without gravity."""
    match, shooter, origin, target = _aimed(rng, history, n, (0.1, 2.5))
    # Projectiles are slower than bullets: start most of them within a few metres of the
    # target so that they get there within the flight.
    close = rng.random(n) < 0.7
    offset = rng.normal(size=(n, 2))
    offset *= rng.uniform(0.5, 4.0, size=(n, 1)) / np.linalg.norm(offset, axis=1, keepdims=True)
    origin[close, :2] = target[close, :2] + offset[close]
    aim = rng.random(n) < aim_fraction
    direction = _unit_directions(rng, origin, target, aim)
    velocity = direction * rng.uniform(0.2 * max_speed, max_speed, size=(n, 1))
    spawn = _view_times(rng, history, match)
    newest = np.array([_history_span(history, int(m))[1] for m in match])
    # Mostly the present, sometimes beyond it (players clamp to the newest snapshot) so that
    # short histories still give flights long enough to reach someone.
    beyond = np.maximum(newest, spawn) + rng.uniform(0.05, 0.25, size=n)
    end = np.where(rng.random(n) < 0.3, newest, beyond)
    expire = spawn + np.where(rng.random(n) < 0.2, 0.05, 0.5) * rng.random(n)
    gravity = rng.choice([0.0, 9.81], size=n)
    return ProjectileShots(
        match=match,
        shooter=shooter,
        origin=origin,
        velocity=velocity,
        gravity=gravity,
        spawn_time=spawn,
        end_time=end,
        expire_time=expire,
        step_time=flight_step(np.linalg.norm(velocity, axis=1), gravity, expire - spawn),
    )
