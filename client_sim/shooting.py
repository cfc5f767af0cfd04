"""The swarm's shooting: who fires this tick, at what, and the book of verdicts.

Per bot this keeps the shots awaiting the server's verdict and the projectiles whose flight
it is still rendering; per swarm, the finished records the report is built from. Arithmetic
that can be shared runs over arrays; what needs one bot's rendered view runs per shot, which
is a few per bot per second.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from client_sim.bot_random import Streams, as_streams
from client_sim.brain import Brain
from client_sim.fairness import disagreement, disputed_shot, rule_outcome, shot_detail
from client_sim.interpolation import InterpolatedView
from client_sim.marksman import (
    CHEST_HEIGHT,
    AimSkill,
    ShotRecord,
    aim_at,
    choose_weapon,
    eye_of,
    fly_projectile,
    hitscan_verdict,
    tracked_players,
)
from shared import protocol
from shared.arena_map import ArenaMap
from shared.protocol import RespawnEvent, ShotEvent, SnapshotEvent
from shared.sightlines import sight_blocked
from shared.weapons import LAUNCHER, WEAPONS, aim_direction

__all__ = ["SIGHTING_INTERVAL_S", "ShotSummary", "SwarmShooting"]

_NEVER = -(2**40)
#: Seconds between two sightings of one bot (bots report some of their shots, not all).
SIGHTING_INTERVAL_S = 0.5


@dataclass(frozen=True, slots=True)
class ShotSummary:
    """A finished shot, reduced to what the report needs (picklable, small)."""

    weapon: int
    rtt_ms: float  # measured by the bot's pings
    client_hit: bool
    server_result: str | None  # None: no verdict arrived before the run ended
    agrees: bool
    link_rtt_ms: float = math.nan  # the link's configured RTT
    rule: str | None = None  # the rule that decided it (client_sim.fairness.RULE_CAUSES)
    cause: str | None = None  # why the verdicts differ (client_sim.fairness.CAUSES)
    server_rtt_ms: float = math.nan  # the server's estimate of the shooter's RTT
    #: An unexplained disagreement's verdicts and their grounds (fairness.shot_detail).
    detail: dict[str, Any] | None = None
    #: Any disagreement: where to find it in a match log (fairness.disputed_shot).
    disputed: dict[str, Any] | None = None


class SwarmShooting:
    def __init__(
        self, count: int, arena: ArenaMap, skill: AimSkill, rng: np.random.Generator | Streams
    ):
        self.arena = arena
        self.skill = skill
        self.rng = as_streams(rng)  # one stream per bot in a swarm: the same whatever the split
        self.awaiting: list[dict[tuple[int, int], ShotRecord]] = [{} for _ in range(count)]
        self.last_fired = np.full((count, len(WEAPONS)), _NEVER, dtype=np.int64)
        self.alive = np.ones(count, dtype=bool)
        self.finished: list[ShotSummary] = []
        self.hits_received = 0
        #: The share of the bots asked last tick that were engaged (light players fire
        #: as often: client_sim.light).
        self.engaged_share = math.nan
        self.hits_behind_cover = 0
        #: Per hit received and checked: (the server's RTT estimate of its shooter in ms,
        #: NaN when none; whether the victim was behind cover on its own screen).
        self.hits_checked: list[tuple[float, bool]] = []
        #: Per bot: the target and where it was drawn at the last shot, and the local time
        #: its next sighting may be sent (:meth:`sighting`).
        self._sighted: list[tuple[int, tuple[float, float, float]] | None] = [None] * count
        self._next_sighting = np.zeros(count)

    @staticmethod
    def concerning(events: tuple[SnapshotEvent, ...], player: int) -> list[SnapshotEvent]:
        """The events of a snapshot that name ``player`` (as shooter, victim or respawned).
        A client is told only the events near it, so this is a short scan."""
        return [event for event in events if event.names(player)] if events else []

    def shooters(self, ready: np.ndarray, brain: Brain, now: float, tick_rate: int) -> np.ndarray:
        """Bots among ``ready`` that pull the trigger this tick."""
        engaged = (
            brain.has_threat[ready]
            & (now - brain.threat_since[ready] >= self.skill.reaction_s)
            & self.alive[ready]
        )
        chance = self.skill.fire_rate_hz / tick_rate
        self.engaged_share = float(engaged.mean()) if len(ready) else math.nan
        return ready[engaged & (self.rng.random(ready) < chance)]

    def fire(
        self,
        index: int,
        me: int,
        seq: int,
        feet: np.ndarray,
        view: InterpolatedView,
        target: int,
        rtt_ms: float,
        link_rtt_ms: float,
        tick_rate: int,
        history: Callable[[float], list[tuple[float, np.ndarray]]],
    ) -> tuple[float, float, int, float] | None:
        """Aim at ``target`` in the rendered ``view`` and shoot.

        Returns (yaw, pitch, buttons, view time): the view time is the server time of the
        world the bot actually drew, which the input must claim.
        """
        weapon = choose_weapon(self.skill, self.rng.one(index))
        if seq - self.last_fired[index, weapon.id] < weapon.interval_inputs(tick_rate):
            return None
        where = np.flatnonzero((view.ids == target) & view.alive)
        if not len(where):
            return None
        eye = eye_of(feet)
        yaw, pitch = aim_at(
            eye, view.positions[where[0]], np.radians(self.skill.error_deg), self.rng.one(index)
        )
        self.last_fired[index, weapon.id] = seq
        seen = view.positions[where[0]]
        self._sighted[index] = (target, (float(seen[0]), float(seen[1]), float(seen[2])))
        present = view.alive & (view.ids != me)
        record = ShotRecord(
            seq, weapon.id, rtt_ms, -1, 0, view.shown_time, link_rtt_ms=link_rtt_ms,
            eye=(float(eye[0]), float(eye[1]), float(eye[2])),
        )  # fmt: skip
        if weapon.hitscan:
            record.drawn = frozenset(view.ids.tolist())
            record.client_victim, record.client_hitbox = hitscan_verdict(
                eye, yaw, pitch, view.ids, view.positions, present, self.arena
            )
        else:
            record.origin = eye
            record.velocity = aim_direction(yaw, pitch) * weapon.speed
            for time, records in history(view.shown_time):
                self._track(record, time, records)
        self.awaiting[index][(seq, weapon.id)] = record
        return yaw, pitch, weapon.button, view.shown_time

    def sighted(self, index: int) -> tuple[int, tuple[float, float, float]] | None:
        """The target bot ``index`` last fired at and its feet where the bot drew them."""
        return self._sighted[index]

    def sighting(self, index: int, seq: int, local: float) -> bytes | None:
        """The ``sighting`` of the shot bot ``index`` just fired with input ``seq`` (where
        it drew its target, for the node's live view), at most one every
        :data:`SIGHTING_INTERVAL_S` a bot: it is charged to the bot's budget of 20 small
        frames a second, beside its pings and probe echoes."""
        sighted = self._sighted[index]
        if sighted is None or local < self._next_sighting[index]:
            return None
        self._next_sighting[index] = local + SIGHTING_INTERVAL_S
        target, seen = sighted
        return protocol.encode(protocol.SightingMessage(seq, target, seen))

    @staticmethod
    def _track(record: ShotRecord, time: float, records: np.ndarray) -> None:
        """Remember one more snapshot rendered during a projectile's flight."""
        record.track_times.append(time)
        record.track_frames.append(records)

    def on_snapshot(
        self,
        index: int,
        me: int,
        time: float,
        records: np.ndarray,
        events: Sequence[SnapshotEvent],
        own_feet: np.ndarray,
        current_view: Callable[[], InterpolatedView | None],
        *,
        tick: int = -1,
        told: Sequence[SnapshotEvent] = (),
    ) -> bool:
        """Track projectiles, pair verdicts, note deaths; True when this bot respawned.

        ``events`` are those that name this bot (:meth:`concerning`); ``told``, all the
        snapshot's (a projectile's verdict needs the kills of the ticks before ``tick``,
        the snapshot's own).
        """
        awaiting = self.awaiting[index]
        for record in awaiting.values():
            if record.velocity is not None:
                self._track(record, time, records)
        respawned = False
        for event in events:
            if isinstance(event, ShotEvent):
                if event.shooter == me:
                    key = (event.seq, event.weapon)
                    if key in awaiting:
                        self._settle(awaiting.pop(key), event, told, tick)
                if event.victim == me and event.result == "hit":
                    self._hit_on_me(event, own_feet, current_view)
                    if event.kill:
                        self.alive[index] = False
            elif isinstance(event, RespawnEvent) and event.player == me:
                self.alive[index] = True
                respawned = True
        return respawned

    def _settle(
        self, record: ShotRecord, event: ShotEvent, told: Sequence[SnapshotEvent], tick: int
    ) -> None:
        """Pair ``event``, the server's verdict told by the snapshot of ``tick`` (with the
        other events ``told`` there), with the bot's own; a projectile's is flown now."""
        record.server_result = event.result
        record.server_victim = event.victim
        record.server_damage = event.damage
        record.server_judged = event.judged
        record.server_view_time = event.view_time
        record.server_origin = event.origin
        record.server_traded = event.traded
        record.server_tick, record.shooter = event.tick, event.shooter
        record.server_rtt_ms = event.shooter_rtt * 1e3 if event.shooter_rtt >= 0 else math.nan
        if record.velocity is not None and record.track_times:
            assert record.origin is not None
            ids, positions, alive = tracked_players(
                record.track_frames, event.shooter, _killed_before(told, tick)
            )
            # Flown from the moment the server spawned it, so that both verdicts judge one
            # flight (a clamped claim shows up as such, not as a different path).
            candidate, hitbox = fly_projectile(
                record.origin,
                record.velocity,
                LAUNCHER.gravity,
                event.view_time,
                event.view_time + LAUNCHER.lifetime,
                np.array(record.track_times),
                positions,
                alive,
                self.arena,
                LAUNCHER.flight_step,
            )
            if candidate >= 0:
                record.client_victim = int(ids[candidate])
                record.client_hitbox = hitbox
            # Only these could the bot's flight hit all along (interest management may
            # leave a player out of some snapshots): the rest were not shown it.
            drawn = set(record.track_frames[0]["id"].tolist())
            for frame in record.track_frames[1:]:
                drawn.intersection_update(frame["id"].tolist())
            record.drawn = frozenset(drawn)
        self.finished.append(self._summary(record))

    def _hit_on_me(
        self,
        event: ShotEvent,
        own_feet: np.ndarray,
        current_view: Callable[[], InterpolatedView | None],
    ) -> None:
        """Was I behind cover on my own screen when this hit reached me?"""
        self.hits_received += 1
        view = current_view()
        if view is None:
            return
        where = np.flatnonzero(view.ids == event.shooter)
        if not len(where):
            return
        shooter_eye = eye_of(view.positions[where[0]])
        chest = own_feet + (0.0, 0.0, CHEST_HEIGHT)
        blocked = bool(
            sight_blocked(shooter_eye[None], chest[None], self.arena.box_min, self.arena.box_max)[0]
        )
        self.hits_behind_cover += blocked
        shooter_rtt = event.shooter_rtt * 1e3 if event.shooter_rtt >= 0 else math.nan
        self.hits_checked.append((shooter_rtt, blocked))

    @staticmethod
    def _summary(record: ShotRecord) -> ShotSummary:
        judged = record.server_result is not None
        cause = disagreement(record) if judged else None
        return ShotSummary(
            record.weapon,
            record.rtt_ms,
            record.client_hit,
            record.server_result,
            record.agrees if judged else False,
            record.link_rtt_ms,
            rule_outcome(record) if judged else None,
            cause,
            record.server_rtt_ms,
            shot_detail(record) if cause == "unexplained" else None,
            disputed_shot(record, cause) if cause is not None else None,
        )

    def new_seat(self, index: int) -> None:
        """Bot ``index`` lost its seat and took another: its shots still awaiting a verdict
        never get one (reported unresolved, as at the end), and the new seat spawns alive."""
        awaiting = self.awaiting[index]
        self.finished.extend(self._summary(record) for record in awaiting.values())
        awaiting.clear()
        self.alive[index] = True

    def close(self) -> None:
        """End of run: shots still awaiting a verdict are reported as unresolved."""
        for awaiting in self.awaiting:
            self.finished.extend(self._summary(record) for record in awaiting.values())
            awaiting.clear()


def _killed_before(told: Sequence[SnapshotEvent], tick: int) -> set[int]:
    """The players a snapshot of ``tick`` tells killed in an earlier tick (since the
    snapshot before): dead already in the history the server judged ``tick``'s shots in."""
    return {
        event.victim
        for event in told
        if type(event) is ShotEvent and event.kill and 0 <= event.tick < tick
    }
