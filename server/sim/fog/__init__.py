"""Fog of war: an enemy is sent to a client only while it may see him (sans-I/O).

Interest management (:mod:`server.sim.interest`) picks the players near a client, in its
view and in a fight with it; fog of war then takes out every enemy that no line from the
client's eye can reach within the client's margin (:mod:`server.sim.fog.state` says what
the margin covers, :mod:`server.sim.fog.reference` the geometry). Players in a fight with
the client and the client itself are always sent. The arena is free for all: every other
player is an enemy. Fog only filters what is sent: what is simulated, rewound and judged
is the same for every client.

``reference`` is the readable NumPy specification; ``kernel`` (numba, the policy in
``jit``) must agree with it exactly; ``state`` holds a match's account.
"""

from __future__ import annotations

from server.sim.fog.state import UNMEASURED_RTT_S, Fog

__all__ = ["UNMEASURED_RTT_S", "Fog", "warm_up"]


def warm_up() -> None:
    """Compile (or load from the cache) the fog kernels before the first snapshot tick."""
    import numpy as np

    from shared.arena_map import default_map
    from shared.movement import MovementParams

    fog = Fog(default_map(), MovementParams(), 1 / 30, 0.1)
    slots = np.arange(2)
    selected = np.ones((2, 2), dtype=np.bool_)
    feet = np.array([[0.0, -20.0, 0.0], [0.0, 20.0, 0.0]])
    fog.withhold(slots, np.full(2, 0.3), feet, np.ones(2, dtype=np.bool_), selected,
                 np.zeros((2, 2), dtype=np.bool_))  # fmt: skip
