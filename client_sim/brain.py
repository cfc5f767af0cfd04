"""What the bots decide to press: wander, strafe under fire, seek cover (vectorised).

The brain sees only what a client sees: its own predicted position and, a few times a
second, the nearest enemy in its interpolated view (``perceive``). Every tick it turns that
into a move vector in world axes (length <= 1), a view yaw/pitch and buttons, for all bots
in one pass over arrays.
"""

from __future__ import annotations

import math

import numpy as np

from shared.arena_map import ArenaMap
from shared.hitbox import ray_world_entry
from shared.movement import BUTTON_JUMP, PLAYER_RADIUS
from shared.weapons import EYE_HEIGHT

__all__ = ["BotIntent", "Brain"]

#: "play" wanders, strafes, seeks cover and shoots; "still" and "pace" are targets that
#: stand or run to and fro and never shoot; "marksman" stands and shoots.
BEHAVIOURS = ("play", "still", "pace", "marksman")
SHOOTING_BEHAVIOURS = ("play", "marksman")
PACE_SPEED = 0.9  # of full speed

CHEST_HEIGHT = 1.2  # where bots look and aim: the torso capsule's middle
COVER_STANDOFF = PLAYER_RADIUS + 0.4  # how far from a crate's face a bot crouches behind it


class BotIntent:
    """One tick's decisions for every bot (views into the brain's arrays)."""

    __slots__ = ("buttons", "move", "pitch", "yaw")

    def __init__(self, move: np.ndarray, yaw: np.ndarray, pitch: np.ndarray, buttons: np.ndarray):
        self.move, self.yaw, self.pitch, self.buttons = move, yaw, pitch, buttons


def _cover_points(arena: ArenaMap) -> np.ndarray:
    """Points just outside the middle of each face of each low cover box, ``(K, 2)``."""
    points = []
    for lo, hi, kind in zip(arena.box_min, arena.box_max, arena.box_kind, strict=True):
        if kind != "cover":
            continue
        cx, cy = (lo[0] + hi[0]) / 2, (lo[1] + hi[1]) / 2
        points += [
            (lo[0] - COVER_STANDOFF, cy),
            (hi[0] + COVER_STANDOFF, cy),
            (cx, lo[1] - COVER_STANDOFF),
            (cx, hi[1] + COVER_STANDOFF),
        ]
    return np.array(points).reshape(-1, 2)


class Brain:
    def __init__(
        self,
        count: int,
        arena: ArenaMap,
        rng: np.random.Generator,
        cover_seeking: float = 0.5,
        engage_range: float = 25.0,
        behaviour: str = "play",
    ) -> None:
        if behaviour not in BEHAVIOURS:
            raise ValueError(f"behaviour must be one of {', '.join(BEHAVIOURS)}")
        self.behaviour = behaviour
        self.count = count
        self.arena = arena
        self.rng = rng
        self.cover_seeking = cover_seeking
        self.engage_range = engage_range
        self.goal = self._random_points(count)
        self.goal_deadline = np.zeros(count)
        self.in_cover_mode = np.zeros(count, dtype=bool)
        self.strafe_phase = rng.uniform(0.0, 2 * math.pi, count)
        self.strafe_rate = rng.uniform(2.0, 5.0, count)  # radians per second
        self.threat = np.zeros((count, 3))
        self.threat_id = np.full(count, -1, dtype=np.int64)
        self.threat_since = np.zeros(count)
        self.has_threat = np.zeros(count, dtype=bool)
        self.cover_points = _cover_points(arena)
        self._move = np.zeros((count, 2))
        self._yaw = np.zeros(count)
        self._pitch = np.zeros(count)
        self._buttons = np.zeros(count, dtype=np.int64)

    def _random_points(self, n: int) -> np.ndarray:
        lo = self.arena.bounds_min + 1.0
        hi = self.arena.bounds_max - 1.0
        return self.rng.uniform(lo, hi, size=(n, 2))

    def perceive(
        self, bot: int, own: np.ndarray, enemies: np.ndarray, enemy_ids: np.ndarray, now: float
    ) -> None:
        """Note the nearest enemy in range that the bot can see (feet positions ``(K, 3)``).

        Walls and cover hide enemies: the line from this bot's eye to the enemy's chest
        must be clear. Only the three nearest are checked, as a player glances around.
        """
        if len(enemies):
            distance = np.linalg.norm(enemies[:, :2] - own[:2], axis=1)
            eye = own + (0.0, 0.0, EYE_HEIGHT)
            for nearest in np.argsort(distance)[:3].tolist():
                if distance[nearest] > self.engage_range:
                    break
                chest = enemies[nearest] + (0.0, 0.0, CHEST_HEIGHT)
                if self._blocked(eye, chest):
                    continue
                newly = not self.has_threat[bot] or self.threat_id[bot] != enemy_ids[nearest]
                self.threat[bot] = enemies[nearest]
                self.threat_id[bot] = enemy_ids[nearest]
                self.has_threat[bot] = True
                if newly:
                    self.threat_since[bot] = now
                    if self.rng.random() < self.cover_seeking:
                        self._seek_cover(bot, own, now)
                return
        self.has_threat[bot] = False
        self.threat_id[bot] = -1
        self.in_cover_mode[bot] = False

    def _blocked(self, start: np.ndarray, end: np.ndarray) -> bool:
        """Whether a box stands between two points above the floor."""
        span = end - start
        length = float(np.linalg.norm(span))
        if length == 0.0:
            return False
        direction = span / length
        hit = ray_world_entry(start, direction, length, self.arena.box_min, self.arena.box_max)
        return hit < length

    def _seek_cover(self, bot: int, own: np.ndarray, now: float) -> None:
        """Head for the nearest cover point with a crate between it and the threat."""
        if not len(self.cover_points):
            return
        threat_eye = self.threat[bot] + (0.0, 0.0, EYE_HEIGHT)
        distance = np.linalg.norm(self.cover_points - own[:2], axis=1)
        for choice in np.argsort(distance).tolist():
            chest = np.array((*self.cover_points[choice], CHEST_HEIGHT))
            if self._blocked(threat_eye, chest):
                self.goal[bot] = self.cover_points[choice]
                self.goal_deadline[bot] = now + self.rng.uniform(4.0, 8.0)
                self.in_cover_mode[bot] = True
                return

    def decide(self, pos: np.ndarray, now: float, dt: float) -> BotIntent:
        """This tick's inputs for every bot, from its predicted feet position ``(N, 3)``."""
        to_goal = self.goal - pos[:, :2]
        distance = np.linalg.norm(to_goal, axis=1)
        arrived = (distance < 0.75) & ~self.in_cover_mode
        expired = now >= self.goal_deadline
        fresh = np.flatnonzero(arrived | expired)
        if len(fresh):
            self.goal[fresh] = self._random_points(len(fresh))
            self.goal_deadline[fresh] = now + self.rng.uniform(3.0, 8.0, len(fresh))
            self.in_cover_mode[fresh] = False
            to_goal[fresh] = self.goal[fresh] - pos[fresh, :2]
            distance[fresh] = np.linalg.norm(to_goal[fresh], axis=1)

        heading = to_goal / np.maximum(distance, 1e-9)[:, None]
        settled = (self.in_cover_mode & (distance < 0.5)) | (self.behaviour == "marksman")
        move = np.where(settled[:, None], 0.0, heading)

        self.strafe_phase += self.strafe_rate * dt
        to_threat = self.threat[:, :2] - pos[:, :2]
        threat_distance = np.maximum(np.linalg.norm(to_threat, axis=1), 1e-9)
        sideways = np.stack((-to_threat[:, 1], to_threat[:, 0]), axis=1) / threat_distance[:, None]
        strafing = self.has_threat & ~self.in_cover_mode & (self.behaviour == "play")
        move = move + np.where(
            strafing[:, None], sideways * np.sin(self.strafe_phase)[:, None], 0.0
        )
        pacing = self.behaviour == "pace"
        if pacing or self.behaviour == "still":
            # Targets for fairness measurements: stand, or run to and fro along x.
            move = np.zeros_like(move)
            if pacing:
                move[:, 0] = np.sign(np.sin(self.strafe_phase * 0.5)) * PACE_SPEED
        length = np.linalg.norm(move, axis=1)
        # Scale just inside the unit circle: dividing by the norm can land a hair above 1,
        # and the server would clamp that input, costing the prediction its last bit.
        scale = np.where(length > 1.0, (1.0 - 1e-12) / np.maximum(length, 1e-12), 1.0)
        self._move[:] = move * scale[:, None]

        look = np.where(self.has_threat[:, None], to_threat, heading)
        self._yaw[:] = np.arctan2(look[:, 1], look[:, 0])
        rise = self.threat[:, 2] - pos[:, 2]
        self._pitch[:] = np.where(self.has_threat, np.arctan2(rise, threat_distance), 0.0)
        jumping = (self.rng.random(self.count) < 0.005) & (self.behaviour == "play")
        self._buttons[:] = np.where(jumping, BUTTON_JUMP, 0)
        return BotIntent(self._move, self._yaw, self._pitch, self._buttons)
