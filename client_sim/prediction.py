"""Client-side prediction and reconciliation for a whole swarm at once (sans-I/O).

Each bot predicts its own player with the shared movement model the moment it presses a key,
and when the server's authoritative state for input ``ack`` arrives it rewinds to that state
and replays the inputs the server has not applied yet. Doing this bot by bot costs one
NumPy call per replayed input per bot; here every bot's replay runs in lock-step over
struct-of-arrays, so 300 bots cost about as much as one.

Prediction error is measured the usual way: the distance between what this bot had predicted
after input ``ack`` and where the server says it was after that same input.
"""

from __future__ import annotations

import numpy as np

from shared.arena_map import ArenaMap
from shared.movement import MovementParams, step

__all__ = ["SwarmPredictor"]


class SwarmPredictor:
    def __init__(
        self,
        count: int,
        arena: ArenaMap,
        tick_rate: int,
        history: int = 256,
        params: MovementParams = MovementParams(),
    ) -> None:
        self.count = count
        self.arena = arena
        self.dt = 1.0 / tick_rate
        self.params = params
        self.history = history
        self.pos = np.zeros((count, 3))
        self.vel = np.zeros((count, 3))
        self.next_seq = np.zeros(count, dtype=np.int64)  # sequence number of the next input
        self.acked = np.full(count, -1, dtype=np.int64)
        self.first_seq = np.zeros(count, dtype=np.int64)  # the first input of the seat
        # Ring of sent inputs and of the state predicted right after each, by seq % history.
        self.sent_move = np.zeros((count, history, 2))
        self.sent_buttons = np.zeros((count, history), dtype=np.int64)
        self.predicted_pos = np.zeros((count, history, 3))
        self.predicted_vel = np.zeros((count, history, 3))
        # Authoritative states waiting for the next reconcile (latest per bot wins).
        # The server's state per bot: position then velocity (one row, set in one go).
        self._auth = np.zeros((count, 6))
        self._auth_pos = self._auth[:, :3]
        self._auth_vel = self._auth[:, 3:]
        self._auth_ack = np.full(count, -1, dtype=np.int64)
        self._has_auth = np.zeros(count, dtype=bool)
        # Bots whose error is not scored: dead (the server does not move them, so neither
        # does the prediction), or just respawned (the server moved them to a spawn point,
        # which nobody predicts).
        self.unscored = np.zeros(count, dtype=bool)
        self.skip_next = np.zeros(count, dtype=bool)
        self.errors: list[np.ndarray] = []

    def place(self, bot: int, pos: np.ndarray, vel: np.ndarray) -> None:
        """Start predicting ``bot`` from a state the server gave (its first snapshot in a
        seat): inputs sent before belong to a seat it lost, and are never replayed."""
        self.pos[bot], self.vel[bot] = pos, vel
        self.first_seq[bot] = self.next_seq[bot]

    def authoritative(self, bot: int, ack: int, you: tuple[float, ...]) -> None:
        """Record the server's state of ``bot`` after input ``ack`` (from a snapshot)."""
        self._auth[bot] = you
        self._auth_ack[bot] = ack
        self._has_auth[bot] = True

    def reconcile(self) -> None:
        """Rewind every bot with news to the server's state and replay its pending inputs.

        A bot whose prediction after input ``ack`` was exactly the server's state (position
        and velocity, bit for bit: the shared model is deterministic) would replay to
        exactly its current state, so it is left as it is: the usual case costs nothing.
        """
        bots = np.flatnonzero(self._has_auth)
        self._has_auth[:] = False
        if not len(bots):
            return
        ack = self._auth_ack[bots]
        in_ring = (ack >= 0) & (ack > self.next_seq[bots] - self.history)
        known = in_ring & ~self.unscored[bots] & ~self.skip_next[bots]
        self.skip_next[bots] = False
        scored = bots[known]
        if len(scored):
            guess = self.predicted_pos[scored, ack[known] % self.history]
            self.errors.append(np.linalg.norm(guess - self._auth_pos[scored], axis=1))
        self.acked[bots] = np.maximum(self.acked[bots], ack)
        ring = ack % self.history
        exact = (
            in_ring
            & (ack < self.next_seq[bots])
            & (self.predicted_pos[bots, ring] == self._auth_pos[bots]).all(axis=1)
            & (self.predicted_vel[bots, ring] == self._auth_vel[bots]).all(axis=1)
        )
        bots, ack = bots[~exact], ack[~exact]
        self.pos[bots] = self._auth_pos[bots]
        self.vel[bots] = self._auth_vel[bots]
        alive = ~self.unscored[bots]  # the server does not move the dead: nothing to replay
        bots, ack = bots[alive], ack[alive]
        first = np.maximum(ack + 1, self.first_seq[bots])
        pending = self.next_seq[bots] - first
        for offset in range(int(pending.max(initial=0))):
            replaying = bots[pending > offset]
            seq = first[pending > offset] + offset
            ring = seq % self.history
            self.pos[replaying], self.vel[replaying] = step(
                self.pos[replaying],
                self.vel[replaying],
                self.sent_move[replaying, ring],
                self.sent_buttons[replaying, ring],
                self.dt,
                self.arena,
                self.params,
            )
            self.predicted_pos[replaying, ring] = self.pos[replaying]
            self.predicted_vel[replaying, ring] = self.vel[replaying]

    def apply(self, bots: np.ndarray, move: np.ndarray, buttons: np.ndarray) -> np.ndarray:
        """Predict one new input for each of ``bots``; returns the sequence numbers used."""
        seq = self.next_seq[bots].copy()
        ring = seq % self.history
        self.sent_move[bots, ring] = move
        self.sent_buttons[bots, ring] = buttons
        alive = ~self.unscored[bots]  # a dead player stands where the server left it
        moving = bots[alive]
        self.pos[moving], self.vel[moving] = step(
            self.pos[moving],
            self.vel[moving],
            move[alive],
            buttons[alive],
            self.dt,
            self.arena,
            self.params,
        )
        self.predicted_pos[bots, ring] = self.pos[bots]
        self.predicted_vel[bots, ring] = self.vel[bots]
        self.next_seq[bots] += 1
        return seq

    def error_samples(self) -> np.ndarray:
        return np.concatenate(self.errors) if self.errors else np.zeros(0)
