"""Entity records straight from players' state, for tests that need what a client draws
without going through the wire (the snapshot buffer, the marksman's book).

The quantisation is that of the old fixed-layout records (before deltas): positions and
velocities as the record's floats hold them (the nearest float32), yaw and pitch in their
uint16 / int16 steps, so binary-fraction positions come back exactly and the tests can
compare them with ``==``.
"""

from __future__ import annotations

import math

import numpy as np

from shared.protocol import ENTITY_DTYPE, ENTITY_FLAG_ALIVE

__all__ = ["entity_records"]

_YAW_STEP = 2.0 * math.pi / 65536.0
_PITCH_STEP = (math.pi / 2.0) / 32767.0


def entity_records(
    ids: np.ndarray,
    pos: np.ndarray,
    vel: np.ndarray,
    yaw: np.ndarray,
    pitch: np.ndarray,
    health: np.ndarray,
    alive: np.ndarray,
) -> np.ndarray:
    """N players' public state as :data:`~shared.protocol.ENTITY_DTYPE` records."""
    records = np.empty(len(ids), dtype=ENTITY_DTYPE)
    records["id"] = ids
    records["x"], records["y"], records["z"] = pos[:, 0], pos[:, 1], pos[:, 2]
    records["vx"], records["vy"], records["vz"] = vel[:, 0], vel[:, 1], vel[:, 2]
    wrapped = np.mod(yaw + math.pi, 2.0 * math.pi)
    records["yaw"] = np.round(wrapped / _YAW_STEP).astype(np.int64) % 65536
    records["pitch"] = np.round(np.clip(pitch, -math.pi / 2, math.pi / 2) / _PITCH_STEP)
    records["health"] = np.clip(health, 0, 255)
    records["flags"] = np.where(alive, ENTITY_FLAG_ALIVE, 0)
    return records
