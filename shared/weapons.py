"""Weapons and combat rules, shared by server and bots so both judge shots the same way.

A shot leaves the shooter's eye (feet + ``EYE_HEIGHT``) along its view direction. The
shooter's position is the one after the input that fired was applied, which the client's
prediction and the server's simulation agree on bit for bit. The server holds each weapon to
its ``fire_interval`` on its own clock (server time of the tick that applies the input), so
a client cannot fire faster by sending inputs faster; an honest client, which sends one
input per tick, paces itself in inputs (:meth:`Weapon.interval_inputs`), which comes to the
same spacing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from shared.hitbox import HITBOX_MIN_RADIUS
from shared.movement import BUTTON_FIRE

__all__ = [
    "BUTTON_ALT_FIRE",
    "EYE_HEIGHT",
    "LAUNCHER",
    "RESPAWN_DELAY_S",
    "RIFLE",
    "WEAPONS",
    "Weapon",
    "aim_direction",
    "flight_step",
]

BUTTON_ALT_FIRE = 1 << 2
EYE_HEIGHT = 1.6
RESPAWN_DELAY_S = 3.0


@dataclass(frozen=True, slots=True)
class Weapon:
    id: int
    name: str
    button: int
    hitscan: bool
    damage: float  # before the hitbox multiplier
    max_range: float  # metres
    fire_interval: float  # seconds of server time between shots
    speed: float = 0.0  # m/s, projectiles only
    gravity: float = 0.0  # m/s^2 downwards, projectiles only
    lifetime: float = 0.0  # seconds a projectile flies before it expires

    @property
    def flight_step(self) -> float:
        """Seconds per chord of this weapon's projectile flights (:func:`flight_step`)."""
        if self.hitscan:
            raise ValueError(f"{self.name} is hitscan: it has no flight")
        return float(flight_step(self.speed, self.gravity, self.lifetime))

    def interval_inputs(self, tick_rate: int) -> int:
        """The fire interval in inputs, for a client that sends one input per tick: the
        fewest ticks that span ``fire_interval``."""
        return max(1, math.ceil(self.fire_interval * tick_rate - 1e-9))


def flight_step(speed: npt.ArrayLike, gravity: npt.ArrayLike, lifetime: npt.ArrayLike) -> Any:
    """Seconds per chord of a projectile's flight, launched at ``speed`` under ``gravity``
    for ``lifetime`` (scalars or arrays, m/s, m/s^2, s).

    A flight is cut into chords of this duration counted from its spawn, and each chord
    is tested against the players as they stand at its end. The server, which flies a
    projectile on in pieces tick by tick, and a client, which flies it through its own
    frames in one go, cut the same chords: the same segments judged against the players at
    the same times, so a near miss is one for both. Short enough that no chord spans more
    than :data:`~shared.hitbox.HITBOX_MIN_RADIUS` at the fastest the projectile can go (its
    speed plus what gravity adds over its lifetime), so nothing tunnels.
    """
    return HITBOX_MIN_RADIUS / (np.add(speed, np.multiply(gravity, lifetime)))


RIFLE = Weapon(
    0, "rifle", BUTTON_FIRE, hitscan=True, damage=25.0, max_range=120.0, fire_interval=0.1
)
LAUNCHER = Weapon(
    1,
    "launcher",
    BUTTON_ALT_FIRE,
    hitscan=False,
    damage=60.0,
    max_range=200.0,
    fire_interval=0.8,
    speed=45.0,
    gravity=9.81,
    lifetime=3.0,
)
WEAPONS = (RIFLE, LAUNCHER)


def aim_direction(yaw: float, pitch: float) -> np.ndarray:
    """Unit view vector: yaw 0 = +x, counter-clockwise; pitch positive = up."""
    cos_pitch = math.cos(pitch)
    return np.array(
        (cos_pitch * math.cos(yaw), cos_pitch * math.sin(yaw), math.sin(pitch)),
        dtype=np.float64,
    )
