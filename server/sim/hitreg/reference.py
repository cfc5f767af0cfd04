"""The readable NumPy reference of lag-compensated hit registration: the specification.

The numba CPU kernels (``cpu.py``) and the CUDA kernels (``cuda.py``) must produce exactly
what these functions produce on every input; the property tests check it. The reference
favours clarity over speed: one Python iteration per shot (and per projectile chord),
NumPy over players and boxes, and the ray tests of :mod:`shared.hitbox`, which the bots use
for their own verdicts too.

History ring layout (one ring per match ``m``, ``H`` snapshots of ``P`` player slots):

* ``times (Mt, H) float64``: server time of each snapshot (``tick / tick_rate``);
* ``positions (Mt, H, P, 3) float64``: feet positions;
* ``alive (Mt, H, P) uint8``: 1 when the slot was occupied and alive in that snapshot;
* ``start (Mt,) int64``: physical index of the oldest snapshot;
* ``count (Mt,) int64``: number of valid snapshots; logical snapshot ``i`` lives at physical
  index ``(start + i) % H`` and logical order is strictly increasing time.
"""

from __future__ import annotations

import math

import numpy as np

from server.sim.hitreg.batches import (
    History,
    HitscanResults,
    HitscanShots,
    ProjectileResults,
    ProjectileShots,
    World,
)
from shared.hitbox import HIT_NONE, HITBOXES, ray_hit_player

__all__ = [
    "DEFAULT_MAX_SUBSTEPS",
    "flight_chords",
    "interpolate_positions",
    "resolve_hitscan",
    "resolve_projectiles",
    "rewound_feet",
    "snapshot_bracket",
]

#: Upper bound on a projectile's chords in one call: a flight that would need more (a tick
#: after a stall of minutes) goes on from there at the next call, on the same chords.
DEFAULT_MAX_SUBSTEPS = 100_000

_HITBOX_COUNT = len(HITBOXES)


def snapshot_bracket(history: History, m: int, t: float) -> tuple[int, int, float]:
    """Physical indices of the snapshots around ``t`` in match ``m`` and the later one's weight.

    Before the oldest snapshot the oldest is used alone, after the newest the newest alone
    (clamping), and at exactly a snapshot's time that snapshot alone; otherwise the two
    snapshots with ``t0 < t < t1`` and weight ``(t - t0) / (t1 - t0)``. ``(-1, -1, 0.0)``
    when the match has no snapshot.
    """
    times = history.times
    n = int(history.count[m])
    if n <= 0:
        return -1, -1, 0.0
    capacity = times.shape[1]
    first = int(history.start[m])
    oldest = first
    newest = (first + n - 1) % capacity
    if t <= times[m, oldest]:
        return oldest, oldest, 0.0
    if t >= times[m, newest]:
        return newest, newest, 0.0
    for i in range(n - 1):
        before = (first + i) % capacity
        after = (first + i + 1) % capacity
        t0 = float(times[m, before])
        if t0 <= t < times[m, after]:
            if t0 == t:
                return before, before, 0.0
            return before, after, (t - t0) / (float(times[m, after]) - t0)
    raise AssertionError("snapshot times must strictly increase in logical order")


def interpolate_positions(history: History, m: int, t: float) -> tuple[np.ndarray, np.ndarray]:
    """Feet positions ``(P, 3)`` of match ``m`` rewound to time ``t``, and who was present.

    Linear interpolation between the bracketing snapshots gives sub-tick accuracy; a player
    is present only if alive in both (or in the single one when clamped or exact).
    """
    before, after, weight = snapshot_bracket(history, m, t)
    if before < 0:
        return np.zeros((history.players, 3)), np.zeros(history.players, dtype=bool)
    p0 = history.positions[m, before]
    p1 = history.positions[m, after]
    rewound = p0 + (p1 - p0) * weight
    present = (history.alive[m, before] != 0) & (history.alive[m, after] != 0)
    return rewound, present


def rewound_feet(history: History, match: int, time: float, player: int) -> np.ndarray | None:
    """``player``'s feet in ``match`` at ``time`` as the hit kernels rewind them (the same
    interpolation, :func:`interpolate_positions`: what the live view and the replay viewer
    draw); None when the ring no longer (or not yet) covers ``time`` or the player was not
    there."""
    count = int(history.count[match])
    if count == 0 or not 0 <= player < history.players:
        return None
    capacity = history.times.shape[1]
    start = int(history.start[match])
    oldest = history.times[match, start]
    newest = history.times[match, (start + count - 1) % capacity]
    if not oldest <= time <= newest:
        return None
    feet, present = interpolate_positions(history, match, time)
    return feet[player].copy() if present[player] else None


def resolve_hitscan(
    history: History,
    world: World,
    shots: HitscanShots,
    out: HitscanResults,
    *,
    broad_phase: bool = False,
) -> None:
    """Resolve instant-hit shots, each against the world as its shooter saw it.

    For shot ``i``: rewind the players of match ``shots.match[i]`` to ``shots.view_time[i]``,
    drop the shooter, and take the nearest hit along ``origin[i] + t * direction[i]`` for
    ``0 <= t <= max_range[i]`` among hitboxes, map boxes and the floor (see
    :mod:`shared.hitbox` for the tie rules). Writes kind (0 miss, 1 player, 2 world), victim
    slot (-1 if none), hitbox id (0 if none), distance (the range on a miss) and the number
    of (player, hitbox) pairs considered. ``broad_phase`` changes nothing here: the
    specification tests every player (the kernels' grid only skips work).
    """
    for i in range(len(shots)):
        m = int(shots.match[i])
        rewound, present = interpolate_positions(history, m, float(shots.view_time[i]))
        shooter = int(shots.shooter[i])
        if 0 <= shooter < present.shape[0]:
            present[shooter] = False
        hit = ray_hit_player(
            shots.origin[i],
            shots.direction[i],
            float(shots.max_range[i]),
            rewound,
            world.box_min,
            world.box_max,
            present,
        )
        out.kind[i] = hit.kind
        out.victim[i] = hit.victim
        out.hitbox[i] = hit.hitbox
        out.distance[i] = hit.distance
        out.hitbox_tests[i] = _HITBOX_COUNT * int(np.count_nonzero(present))


def flight_chords(
    spawn: float, end: float, expire: float, step: float, max_chords: int
) -> tuple[int, float, bool]:
    """How far one call flies a projectile: (its chords, the flight time they end at, and
    whether that is the end of its life).

    The whole chords of ``step`` seconds from ``spawn`` that end by ``min(end, expire)``;
    when the expiry comes by ``end``, one shorter chord more, up to it. At most
    ``max_chords``: a flight cut short there goes on from its last chord at the next call.
    """
    whole = max(0, math.floor((min(end, expire) - spawn) / step))
    if whole >= max_chords:
        return max_chords, max_chords * step, False
    if expire <= end:
        if expire - spawn > whole * step:
            return whole + 1, expire - spawn, True
        return whole, whole * step, True
    return whole, whole * step, False


def resolve_projectiles(
    history: History,
    world: World,
    projectiles: ProjectileShots,
    out: ProjectileResults,
    *,
    max_substeps: int,
    broad_phase: bool = False,
) -> None:
    """Re-simulate projectiles from their spawn (view) time through the history.

    A projectile follows the exact ballistic arc ``origin + v*tau - (0, 0, g*tau**2/2)``,
    cut into chords of ``step_time`` from its spawn (:func:`flight_chords`); each chord is
    tested against the floor, the boxes and the players interpolated at the chord's end
    time. The first hit in time wins. A projectile that hits nothing by the last whole
    chord before ``end_time`` reports its position and velocity there (kind 0, so the
    caller continues it next tick with spawn = that time: the same chords as one flight);
    one that reached ``expire_time`` reports kind 0 with ``out.expired = 1``.
    ``broad_phase`` changes nothing here (see :func:`resolve_hitscan`).
    """
    for i in range(len(projectiles)):
        m = int(projectiles.match[i])
        shooter = int(projectiles.shooter[i])
        ox, oy, oz = (float(v) for v in projectiles.origin[i])
        vx, vy, vz = (float(v) for v in projectiles.velocity[i])
        g = float(projectiles.gravity[i])
        spawn = float(projectiles.spawn_time[i])
        step = float(projectiles.step_time[i])
        chords, flown, expires = flight_chords(
            spawn,
            float(projectiles.end_time[i]),
            float(projectiles.expire_time[i]),
            step,
            max_substeps,
        )
        tests = 0
        kind, victim, hitbox = HIT_NONE, -1, 0
        hit_tau = flown
        ax, ay, az = ox, oy, oz
        hit_point = (ox, oy, oz)
        tau_before = 0.0
        for k in range(1, chords + 1):
            tau = flown if k == chords else k * step
            bx = ox + vx * tau
            by = oy + vy * tau
            bz = oz + vz * tau - 0.5 * g * tau * tau
            chord = np.array([bx - ax, by - ay, bz - az])
            rewound, present = interpolate_positions(history, m, spawn + tau)
            if 0 <= shooter < present.shape[0]:
                present[shooter] = False
            tests += _HITBOX_COUNT * int(np.count_nonzero(present))
            hit = ray_hit_player(
                np.array([ax, ay, az]),
                chord,
                1.0,
                rewound,
                world.box_min,
                world.box_max,
                present,
            )
            if hit.kind != HIT_NONE:
                u = hit.distance
                kind, victim, hitbox = hit.kind, hit.victim, hit.hitbox
                hit_tau = tau_before + u * (tau - tau_before)
                hit_point = (ax + u * chord[0], ay + u * chord[1], az + u * chord[2])
                break
            ax, ay, az = bx, by, bz
            hit_point = (ax, ay, az)
            tau_before = tau
        out.kind[i] = kind
        out.victim[i] = victim
        out.hitbox[i] = hitbox
        out.time[i] = spawn + hit_tau
        out.position[i] = hit_point
        out.velocity[i] = (vx, vy, vz - g * hit_tau)
        out.expired[i] = 1 if kind == HIT_NONE and expires else 0
        out.hitbox_tests[i] = tests
