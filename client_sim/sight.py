"""What a bot's eye can reach: which players the segments of its projectile flight may
touch, and whether an enemy popped in on its screen (:class:`PopInWatch`).

For a flight, the exact test (:func:`shared.rayhits.first_hit`) then runs only on the
chords that may hit someone. The padded bounding sphere is the server kernel's early-out,
so a player dropped here is never hit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from shared.hitbox import BOUNDING_SPHERE_CENTRE
from shared.protocol import JoinEvent, RespawnEvent
from shared.protocol.between import arrivals
from shared.rayhits import REACH
from shared.sightlines import SIGHT_HEIGHTS, sight_blocked
from shared.weapons import EYE_HEIGHT

__all__ = ["PopInWatch", "segments_within_reach"]

_CENTRE = np.array(BOUNDING_SPHERE_CENTRE)


def segments_within_reach(
    starts: np.ndarray, directions: np.ndarray, lengths: np.ndarray, feet: np.ndarray
) -> np.ndarray:
    """Which players each segment may touch: ``(S, 3)`` starts, unit directions and
    ``(S,)`` lengths against feet ``(S, P, 3)`` (or ``(P, 3)``, the same for every
    segment) -> ``(S, P)`` bool. Conservative: a False is never hit."""
    relative = feet + _CENTRE - starts[:, None, :]
    along = np.einsum("spk,sk->sp", relative, directions)
    along = np.clip(along, 0.0, lengths[:, None])
    gap = relative - along[:, :, None] * directions[:, None, :]
    return np.einsum("spk,spk->sp", gap, gap) <= REACH * REACH


#: The distance within which the node's interest management always sends a player (its
#: default: everyone within 8 m), less a margin for where the bot's eye runs ahead of the
#: node's view of it: an enemy who appears further off may have been left out for his
#: distance, not by fog. Interest's view cone is no part of it: the cone follows the aim
#: the node last heard of, and a bot turns faster than that reaches the node (at 60 bots
#: with fog of war off, a region with the cone counted some 300 "pop-ins" in 15 s).
POP_IN_NEAR_M = 6.5

Vector = tuple[float, ...]


class PopInWatch:
    """Pop-in, measured from the bots' side: an enemy drawn later than the moment he came
    into sight on the bot's screen.

    A bot draws a player between two snapshots only when both have him. So when a player
    absent from a bot's previous snapshot (at ``T0``) appears in its newest (at ``T1``), the
    bot draws him from render time ``T1`` on, and nothing of him for render times in
    ``[T0, T1)``. Each frame the bot renders such a time, it places him where he was then
    (his position at ``T1`` moved back along his velocity) and tests, with the rule the node
    uses (:func:`shared.sightlines.sight_blocked` to his sight points), whether its eye saw
    him there: if it did, he popped in (counted once per appearance). Not counted: the
    bot itself, a player who joined or respawned in those snapshots (he was not there), a
    player outside the region where interest management sends everyone regardless of
    sight (``near_m``, :data:`POP_IN_NEAR_M` by default: distance culling may explain
    him), and appearances
    over a stretch in which the bot respawned (its eye jumped where the node could not
    have foreseen it). An appearance is judged at the frames of its stretch in the region
    (``appearances`` counts those judged at least once).
    """

    def __init__(
        self, count: int, box_min: np.ndarray, box_max: np.ndarray, near_m: float = POP_IN_NEAR_M
    ) -> None:
        self.near_m = near_m
        self.box_min = np.ascontiguousarray(box_min, dtype=np.float64).reshape(-1, 3)
        self.box_max = np.ascontiguousarray(box_max, dtype=np.float64).reshape(-1, 3)
        #: Per bot, the appearances whose stretch is not rendered yet: (T0, T1, whether a
        #: frame judged it yet, feet at T1, velocity at T1), as plain floats: a frame looks
        #: at each of them, for every bot, so numbers cost less than small arrays here.
        self.pending: list[list[tuple[float, float, bool, Vector, Vector]]] = [
            [] for _ in range(count)
        ]
        self.moved_at = np.full(count, -math.inf)  # server time of each bot's own jump
        self.enemy_records = 0  # records of other players the bots received
        self.appearances = 0  # appearances whose stretch a frame rendered, in the region
        self.pop_ins = 0
        self._rows = np.empty(64, np.int64)  # scratch for arrivals()

    def figures(self) -> dict[str, int]:
        return {"enemy_records": self.enemy_records, "appearances": self.appearances,
                "pop_ins": self.pop_ins}  # fmt: skip

    def snapshot(
        self,
        index: int,
        me: int,
        before: tuple[float, np.ndarray] | None,
        time: float,
        records: np.ndarray,
        events: Sequence[object],
    ) -> None:
        """Bot ``index`` (player ``me``) shows a snapshot at ``time`` after ``before`` (its
        previous one: time and records). Runs for every bot's every snapshot, so who is new
        is one kernel call (:func:`shared.protocol.between.arrivals`)."""
        arrived = (
            {e.player for e in events if isinstance(e, JoinEvent | RespawnEvent)}
            if events
            else set()
        )
        if me in arrived:
            self.moved_at[index] = time
            self.pending[index].clear()
        held = before[1] if before is not None else records[:0]
        if len(self._rows) < len(records):
            self._rows = np.empty(len(records), np.int64)
        new, others = arrivals(held, records, me, self._rows)
        self.enemy_records += others
        if before is None or new == 0 or before[0] < self.moved_at[index]:
            return
        earlier = before[0]
        for record in records[self._rows[:new]]:
            if int(record["id"]) in arrived:
                continue
            feet = (float(record["x"]), float(record["y"]), float(record["z"]))
            velocity = (float(record["vx"]), float(record["vy"]), float(record["vz"]))
            self.pending[index].append((earlier, time, False, feet, velocity))

    def frame(self, bots: np.ndarray, render: np.ndarray, feet: np.ndarray) -> None:
        """A frame of bots ``bots``, rendered at ``render`` (server time) from their feet
        ``feet`` ``(B, 3)``."""
        for b, index in enumerate(bots.tolist()):
            waiting = self.pending[index]
            if not waiting:
                continue
            now, kept = float(render[b]), []
            ex, ey, ez = (float(v) for v in feet[b])
            eye = (ex, ey, ez + EYE_HEIGHT)
            for entry in waiting:
                earlier, time, judged, at, velocity = entry
                if now >= time:
                    continue  # drawn from now on, and not seen before
                if now < earlier:
                    kept.append(entry)
                    continue
                back = time - now
                then = tuple(a - v * back for a, v in zip(at, velocity, strict=True))
                if math.hypot(then[0] - ex, then[1] - ey) > self.near_m:
                    kept.append(entry)
                    continue
                if not judged:
                    self.appearances += 1
                points = np.array(then) + np.c_[np.zeros((len(SIGHT_HEIGHTS), 2)), SIGHT_HEIGHTS]
                eyes = np.repeat(np.array(eye)[None], len(points), axis=0)
                if sight_blocked(eyes, points, self.box_min, self.box_max).all():
                    kept.append((earlier, time, True, at, velocity))
                else:
                    self.pop_ins += 1  # (and judged: no more frames of it are looked at)
            self.pending[index] = kept
