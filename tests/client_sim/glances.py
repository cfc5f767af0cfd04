"""One bot's glance through :meth:`Brain.perceive_group`, for tests that look one at a time."""

from __future__ import annotations

import numpy as np

from client_sim.brain import Brain


def perceive(
    bots: Brain, bot: int, own: np.ndarray, enemies: np.ndarray, ids: np.ndarray, now: float
) -> None:
    """``bot`` glances at every one of ``enemies`` (feet ``(K, 3)``, all visible)."""
    visible = np.ones((1, len(enemies)), dtype=bool)
    bots.perceive_group(np.array([bot]), own[None], enemies[None], ids, visible, now)
