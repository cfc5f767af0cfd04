"""What the bots decide to press: wander, strafe under fire, seek cover (vectorised).

The brain sees only what a client sees: its own predicted position and, a few times a
second, the nearest enemy in its interpolated view (``perceive_group``). Every tick it turns that
into a move vector in world axes (length <= 1), a view yaw/pitch and buttons, for all bots
in one pass over arrays.
"""

from __future__ import annotations

import math

import numpy as np

from client_sim.bot_random import Streams, as_streams
from shared.arena_map import ArenaMap
from shared.movement import BUTTON_JUMP, PLAYER_RADIUS
from shared.protocol.inputs import quantize_angles, quantize_moves
from shared.sightlines import first_in_sight, sight_blocked, spot_drawn
from shared.weapons import EYE_HEIGHT

__all__ = ["BotIntent", "Brain"]

#: "play" wanders, strafes, seeks cover and shoots; "still", "pace" and "strafe" are
#: targets that stand, run to and fro, or dodge side to side reversing every 0.3-0.8 s,
#: and never shoot; "marksman" stands and shoots.
BEHAVIOURS = ("play", "still", "pace", "strafe", "marksman")
TARGET_BEHAVIOURS = ("still", "pace", "strafe")
SHOOTING_BEHAVIOURS = ("play", "marksman")
PACE_SPEED = 0.9  # of full speed

CHEST_HEIGHT = 1.2  # where bots look and aim: the torso capsule's middle
COVER_STANDOFF = PLAYER_RADIUS + 0.4  # how far from a crate's face a bot crouches behind it
GLANCES = 3  # how many of the nearest enemies a bot checks for a clear line of sight
COVER_CHOICES = 8  # how many of the nearest cover points a bot considers when it is spotted
GLANCE_HEIGHTS = np.array([EYE_HEIGHT, CHEST_HEIGHT])  # a glance goes from the eye to the chest
MAX_SIGHTINGS = 200_000  # about 20 minutes of 300 bots playing


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
        rng: np.random.Generator | Streams,
        cover_seeking: float = 0.5,
        engage_range: float = 25.0,
        behaviour: str = "play",
    ) -> None:
        if behaviour not in BEHAVIOURS:
            raise ValueError(f"behaviour must be one of {', '.join(BEHAVIOURS)}")
        self.behaviour = behaviour
        self.count = count
        self.arena = arena
        self.rng = as_streams(rng)  # one stream per bot in a swarm: the same whatever the split
        self.cover_seeking = cover_seeking
        self.engage_range = engage_range
        every = np.arange(count)
        self.goal = self._random_points(every)
        self.goal_deadline = np.zeros(count)
        self.in_cover_mode = np.zeros(count, dtype=bool)
        self.strafe_phase = self.rng.uniform(0.0, 2 * math.pi, every)
        self.strafe_rate = self.rng.uniform(2.0, 5.0, every)  # radians per second
        self.threat = np.zeros((count, 3))
        self.threat_id = np.full(count, -1, dtype=np.int64)
        self.threat_since = np.zeros(count)
        self.has_threat = np.zeros(count, dtype=bool)
        #: Every time a bot first saw an enemy (after not seeing it): (bot, enemy id, time),
        #: the first MAX_SIGHTINGS of a run (a bounded sample for the peeker's advantage).
        self.sightings: list[tuple[int, int, float]] = []
        self.cover_points = _cover_points(arena)
        self._box_min = np.ascontiguousarray(arena.box_min, dtype=np.float64).reshape(-1, 3)
        self._box_max = np.ascontiguousarray(arena.box_max, dtype=np.float64).reshape(-1, 3)
        self._move = np.zeros((count, 2))
        self._yaw = np.zeros(count)
        self._pitch = np.zeros(count)
        self._buttons = np.zeros(count, dtype=np.int64)

    def _random_points(self, rows: np.ndarray) -> np.ndarray:
        lo = self.arena.bounds_min + 1.0
        hi = self.arena.bounds_max - 1.0
        return self.rng.uniform(lo, hi, rows, width=2)

    def perceive_group(
        self,
        bots: np.ndarray,
        own: np.ndarray,
        feet: np.ndarray,
        ids: np.ndarray,
        visible: np.ndarray,
        now: float,
    ) -> None:
        """Each of ``bots`` notes the nearest enemy in range that it can see.

        The bots render the same players (``ids``, ``(K,)``): ``feet`` ``(B, K, 3)`` is
        where each bot draws them, ``visible`` ``(B, K)`` which of them are enemies it
        could see (alive, not itself, not a teammate); ``own`` ``(B, 3)`` are the bots'
        feet. Walls and cover hide enemies: the line from the bot's eye to the enemy's chest
        must be clear. Only the three nearest are checked, as a player glances around; all
        sight lines of the group are tested in one kernel call
        (:func:`~shared.sightlines.first_in_sight`). The general form, for players given
        as arrays: a swarm's lookers glance through :meth:`perceive_drawn`, which the
        tests hold to this.
        """
        spotted_at = np.empty(len(bots), dtype=np.int64)
        first_in_sight(
            np.ascontiguousarray(own, dtype=np.float64),
            np.ascontiguousarray(feet, dtype=np.float64),
            np.ascontiguousarray(visible, dtype=np.bool_),
            self.engage_range,
            GLANCES,
            GLANCE_HEIGHTS,
            self._box_min,
            self._box_max,
            spotted_at,
        )
        rows = np.flatnonzero(spotted_at >= 0)
        spotted = np.full(len(bots), -1, dtype=np.int64)
        spotted[rows] = ids[spotted_at[rows]]
        where = np.zeros((len(bots), 3))
        where[rows] = feet[rows, spotted_at[rows]]
        self._note(bots, own, spotted, where, now)

    def perceive_drawn(
        self,
        bots: np.ndarray,
        own: np.ndarray,
        records: np.ndarray,
        spans: np.ndarray,
        weights: np.ndarray,
        selves: np.ndarray,
        friends: np.ndarray,
        now: float,
    ) -> None:
        """:meth:`perceive_group` straight from what each bot draws
        (:func:`~client_sim.interpolation.drawn`: its bracket's records, spans and
        weight), in one kernel call (:func:`~shared.sightlines.spot_drawn`) that draws
        only each bot's own players: the same enemies noted as :meth:`perceive_group`
        over :func:`~client_sim.interpolation.seen`. A bot's own player (``selves``) and
        teammates (``friends``, a mask by player id; empty: none) are no enemies."""
        spotted = np.empty(len(bots), dtype=np.int64)
        where = np.zeros((len(bots), 3))
        spot_drawn(
            records, spans, weights, selves, friends,
            np.ascontiguousarray(own, dtype=np.float64), self.engage_range, GLANCES, GLANCE_HEIGHTS,
            self._box_min, self._box_max, spotted, where,
        )  # fmt: skip
        self._note(bots, own, spotted, where, now)

    def _note(
        self, bots: np.ndarray, own: np.ndarray, spotted: np.ndarray, where: np.ndarray, now: float
    ) -> None:
        """Each of ``bots`` (feet ``own``) spotted the enemy ``spotted`` (-1 none) at feet
        ``where``: its threat, a first sighting noted, cover sought."""
        rows = np.flatnonzero(spotted >= 0)
        lost = bots[spotted < 0]
        self.has_threat[lost] = False
        self.threat_id[lost] = -1
        self.in_cover_mode[lost] = False

        watchers = bots[rows]
        enemies = spotted[rows]
        newly = ~self.has_threat[watchers] | (self.threat_id[watchers] != enemies)
        self.threat[watchers] = where[rows]
        self.threat_id[watchers] = enemies
        self.has_threat[watchers] = True
        self.threat_since[watchers[newly]] = now
        if len(self.sightings) < MAX_SIGHTINGS:
            seers, seen = watchers[newly].tolist(), enemies[newly].tolist()
            self.sightings += [(bot, enemy, now) for bot, enemy in zip(seers, seen, strict=True)]
        seeking = np.flatnonzero(newly)
        seeking = seeking[self.rng.random(seeking) < self.cover_seeking]
        self._seek_cover(watchers[seeking], own[rows[seeking]], now)

    def _seek_cover(self, bots: np.ndarray, own: np.ndarray, now: float) -> None:
        """Each of ``bots`` (feet ``own``) heads for the nearest of its few closest cover
        points with a crate between it and its threat (all sight lines in one pass)."""
        points = self.cover_points
        if not len(bots) or not len(points):
            return
        distance = np.hypot(
            points[None, :, 0] - own[:, None, 0], points[None, :, 1] - own[:, None, 1]
        )
        if len(points) > COVER_CHOICES:
            nearby = np.argpartition(distance, COVER_CHOICES - 1, axis=1)[:, :COVER_CHOICES]
        else:
            nearby = np.broadcast_to(np.arange(len(points)), distance.shape)
        spots = points[nearby]  # (S, C, 2)
        chests = np.concatenate((spots, np.full((*nearby.shape, 1), CHEST_HEIGHT)), axis=2)
        eyes = np.repeat(self.threat[bots] + (0.0, 0.0, EYE_HEIGHT), nearby.shape[1], axis=0)
        hidden = sight_blocked(
            eyes, chests.reshape(-1, 3), self.arena.box_min, self.arena.box_max
        ).reshape(nearby.shape)
        best = np.argmin(
            np.where(hidden, np.take_along_axis(distance, nearby, axis=1), np.inf), axis=1
        )
        found = hidden.any(axis=1)
        movers = bots[found]
        self.goal[movers] = spots[found, best[found]]
        self.goal_deadline[movers] = now + self.rng.uniform(4.0, 8.0, movers)
        self.in_cover_mode[movers] = True

    def decide(self, pos: np.ndarray, now: float, dt: float) -> BotIntent:
        """This tick's inputs for every bot, from its predicted feet position ``(N, 3)``."""
        to_goal = self.goal - pos[:, :2]
        distance = np.linalg.norm(to_goal, axis=1)
        arrived = (distance < 0.75) & ~self.in_cover_mode
        expired = now >= self.goal_deadline
        fresh = np.flatnonzero(arrived | expired)
        if len(fresh):
            self.goal[fresh] = self._random_points(fresh)
            self.goal_deadline[fresh] = now + self.rng.uniform(3.0, 8.0, fresh)
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
        if self.behaviour in TARGET_BEHAVIOURS:
            # Targets for fairness measurements: stand, run to and fro along x, or dodge.
            move = np.zeros_like(move)
            if self.behaviour == "pace":
                move[:, 0] = np.sign(np.sin(self.strafe_phase * 0.5)) * PACE_SPEED
            elif self.behaviour == "strafe":
                move[:, 0] = np.sign(np.sin(self.strafe_phase * 2.0)) * PACE_SPEED
        length = np.linalg.norm(move, axis=1)
        # Scale just inside the unit circle: dividing by the norm can land a hair above 1,
        # and the server would clamp that input, costing the prediction its last bit.
        scale = np.where(length > 1.0, (1.0 - 1e-12) / np.maximum(length, 1e-12), 1.0)
        # Kept to the steps the node keeps them to, so prediction and aim are exact.
        self._move[:] = quantize_moves(move * scale[:, None])

        look = np.where(self.has_threat[:, None], to_threat, heading)
        self._yaw[:] = quantize_angles(np.arctan2(look[:, 1], look[:, 0]), math.pi)
        rise = self.threat[:, 2] - pos[:, 2]
        pitch = np.where(self.has_threat, np.arctan2(rise, threat_distance), 0.0)
        self._pitch[:] = quantize_angles(pitch, math.pi / 2)
        jumping = (self.rng.random(np.arange(self.count)) < 0.005) & (self.behaviour == "play")
        self._buttons[:] = np.where(jumping, BUTTON_JUMP, 0)
        return BotIntent(self._move, self._yaw, self._pitch, self._buttons)
