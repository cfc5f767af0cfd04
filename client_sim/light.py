"""Light players: load that costs the node what a bot does, and the bot process little.

A full bot predicts, interpolates, perceives, aims and judges its own shots: it is the
measuring instrument, and at tens of microseconds a bot-tick it is too dear to be the
load. A light player sends the node the same traffic (one input a tick, sent at the same
command rate, pings, an acknowledgement of every snapshot, shots at the rate full bots fire
with the same weapons) from a few array operations a tick: it walks towards a goal it
changes every few seconds, turns to face where it walks, and pulls the trigger while
"engaged" as often as full bots are engaged. It never decodes a snapshot's players and keeps
no prediction, interpolation or verdict. Its draws come from its own stream
(:mod:`client_sim.bot_random`), so it behaves the same in whichever process runs it.
"""

from __future__ import annotations

import math

import numpy as np

from client_sim.bot_random import Streams
from client_sim.marksman import AimSkill
from shared.arena_map import ArenaMap
from shared.movement import BUTTON_JUMP
from shared.protocol.inputs import quantize_angles, quantize_moves
from shared.weapons import LAUNCHER, RIFLE

__all__ = ["DEFAULT_ENGAGED_SHARE", "LightInputs", "LightPlayers"]

#: The share of bot-ticks a full bot is engaged (a target in sight past its reaction time,
#: alive), when the swarm has no full bot to take it from: measured with 40 full bots of the
#: default skill on the default map (docs/load-testing.md).
DEFAULT_ENGAGED_SHARE = 0.3
GOAL_SECONDS = (3.0, 8.0)  # how long a light player walks towards one goal
JUMP_CHANCE = 0.005  # per tick, as a playing full bot jumps


class LightInputs:
    """One tick's inputs of some light players (rows of :class:`LightPlayers`)."""

    __slots__ = ("buttons", "move", "pitch", "yaw")

    def __init__(self, move: np.ndarray, yaw: np.ndarray, pitch: np.ndarray, buttons: np.ndarray):
        self.move, self.yaw, self.pitch, self.buttons = move, yaw, pitch, buttons


class LightPlayers:
    """The inputs of a swarm's light players, decided for all of them at once.

    Rows are the swarm's rows (full bots' rows are never asked for). Each row walks at full
    speed towards its goal from where it thinks it is (dead reckoning of its own inputs:
    it never reads its position back), and fires with chance ``fire_rate_hz`` x the engaged
    share per tick, each weapon no faster than its fire interval, the launcher with the
    skill's ``launcher_share``.
    """

    def __init__(
        self, count: int, rows: np.ndarray, arena: ArenaMap, skill: AimSkill, streams: Streams
    ) -> None:
        """``rows``: the light ones among the swarm's ``count`` rows (only theirs draw)."""
        self.count = count
        self.skill = skill
        self.streams = streams
        self._lo = np.asarray(arena.bounds_min, dtype=np.float64)[:2] + 1.0
        self._hi = np.asarray(arena.bounds_max, dtype=np.float64)[:2] - 1.0
        self.pos = np.zeros((count, 2))
        self.goal = np.zeros((count, 2))
        self.pitch = np.zeros(count)
        self.pos[rows] = streams.uniform(self._lo, self._hi, rows, width=2)
        self.goal[rows] = streams.uniform(self._lo, self._hi, rows, width=2)
        off_level = (streams.random(rows) - 0.5) * 0.2  # a little off level
        self.pitch[rows] = quantize_angles(off_level, math.pi / 2)
        self.goal_until = np.zeros(count)
        self.last_fired = np.full((count, 2), -(10**9), dtype=np.int64)  # per weapon, inputs
        self.engaged_share = DEFAULT_ENGAGED_SHARE

    def decide(self, rows: np.ndarray, seqs: np.ndarray, now: float, tick_rate: int) -> LightInputs:
        """The inputs of ``rows`` this tick (``seqs``: each one's input number)."""
        expired = rows[self.goal_until[rows] <= now]
        if len(expired):
            self.goal[expired] = self.streams.uniform(self._lo, self._hi, expired, width=2)
            low, high = GOAL_SECONDS
            self.goal_until[expired] = now + self.streams.uniform(low, high, expired)
        to = self.goal[rows] - self.pos[rows]
        length = np.maximum(np.hypot(to[:, 0], to[:, 1]), 1e-9)
        move = quantize_moves(to / length[:, None])
        self.pos[rows] += move * (6.0 / tick_rate)  # roughly where its inputs take it
        yaw = quantize_angles(np.arctan2(move[:, 1], move[:, 0]), math.pi)
        draws = self.streams.random(rows, 3)
        buttons = np.where(draws[:, 0] < JUMP_CHANCE, BUTTON_JUMP, 0).astype(np.int64)
        chance = self.skill.fire_rate_hz * self.engaged_share / tick_rate
        pulls = draws[:, 1] < chance
        if pulls.any():
            launcher = draws[:, 2] < self.skill.launcher_share
            for i in np.flatnonzero(pulls).tolist():
                weapon = LAUNCHER if launcher[i] else RIFLE
                row, seq = int(rows[i]), int(seqs[i])
                if seq - self.last_fired[row, weapon.id] >= weapon.interval_inputs(tick_rate):
                    self.last_fired[row, weapon.id] = seq
                    buttons[i] |= weapon.button
        return LightInputs(move, yaw, self.pitch[rows], buttons)

    def note_engaged(self, share: float, weight: float = 0.01) -> None:
        """The full bots' engaged share this tick: light players fire as often on average
        (an exponential average over about a hundred ticks)."""
        if math.isfinite(share):
            self.engaged_share += weight * (share - self.engaged_share)
