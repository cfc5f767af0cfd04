"""Shots, damage, deaths and respawns: the rules around the hit kernels (server/sim/combat.py).

Each scene mirrors what ``Match.tick`` does: the world's positions go into the history ring
as snapshot T, ``Combat.resolve`` judges the queued shots against that history with the
present at T, and the newest snapshot's alive flags are corrected afterwards. Every case runs
on the NumPy reference and on the numba CPU kernels.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from server.sim.combat import Combat, Judgement, _Projectile
from server.sim.history import HistoryRing
from server.sim.hitreg import History, HitValidator, make_validator
from server.sim.lagcomp import LagCompensation, LinkEstimate, ViewTimeVerdict
from server.sim.replica import StateMismatch
from server.sim.world import MAX_HEALTH, World
from shared.hitbox import (
    HITBOX_DAMAGE_MULTIPLIER,
    HITBOX_HEAD,
    HITBOX_LEGS,
    HITBOX_TORSO,
)
from shared.movement import BUTTON_FIRE
from shared.protocol import ShotEvent
from shared.weapons import (
    BUTTON_ALT_FIRE,
    EYE_HEIGHT,
    LAUNCHER,
    RESPAWN_DELAY_S,
    RIFLE,
    aim_direction,
)

RATE = 60
PLAYERS = 4
NO_BOXES = np.zeros((0, 3))


@pytest.fixture(scope="module", params=["reference", "cpu"])
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


#: A link slow enough that the view-time window never stands in the way of a claim (the
#: tests of the window itself pass their own).
SLOW_LINK = LinkEstimate(1.0, 0.0)


class Scene:
    """A world, its history ring and a Combat, driven tick by tick like the match does."""

    def __init__(
        self,
        backend: str,
        rules: LagCompensation | None = None,
        box_min: np.ndarray = NO_BOXES,
        box_max: np.ndarray = NO_BOXES,
        respawn_delay: float = RESPAWN_DELAY_S,
    ) -> None:
        self.world = World(PLAYERS)
        self.history = HistoryRing(RATE + 1, PLAYERS)
        self.rules = rules or LagCompensation()
        self.combat = Combat(self.world, RATE, self.rules, respawn_delay=respawn_delay)
        self.validator: HitValidator = make_validator(backend, box_min=box_min, box_max=box_max)
        self.tick = 0

    def seat(self, slot: int, x: float, y: float, health: int = MAX_HEALTH) -> None:
        self.world.seat(slot, x, y)
        self.world.health[slot] = health
        self.combat.seat(slot)

    def record(self, upto: int, positions: Callable[[int], np.ndarray] | None = None) -> None:
        """Append snapshots up to tick ``upto`` (the world's positions unless given)."""
        world = self.world
        for tick in range(self.tick + 1, upto + 1):
            pos = world.pos if positions is None else positions(tick)
            self.history.append(tick, tick / RATE, pos, world.active & world.alive)
        self.tick = upto

    def view(self) -> History:
        ring = self.history
        return History(
            times=ring.times[None],
            positions=ring.positions[None],
            alive=ring.alive[None],
            start=np.array([ring.start]),
            count=np.array([ring.count]),
        )

    def fire(
        self,
        slot: int,
        seq: int,
        yaw: float,
        pitch: float,
        claim: float,
        buttons: int = BUTTON_FIRE,
        link: LinkEstimate | None = SLOW_LINK,
        interp_delay: float = 0.1,
        arrival: float | None = None,
        ack_time: float | None = None,
        applied_at: float | None = None,
    ) -> None:
        """Queue a shot; its input arrives at ``arrival`` (default: now) and is applied at
        ``applied_at`` (default: one input per tick, ``seq / RATE``, for the cooldown)."""
        present = self.tick / RATE
        self.combat.fire(
            slot,
            seq,
            buttons,
            yaw,
            pitch,
            claim,
            present if arrival is None else arrival,
            ack_time,
            link,
            interp_delay,
            seq / RATE if applied_at is None else applied_at,
        )

    def step(self, positions: Callable[[int], np.ndarray] | None = None) -> list[dict[str, Any]]:
        """One more tick: append its snapshot, resolve, correct the newest alive flags."""
        self.record(self.tick + 1, positions)
        return self.resolve()

    def resolve(self) -> list[dict[str, Any]]:
        """The tick's events, each of which names this tick as the one that judged it (the
        tests below compare the rest)."""
        world = self.world
        events = self.combat.resolve(self.view(), self.validator, self.tick / RATE, self.tick)
        self.history.mark_newest_alive(world.active & world.alive)
        assert [event.tick for event in events] == [self.tick] * len(events)
        return [dataclasses.replace(event, tick=-1) for event in events]


def aim(shooter: tuple[float, float], target: tuple[float, float, float]) -> tuple[float, float]:
    """Yaw and pitch from a shooter's eye (feet at ``shooter``) to a point."""
    dx, dy = target[0] - shooter[0], target[1] - shooter[1]
    return math.atan2(dy, dx), math.atan2(target[2] - EYE_HEIGHT, math.hypot(dx, dy))


HEIGHT = {HITBOX_HEAD: 1.62, HITBOX_TORSO: 1.2, HITBOX_LEGS: 0.5}


def duel(backend: str, health: int = MAX_HEALTH, **kw: Any) -> Scene:
    """Shooter in slot 0 at the origin, target in slot 1 ten metres down +x, 10 ticks held."""
    scene = Scene(backend, **kw)
    scene.seat(0, 0.0, 0.0)
    scene.seat(1, 10.0, 0.0, health)
    scene.record(10)
    return scene


def shot_event(**fields: Any) -> ShotEvent:
    event: dict[str, Any] = {
        "shooter": 0,
        "seq": 0,
        "weapon": RIFLE.id,
        "result": "hit",
        "victim": -1,
        "hitbox": 0,
        "damage": 0,
        "kill": False,
        "view_time": 0.0,
        "origin": (0.0, 0.0, EYE_HEIGHT),  # the duel's shooter stands at the origin
        "shooter_rtt": SLOW_LINK.rtt,
    }
    return ShotEvent(**{**event, **fields})


# -- damage -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("hitbox", "damage"), [(HITBOX_HEAD, 50), (HITBOX_TORSO, 25), (HITBOX_LEGS, 19)]
)
def test_rifle_damage_follows_the_hitbox_multiplier(backend: str, hitbox: int, damage: int) -> None:
    assert damage == round(RIFLE.damage * HITBOX_DAMAGE_MULTIPLIER[hitbox])
    scene = duel(backend)
    yaw, pitch = aim((0.0, 0.0), (10.0, 0.0, HEIGHT[hitbox]))
    scene.fire(0, 7, yaw, pitch, claim=9 / RATE)
    events = scene.step()
    assert events == [shot_event(seq=7, victim=1, hitbox=hitbox, damage=damage, view_time=9 / RATE)]
    assert scene.world.health[1] == MAX_HEALTH - damage
    assert scene.world.alive[1]
    assert scene.combat.counters["hits"] == 1 and scene.combat.counters["kills"] == 0


def test_a_shot_into_the_sky_is_a_miss_and_into_the_floor_hits_the_world(backend: str) -> None:
    scene = duel(backend)
    scene.fire(0, 0, 0.0, 0.5, claim=10 / RATE)  # up, over the target
    scene.fire(0, 6, math.pi / 2, -0.5, claim=10 / RATE)  # down, sideways, into the floor
    events = scene.step()
    assert events == [
        shot_event(seq=0, result="miss", view_time=10 / RATE),
        shot_event(seq=6, result="world", view_time=10 / RATE),
    ]
    assert scene.world.health[1] == MAX_HEALTH


def test_a_wall_between_shooter_and_target_stops_the_shot(backend: str) -> None:
    wall_min, wall_max = np.array([[4.0, -2.0, 0.0]]), np.array([[5.0, 2.0, 3.0]])
    scene = Scene(backend, box_min=wall_min, box_max=wall_max)
    scene.seat(0, 0.0, 0.0)
    scene.seat(1, 10.0, 0.0)
    scene.record(10)
    scene.fire(0, 0, *aim((0.0, 0.0), (10.0, 0.0, 1.2)), claim=10 / RATE)
    assert scene.step() == [shot_event(result="world", view_time=10 / RATE)]
    assert scene.world.health[1] == MAX_HEALTH


def test_a_shooter_cannot_hit_itself(backend: str) -> None:
    scene = Scene(backend)
    scene.seat(0, 0.0, 0.0)
    scene.record(10)
    # Straight down from the eye: through its own body, into the floor.
    scene.fire(0, 0, 0.0, -math.pi / 2, claim=10 / RATE)
    assert scene.step() == [shot_event(result="world", view_time=10 / RATE)]
    assert scene.world.health[0] == MAX_HEALTH


# -- kills and respawns ---------------------------------------------------------------------


def test_a_kill_marks_the_victim_dead_and_schedules_its_respawn(backend: str) -> None:
    scene = duel(backend, health=50)
    scene.world.vel[1] = (3.0, 0.0, 0.0)
    scene.fire(0, 0, *aim((0.0, 0.0), (10.0, 0.0, 1.62)), claim=9 / RATE)
    events = scene.step()
    assert events == [
        shot_event(victim=1, hitbox=HITBOX_HEAD, damage=50, kill=True, view_time=9 / RATE)
    ]
    world, combat = scene.world, scene.combat
    assert world.health[1] == 0
    assert not world.alive[1] and world.active[1]
    assert world.vel[1].tolist() == [0.0, 0.0, 0.0]
    assert combat.death_time[1] == 9 / RATE  # when it was seen, not when it was judged
    assert combat.counters["kills"] == 1
    assert combat.respawn_tick[1] == 11 + round(RESPAWN_DELAY_S * RATE)
    # The corrected history: the victim is gone from the newest snapshot.
    newest = (scene.history.start + scene.history.count - 1) % scene.history.capacity
    assert scene.history.alive[newest].tolist() == [1, 0, 0, 0]


def test_respawn_is_due_after_the_respawn_delay_in_ticks(backend: str) -> None:
    scene = duel(backend, health=25)
    scene.fire(0, 0, *aim((0.0, 0.0), (10.0, 0.0, 1.2)), claim=9 / RATE)
    scene.step()  # tick 11: killed
    delay = round(RESPAWN_DELAY_S * RATE)
    assert delay == 180
    combat = scene.combat
    assert combat.respawn_due(11 + delay - 1) == []
    assert combat.respawn_due(11 + delay) == [1]
    assert scene.world.health[1] == MAX_HEALTH
    assert math.isnan(combat.death_time[1]) and combat.respawn_tick[1] == -1
    assert combat.respawn_due(11 + delay + 1) == []  # once only


def test_the_respawn_delay_is_configurable() -> None:
    combat = Combat(World(2), RATE, LagCompensation(), respawn_delay=0.5)
    assert combat.respawn_ticks == 30


def test_overkill_damage_stops_health_at_zero(backend: str) -> None:
    scene = duel(backend, health=10)
    scene.fire(0, 0, *aim((0.0, 0.0), (10.0, 0.0, 1.62)), claim=9 / RATE)
    (event,) = scene.step()
    assert (event.damage, event.kill) == (50, True)
    assert scene.world.health[1] == 0


# -- fire rate --------------------------------------------------------------------------------


def shoot(combat: Combat, tick: int, seq: int, buttons: int = BUTTON_FIRE) -> None:
    """Slot 0 fires with input ``seq``, applied by the tick ``tick``."""
    combat.fire(0, seq, buttons, 0.0, 0.0, 0.0, 0.0, None, None, 0.1, tick / RATE)


def test_the_fire_rate_is_counted_in_server_time() -> None:
    combat = Combat(World(2), RATE, LagCompensation())
    combat.world.seat(0, 0.0, 0.0)
    shoot(combat, 10, 10)
    shoot(combat, 11, 11)  # one tick later: refused
    shoot(combat, 15, 15)  # five ticks later: still refused
    assert [s.seq for s in combat.pending] == [10]
    assert combat.counters["shots_rate_limited"] == 2
    shoot(combat, 16, 16)  # six ticks (0.1 s) later at 60 Hz: allowed
    assert [s.seq for s in combat.pending] == [10, 16]
    assert combat.counters["shots_fired"] == 2


def test_inputs_sent_faster_do_not_fire_faster() -> None:
    """Sequence numbers are the client's to choose: inputs far apart in ``seq`` but
    applied in one tick (a catch-up), or in the next, fire one shot."""
    combat = Combat(World(2), RATE, LagCompensation())
    combat.world.seat(0, 0.0, 0.0)
    for seq in range(0, 40, 10):
        shoot(combat, 10, seq)  # one tick's catch-up of inputs 30 sequence numbers apart
    shoot(combat, 11, 1000)
    assert [s.seq for s in combat.pending] == [0]
    assert combat.counters["shots_rate_limited"] == 4


@pytest.mark.parametrize("rate", [20, 30, 60, 64, 128])
@pytest.mark.parametrize("start", [0, 7, 10**6 + 3])
def test_a_client_one_input_per_tick_fires_at_the_weapon_s_rate(rate: int, start: int) -> None:
    """The spacing a client keeps in inputs (``interval_inputs``) is the spacing the server
    accepts in ticks, whatever the rounding of ``tick / rate`` (far into a match too)."""
    assert RIFLE.interval_inputs(60) == 6 and LAUNCHER.interval_inputs(60) == 48
    for weapon in (RIFLE, LAUNCHER):
        combat = Combat(World(2), rate, LagCompensation())
        combat.world.seat(0, 0.0, 0.0)
        spacing = weapon.interval_inputs(rate)
        ticks = [start + k * spacing for k in range(4)]
        for tick in ticks:
            combat.fire(0, tick, weapon.button, 0.0, 0.0, 0.0, 0.0, None, None, 0.1, tick / rate)
            early = tick + spacing - 1  # one tick short of the interval
            combat.fire(0, early, weapon.button, 0.0, 0.0, 0.0, 0.0, None, None, 0.1, early / rate)
        assert [s.seq for s in combat.pending] == ticks
        assert combat.counters["shots_rate_limited"] == 4


def test_each_weapon_has_its_own_cooldown() -> None:
    combat = Combat(World(2), RATE, LagCompensation())
    combat.world.seat(0, 0.0, 0.0)
    shoot(combat, 0, 0, BUTTON_FIRE | BUTTON_ALT_FIRE)
    assert [(s.seq, s.weapon) for s in combat.pending] == [(0, RIFLE), (0, LAUNCHER)]
    shoot(combat, 6, 6, BUTTON_FIRE | BUTTON_ALT_FIRE)
    assert [(s.seq, s.weapon) for s in combat.pending][2:] == [(6, RIFLE)]
    assert combat.counters["shots_rate_limited"] == 1


def test_a_new_seat_does_not_inherit_the_previous_owner_s_cooldown() -> None:
    combat = Combat(World(2), RATE, LagCompensation())
    combat.world.seat(0, 0.0, 0.0)
    shoot(combat, 100, 100)
    combat.seat(0)  # a new player, firing in the same tick
    shoot(combat, 100, 0)
    assert [s.seq for s in combat.pending] == [100, 0]


def test_a_shot_leaves_the_shooter_s_eye_along_its_view(backend: str) -> None:
    scene = duel(backend)
    scene.world.pos[0] = (1.5, -2.0, 0.25)
    scene.fire(0, 0, 0.75, -0.25, claim=0.0)
    (shot,) = scene.combat.pending
    assert shot.origin.tolist() == [1.5, -2.0, 0.25 + EYE_HEIGHT]
    assert shot.direction.tolist() == aim_direction(0.75, -0.25).tolist()
    assert (shot.slot, shot.seq, shot.weapon, shot.claim) == (0, 0, RIFLE, 0.0)


# -- the view time ------------------------------------------------------------------------------


def test_a_claim_beyond_the_rewind_cap_is_capped_from_the_arrival_and_counted(
    backend: str,
) -> None:
    scene = duel(backend)
    scene.record(30)
    scene.fire(0, 0, *aim((0.0, 0.0), (10.0, 0.0, 1.2)), claim=0.0, arrival=29.5 / RATE)
    (event,) = scene.step()  # resolved at tick 31: the cap still counts from the arrival
    assert event.view_time == 29.5 / RATE - scene.rules.max_rewind
    assert (event.result, event.judged) == ("hit", "capped")
    assert scene.combat.counters["view_time_capped"] == 1
    assert scene.combat.counters["view_time_clamped"] == 0


def test_a_claim_older_than_the_link_allows_is_clamped_and_counted(backend: str) -> None:
    scene = duel(backend)
    scene.record(20)
    arrival, link = 20.5 / RATE, LinkEstimate(0.1, 0.0)
    aim_at = aim((0.0, 0.0), (10.0, 0.0, 1.2))
    scene.fire(0, 0, *aim_at, claim=0.1, link=link, arrival=arrival)
    (event,) = scene.step()
    # earliest: arrival - rtt/2 - max(interp, rtt/2), less one tick of slack
    assert event.view_time == arrival - 0.05 - 0.1 - 1 / RATE
    assert (event.judged, event.shooter_rtt) == ("clamped", 0.1)
    assert scene.combat.counters["view_time_clamped"] == 1


def test_a_claim_newer_than_the_newest_snapshot_held_is_clamped_to_it(backend: str) -> None:
    scene = duel(backend)
    scene.record(20)
    scene.fire(0, 0, 0.0, 0.5, claim=20 / RATE, ack_time=18 / RATE)
    (event,) = scene.step()
    assert (event.view_time, event.judged) == (18 / RATE, "clamped")


def test_a_claim_inside_the_window_is_taken_and_not_counted(backend: str) -> None:
    scene = duel(backend)
    scene.record(20)
    arrival, claim = 20.5 / RATE, 0.25  # the window: [20/60 - 0.1 - 1/60, 20/60]
    scene.fire(
        0, 0, 0.0, 0.5, claim=claim, link=LinkEstimate(0.1, 0.0), arrival=arrival,
        ack_time=20 / RATE,
    )  # fmt: skip
    (event,) = scene.step()
    assert (event.view_time, event.judged) == (claim, "claimed")
    assert event.origin == (0.0, 0.0, EYE_HEIGHT)
    assert not any(k.startswith("view_time_") for k in scene.combat.counters)


def test_the_target_is_rewound_to_the_view_time(backend: str) -> None:
    scene = Scene(backend)
    scene.seat(0, 0.0, 0.0)
    scene.seat(1, 10.0, 0.0)
    # The target stood at y = 0 until tick 8, then ran to y = 3: the shooter saw it at y = 0.
    scene.record(10, lambda t: np.array([[0, 0, 0], [10, 0 if t <= 8 else 3, 0], [0] * 3, [0] * 3]))
    yaw, pitch = aim((0.0, 0.0), (10.0, 0.0, 1.2))
    scene.fire(0, 0, yaw, pitch, claim=8 / RATE)
    scene.fire(0, 6, yaw, pitch, claim=10 / RATE)
    events = scene.step(lambda t: np.array([[0, 0, 0], [10, 3, 0], [0] * 3, [0] * 3]))
    assert [(e.seq, e.result, e.victim) for e in events] == [
        (0, "hit", 1),
        (6, "world", -1),  # past where the target stood, into the floor
    ]


# -- the ordered story ------------------------------------------------------------------------


def test_outcomes_are_applied_in_view_time_order(backend: str) -> None:
    scene = duel(backend)
    scene.seat(2, 0.0, 2.0)
    scene.fire(0, 0, *aim((0.0, 0.0), (10.0, 0.0, 1.2)), claim=9.5 / RATE)
    scene.fire(2, 0, *aim((0.0, 2.0), (10.0, 0.0, 1.2)), claim=8.5 / RATE)
    events = scene.step()
    assert [(e.shooter, e.view_time) for e in events] == [(2, 8.5 / RATE), (0, 9.5 / RATE)]


def test_a_hit_on_a_victim_already_dead_in_the_story_does_no_damage(backend: str) -> None:
    scene = duel(backend, health=50)
    scene.seat(2, 0.0, 2.0)
    scene.fire(0, 0, *aim((0.0, 0.0), (10.0, 0.0, 1.62)), claim=8 / RATE)  # kills first
    scene.fire(2, 0, *aim((0.0, 2.0), (10.0, 0.0, 1.2)), claim=9 / RATE)
    events = scene.step()
    assert events == [
        shot_event(victim=1, hitbox=HITBOX_HEAD, damage=50, kill=True, view_time=8 / RATE),
        shot_event(
            shooter=2, victim=1, hitbox=HITBOX_TORSO, damage=0, view_time=9 / RATE,
            origin=(0.0, 2.0, EYE_HEIGHT),
        ),
    ]  # fmt: skip
    assert scene.world.health[1] == 0
    assert scene.combat.death_time[1] == 8 / RATE
    assert scene.combat.counters["hits_on_dead"] == 1
    assert scene.combat.counters["kills"] == 1


def test_a_hit_on_a_victim_that_died_in_an_earlier_tick_does_no_damage(backend: str) -> None:
    scene = duel(backend, health=50)
    scene.seat(2, 0.0, 2.0)
    head = aim((0.0, 0.0), (10.0, 0.0, 1.62))
    scene.fire(0, 0, *head, claim=10 / RATE)
    scene.step()  # tick 11: killed at 10/60
    # A slower shooter saw it alive (before its death): the geometry hits, nothing is dealt.
    scene.fire(2, 0, *aim((0.0, 2.0), (10.0, 0.0, 1.2)), claim=9 / RATE)
    (event,) = scene.step()
    assert (event.result, event.victim, event.damage, event.kill) == (
        "hit",
        1,
        0,
        False,
    )
    assert scene.combat.counters["hits_on_dead"] == 1


def test_a_shooter_killed_in_an_earlier_tick_cannot_fire_after_its_death(backend: str) -> None:
    scene = duel(backend, health=50)
    scene.world.health[0] = 50
    scene.fire(0, 0, *aim((0.0, 0.0), (10.0, 0.0, 1.62)), claim=9 / RATE)
    scene.step()  # tick 11: slot 1 dies at 9/60
    scene.fire(1, 0, *aim((10.0, 0.0), (0.0, 0.0, 1.62)), claim=10 / RATE)
    events = scene.step()
    rejected = shot_event(
        shooter=1, result="rejected", view_time=10 / RATE, origin=(10.0, 0.0, EYE_HEIGHT),
        traded=True,
    )  # fmt: skip
    assert events == [rejected]
    assert scene.world.health[0] == 50 and scene.world.alive[0]
    assert scene.combat.counters["shots_rejected_dead"] == 1


def test_a_shot_fired_in_a_view_before_its_shooter_s_death_counts_from_where_it_fell(
    backend: str,
) -> None:
    """Slot 1 dies at 9/60; its input that fired in the world of 8/60 is applied after
    that: the shot counts (a trade), from the eye of a player that no longer moves, and
    its event says so (``traded``), so that a client that moved on knows why."""
    scene = duel(backend, health=50)
    scene.world.health[0] = 50
    scene.fire(0, 0, *aim((0.0, 0.0), (10.0, 0.0, 1.62)), claim=9 / RATE)
    scene.step()  # tick 11: slot 1 dies at 9/60
    scene.fire(1, 0, *aim((10.0, 0.0), (0.0, 0.0, 1.62)), claim=8 / RATE)
    (event,) = scene.step()
    assert (event.shooter, event.result, event.victim, event.kill) == (1, "hit", 0, True)
    assert event.traded and event.origin == (10.0, 0.0, EYE_HEIGHT)


def mutual_kill(
    backend: str, trade_window: float, t_a: float, t_b: float
) -> tuple[Scene, list[dict[str, Any]]]:
    """Slots 0 and 1 head-shoot each other in one tick; each has 50 health left."""
    scene = duel(backend, health=50, rules=LagCompensation(trade_window=trade_window))
    scene.world.health[0] = 50
    scene.fire(0, 0, *aim((0.0, 0.0), (10.0, 0.0, 1.62)), claim=t_a)
    scene.fire(1, 0, *aim((10.0, 0.0), (0.0, 0.0, 1.62)), claim=t_b)
    return scene, scene.step()


@pytest.mark.parametrize("trade_window", [0.0, 0.5 / RATE])
def test_in_a_mutual_kill_in_one_tick_the_earlier_view_time_wins(
    backend: str, trade_window: float
) -> None:
    scene, events = mutual_kill(backend, trade_window, t_a=8 / RATE, t_b=9 / RATE)
    by_shooter = {e.shooter: e for e in events}
    assert by_shooter[0].kill is True
    assert by_shooter[1].result == "rejected"
    assert scene.world.alive[0] and scene.world.health[0] == 50
    assert not scene.world.alive[1]
    assert scene.combat.counters["shots_rejected_dead"] == 1


def test_in_a_mutual_kill_within_the_trade_window_both_die(backend: str) -> None:
    scene, events = mutual_kill(backend, trade_window=0.05, t_a=8 / RATE, t_b=9 / RATE)
    assert [(e.shooter, e.kill) for e in events] == [(0, True), (1, True)]
    assert not scene.world.alive[0] and not scene.world.alive[1]
    assert scene.combat.death_time[1] == 8 / RATE and scene.combat.death_time[0] == 9 / RATE


def test_in_a_mutual_kill_at_the_same_view_time_both_die(backend: str) -> None:
    scene, events = mutual_kill(backend, trade_window=0.0, t_a=9 / RATE, t_b=9 / RATE)
    assert [(e.shooter, e.kill) for e in events] == [(0, True), (1, True)]
    assert not scene.world.alive[0] and not scene.world.alive[1]


# -- projectiles ------------------------------------------------------------------------------


def test_a_projectile_that_hit_in_the_past_reports_in_the_tick_it_resolves(backend: str) -> None:
    scene = Scene(backend)
    scene.seat(0, 0.0, 0.0)
    scene.seat(1, 4.5, 0.0)
    scene.record(20)
    claim = 11 / RATE  # 0.15 s ago; the flight to the target takes about 0.1 s
    scene.fire(0, 0, *aim((0.0, 0.0), (4.5, 0.0, 1.1)), claim=claim, buttons=BUTTON_ALT_FIRE)
    events = scene.step()
    assert events == [
        shot_event(
            weapon=LAUNCHER.id,
            victim=1,
            hitbox=HITBOX_TORSO,
            damage=round(LAUNCHER.damage),
            view_time=claim,
        )
    ]
    assert scene.world.health[1] == MAX_HEALTH - 60
    assert scene.combat.flying == []


def test_a_projectile_still_flying_continues_next_tick_and_hits_later(backend: str) -> None:
    scene = Scene(backend)
    scene.seat(0, 0.0, 0.0)
    scene.seat(1, 20.0, 0.0)
    scene.record(10)
    pitch = math.asin(0.0277)  # arcs down into the torso at 20 m
    flight = (20.0 - 0.22) / (LAUNCHER.speed * math.cos(pitch))  # to the torso's front face
    height = EYE_HEIGHT + LAUNCHER.speed * math.sin(pitch) * flight - 4.905 * flight**2
    assert 1.0 < height < 1.38  # the torso cylinder's straight part
    claim = 11 / RATE
    scene.fire(0, 0, 0.0, pitch, claim=claim, buttons=BUTTON_ALT_FIRE, arrival=claim)
    hit_tick = math.ceil((claim + flight) * RATE)
    assert hit_tick == 38
    for tick in range(11, hit_tick):
        assert scene.step() == [], tick
        assert len(scene.combat.flying) == 1
        assert scene.world.health[1] == MAX_HEALTH
    assert scene.step() == [
        shot_event(weapon=LAUNCHER.id, victim=1, hitbox=HITBOX_TORSO, damage=60, view_time=claim)
    ]
    assert scene.combat.flying == []
    assert scene.world.health[1] == MAX_HEALTH - 60


def dodge_scene(backend: str, dodges: bool) -> list[dict[str, Any]]:
    scene = Scene(backend, rules=LagCompensation(max_rewind=1.0))
    scene.seat(0, 0.0, 0.0)
    scene.seat(1, 9.0, 0.0)

    def positions(tick: int) -> np.ndarray:
        y = 3.0 if dodges and tick > 20 else 0.0  # steps aside 0.35 s into the match
        return np.array([[0.0, 0.0, 0.0], [9.0, y, 0.0], [0.0] * 3, [0.0] * 3])

    scene.record(59, positions)
    # Fired at 0.2 s; it needs about 0.2 s to reach x = 9.
    scene.fire(0, 0, *aim((0.0, 0.0), (9.0, 0.0, 1.2)), claim=12 / RATE, buttons=BUTTON_ALT_FIRE)
    return scene.step(positions)


def test_a_projectile_misses_a_target_that_dodged_before_it_arrived(backend: str) -> None:
    events = dodge_scene(backend, dodges=True)
    # It flies on past the target's old place and lands on the floor, in the past too.
    assert [(e.result, e.victim, e.damage) for e in events] == [("world", -1, 0)]


def test_a_projectile_hits_the_same_target_when_it_stays(backend: str) -> None:
    events = dodge_scene(backend, dodges=False)
    assert [(e.result, e.victim) for e in events] == [("hit", 1)]


def test_a_projectile_expires_after_its_lifetime(backend: str) -> None:
    scene = Scene(backend)
    scene.seat(0, 0.0, 0.0)
    scene.record(10)
    scene.fire(0, 0, 0.0, math.pi / 2 - 1e-3, claim=10 / RATE, buttons=BUTTON_ALT_FIRE)
    # Straight up at 45 m/s: it rises for 4.6 s, longer than its 3 s life.
    results = []
    for _ in range(round(LAUNCHER.lifetime * RATE) + 1):
        results.extend(scene.step())
    assert [(e.result, e.view_time) for e in results] == [("miss", 10 / RATE)]
    assert scene.combat.flying == []


def test_a_flight_is_judged_no_further_than_the_newest_snapshot(backend: str) -> None:
    """With a snapshot every other tick, a tick between two holds the players where the
    last snapshot showed them, while the clients see them move on: a flight is followed
    only as far as the newest snapshot, and on at the next one's tick."""
    scene = Scene(backend)
    scene.seat(0, 0.0, 0.0)
    scene.seat(1, 20.0, 0.0)
    scene.record(10)
    judged_until: list[tuple[float, float, float]] = []  # (end asked, newest snapshot, now)
    resolve = scene.validator.resolve_projectiles

    def spy(history: History, shots: Any, *args: Any, **kwargs: Any) -> Any:
        newest = (history.start[0] + history.count[0] - 1) % history.times.shape[1]
        now = scene.tick / RATE
        judged_until.extend((end, history.times[0, newest], now) for end in shots.end_time)
        return resolve(history, shots, *args, **kwargs)

    scene.validator.resolve_projectiles = spy  # type: ignore[method-assign]
    pitch = math.asin(0.0277)  # arcs down into the torso at 20 m (as in the test above)
    claim = 10 / RATE
    scene.fire(0, 0, 0.0, pitch, claim=claim, buttons=BUTTON_ALT_FIRE, arrival=claim)
    events: list[Any] = []
    for tick in range(11, 50):
        scene.tick = tick  # a snapshot on even ticks only, as at 30 snapshots a second
        if tick % 2 == 0:
            world = scene.world
            scene.history.append(tick, tick / RATE, world.pos, world.active & world.alive)
        events.extend(scene.resolve())
    assert [(e.result, e.victim, e.hitbox) for e in events] == [("hit", 1, HITBOX_TORSO)]
    assert judged_until and all(end <= newest for end, newest, _ in judged_until)
    assert any(end < now for end, _, now in judged_until)  # the ticks between waited


# -- projectiles in flight, replicated ----------------------------------------------------


def test_a_projectile_row_from_before_the_trade_flag_restores_as_not_traded() -> None:
    """A checkpoint written by a node from before the trade flag (or its stream during a
    rolling upgrade) holds 11 values a projectile: it restores, not traded; a row of any
    other length is refused as a state mismatch, and nothing changes."""
    judged = Judgement(1.25, ViewTimeVerdict.CLAMPED, np.array([1.0, 2.0, 1.6]), 40.0, True)
    flying = _Projectile(
        3, 7, LAUNCHER, np.array([1.0, 2.0, 3.0]), np.array([4.0, 5.0, 6.0]), 1.5, 3.0, judged
    )
    row = flying.row()
    assert _Projectile.from_row(row).row() == row
    old = _Projectile.from_row(row[:-1])
    assert old.judged.traded is False and old.row() == [*row[:-1], False]
    combat = Combat(World(4), 60, LagCompensation())
    state = combat.export_state()
    combat.import_state({**state, "flying": [row[:-1]]})
    assert [p.row() for p in combat.flying] == [[*row[:-1], False]]
    for bad in (row[:-2], [*row, 0]):
        with pytest.raises(StateMismatch, match="projectiles in flight"):
            combat.import_state({**state, "flying": [bad]})
        assert [p.row() for p in combat.flying] == [[*row[:-1], False]]
