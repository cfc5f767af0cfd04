"""The world as struct-of-arrays: one row per player slot (sans-I/O).

A slot is a seat in the match; its index is the player's id on the wire. Only the tick
writes these arrays (see :mod:`server.sim.match`).
"""

from __future__ import annotations

import hashlib

import numpy as np

from server.sim.replica import ArrayState

__all__ = ["MAX_HEALTH", "World"]

MAX_HEALTH = 100


class World(ArrayState):
    """Every array is the world's state: replicated to standbys, and hashed."""

    REPLICATED = ("active", "alive", "pos", "vel", "yaw", "pitch", "health", "move", "buttons",
                  "seat_id")  # fmt: skip

    def __init__(self, max_players: int) -> None:
        self.max_players = max_players
        self.active = np.zeros(max_players, dtype=bool)  # seat taken
        self.alive = np.zeros(max_players, dtype=bool)
        self.pos = np.zeros((max_players, 3), dtype=np.float64)
        self.vel = np.zeros((max_players, 3), dtype=np.float64)
        self.yaw = np.zeros(max_players, dtype=np.float64)
        self.pitch = np.zeros(max_players, dtype=np.float64)
        self.health = np.zeros(max_players, dtype=np.int16)
        # The input being applied each tick; repeats when a player's inputs stop arriving.
        self.move = np.zeros((max_players, 2), dtype=np.float64)
        self.buttons = np.zeros(max_players, dtype=np.int64)
        # Which seating of the slot this is (Match.join): a session token names it, so a
        # token cannot resume a later player in the same slot. Kept here, with the seat's
        # other arrays, so that standbys and checkpoints carry it.
        self.seat_id = np.zeros(max_players, dtype=np.int64)

    @property
    def player_count(self) -> int:
        return int(self.active.sum())

    def free_slot(self) -> int | None:
        free = np.flatnonzero(~self.active)
        return int(free[0]) if len(free) else None

    def seat(self, slot: int, x: float, y: float) -> None:
        self.active[slot] = True
        self.alive[slot] = True
        self.pos[slot] = (x, y, 0.0)
        self.vel[slot] = 0.0
        self.yaw[slot] = self.pitch[slot] = 0.0
        self.health[slot] = MAX_HEALTH
        self.move[slot] = 0.0
        self.buttons[slot] = 0

    def vacate(self, slot: int) -> None:
        self.active[slot] = False
        self.alive[slot] = False

    def state_hash(self) -> str:
        """A digest of everything that defines the world (its replicated arrays), to
        compare replicas and runs."""
        # SHA-256 (its first 16 bytes): the CPU's SHA instructions make it twice as fast
        # as BLAKE2b here, and this runs every tick.
        # Only the slots up to the last one seated: a vacant slot means nothing (seating
        # rewrites it), and a node of 600 seats with a few players, or none, hashes a few
        # rows instead of every row each tick.
        seated = np.flatnonzero(self.active)
        rows = int(seated[-1]) + 1 if len(seated) else 0
        digest = hashlib.sha256(rows.to_bytes(4, "little"))
        for name in self.REPLICATED:  # (the bytes array_state sends, hashed without a copy)
            digest.update(np.ascontiguousarray(getattr(self, name)[:rows]).data)
        return digest.hexdigest()[:32]
