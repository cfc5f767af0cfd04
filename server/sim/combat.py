"""Shots, damage, deaths and respawns of one match: the rules around the hit kernels.

Sans-I/O. During a tick the match hands every fire input to :meth:`Combat.fire` with the
shooter's position after that input's movement; after the tick's snapshot is in the history,
:meth:`Combat.resolve` judges them all:

1. Each shot's view time is checked (:class:`~server.sim.lagcomp.LagCompensation`).
2. Hitscan shots go to the hit kernel in one batch, new and flying projectiles to the
   projectile kernel in one batch: every target rewound to the time that shot was seen.
3. The outcomes are applied in time order (view time for hitscan, impact time for
   projectiles), so the match has one timestamp-ordered story: a shooter killed at time t
   fires nothing seen after ``t + trade_window``, and a victim cannot be damaged after the
   time it died, even by a shot that hit it in the rewound world.

The verdict reported for a shot is the lag-compensated geometry (what it hit in the world its
shooter saw); ``damage`` is 0 when the ordered story says the victim was already dead.
"""

from __future__ import annotations

import collections
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from server.sim.hitreg.backend import History, HitscanShots, HitValidator, ProjectileShots
from server.sim.lagcomp import LagCompensation, LinkEstimate, ViewTimeVerdict
from server.sim.replica import ArrayState, StateMismatch
from server.sim.world import MAX_HEALTH, World
from shared.hitbox import HIT_PLAYER, HIT_WORLD, HITBOX_DAMAGE_MULTIPLIER
from shared.protocol import ShotEvent
from shared.protocol.events import ShotResult
from shared.weapons import EYE_HEIGHT, RESPAWN_DELAY_S, WEAPONS, Weapon, aim_direction

__all__ = ["Combat", "Judgement", "PendingShot", "ShotBatch", "ShotTrace", "judge"]

#: Seconds a shot may come early from rounding alone: tick times are ``tick / rate`` in
#: floating point, and six ticks at 60 Hz may differ by a hair less than 0.1 s.
_COOLDOWN_ROUNDING = 1e-6


@dataclass(frozen=True, slots=True)
class PendingShot:
    slot: int
    seq: int
    weapon: Weapon
    origin: np.ndarray  # (3,) the shooter's eye after the input that fired
    traded: bool  # the shooter was dead when that input was applied (it did not move)
    direction: np.ndarray  # (3,) unit
    claim: float  # the client's view time
    arrival: float  # server time the input arrived
    ack_time: float | None  # the time of the newest snapshot the input says it had
    link: LinkEstimate | None  # the server's measurement of the shooter's link then
    interp_delay: float


@dataclass(frozen=True, slots=True)
class Judgement:
    """How a shot's moment was decided, as its ``shot`` event reports it."""

    view_time: float
    verdict: ViewTimeVerdict
    origin: np.ndarray  # (3,) where it left the shooter's eye
    shooter_rtt: float  # the server's RTT estimate of the shooter, -1 without one
    traded: bool = False  # fired from where its shooter fell (see ShotEvent.traded)


@dataclass(frozen=True, slots=True)
class ShotTrace:
    """A judged shot's line, for the live view: its event, the direction it left the eye
    in and where it stopped (the hit on a player or cover, the end of its range, a
    projectile's impact or expiry; the eye itself for a shot rejected unfired)."""

    event: ShotEvent
    direction: np.ndarray  # (3,) unit
    end: np.ndarray  # (3,)
    tick: int  # the tick that judged it
    time: float  # that tick's server time: the present it was rewound from


#: The judgement's values in a projectile's row before the trade flag was added.
_ROW_BEFORE_TRADES = ("view_time", "verdict", "origin", "shooter_rtt")


@dataclass(slots=True)
class _Projectile:
    slot: int
    seq: int
    weapon: Weapon
    position: np.ndarray
    velocity: np.ndarray
    time: float  # the time ``position``/``velocity`` belong to
    expire_time: float
    judged: Judgement

    def row(self) -> list[Any]:
        """This projectile as plain values, for a standby."""
        judged = self.judged
        return [
            self.slot, self.seq, self.weapon.id, self.position.tobytes(),
            self.velocity.tobytes(), self.time, self.expire_time, judged.view_time,
            judged.verdict.value, judged.origin.tobytes(), judged.shooter_rtt, judged.traded,
        ]  # fmt: skip

    @classmethod
    def from_row(cls, row: list[Any]) -> _Projectile:
        """A projectile from :meth:`row`'s values; a row of a node from before the trade
        flag (11 values: a checkpoint written by it, or its stream during a rolling
        upgrade) is a projectile not traded."""
        slot, seq, weapon, position, velocity, time, expire, *judgement = row
        if len(judgement) == len(_ROW_BEFORE_TRADES):
            judgement = [*judgement, False]
        view, verdict, origin, rtt, traded = judgement
        judged = Judgement(
            float(view), ViewTimeVerdict(verdict), np.frombuffer(origin).copy(), float(rtt),
            bool(traded),
        )  # fmt: skip
        return cls(
            int(slot), int(seq), WEAPONS[int(weapon)], np.frombuffer(position).copy(),
            np.frombuffer(velocity).copy(), float(time), float(expire), judged,
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class _Outcome:
    time: float
    slot: int
    seq: int
    weapon: Weapon
    kind: int
    victim: int
    hitbox: int
    judged: Judgement
    direction: np.ndarray  # (3,) for the trace: how it left the eye (hitscan) or flew in
    end: np.ndarray  # (3,) for the trace: where it stopped


class Combat(ArrayState):
    """One match's combat bookkeeping. Replicated: deaths, respawns, fire cooldowns and the
    projectiles in flight (:meth:`export_state`); the shots pending within a tick never
    outlive it, and the counters are each node's own statistics."""

    REPLICATED = ("death_time", "respawn_tick", "last_fired")

    def __init__(
        self,
        world: World,
        tick_rate: int,
        rules: LagCompensation,
        respawn_delay: float = RESPAWN_DELAY_S,
        match_index: int = 0,
        snapshot_interval: int = 1,
    ) -> None:
        self.world = world
        self.tick_rate = tick_rate
        #: Seconds between two snapshots: how stale a client's newest snapshot may honestly
        #: be, the view-time window's slack (``LagCompensation.window``).
        self.snapshot_period = snapshot_interval / tick_rate
        self.rules = rules
        self.respawn_ticks = max(1, round(respawn_delay * tick_rate))
        self.match_index = match_index
        players = world.max_players
        self.death_time = np.full(players, np.nan)
        self.respawn_tick = np.full(players, -1, dtype=np.int64)
        #: Per slot and weapon, the server time of its last shot: the cooldown runs on the
        #: server's clock, not on the inputs a client sends (which it could send faster).
        self.last_fired = np.full((players, len(WEAPONS)), -np.inf)
        self.pending: list[PendingShot] = []
        self.flying: list[_Projectile] = []
        self.counters: collections.Counter[str] = collections.Counter()
        #: The judged shots' lines while someone watches the live view (None: nobody does,
        #: and nothing is traced); the view takes them a few times a second.
        self.traces: list[ShotTrace] | None = None

    def export_state(self) -> dict[str, Any]:
        """The arrays, and each projectile in flight as a row of plain values."""
        return {**self.array_state(), "flying": [p.row() for p in self.flying]}

    def import_state(self, state: Mapping[str, Any]) -> None:
        """Take over the primary's combat state (no shot is pending between ticks)."""
        arrays = {name: value for name, value in state.items() if name != "flying"}
        try:
            flying = [_Projectile.from_row(row) for row in state["flying"]]
        except (KeyError, TypeError, ValueError, IndexError) as error:
            raise StateMismatch(f"combat: projectiles in flight unreadable ({error})") from None
        self.restore_arrays(arrays)
        self.flying = flying
        self.pending = []

    # -- during the tick ---------------------------------------------------------------

    def seat(self, slot: int) -> None:
        """A new player in ``slot``: no death, no cooldowns from the seat's last owner."""
        self.death_time[slot] = np.nan
        self.respawn_tick[slot] = -1
        self.last_fired[slot] = -np.inf

    def fire(
        self,
        slot: int,
        seq: int,
        buttons: int,
        yaw: float,
        pitch: float,
        claim: float,
        arrival: float,
        ack_time: float | None,
        link: LinkEstimate | None,
        interp_delay: float,
        now: float,
    ) -> None:
        """Queue the shots of one applied input (``buttons`` may hold several weapons);
        ``now``: the server time of the tick applying it, which every input applied in
        that tick shares, so a burst of inputs cannot fire a burst of shots."""
        for weapon in WEAPONS:
            if not buttons & weapon.button:
                continue
            if now - self.last_fired[slot, weapon.id] < weapon.fire_interval - _COOLDOWN_ROUNDING:
                self.counters["shots_rate_limited"] += 1
                continue
            self.last_fired[slot, weapon.id] = now
            direction = aim_direction(yaw, pitch)
            origin = self.world.pos[slot] + (0.0, 0.0, EYE_HEIGHT)
            traded = not self.world.alive[slot]
            self.pending.append(
                PendingShot(
                    slot, seq, weapon, origin, traded, direction, claim, arrival, ack_time,
                    link, interp_delay,
                )
            )  # fmt: skip
            self.counters["shots_fired"] += 1

    # -- after the tick's snapshot is in the history -------------------------------------

    def prepare(self, present: float) -> ShotBatch:
        """Check this tick's shots (view time, dead shooter) and gather them with the
        projectiles in flight, for the kernels; clears the pending shots."""
        batch = ShotBatch(self, present)
        period = self.snapshot_period
        tick = round(present * self.tick_rate)
        for shot in self.pending:
            view_time, verdict = self.rules.view_time(
                shot.claim, shot.arrival, shot.ack_time, shot.link, shot.interp_delay, period
            )
            if verdict is not ViewTimeVerdict.CLAIMED:
                self.counters[f"view_time_{verdict.value}"] += 1
            rtt = shot.link.rtt if shot.link is not None else -1.0
            judged = Judgement(view_time, verdict, shot.origin, rtt, shot.traded)
            death = self.death_time[shot.slot]
            if not self.rules.may_fire(view_time, None if np.isnan(death) else float(death)):
                self.counters["shots_rejected_dead"] += 1
                event = _shot_event(shot.slot, shot.seq, shot.weapon, "rejected", judged, tick)
                batch.events.append(event)
                self._trace(event, shot.direction, shot.origin, present)
            elif shot.weapon.hitscan:
                batch.hitscan.append((shot, judged))
            else:
                velocity = shot.direction * shot.weapon.speed
                expire = view_time + shot.weapon.lifetime
                batch.flying.append(
                    _Projectile(
                        shot.slot, shot.seq, shot.weapon, shot.origin, velocity, view_time,
                        expire, judged,
                    )
                )  # fmt: skip
        self.pending = []
        batch.flying = self.flying + batch.flying
        self.flying = []
        return batch

    def conclude(self, batch: ShotBatch, tick: int) -> list[ShotEvent]:
        """Apply a judged batch in time order; projectiles still flying fly on."""
        outcomes = list(batch.outcomes)
        for projectile, (kind, victim, hitbox, time, position, velocity, expired) in zip(
            batch.flying, batch.projectile_results, strict=True
        ):
            if kind == 0 and not expired:
                projectile.position, projectile.velocity, projectile.time = position, velocity, time
                self.flying.append(projectile)
            else:
                outcomes.append(
                    _Outcome(
                        time,
                        projectile.slot,
                        projectile.seq,
                        projectile.weapon,
                        kind,
                        victim,
                        hitbox,
                        projectile.judged,
                        velocity / max(float(np.linalg.norm(velocity)), 1e-12),
                        position,
                    )
                )
        outcomes.sort(key=lambda o: (o.time, o.slot, o.seq, o.weapon.id))
        events = list(batch.events)
        for outcome in outcomes:
            event = self._apply(outcome, tick)
            events.append(event)
            self._trace(event, outcome.direction, outcome.end, batch.present)
        return events

    def _trace(
        self, event: ShotEvent, direction: np.ndarray, end: np.ndarray, present: float
    ) -> None:
        if self.traces is not None:
            tick = round(present * self.tick_rate)
            self.traces.append(ShotTrace(event, direction, end, tick, present))

    def resolve(
        self, history: History, validator: HitValidator, present: float, tick: int
    ) -> list[ShotEvent]:
        """Judge this tick's shots and flying projectiles of this match alone."""
        batch = self.prepare(present)
        judge([batch], history, validator)
        return self.conclude(batch, tick)

    def _apply(self, outcome: _Outcome, tick: int) -> ShotEvent:
        died_at = self.death_time[outcome.slot]
        judged = outcome.judged
        if not self.rules.may_fire(judged.view_time, None if np.isnan(died_at) else died_at):
            # Killed earlier in this tick's story, before the moment this shot was fired.
            self.counters["shots_rejected_dead"] += 1
            return _shot_event(outcome.slot, outcome.seq, outcome.weapon, "rejected", judged, tick)
        if outcome.kind != HIT_PLAYER:
            result: ShotResult = "world" if outcome.kind == HIT_WORLD else "miss"
            return _shot_event(outcome.slot, outcome.seq, outcome.weapon, result, judged, tick)
        world, victim = self.world, outcome.victim
        died_at = self.death_time[victim]
        damage, kill = 0, False
        if world.active[victim] and np.isnan(died_at):
            multiplier = HITBOX_DAMAGE_MULTIPLIER[outcome.hitbox]
            damage = round(outcome.weapon.damage * multiplier)
            world.health[victim] = max(0, int(world.health[victim]) - damage)
            if world.health[victim] == 0:
                kill = True
                self.death_time[victim] = outcome.time
                self.respawn_tick[victim] = tick + self.respawn_ticks
                world.alive[victim] = False
                world.vel[victim] = 0.0
                self.counters["kills"] += 1
        else:
            self.counters["hits_on_dead"] += 1
        self.counters["hits"] += 1
        return _shot_event(
            outcome.slot, outcome.seq, outcome.weapon, "hit", judged, tick,
            victim=victim, hitbox=outcome.hitbox, damage=damage, kill=kill,
        )  # fmt: skip

    def respawn_due(self, tick: int) -> list[int]:
        """Slots whose respawn delay is over at ``tick`` (the match re-seats them)."""
        due = np.flatnonzero((self.respawn_tick >= 0) & (self.respawn_tick <= tick))
        for slot in due.tolist():
            self.respawn_tick[slot] = -1
            self.death_time[slot] = np.nan
            self.world.health[slot] = MAX_HEALTH
        return due.tolist()


def _shot_event(
    slot: int,
    seq: int,
    weapon: Weapon,
    result: ShotResult,
    judged: Judgement,
    tick: int,
    **hit: Any,
) -> ShotEvent:
    return ShotEvent(
        slot,
        seq,
        weapon.id,
        result,
        judged.view_time,
        judged=judged.verdict.value,
        origin=tuple(judged.origin.tolist()),
        shooter_rtt=judged.shooter_rtt,
        tick=tick,
        traded=judged.traded,
        **hit,
    )


@dataclass(slots=True)
class ShotBatch:
    """One match's shots of one tick on their way through the kernels."""

    combat: Combat
    present: float
    hitscan: list[tuple[PendingShot, Judgement]] = field(default_factory=list)
    flying: list[_Projectile] = field(default_factory=list)
    events: list[ShotEvent] = field(default_factory=list)  # decided without a kernel
    outcomes: list[_Outcome] = field(default_factory=list)  # hitscan verdicts
    projectile_results: list[tuple[Any, ...]] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.hitscan and not self.flying


def judge(batches: list[ShotBatch], history: History, validator: HitValidator) -> None:
    """Every match's shots of a tick in one kernel call per weapon kind.

    ``history`` holds the rings of all the matches (``Combat.match_index`` picks a ring).
    """
    hitscan = [(b, shot, judged) for b in batches for shot, judged in b.hitscan]
    if hitscan:
        result = validator.resolve_hitscan(
            history,
            HitscanShots(
                match=np.array([b.combat.match_index for b, _, _ in hitscan], dtype=np.int32),
                shooter=np.array([s.slot for _, s, _ in hitscan], dtype=np.int32),
                origin=np.array([s.origin for _, s, _ in hitscan]),
                direction=np.array([s.direction for _, s, _ in hitscan]),
                max_range=np.array([s.weapon.max_range for _, s, _ in hitscan]),
                view_time=np.array([judged.view_time for _, _, judged in hitscan]),
            ),
        )
        for i, (batch, shot, judged) in enumerate(hitscan):
            batch.outcomes.append(
                _Outcome(
                    judged.view_time,
                    shot.slot,
                    shot.seq,
                    shot.weapon,
                    int(result.kind[i]),
                    int(result.victim[i]),
                    int(result.hitbox[i]),
                    judged,
                    shot.direction,
                    shot.origin + shot.direction * float(result.distance[i]),
                )
            )
    flying = [(b, p) for b in batches for p in b.flying]
    if flying:
        # A flight is followed no further than the newest snapshot of its match: beyond it
        # the players are not yet where any client was shown them (a tick between two
        # snapshots would hold them still where the clients see them move), so that part
        # waits for the next snapshot's tick.
        matches = np.array([b.combat.match_index for b, _ in flying], dtype=np.int64)
        shown_until = history.newest_times()
        out = validator.resolve_projectiles(
            history,
            ProjectileShots(
                match=matches.astype(np.int32),
                shooter=np.array([p.slot for _, p in flying], dtype=np.int32),
                origin=np.array([p.position for _, p in flying]),
                velocity=np.array([p.velocity for _, p in flying]),
                gravity=np.array([p.weapon.gravity for _, p in flying]),
                spawn_time=np.array([p.time for _, p in flying]),
                end_time=np.minimum([b.present for b, _ in flying], shown_until[matches]),
                expire_time=np.array([p.expire_time for _, p in flying]),
                step_time=np.array([p.weapon.flight_step for _, p in flying]),
            ),
        )
        for i, (batch, _) in enumerate(flying):
            batch.projectile_results.append(
                (
                    int(out.kind[i]),
                    int(out.victim[i]),
                    int(out.hitbox[i]),
                    float(out.time[i]),
                    out.position[i].copy(),
                    out.velocity[i].copy(),
                    bool(out.expired[i]),
                )
            )
