"""The readable NumPy reference of lag-compensated hit registration: the specification.

The numba CPU kernels (``cpu.py``) and the CUDA kernels (``cuda.py``) must produce exactly
what these functions produce on every input; the property tests check it. The reference
favours clarity over speed: one Python iteration per shot (and per projectile sub-step),
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

from shared.hitbox import HIT_NONE, HITBOXES, ray_hit_player

__all__ = [
    "DEFAULT_MAX_SUBSTEPS",
    "interpolate_positions",
    "projectile_substeps",
    "resolve_hitscan",
    "resolve_projectiles",
    "snapshot_bracket",
]

#: Upper bound on a projectile's sub-steps in one call; beyond it steps get longer than
#: ``max_step`` (only reachable with absurd speeds or spans, which the server rejects).
DEFAULT_MAX_SUBSTEPS = 100_000

_HITBOX_COUNT = len(HITBOXES)


def snapshot_bracket(
    times: np.ndarray, start: np.ndarray, count: np.ndarray, m: int, t: float
) -> tuple[int, int, float]:
    """Physical indices of the snapshots around ``t`` in match ``m`` and the later one's weight.

    Before the oldest snapshot the oldest is used alone, after the newest the newest alone
    (clamping), and at exactly a snapshot's time that snapshot alone; otherwise the two
    snapshots with ``t0 < t < t1`` and weight ``(t - t0) / (t1 - t0)``. ``(-1, -1, 0.0)``
    when the match has no snapshot.
    """
    n = int(count[m])
    if n <= 0:
        return -1, -1, 0.0
    capacity = times.shape[1]
    first = int(start[m])
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


def interpolate_positions(
    times: np.ndarray,
    positions: np.ndarray,
    alive: np.ndarray,
    start: np.ndarray,
    count: np.ndarray,
    m: int,
    t: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Feet positions ``(P, 3)`` of match ``m`` rewound to time ``t``, and who was present.

    Linear interpolation between the bracketing snapshots gives sub-tick accuracy; a player
    is present only if alive in both (or in the single one when clamped or exact).
    """
    before, after, weight = snapshot_bracket(times, start, count, m, t)
    players = positions.shape[2]
    if before < 0:
        return np.zeros((players, 3)), np.zeros(players, dtype=bool)
    p0 = positions[m, before]
    p1 = positions[m, after]
    rewound = p0 + (p1 - p0) * weight
    present = (alive[m, before] != 0) & (alive[m, after] != 0)
    return rewound, present


def resolve_hitscan(
    times: np.ndarray,
    positions: np.ndarray,
    alive: np.ndarray,
    start: np.ndarray,
    count: np.ndarray,
    box_min: np.ndarray,
    box_max: np.ndarray,
    shot_match: np.ndarray,
    shot_shooter: np.ndarray,
    shot_origin: np.ndarray,
    shot_dir: np.ndarray,
    shot_range: np.ndarray,
    shot_time: np.ndarray,
    out_kind: np.ndarray,
    out_victim: np.ndarray,
    out_hitbox: np.ndarray,
    out_distance: np.ndarray,
    out_tests: np.ndarray,
) -> None:
    """Resolve instant-hit shots, each against the world as its shooter saw it.

    For shot ``i``: rewind the players of match ``shot_match[i]`` to ``shot_time[i]``, drop the
    shooter, and take the nearest hit along ``shot_origin[i] + t * shot_dir[i]`` for
    ``0 <= t <= shot_range[i]`` among hitboxes, map boxes and the floor (see
    :mod:`shared.hitbox` for the tie rules). Writes kind (0 miss, 1 player, 2 world), victim
    slot (-1 if none), hitbox id (0 if none), distance (the range on a miss) and the number
    of (player, hitbox) pairs considered.
    """
    for i in range(shot_match.shape[0]):
        m = int(shot_match[i])
        rewound, present = interpolate_positions(
            times, positions, alive, start, count, m, float(shot_time[i])
        )
        shooter = int(shot_shooter[i])
        if 0 <= shooter < present.shape[0]:
            present[shooter] = False
        hit = ray_hit_player(
            shot_origin[i], shot_dir[i], float(shot_range[i]), rewound, box_min, box_max, present
        )
        out_kind[i] = hit.kind
        out_victim[i] = hit.victim
        out_hitbox[i] = hit.hitbox
        out_distance[i] = hit.distance
        out_tests[i] = _HITBOX_COUNT * int(np.count_nonzero(present))


def projectile_substeps(
    velocity: np.ndarray, gravity: float, duration: float, max_step: float, max_substeps: int
) -> int:
    """How many equal sub-steps keep every step of the flight no longer than ``max_step``.

    Speed along a ballistic arc is largest at one of its ends (its square is a convex
    quadratic in time), so ``max(end speeds) * duration`` bounds the path length.
    """
    vx, vy, vz = float(velocity[0]), float(velocity[1]), float(velocity[2])
    speed0 = math.sqrt(vx * vx + vy * vy + vz * vz)
    vz1 = vz - gravity * duration
    speed1 = math.sqrt(vx * vx + vy * vy + vz1 * vz1)
    steps = max(speed0, speed1) * duration / max_step
    if steps >= max_substeps:
        return max_substeps
    return max(1, math.ceil(steps))


def resolve_projectiles(
    times: np.ndarray,
    positions: np.ndarray,
    alive: np.ndarray,
    start: np.ndarray,
    count: np.ndarray,
    box_min: np.ndarray,
    box_max: np.ndarray,
    proj_match: np.ndarray,
    proj_shooter: np.ndarray,
    proj_origin: np.ndarray,
    proj_velocity: np.ndarray,
    proj_gravity: np.ndarray,
    proj_spawn_time: np.ndarray,
    proj_end_time: np.ndarray,
    proj_expire_time: np.ndarray,
    out_kind: np.ndarray,
    out_victim: np.ndarray,
    out_hitbox: np.ndarray,
    out_time: np.ndarray,
    out_position: np.ndarray,
    out_velocity: np.ndarray,
    out_expired: np.ndarray,
    out_tests: np.ndarray,
    max_step: float,
    max_substeps: int = DEFAULT_MAX_SUBSTEPS,
) -> None:
    """Re-simulate projectiles from their spawn (view) time through the history.

    A projectile follows the exact ballistic arc ``origin + v*tau - (0, 0, g*tau**2/2)``,
    cut into equal sub-steps no longer than ``max_step`` (so a hitbox at least that thick
    cannot be skipped); each chord is tested against the floor, the boxes and the players
    interpolated at the chord's end time. The first hit in time wins. Flight stops at
    ``min(end_time, expire_time)``: a projectile that is still flying reports its position and
    velocity there (kind 0, so the caller can continue it next tick with spawn = this end),
    one that reached ``expire_time`` first reports kind 0 with ``out_expired = 1``.
    """
    for i in range(proj_match.shape[0]):
        m = int(proj_match[i])
        shooter = int(proj_shooter[i])
        ox, oy, oz = (float(v) for v in proj_origin[i])
        vx, vy, vz = (float(v) for v in proj_velocity[i])
        g = float(proj_gravity[i])
        spawn = float(proj_spawn_time[i])
        end = float(proj_end_time[i])
        expire = float(proj_expire_time[i])
        duration = min(end, expire) - spawn
        tests = 0
        kind, victim, hitbox = HIT_NONE, -1, 0
        hit_tau = 0.0
        hit_point = (ox, oy, oz)
        if duration > 0.0:
            n = projectile_substeps(proj_velocity[i], g, duration, max_step, max_substeps)
            ax, ay, az = ox, oy, oz
            tau_before = 0.0
            for k in range(1, n + 1):
                tau = duration if k == n else duration * k / n
                bx = ox + vx * tau
                by = oy + vy * tau
                bz = oz + vz * tau - 0.5 * g * tau * tau
                chord = np.array([bx - ax, by - ay, bz - az])
                rewound, present = interpolate_positions(
                    times, positions, alive, start, count, m, spawn + tau
                )
                if 0 <= shooter < present.shape[0]:
                    present[shooter] = False
                tests += _HITBOX_COUNT * int(np.count_nonzero(present))
                hit = ray_hit_player(
                    np.array([ax, ay, az]), chord, 1.0, rewound, box_min, box_max, present
                )
                if hit.kind != HIT_NONE:
                    u = hit.distance
                    kind, victim, hitbox = hit.kind, hit.victim, hit.hitbox
                    hit_tau = tau_before + u * (tau - tau_before)
                    hit_point = (ax + u * chord[0], ay + u * chord[1], az + u * chord[2])
                    break
                ax, ay, az = bx, by, bz
                tau_before = tau
            if kind == HIT_NONE:
                hit_tau = duration
                hit_point = (ax, ay, az)
        out_kind[i] = kind
        out_victim[i] = victim
        out_hitbox[i] = hitbox
        out_time[i] = spawn + hit_tau
        out_position[i] = hit_point
        out_velocity[i] = (vx, vy, vz - g * hit_tau)
        out_expired[i] = 1 if kind == HIT_NONE and expire <= end else 0
        out_tests[i] = tests
