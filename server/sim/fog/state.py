"""One match's fog of war: which enemies each client is not sent, and the account of what
it was sent while hidden (sans-I/O: arrays in, arrays changed in place).

The margin of a client is the time over which what it draws may differ from what the
server knows at a snapshot tick: the client draws snapshot ``T`` during the snapshot
interval on either side of ``T``, from an eye that its prediction has moved ahead of the
server by up to its round trip and its interpolation delay. So the client's eye may be
anywhere its player can run to within round trip + interpolation delay + a snapshot
interval + the peek allowance, and an enemy it draws anywhere he can run to within a
snapshot interval + the allowance (the server knows where he is at ``T``; what is drawn
between two snapshots lies between their positions); neither gets past a box he stands
behind and cannot get round in time (:func:`server.sim.fog.reference.movement_region`).
The allowance covers what the account leaves out: the jitter of the round trip (its
spread is added as well), the input queue's delay, a client's clock error, a burst of
inputs caught up in one tick.
"""

from __future__ import annotations

import math

import numpy as np

from server.sim.fog.kernel import candidates_for, fog_sight, scratch_for, withhold
from shared.arena_map import ArenaMap
from shared.movement import PLAYER_RADIUS, MovementParams
from shared.sightlines import SIGHT_HEIGHTS
from shared.weapons import EYE_HEIGHT

__all__ = ["INNER_MARGIN_M", "UNMEASURED_RTT_S", "Fog"]

#: A client whose round trip no probe has measured yet is granted this one.
UNMEASURED_RTT_S = 0.25
#: The boxes a pair's lines must all cross are the map's boxes shrunk by this much, so
#: that rounding can never make a line the client tests pass where the node's did not.
INNER_MARGIN_M = 0.001
#: The account judges a record over at most this many snapshots (bits of a word).
_MAX_HORIZON = 62
_GROWTH = 64


class Fog:
    """Fog of war over one match's slots (they grow with the highest slot coded)."""

    def __init__(
        self, arena: ArenaMap, movement: MovementParams, snapshot_period: float, peek_s: float
    ) -> None:
        self.box_min = np.ascontiguousarray(arena.box_min, dtype=np.float64).reshape(-1, 3)
        self.box_max = np.ascontiguousarray(arena.box_max, dtype=np.float64).reshape(-1, 3)
        self.inner_min = self.box_min + INNER_MARGIN_M
        self.inner_max = self.box_max - INNER_MARGIN_M
        self.speed = movement.max_speed
        self.period = snapshot_period
        self.peek_s = peek_s
        rise = movement.jump_speed**2 / (2.0 * movement.gravity)  # a jump's height
        self.shape = np.array(
            [EYE_HEIGHT, SIGHT_HEIGHTS.min(), SIGHT_HEIGHTS.max(), rise, PLAYER_RADIUS]
        )
        self.body_reach = self.speed * (snapshot_period + peek_s)
        self.pending = np.zeros((0, 0), dtype=np.uint64)
        self._scratch = scratch_for(len(self.box_min))
        #: Records of other players sent, judged seen within the margin, judged hidden
        #: for the whole margin, withheld.
        self.counts = np.zeros(4, dtype=np.int64)

    def margins(self, rtt: np.ndarray, interp_delay: np.ndarray) -> np.ndarray:
        """Each client's margin, seconds, from its measured round trip (rtt + spread, NaN
        before the first probe) and its interpolation delay."""
        rtt = np.where(np.isnan(rtt), UNMEASURED_RTT_S, rtt)
        return rtt + interp_delay + self.period + self.peek_s

    def withhold(
        self,
        slots: np.ndarray,
        margins: np.ndarray,
        feet: np.ndarray,
        present: np.ndarray,
        selected: np.ndarray,
        kept: np.ndarray,
    ) -> None:
        """Take out of ``selected`` (``(C, N)``, the players each client in ``slots`` is
        to be sent) every player it cannot see within its ``margins`` (seconds), unless
        ``kept`` (``(C, N)``: in a fight with it) or itself; and account for the rest."""
        count, players = selected.shape
        if not count:
            return
        self._grow(players)
        candidates = np.empty_like(selected)
        candidates_for(slots, selected, self.pending, candidates)
        seen = np.empty_like(selected)
        shown = np.empty_like(selected)
        fog_sight(
            slots, feet, self.speed * margins, self.body_reach, candidates, self.box_min,
            self.box_max, self.inner_min, self.inner_max, SIGHT_HEIGHTS, self.shape, self._scratch,
            np.empty((players, 2, 3)), seen, shown,
        )  # fmt: skip
        horizon = np.minimum(np.floor(margins / self.period), _MAX_HORIZON).astype(np.int64)
        withhold(slots, selected, kept, seen, shown, present, horizon, self.pending, self.counts)

    def forget(self, slots: np.ndarray) -> None:
        """Seats freed or given to another player: their records wait no more, either way."""
        slots = slots[slots < len(self.pending)]
        self.pending[slots] = 0
        self.pending[:, slots] = 0

    def tally(self) -> dict[str, int]:
        """Records of other players sent, judged seen within the margin, judged hidden for
        the whole of it; records withheld."""
        sent, seen, hidden, withheld = self.counts.tolist()
        return {"fog_sent": sent, "fog_seen": seen, "fog_hidden": hidden,
                "fog_withheld": withheld}  # fmt: skip

    def _grow(self, players: int) -> None:
        old = len(self.pending)
        if players <= old:
            return
        size = max(players, math.ceil(players / _GROWTH) * _GROWTH)
        pending = np.zeros((size, size), dtype=np.uint64)
        pending[:old, :old] = self.pending
        self.pending = pending
