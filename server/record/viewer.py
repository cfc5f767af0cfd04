"""What ``arena-replay DIR --serve`` shows: a recorded match replayed once, kept tick by
tick for the page to step through, and every judged shot with both worlds (sans-I/O).

For each shot the viewer keeps the target twice, both read from the replay's own history
ring at the tick that judged it, with the interpolation the hit kernels rewind by
(:func:`~server.sim.hitreg.reference.rewound_feet`):

* *as sent*: at the shooter's claimed view time, i.e. between the two snapshots the shooter
  interpolated; and whether those snapshots held the target at all (``target_sent``): the
  replay codes every snapshot's players as the node did, interest management and fog of
  war included, and keeps who was sent whom for :data:`_CLAIM_TICKS`;
* *rewound*: at the view time the server judged the shot at (the claim, or the server's own
  estimate when it clamped or capped the claim).

The target is the victim of a hit; for any other verdict, the player its shooter says it
aimed at (its sighting, below), else the player nearest to the aim ray at the claim. Where
the bots recorded their shots (``arena-bots --record DIR``), a shot also has its shooter's
*sighting*: the target it aimed at and where it drew it, found by the shooter's slot, the
input's sequence number and the claimed view time.

A frame keeps only what the page draws (slot, position, yaw, health, alive: about 20 bytes
a player); :data:`MAX_TICKS` bounds a replay's memory, and ``--from``/``--to`` pick the
window of a longer recording.
"""

from __future__ import annotations

import json
from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from server.record.replay import ReplayedTick, ReplayOutcome, replay_ticks
from server.record.timeline import Recording
from server.sim.combat import ShotTrace
from server.sim.hitreg.backend import History, HitValidator
from server.sim.hitreg.reference import interpolate_positions, rewound_feet
from server.sim.match import MatchConfig
from server.view import frames
from server.view.frames import NodeView
from shared.hitbox import HITBOXES

__all__ = [
    "MAX_TICKS",
    "ReplayViewer",
    "Sightings",
    "ViewedTick",
    "ViewerError",
    "cause_of",
    "read_sightings",
]

#: Ticks one viewer keeps at most (ten minutes at 60 Hz; 300 players take ~60 kB a tick).
MAX_TICKS = 36_000
#: A miss's target: the player whose torso passes within this of the aim ray (metres).
_AIM_RADIUS_M = 1.5
_TORSO_HEIGHT_M = 1.2
#: Ticks a fired input's claim is remembered for (a projectile is judged later).
_CLAIM_TICKS = 600
#: A claimed view time this close to a snapshot's tick (in ticks) is that snapshot's time:
#: the log keeps view times to the microsecond.
_SAME_TICK = 1e-3
#: A sighting belongs to a shot whose claimed view time is this close to its own (seconds;
#: the same input claims the same time, so this only tells a slot's next player apart).
_SIGHTING_MATCH_S = 0.01

#: (shooter slot, seq) -> the bots' sightings of that pair (a slot reused: several).
Sightings = dict[tuple[int, int], list[dict[str, Any]]]


def read_sightings(lines: Iterable[str]) -> Sightings:
    """The ``sighting`` lines of bots' records (``arena-bots --record``); their other lines,
    and torn or foreign ones, are skipped."""
    found: Sightings = {}
    for line in lines:
        try:
            entry = json.loads(line)
            if entry.get("event") != "sighting":
                continue
            sighting = {
                "bot": int(entry["bot"]),
                "target": int(entry["target"]),
                "seen_feet": [round(float(v), 3) for v in entry["seen"]][:3],
                "view_time": float(entry["view_time"]),
            }
            key = (int(entry["player"]), int(entry["seq"]))
        except (ValueError, KeyError, TypeError, AttributeError):
            continue
        found.setdefault(key, []).append(sighting)
    return found


class ViewerError(ValueError):
    """The recording cannot be shown (no such match, nothing replayed)."""


@dataclass(frozen=True, slots=True)
class ViewedTick:
    """One tick as the page draws it: the seated players (rounded for the page)."""

    tick: int
    epoch: int
    time: float
    slots: np.ndarray  # (n,) int16
    pos: np.ndarray  # (n, 3) float32
    yaw: np.ndarray  # (n,) float32
    health: np.ndarray  # (n,) int16
    alive: np.ndarray  # (n,) bool
    names: dict[int, str]  # shared with the ticks before while no seat changes
    shots: tuple[int, ...]  # ids of the shots this tick judged


#: The most shot lines ``/view/hello`` lists: a ten-minute match of 300 players judges about
#: 100,000 shots, megabytes the page would load and list before showing anything. The shots
#: decided by a rule rather than taken as claimed come first (:func:`is_notable`), then the
#: rest, by tick; every shot is still in its tick's frame and at ``/view/shots``.
LISTED_SHOTS_MAX = 2000


def is_notable(shot: dict[str, Any]) -> bool:
    """Whether a rule, not the claim alone, decided the shot (what players dispute)."""
    return not cause_of(shot).startswith("the claim was taken")


def cause_of(shot: dict[str, Any]) -> str:
    """Why the server judged a shot as it did, in words: the rule that decided it, or the
    geometry at the view time it judged (the server's side of the report's causes)."""
    if shot["result"] == "rejected":
        return "rejected: its shooter was dead at the view time"
    if shot.get("traded"):
        return "a trade: its shooter was killed first, and it fired from where it fell"
    if shot["judged"] == "capped":
        return "the claim was older than the rewind cap: judged at the cap"
    if shot["judged"] == "clamped":
        return (
            "the claim lay outside what the shooter's link allows: judged at the server's estimate"
        )
    if shot["result"] == "hit" and shot["damage"] == 0:
        return "the victim was already dead in the tick's story"
    return f"the claim was taken: a {shot['result']} at the shooter's view time"


def _xyz(point: Any) -> list[float] | None:
    return None if point is None else [round(float(v), 3) for v in point]


def _hitboxes(feet: np.ndarray | None) -> list[dict[str, Any]] | None:
    """The capsules standing on ``feet``, in world coordinates."""
    if feet is None:
        return None
    return [
        {"name": h.name, "bottom": _xyz(feet + np.array(h.bottom)),
         "top": _xyz(feet + np.array(h.top)), "radius": h.radius}
        for h in HITBOXES
    ]  # fmt: skip


def _aimed_at(history: History, trace: ShotTrace, at: float) -> int:
    """The player nearest to the shot's ray at ``at`` (its torso within
    :data:`_AIM_RADIUS_M`, ahead of the eye), -1 for none."""
    feet, present = interpolate_positions(history, 0, at)
    origin = np.asarray(trace.event.origin, dtype=np.float64)
    centre = feet + np.array([0.0, 0.0, _TORSO_HEIGHT_M])
    along = (centre - origin) @ trace.direction
    off = np.linalg.norm(centre - origin - along[:, None] * trace.direction, axis=1)
    candidates = present & (along > 0) & (off <= _AIM_RADIUS_M)
    candidates[trace.event.shooter] = False
    if not candidates.any():
        return -1
    return int(np.flatnonzero(candidates)[np.argmin(off[candidates])])


class ReplayViewer:
    """One match of a recording, replayed once and kept for viewing."""

    def __init__(
        self,
        recording: Recording,
        config: MatchConfig,
        validator: HitValidator,
        match: int = 0,
        start: int | None = None,
        stop: int | None = None,
        max_ticks: int = MAX_TICKS,
        region: str = "",
        node: str = "",
        sightings: Sightings | None = None,
    ) -> None:
        if match not in recording.matches:
            have = ", ".join(str(m) for m in sorted(recording.matches)) or "none"
            raise ViewerError(f"no match {match} in the recording (it holds {have})")
        self.config = config
        self.match = match
        self.region, self.node = region, node
        self.outcome = ReplayOutcome(match)
        self.ticks: list[ViewedTick] = []
        self.shots: list[dict[str, Any]] = []
        self.truncated = False
        self.sightings = sightings or {}
        self._claims: dict[tuple[int, int], tuple[int, float]] = {}  # (slot, seq) -> tick, claim
        # Per snapshot kept, in tick order: (its tick, each client's row, the players each
        # was sent: (C, size) bool).
        self._sent: list[tuple[int, dict[int, int], np.ndarray]] = []
        names: dict[int, str] = {}
        replayed_ticks = replay_ticks(
            recording, config, validator, self.outcome, start, stop, publish=True
        )
        for replayed in replayed_ticks:
            if len(self.ticks) >= max_ticks:
                self.truncated = True
                break
            names = self._seat_names(replayed, names)
            self._remember_claims(replayed)
            self._remember_sent(replayed)
            ids = tuple(self._add_shot(replayed, trace) for trace in replayed.traces)
            world = replayed.match.world
            slots = np.flatnonzero(world.active)
            self.ticks.append(
                ViewedTick(
                    replayed.entry.tick, replayed.entry.epoch, replayed.match.server_time,
                    slots.astype(np.int16), world.pos[slots].astype(np.float32),
                    world.yaw[slots].astype(np.float32), world.health[slots].astype(np.int16),
                    world.alive[slots].astype(bool), names, ids,
                )
            )  # fmt: skip
        if not self.ticks:
            problems = "; ".join(self.outcome.problems) or "no ticks in the window"
            raise ViewerError(f"match {match}: nothing to show: {problems}")
        self._index = {viewed.tick: i for i, viewed in enumerate(self.ticks)}

    # -- building -------------------------------------------------------------------------

    @staticmethod
    def _seat_names(replayed: ReplayedTick, names: dict[int, str]) -> dict[int, str]:
        seats = replayed.match.seats
        if len(seats) == len(names) and all(names.get(s) == seat.name for s, seat in seats.items()):
            return names
        return {slot: seat.name for slot, seat in seats.items()}

    def _remember_claims(self, replayed: ReplayedTick) -> None:
        """The view time each input fired by claimed (the log keeps the inputs, the shot
        events only the view time judged)."""
        inputs = replayed.entry.inputs
        tick = replayed.entry.tick
        if inputs is not None:
            for slot, seq, claim in zip(
                inputs.slot.tolist(), inputs.ints[:, 0].tolist(), inputs.floats[:, 4].tolist(),
                strict=True,
            ):  # fmt: skip
                self._claims[(int(slot), int(seq))] = (tick, float(claim))
        if tick % _CLAIM_TICKS == 0:
            self._claims = {k: v for k, v in self._claims.items() if tick - v[0] <= _CLAIM_TICKS}

    def _remember_sent(self, replayed: ReplayedTick) -> None:
        """A snapshot tick: every seat's players coded as the node coded them (its
        interest and fog), and who was sent whom kept for :data:`_CLAIM_TICKS`."""
        result, match = replayed.result, replayed.match
        if result.shown is None:
            return
        match.last_sent = None
        match.snapshot_parts(result, sorted(result.seats))
        if match.last_sent is None:
            return
        slots, selected = match.last_sent
        tick = replayed.entry.tick
        self._sent.append((tick, {slot: row for row, slot in enumerate(slots.tolist())}, selected))
        if self._sent[0][0] < tick - _CLAIM_TICKS:
            self._sent = [kept for kept in self._sent if kept[0] >= tick - _CLAIM_TICKS]

    def _target_sent(self, shooter: int, target: int, claim: float) -> str | None:
        """Whether the snapshots the shooter drew at ``claim`` held ``target``: ``"yes"``
        (the one at that time, or both it interpolated between), ``"partly"`` (one of the
        two), ``"no"``, or None (those snapshots are not kept, or did not go to it)."""
        kept = self._sent
        at = claim * self.config.tick_rate
        i = bisect_right(kept, at + _SAME_TICK, key=lambda snapshot: snapshot[0]) - 1
        if i < 0 or target < 0:
            return None
        drawn = kept[i : i + 1] if abs(at - kept[i][0]) <= _SAME_TICK else kept[i : i + 2]
        held = []
        for _, rows, selected in drawn:
            row = rows.get(shooter)
            if row is not None:
                held.append(target < selected.shape[1] and bool(selected[row, target]))
        if not held:
            return None
        return "yes" if all(held) else "partly" if any(held) else "no"

    def _add_shot(self, replayed: ReplayedTick, trace: ShotTrace) -> int:
        event = trace.event
        history = replayed.match.history_view()
        remembered = self._claims.get((event.shooter, event.seq))
        claim = event.view_time if remembered is None else remembered[1]
        sighting = self._sighting(event.shooter, event.seq, claim)
        if event.result == "hit":
            target = event.victim
        else:  # the player the bot says it aimed at, else the one nearest to the ray
            target = sighting["target"] if sighting else _aimed_at(history, trace, claim)
        sent = None if target < 0 else rewound_feet(history, 0, claim, target)
        rewound = None if target < 0 else rewound_feet(history, 0, event.view_time, target)
        shot: dict[str, Any] = {
            "id": len(self.shots),
            "key": f"{event.shooter}:{event.seq}",
            "m": self.match,
            **frames.traced_shot_fields(trace),
            "tick": replayed.entry.tick,
            "traded": event.traded,
            "claim_time": round(claim, 6),
            "target": target,
            "sent_feet": _xyz(sent),
            "target_sent": self._target_sent(event.shooter, target, claim),
            "server_feet": _xyz(rewound),
            "server_hitboxes": _hitboxes(rewound),
            "offset_cm": None
            if sent is None or rewound is None
            else round(float(np.linalg.norm(sent - rewound)) * 100.0, 1),
        }
        shot["cause"] = cause_of(shot)
        shot["sighting"] = sighting
        shot["seen_vs_sent_cm"] = (
            None
            if sighting is None or sent is None or sighting["target"] != target
            else round(float(np.linalg.norm(np.array(sighting["seen_feet"]) - sent)) * 100.0, 1)
        )
        self.shots.append(shot)
        return int(shot["id"])

    def _sighting(self, shooter: int, seq: int, claim: float) -> dict[str, Any] | None:
        near = [
            s
            for s in self.sightings.get((shooter, seq), [])
            if abs(s["view_time"] - claim) <= _SIGHTING_MATCH_S
        ]
        return min(near, key=lambda s: abs(s["view_time"] - claim)) if near else None

    # -- reading --------------------------------------------------------------------------

    @property
    def first_tick(self) -> int:
        return self.ticks[0].tick

    @property
    def last_tick(self) -> int:
        return self.ticks[-1].tick

    def hello(self) -> dict[str, Any]:
        """What the page needs once: the map and hitboxes (as the live view's hello), the
        tick range, every shot (a short line each) and how the replay went."""
        last = self.ticks[-1]
        view = NodeView(
            self.region, self.node, "replay", last.epoch, last.tick, last.time,
            self.config.lag_compensation.max_rewind * 1000.0,
        )  # fmt: skip
        message = frames.hello(self.config.arena, self.config.tick_rate, 0.0, view)
        outcome = self.outcome
        message["replay"] = {
            "match": self.match,
            "first_tick": self.first_tick,
            "last_tick": self.last_tick,
            "ticks": len(self.ticks),
            "truncated": self.truncated,
            "exact": outcome.exact,
            "mismatches": [m.line() for m in outcome.mismatches],
            "problems": outcome.problems,
            "notes": outcome.notes,
            "sightings": sum(len(found) for found in self.sightings.values()),
        }
        message["replay"]["shots"] = len(self.shots)
        message["shots"] = [self.shot_line(shot) for shot in self.listed_shots()]
        return message

    def listed_shots(self) -> list[dict[str, Any]]:
        """The shots ``/view/hello`` lists, in tick order: every one, or the first
        :data:`LISTED_SHOTS_MAX` of the notable ones, then of the rest."""
        if len(self.shots) <= LISTED_SHOTS_MAX:
            return self.shots
        ranked = sorted(self.shots, key=lambda shot: (not is_notable(shot), shot["id"]))
        return sorted(ranked[:LISTED_SHOTS_MAX], key=lambda shot: shot["id"])

    @staticmethod
    def shot_line(shot: dict[str, Any]) -> dict[str, Any]:
        keys = ("id", "key", "tick", "shooter", "seq", "result", "victim", "target", "judged")
        return {k: shot[k] for k in keys}

    def nearest_tick(self, tick: int) -> ViewedTick:
        """The kept tick at ``tick``, or the nearest kept one before it (ticks a failover
        skipped are not kept), or the first."""
        index = self._index.get(tick)
        if index is None:
            before = [i for t, i in self._index.items() if t <= tick]
            index = max(before) if before else 0
        return self.ticks[index]

    def frame(self, tick: int) -> dict[str, Any]:
        """The players at ``tick`` and the shots it judged, in full."""
        viewed = self.nearest_tick(tick)
        players = frames.player_rows(
            self.match, viewed.slots, viewed.pos.astype(np.float64),
            viewed.yaw.astype(np.float64), viewed.health, viewed.alive, viewed.names,
        )  # fmt: skip
        return {
            "type": "frame",
            "role": "replay",
            "region": self.region,
            "node": self.node,
            "epoch": viewed.epoch,
            "tick": viewed.tick,
            "time": round(viewed.time, 6),
            "players": players,
            "shots": [self.shots[i] for i in viewed.shots],
        }

    def find_shot(self, key: str, tick: int | None = None) -> dict[str, Any] | None:
        """The shot ``SHOOTER:SEQ`` (the one nearest to ``tick`` when the pair recurs: a
        slot's next player counts its inputs afresh)."""
        found = [shot for shot in self.shots if shot["key"] == key]
        if not found:
            return None
        if tick is None:
            return found[0]
        return min(found, key=lambda shot: abs(shot["tick"] - tick))

    def shot(self, ident: int) -> dict[str, Any] | None:
        return self.shots[ident] if 0 <= ident < len(self.shots) else None
