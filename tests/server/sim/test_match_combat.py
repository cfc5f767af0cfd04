"""Combat inside the match's tick: fire inputs, shot origins, kills, deaths and respawns."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from server.sim.hitreg import HitValidator, make_validator
from server.sim.match import Match, MatchConfig
from server.sim.world import MAX_HEALTH
from shared.arena_map import default_map
from shared.hitbox import HITBOX_HEAD
from shared.movement import BUTTON_FIRE, step
from shared.protocol import (
    ENTITY_FLAG_ALIVE,
    InputMessage,
    RespawnEvent,
    ShotEvent,
    decode_server,
)
from shared.protocol.inputs import quantize_angle
from shared.weapons import (
    BUTTON_ALT_FIRE,
    EYE_HEIGHT,
    LAUNCHER,
    RESPAWN_DELAY_S,
    aim_direction,
)
from tests.server.frames import players_shown, snapshot_for

ARENA = default_map()
RATE = 60
DT = 1.0 / RATE
SHOOTER, VICTIM = 0, 1
# Joins spawn round-robin: the shooter at (-26, -26), the victim 52 m north at (-26, 26),
# with nothing between them. Aim along +y at the centre of the head.
# Kept to the protocol's steps, as the node keeps an input's angles (a bot aims so).
HEAD_SHOT = (
    quantize_angle(math.pi / 2, math.pi),
    quantize_angle(math.atan2(1.62 - EYE_HEIGHT, 52.0), math.pi / 2),
)


class SpyValidator:
    """Delegates to a real validator and keeps every hitscan batch it was given."""

    def __init__(self, inner: HitValidator) -> None:
        self.inner = inner
        self.hitscan: list[Any] = []

    def resolve_hitscan(self, history: Any, shots: Any) -> Any:
        self.hitscan.append(shots)
        return self.inner.resolve_hitscan(history, shots)

    def resolve_projectiles(self, history: Any, shots: Any) -> Any:
        return self.inner.resolve_projectiles(history, shots)


@pytest.fixture(scope="module", params=["reference", "cpu"])
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


def new_match(backend: str = "reference", **config: Any) -> Match:
    validator = make_validator(backend, box_min=ARENA.box_min, box_max=ARENA.box_max)
    match = Match(MatchConfig(ARENA, tick_rate=RATE, max_players=4, **config), validator=validator)
    assert match.join("shooter", 0.1).slot == SHOOTER
    assert match.join("victim", 0.1).slot == VICTIM
    assert match.world.pos[:2].tolist() == [[-26.0, -26.0, 0.0], [-26.0, 26.0, 0.0]]
    return match


def send(
    match: Match,
    slot: int,
    seq: int,
    buttons: int = 0,
    move: tuple[float, float] = (0.0, 0.0),
    aim: tuple[float, float] = (0.0, 0.0),
) -> None:
    """One input that claims to have seen the newest tick, arriving now."""
    message = InputMessage(
        seq=seq,
        tick=seq,
        move=move,
        yaw=aim[0],
        pitch=aim[1],
        buttons=buttons,
        view_time=match.server_time,
        ack_tick=-1,
    )
    assert match.receive_input(slot, message, arrival=match.server_time).usable


def kill_victim(match: Match) -> int:
    """Two head shots six inputs apart (50 + 50); returns the tick of the kill."""
    for seq in range(7):
        send(match, SHOOTER, seq, BUTTON_FIRE if seq in (0, 6) else 0, aim=HEAD_SHOT)
        result = match.tick()
        shots = [e for e in result.events if e.KIND == "shot"]
        if seq in (0, 6):
            assert [(e.result, e.hitbox, e.damage) for e in shots] == [("hit", HITBOX_HEAD, 50)]
    assert shots[0].kill is True
    assert not match.world.alive[VICTIM]
    return result.tick


def lob_pitch(distance: float, height: float) -> float:
    """The launch pitch whose arc is at ``height`` after ``distance`` metres (bisection)."""

    def height_at(pitch: float) -> float:
        t = distance / (LAUNCHER.speed * math.cos(pitch))
        return EYE_HEIGHT + LAUNCHER.speed * math.sin(pitch) * t - 0.5 * LAUNCHER.gravity * t * t

    low, high = -0.5, 0.5
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if height_at(middle) < height else (low, middle)
    return low


def newest_alive(match: Match) -> list[int]:
    ring = match.history
    return ring.alive[(ring.start + ring.count - 1) % ring.capacity].tolist()


def test_a_shot_leaves_the_eye_after_that_input_s_movement() -> None:
    match = new_match()
    spy = SpyValidator(match.validator)
    match.validator = spy  # type: ignore[assignment]
    match.tick()
    before_pos, before_vel = match.world.pos[:1].copy(), match.world.vel[:1].copy()
    send(match, SHOOTER, 0, BUTTON_FIRE, move=(1.0, 0.0), aim=HEAD_SHOT)
    match.tick()
    moved, _ = step(before_pos, before_vel, np.array([[1.0, 0.0]]), np.array([2]), DT, ARENA)
    assert moved[0, 0] > before_pos[0, 0]
    assert match.world.pos[SHOOTER].tolist() == moved[0].tolist()
    (batch,) = spy.hitscan
    assert batch.origin.tolist() == [(moved[0] + (0.0, 0.0, EYE_HEIGHT)).tolist()]
    assert batch.direction.tolist() == [aim_direction(*HEAD_SHOT).tolist()]
    assert batch.shooter.tolist() == [SHOOTER]


def test_a_shot_from_a_caught_up_input_leaves_after_its_own_movement() -> None:
    match = new_match(input_max_depth=1)  # every queued input is applied in the next tick
    spy = SpyValidator(match.validator)
    match.validator = spy  # type: ignore[assignment]
    match.tick()
    pos, vel = match.world.pos[:1].copy(), match.world.vel[:1].copy()
    send(match, SHOOTER, 0, 0, move=(1.0, 0.0))
    send(match, SHOOTER, 1, BUTTON_FIRE, move=(0.0, 1.0), aim=HEAD_SHOT)
    match.tick()
    pos, vel = step(pos, vel, np.array([[1.0, 0.0]]), np.array([0]), DT, ARENA)
    pos, vel = step(pos, vel, np.array([[0.0, 1.0]]), np.array([2]), DT, ARENA)
    (batch,) = spy.hitscan
    assert batch.origin.tolist() == [(pos[0] + (0.0, 0.0, EYE_HEIGHT)).tolist()]
    assert match.world.pos[SHOOTER].tolist() == pos[0].tolist()


def test_a_repeated_input_does_not_fire_again() -> None:
    match = new_match()
    send(match, SHOOTER, 0, BUTTON_FIRE, aim=(0.0, 0.5))
    assert [e.result for e in match.tick().events if e.KIND == "shot"] == ["miss"]
    for _ in range(10):  # no new input: the last one repeats for movement only
        assert [e for e in match.tick().events if e.KIND == "shot"] == []
    assert match.combat.counters["shots_fired"] == 1


def test_the_snapshot_carries_the_shot_s_result(backend: str) -> None:
    match = new_match(backend)
    match.tick()
    send(match, SHOOTER, 0, BUTTON_FIRE, aim=HEAD_SHOT)
    result = match.tick()
    expected = ShotEvent(
        shooter=SHOOTER,
        seq=0,
        weapon=0,
        result="hit",
        victim=VICTIM,
        hitbox=HITBOX_HEAD,
        damage=50,
        kill=False,
        view_time=round(1 / RATE, 6),  # the claim, kept to the microsecond
        origin=tuple((match.world.pos[SHOOTER] + (0.0, 0.0, EYE_HEIGHT)).tolist()),
        tick=result.tick,  # the tick that judged it
    )
    assert result.events == [expected]
    for slot in (SHOOTER, VICTIM):
        snapshot = decode_server(snapshot_for(match, result, slot))
        assert snapshot.events == (expected,)
        records = players_shown(match, result, slot)
        assert records["health"].tolist() == [MAX_HEALTH, MAX_HEALTH - 50]


def test_a_launcher_shot_resolves_in_a_later_tick_s_snapshot(backend: str) -> None:
    match = new_match(backend)
    match.tick()
    pitch = lob_pitch(52.0 - 0.22, 1.2)
    send(match, SHOOTER, 0, BUTTON_ALT_FIRE, aim=(math.pi / 2, pitch))
    fired_at = match.tick().tick
    ticks = {}
    for _ in range(90):  # 52 m at 45 m/s: about 70 ticks of flight
        result = match.tick()
        shots = [e for e in result.events if e.KIND == "shot"]
        if shots:
            ticks[result.tick] = shots
    ((tick, shots),) = ticks.items()
    claim = (fired_at - 1) / RATE  # the input claimed the tick before it was applied
    flight = (52.0 - 0.22) / (LAUNCHER.speed * math.cos(pitch))  # to the torso's face
    assert tick == math.ceil((claim + flight) * RATE) == 71
    assert [(e.weapon, e.result, e.victim) for e in shots] == [(1, "hit", VICTIM)]


def test_a_kill_shows_in_the_snapshot_and_corrects_the_history(backend: str) -> None:
    match = new_match(backend)
    tick = kill_victim(match)
    # The snapshot of tick T was taken with the victim alive; the kill corrected it.
    assert match.history.newest_tick == tick
    assert newest_alive(match)[:2] == [1, 0]
    ring = match.history
    before = (ring.start + len(ring) - 2) % ring.capacity  # the snapshot of tick T - 1
    assert int(ring.ticks[before]) == tick - 1
    assert ring.alive[before][:2].tolist() == [1, 1]
    records = players_shown(match, match.tick(), SHOOTER)
    assert records["health"].tolist() == [MAX_HEALTH, 0]
    assert (records["flags"] & ENTITY_FLAG_ALIVE).tolist() == [1, 0]


def test_a_dead_player_does_not_move_while_its_inputs_keep_arriving() -> None:
    match = new_match()
    kill_victim(match)
    where = match.world.pos[VICTIM].copy()
    for seq in range(30):
        send(match, VICTIM, seq, 1, move=(1.0, 0.0))  # running and jumping
        match.tick()
        assert match.world.pos[VICTIM].tolist() == where.tolist()
        assert match.world.vel[VICTIM].tolist() == [0.0, 0.0, 0.0]
    assert match.seats[VICTIM].inputs.acked == 29  # they were applied, just not to a body


def test_a_dead_player_s_shots_are_rejected() -> None:
    match = new_match()
    kill_victim(match)
    send(match, VICTIM, 0, BUTTON_FIRE, aim=(-math.pi / 2, 0.0))
    (event,) = match.tick().events
    assert (event.shooter, event.result, event.damage) == (VICTIM, "rejected", 0)
    assert match.world.health[SHOOTER] == MAX_HEALTH


def test_the_dead_respawn_at_a_spawn_point_with_full_health(backend: str) -> None:
    match = new_match(backend)
    killed = kill_victim(match)
    delay = round(RESPAWN_DELAY_S * RATE)
    for _ in range(delay - 1):
        result = match.tick()
        assert not [e for e in result.events if e.KIND == "respawn"]
        assert not match.world.alive[VICTIM]
    result = match.tick()
    assert result.tick == killed + delay
    assert RespawnEvent(VICTIM) in result.events
    assert match.world.alive[VICTIM] and match.world.active[VICTIM]
    assert match.world.health[VICTIM] == MAX_HEALTH
    assert match.world.pos[VICTIM].tolist() == [*ARENA.spawn_point(2), 0.0]
    assert newest_alive(match)[:2] == [1, 1]
    assert math.isnan(match.combat.death_time[VICTIM])


def test_a_respawned_player_moves_again() -> None:
    match = new_match()
    kill_victim(match)
    for _ in range(round(RESPAWN_DELAY_S * RATE)):
        match.tick()
    spawn = match.world.pos[VICTIM].copy()
    send(match, VICTIM, 0, move=(1.0, 0.0))
    match.tick()
    assert match.world.pos[VICTIM, 0] > spawn[0]
