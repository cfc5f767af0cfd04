"""The deterministic movement model: one function that the server and the bots both run.

The server steps every player with it; a bot steps its own player with it to predict, and
replays its unacknowledged inputs through it to reconcile. Determinism across the two comes
from using only IEEE-exact element-wise operations (+, -, *, /, sqrt, min, max, comparisons):
the same inputs give bit-identical states whether the arrays hold one player or three
hundred, on any machine. No transcendental functions: the move vector is already in world
axes, so no sin/cos of the yaw is needed.

:func:`step` runs a numba kernel, one loop over the players (a tick's few dozen NumPy calls
cost more than the arithmetic: about 0.2 ms at any player count). :func:`step_reference`
is the same model in NumPy, the readable one: the kernel must agree with it bit for bit,
which holds because both do the same IEEE operations in the same order (no fastmath, so no
fused multiply-adds).

Units: metres, seconds, z up, the floor at z = 0. A player is a vertical box of half-width
``PLAYER_RADIUS`` and height ``PLAYER_HEIGHT`` standing on its feet position.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from shared.arena_map import ArenaMap

__all__ = [
    "BUTTON_FIRE",
    "BUTTON_JUMP",
    "PLAYER_HEIGHT",
    "PLAYER_RADIUS",
    "MovementParams",
    "step",
    "step_reference",
    "warm_up",
]

PLAYER_RADIUS = 0.4
PLAYER_HEIGHT = 1.8
BUTTON_JUMP = 1 << 0
BUTTON_FIRE = 1 << 1

# Keeps a resolved player a hair outside the box face so the next step starts clear of it.
_SKIN = 1e-6


@dataclass(frozen=True, slots=True)
class MovementParams:
    """Tuned for a brisk arena shooter: 6 m/s run, a hop that clears nothing taller than 0.8 m."""

    max_speed: float = 6.0  # m/s on the ground
    ground_accel: float = 60.0  # m/s^2 towards the wished velocity
    air_accel: float = 15.0  # m/s^2, limited air control
    friction: float = 8.0  # 1/s, fraction of speed lost per second on the ground
    jump_speed: float = 4.0  # m/s upward at take-off
    gravity: float = 9.81  # m/s^2


def _accelerate(vel_xy: np.ndarray, wish: np.ndarray, limit: np.ndarray) -> np.ndarray:
    """Move the horizontal velocity towards ``wish`` by at most ``limit`` (per player)."""
    delta = wish - vel_xy
    length = np.sqrt(delta[:, 0] * delta[:, 0] + delta[:, 1] * delta[:, 1])
    scale = np.where(length > limit, limit / np.where(length > 0.0, length, 1.0), 1.0)
    return vel_xy + delta * scale[:, None]


def _resolve_axis(pos: np.ndarray, vel: np.ndarray, axis: int, dt: float, arena: ArenaMap) -> None:
    """Move along one horizontal axis and stop at the first box face crossed (in place)."""
    other = 1 - axis
    moved = pos[:, axis] + vel[:, axis] * dt
    if arena.box_count:
        lo, hi = arena.box_min, arena.box_max
        overlap = (
            (moved[:, None] + PLAYER_RADIUS > lo[None, :, axis])
            & (moved[:, None] - PLAYER_RADIUS < hi[None, :, axis])
            & (pos[:, other, None] + PLAYER_RADIUS > lo[None, :, other])
            & (pos[:, other, None] - PLAYER_RADIUS < hi[None, :, other])
            & (pos[:, 2, None] + PLAYER_HEIGHT > lo[None, :, 2])
            & (pos[:, 2, None] < hi[None, :, 2])
        )
        forward = vel[:, axis] > 0.0
        stop_forward = np.where(overlap, lo[None, :, axis] - PLAYER_RADIUS - _SKIN, np.inf)
        stop_backward = np.where(overlap, hi[None, :, axis] + PLAYER_RADIUS + _SKIN, -np.inf)
        limit = np.where(forward, stop_forward.min(axis=1), stop_backward.max(axis=1))
        blocked = overlap.any(axis=1)
        moved = np.where(blocked, limit, moved)
        vel[:, axis] = np.where(blocked, 0.0, vel[:, axis])
    low = arena.bounds_min[axis] + PLAYER_RADIUS
    high = arena.bounds_max[axis] - PLAYER_RADIUS
    outside = (moved < low) | (moved > high)
    pos[:, axis] = np.minimum(np.maximum(moved, low), high)
    vel[:, axis] = np.where(outside, 0.0, vel[:, axis])


def step_reference(
    pos: np.ndarray,
    vel: np.ndarray,
    move: np.ndarray,
    buttons: np.ndarray,
    dt: float,
    arena: ArenaMap,
    params: MovementParams = MovementParams(),
) -> tuple[np.ndarray, np.ndarray]:
    """Advance N players by one tick of length ``dt``; returns new ``(pos, vel)``.

    ``pos`` and ``vel`` are ``(N, 3)`` float64, ``move`` is ``(N, 2)`` float64 in world axes
    with length at most 1 (callers clamp untrusted input first), ``buttons`` is ``(N,)``
    integer bit flags. The inputs are not modified.
    """
    pos = np.array(pos, dtype=np.float64, copy=True)
    vel = np.array(vel, dtype=np.float64, copy=True)
    on_ground = pos[:, 2] <= 0.0

    horizontal = vel[:, :2]
    damping = np.maximum(0.0, 1.0 - params.friction * dt)
    horizontal = np.where(on_ground[:, None], horizontal * damping, horizontal)
    wish = np.asarray(move, dtype=np.float64) * params.max_speed
    accel = np.where(on_ground, params.ground_accel, params.air_accel) * dt
    vel[:, :2] = _accelerate(horizontal, wish, accel)

    jumping = on_ground & ((np.asarray(buttons) & BUTTON_JUMP) != 0)
    vel[:, 2] = np.where(jumping, params.jump_speed, vel[:, 2]) - params.gravity * dt
    pos[:, 2] = pos[:, 2] + vel[:, 2] * dt
    landed = pos[:, 2] <= 0.0
    pos[:, 2] = np.where(landed, 0.0, pos[:, 2])
    vel[:, 2] = np.where(landed, 0.0, vel[:, 2])

    _resolve_axis(pos, vel, 0, dt, arena)
    _resolve_axis(pos, vel, 1, dt, arena)
    return pos, vel


def step(
    pos: np.ndarray,
    vel: np.ndarray,
    move: np.ndarray,
    buttons: np.ndarray,
    dt: float,
    arena: ArenaMap,
    params: MovementParams = MovementParams(),
) -> tuple[np.ndarray, np.ndarray]:
    """Advance N players by one tick of length ``dt``; returns new ``(pos, vel)``, exactly
    as :func:`step_reference` does (same arguments; the inputs are not modified)."""
    return _step_players(
        np.ascontiguousarray(pos, dtype=np.float64),
        np.ascontiguousarray(vel, dtype=np.float64),
        np.ascontiguousarray(move, dtype=np.float64),
        np.ascontiguousarray(buttons, dtype=np.int64),
        float(dt),
        arena.box_min,
        arena.box_max,
        arena.bounds_min,
        arena.bounds_max,
        params.max_speed,
        params.ground_accel,
        params.air_accel,
        params.friction,
        params.jump_speed,
        params.gravity,
    )


@numba.njit(cache=True, nogil=True)
def _step_players(
    pos: np.ndarray,
    vel: np.ndarray,
    move: np.ndarray,
    buttons: np.ndarray,
    dt: float,
    box_min: np.ndarray,
    box_max: np.ndarray,
    bounds_min: np.ndarray,
    bounds_max: np.ndarray,
    max_speed: float,
    ground_accel: float,
    air_accel: float,
    friction: float,
    jump_speed: float,
    gravity: float,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`step_reference`, player by player, operation for operation."""
    out_pos, out_vel = pos.copy(), vel.copy()
    damping = max(0.0, 1.0 - friction * dt)
    # Scalars only, never a row view (``out_pos[i]``, ``box_min[b]``) nor a call with an
    # array argument: each costs a reference count taken and dropped, an atomic operation
    # that was most of this kernel's time. So the collision of each axis is written here.
    for i in range(pos.shape[0]):
        on_ground = out_pos[i, 2] <= 0.0
        vx, vy = out_vel[i, 0], out_vel[i, 1]
        if on_ground:
            vx, vy = vx * damping, vy * damping
        limit = (ground_accel if on_ground else air_accel) * dt
        dx, dy = move[i, 0] * max_speed - vx, move[i, 1] * max_speed - vy
        length = np.sqrt(dx * dx + dy * dy)
        scale = limit / (length if length > 0.0 else 1.0) if length > limit else 1.0
        out_vel[i, 0], out_vel[i, 1] = vx + dx * scale, vy + dy * scale
        jumping = on_ground and (buttons[i] & BUTTON_JUMP) != 0
        out_vel[i, 2] = (jump_speed if jumping else out_vel[i, 2]) - gravity * dt
        out_pos[i, 2] = out_pos[i, 2] + out_vel[i, 2] * dt
        if out_pos[i, 2] <= 0.0:
            out_pos[i, 2], out_vel[i, 2] = 0.0, 0.0
        for axis in range(2):  # (:func:`_resolve_axis` for this player, x then y)
            other = 1 - axis
            moved = out_pos[i, axis] + out_vel[i, axis] * dt
            across, height = out_pos[i, other], out_pos[i, 2]
            blocked, stop_forward, stop_backward = False, np.inf, -np.inf
            for b in range(box_min.shape[0]):
                if (
                    moved + PLAYER_RADIUS > box_min[b, axis]
                    and moved - PLAYER_RADIUS < box_max[b, axis]
                    and across + PLAYER_RADIUS > box_min[b, other]
                    and across - PLAYER_RADIUS < box_max[b, other]
                    and height + PLAYER_HEIGHT > box_min[b, 2]
                    and height < box_max[b, 2]
                ):
                    blocked = True
                    stop_forward = min(stop_forward, box_min[b, axis] - PLAYER_RADIUS - _SKIN)
                    stop_backward = max(stop_backward, box_max[b, axis] + PLAYER_RADIUS + _SKIN)
            if blocked:
                moved = stop_forward if out_vel[i, axis] > 0.0 else stop_backward
                out_vel[i, axis] = 0.0
            low = bounds_min[axis] + PLAYER_RADIUS
            high = bounds_max[axis] - PLAYER_RADIUS
            if moved < low or moved > high:
                out_vel[i, axis] = 0.0
            out_pos[i, axis] = min(max(moved, low), high)
    return out_pos, out_vel


def warm_up() -> None:
    """Compile (or load from the cache) the movement kernel, for the types step passes."""
    from shared.arena_map import default_map

    one = np.zeros((1, 3))
    step(one, one, np.zeros((1, 2)), np.zeros(1, dtype=np.int64), 1.0 / 60, default_map())
