"""Interest management: which players each client is sent in a snapshot.

Every client is sent, in every snapshot, the players relevant to it: itself, those near
it (within a radius, and however far its few nearest are), those in its view cone within
the view range, and those it fought (shot or was shot by) lately. The others share a
small budget per snapshot, by a priority accumulator (Fiedler's state synchronisation):
each snapshot a player is not sent, its priority for that client grows, faster the nearer
it is; the highest are sent and start again from zero. So a player that becomes relevant
is in the very next snapshot, and every player is refreshed now and then however far.
Lag compensation is not affected: the server rewinds every player, whatever a client was
sent.

The view here is a cone and a range, not a line of sight. Cover is fog of war's part
(:mod:`server.sim.fog`, on by default, ``InterestConfig.fog``): of the players selected
here, the encoder then withholds every enemy that no line from the client's eye can reach
within the client's margin (its round trip, interpolation delay, a snapshot interval and
a peek allowance), so a player behind a wall is not sent until he may come into sight.
Players in a fight with the client and the client itself are always sent. A background
place given to a hidden player is lost for that snapshot (his priority starts again from
zero, as if sent). The arena is free for all: every other player is an enemy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numba
import numpy as np

__all__ = ["InterestConfig", "select_players"]


@dataclass(frozen=True, slots=True)
class InterestConfig:
    """What makes a player relevant to a client. ``enabled`` False sends everyone."""

    enabled: bool = True
    near_m: float = 8.0
    #: However far they are, a client's nearest this many players are near (a sparse
    #: match: the neighbours it may fight are never background).
    nearest: int = 12
    view_m: float = 20.0
    view_half_angle_deg: float = 60.0
    #: Players outside a client's interest sent per snapshot, highest priority first.
    background: int = 4
    fight_memory_s: float = 3.0
    #: Fog of war (:mod:`server.sim.fog`): of the players selected, an enemy is sent only
    #: while the client may see him within its margin; ``fog_peek_s`` widens the margin.
    fog: bool = True
    fog_peek_s: float = 0.1

    def __post_init__(self) -> None:
        if not (self.near_m >= 0 and self.view_m >= 0 and self.fight_memory_s >= 0):
            raise ValueError("interest ranges and the fight memory must be >= 0")
        if not 0 <= self.fog_peek_s <= 1:
            raise ValueError("the fog's peek allowance must be between 0 and 1 s")
        if not 0 < self.view_half_angle_deg < 90:
            raise ValueError("the view cone's half angle must be between 0 and 90 degrees")
        if self.background < 0 or self.nearest < 0:
            raise ValueError("the nearest count and the background budget must be >= 0")


def select_players(
    config: InterestConfig,
    viewers: np.ndarray,
    pos: np.ndarray,
    yaw: np.ndarray,
    present: np.ndarray,
    fight_until: np.ndarray,
    now: float,
    priority: np.ndarray,
) -> np.ndarray:
    """``(C, N)`` bool: the players (columns) each viewer (``viewers``, slots) is sent.
    ``priority`` ``(S, N)`` is each client's accumulator, updated in place."""
    selected = np.zeros((len(viewers), len(present)), dtype=np.bool_)
    if not config.enabled:
        selected[:, :] = present
        return selected
    cos_half = math.cos(math.radians(config.view_half_angle_deg))
    _select(
        viewers, pos, yaw, present, fight_until, now, priority,
        config.near_m, config.nearest, config.view_m, cos_half, config.background, selected,
    )  # fmt: skip
    return selected


# (``error_model="numpy"``: a division is plain IEEE, with no zero check per pair.)
@numba.njit(cache=True, error_model="numpy")
def _select(
    viewers: np.ndarray,
    pos: np.ndarray,
    yaw: np.ndarray,
    present: np.ndarray,
    fight_until: np.ndarray,
    now: float,
    priority: np.ndarray,
    near_m: float,
    nearest: int,
    view_m: float,
    cos_half: float,
    background: int,
    selected: np.ndarray,
) -> None:
    players = len(present)
    near2, view2, cos2 = near_m * near_m, view_m * view_m, cos_half * cos_half
    growth_scale = 1.0 / max(near_m, 1.0)
    best = np.empty(max(background, 1), dtype=np.int64)  # the highest waiting, descending
    best_priority = np.empty(max(background, 1))
    closest_d2 = np.empty(max(nearest, 1))  # the nearest players' squared distances
    xs, ys = pos[:, 0].copy(), pos[:, 1].copy()
    d2s, aheads, growth = np.empty(players), np.empty(players), np.empty(players)
    waiting = np.empty(players, dtype=np.bool_)
    for c in range(len(viewers)):
        s = viewers[c]
        fx, fy = math.cos(yaw[s]), math.sin(yaw[s])
        px, py = xs[s], ys[s]
        # Branch-free over every player: distances, how far
        # ahead, and what waiting one more snapshot adds to the priority.
        within = 0  # others within the near radius (the viewer itself counted out below)
        for e in range(players):
            dx, dy = xs[e] - px, ys[e] - py
            d2 = dx * dx + dy * dy
            d2s[e] = d2
            aheads[e] = dx * fx + dy * fy
            growth[e] = 1.0 / (1.0 + math.sqrt(d2) * growth_scale)
            within += present[e] & (d2 <= near2)
        within -= present[s] & (d2s[s] <= near2)
        # The nearest ``nearest`` others: their squared distance bounds "near" from above,
        # so only a viewer with fewer than that within the radius needs them found.
        near_bound = near2
        if nearest > within:
            found = 0
            for e in range(players):
                d2 = d2s[e]
                if not present[e] or e == s:
                    continue
                if found == nearest and d2 >= closest_d2[found - 1]:
                    continue
                k = found if found < nearest else nearest - 1
                while k > 0 and closest_d2[k - 1] > d2:
                    closest_d2[k] = closest_d2[k - 1]
                    k -= 1
                closest_d2[k] = d2
                found = min(found + 1, nearest)
            if found == nearest:
                near_bound = max(near2, closest_d2[found - 1])
            else:
                near_bound = math.inf  # fewer others than that: every one is near
        # Who is relevant (sent, priority back to zero) and who waits (priority grows).
        owed, fights, row = priority[s], fight_until[s], selected[c]
        for e in range(players):
            d2, ahead = d2s[e], aheads[e]
            seen = (d2 <= view2) & (ahead > 0.0) & (ahead * ahead >= cos2 * d2)
            relevant = (d2 <= near_bound) | (fights[e] > now) | seen
            shown, itself = present[e], e == s
            waits = shown & (not itself) & (not relevant)
            row[e] = shown & (itself | relevant)
            held = owed[e]
            owed[e] = held + growth[e] if waits else (held if itself & shown else 0.0)
            waiting[e] = waits
        # The background budget: the highest priorities among those waiting.
        kept = 0
        for e in range(players if background > 0 else 0):
            if not waiting[e]:
                continue
            p = owed[e]
            if kept == background and p <= best_priority[kept - 1]:
                continue
            # Insert into the top list (ties: the lower index, seen first, stays ahead).
            k = kept if kept < background else background - 1
            while k > 0 and best_priority[k - 1] < p:
                best[k], best_priority[k] = best[k - 1], best_priority[k - 1]
                k -= 1
            best[k], best_priority[k] = e, p
            kept = min(kept + 1, background)
        for k in range(kept):
            row[best[k]] = True
            owed[best[k]] = 0.0
