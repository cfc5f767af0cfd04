"""How bots aim and judge their own shots, and how they pair them with the server's verdicts."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from client_sim.brain import Brain
from client_sim.fairness import shot_detail
from client_sim.interpolation import InterpolatedView, SnapshotBuffer
from client_sim.marksman import (
    CHEST_HEIGHT,
    AimSkill,
    ShotRecord,
    aim_at,
    fly_projectile,
    hitscan_verdict,
)
from client_sim.shooting import ShotSummary, SwarmShooting
from shared.arena_map import default_map, parse_map
from shared.hitbox import HIT_PLAYER, HITBOX_TORSO, ray_hit_player
from shared.movement import BUTTON_FIRE
from shared.protocol import ENTITY_FLAG_ALIVE, RespawnEvent, ShotEvent
from shared.protocol.inputs import ANGLE_STEP, quantize_angle
from shared.weapons import BUTTON_ALT_FIRE, EYE_HEIGHT, LAUNCHER, RIFLE, aim_direction
from tests.records import entity_records as records_of

ARENA = default_map()
RATE = 60


def open_arena(boxes: list[dict[str, Any]] | None = None):
    return parse_map(
        {
            "name": "open",
            "bounds": {"min": [-50.0, -50.0], "max": [50.0, 50.0]},
            "boxes": boxes or [],
            "spawns": [[0.0, 0.0]],
        }
    )


WALL = {"kind": "wall", "min": [4.0, -2.0, 0.0], "max": [5.0, 2.0, 3.0]}


# -- aiming --------------------------------------------------------------------------------------


coordinate = st.floats(-40.0, 40.0)


@given(ex=coordinate, ey=coordinate, ez=st.floats(0.0, 3.0), tx=coordinate, ty=coordinate)
def test_aim_without_error_points_exactly_at_the_chest(
    ex: float, ey: float, ez: float, tx: float, ty: float
) -> None:
    eye, feet = np.array([ex, ey, ez]), np.array([tx, ty, 0.0])
    to = feet + (0.0, 0.0, CHEST_HEIGHT) - eye
    distance = float(np.linalg.norm(to))
    if math.hypot(to[0], to[1]) < 1e-3:
        return  # straight up or down: the yaw is arbitrary
    yaw, pitch = aim_at(eye, feet, 0.0, np.random.default_rng(0))
    assert -math.pi <= yaw < math.pi
    assert -math.pi / 2 <= pitch <= math.pi / 2
    assert (yaw / ANGLE_STEP).is_integer() and (pitch / ANGLE_STEP).is_integer()
    reached = eye + aim_direction(yaw, pitch) * distance
    # Off the chest by the angles' steps at most (one at the ranges' ends), no more.
    off = float(np.linalg.norm(reached - feet - (0.0, 0.0, CHEST_HEIGHT)))
    assert off <= 2 * ANGLE_STEP * distance + 1e-9 * max(distance, 1)


def test_aim_straight_behind_wraps_the_yaw_to_minus_pi() -> None:
    yaw, pitch = aim_at(
        np.array([0.0, 0.0, CHEST_HEIGHT]),
        np.array([-5.0, 0.0, 0.0]),
        0.0,
        np.random.default_rng(0),
    )
    assert (yaw, pitch) == (quantize_angle(-math.pi, math.pi), 0.0)  # one step inside


def test_aim_error_adds_one_gaussian_draw_to_yaw_and_then_to_pitch() -> None:
    eye, feet = np.array([0.0, 0.0, EYE_HEIGHT]), np.array([10.0, 10.0, 0.0])
    yaw0, pitch0 = aim_at(eye, feet, 0.0, np.random.default_rng(0))
    draws = np.random.default_rng(42)
    d_yaw, d_pitch = draws.normal(0.0, 0.05), draws.normal(0.0, 0.05)
    yaw, pitch = aim_at(eye, feet, 0.05, np.random.default_rng(42))
    to = feet + (0.0, 0.0, CHEST_HEIGHT) - eye
    yaw_exact, pitch_exact = math.atan2(to[1], to[0]), math.atan2(to[2], math.hypot(*to[:2]))
    assert (yaw0, pitch0) == (
        quantize_angle(yaw_exact, math.pi),
        quantize_angle(pitch_exact, math.pi / 2),
    )
    # Each draw is added to the exact angle; the sum is kept to the step.
    assert yaw == quantize_angle(yaw_exact + d_yaw, math.pi)
    assert pitch == quantize_angle(pitch_exact + d_pitch, math.pi / 2)


@pytest.mark.parametrize("seed", range(10))
def test_a_huge_aim_error_keeps_the_angles_in_range(seed: int) -> None:
    yaw, pitch = aim_at(np.zeros(3), np.array([3.0, 4.0, 0.0]), 50.0, np.random.default_rng(seed))
    assert -math.pi <= yaw < math.pi
    assert -math.pi / 2 <= pitch <= math.pi / 2


def test_aim_skill_rejects_nonsense() -> None:
    for bad in ({"error_deg": -1.0}, {"fire_rate_hz": 0.0}, {"launcher_share": 1.5}):
        with pytest.raises(ValueError):
            AimSkill(**bad)


# -- the shooter's own verdicts -----------------------------------------------------------------


def chest_aim(eye: np.ndarray, feet: tuple[float, float, float]) -> tuple[float, float]:
    return aim_at(eye, np.array(feet), 0.0, np.random.default_rng(0))


def test_hitscan_verdict_names_the_first_player_in_line_by_id() -> None:
    eye = np.array([0.0, 0.0, EYE_HEIGHT])
    ids = np.array([5, 9])
    positions = np.array([[10.0, 0.0, 0.0], [20.0, 0.0, 0.0]])
    yaw, pitch = chest_aim(eye, (20.0, 0.0, 0.0))
    arena = open_arena()
    both = np.array([True, True])
    assert hitscan_verdict(eye, yaw, pitch, ids, positions, both, arena) == (5, HITBOX_TORSO)
    only_far = np.array([False, True])
    assert hitscan_verdict(eye, yaw, pitch, ids, positions, only_far, arena)[0] == 9
    nobody = np.array([False, False])
    assert hitscan_verdict(eye, yaw, pitch, ids, positions, nobody, arena) == (-1, 0)


def test_hitscan_verdict_is_stopped_by_a_wall() -> None:
    eye = np.array([0.0, 0.0, EYE_HEIGHT])
    yaw, pitch = chest_aim(eye, (10.0, 0.0, 0.0))
    args = (np.array([5]), np.array([[10.0, 0.0, 0.0]]), np.array([True]))
    assert hitscan_verdict(eye, yaw, pitch, *args, open_arena())[0] == 5
    assert hitscan_verdict(eye, yaw, pitch, *args, open_arena([WALL])) == (-1, 0)


def angles(limit: float) -> st.SearchStrategy[float]:
    """Angles in [-limit, limit], none within 1e-200 of 0 but 0 itself: shared.hitbox divides
    by the direction's components, and a tiny one overflows to inf (the right answer, but a
    RuntimeWarning, which is an error under this project's pytest settings)."""
    return st.just(0.0) | st.floats(1e-200, limit) | st.floats(-limit, -1e-200)


@settings(max_examples=60, deadline=None)
@given(
    data=st.data(),
    n=st.integers(1, 6),
    yaw=angles(math.pi),
    pitch=angles(0.3),
)
def test_hitscan_verdict_agrees_with_the_shared_ray_test(
    data: st.DataObject, n: int, yaw: float, pitch: float
) -> None:
    xy = st.floats(-29.0, 29.0)
    eye = np.array([data.draw(xy), data.draw(xy), EYE_HEIGHT])
    positions = np.array([[data.draw(xy), data.draw(xy), 0.0] for _ in range(n)])
    present = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    ids = np.array(data.draw(st.lists(st.integers(0, 299), min_size=n, max_size=n, unique=True)))
    if data.draw(st.booleans()):  # aim at somebody, so hits are common
        yaw, pitch = chest_aim(eye, tuple(positions[data.draw(st.integers(0, n - 1))]))
    hit = ray_hit_player(
        eye,
        aim_direction(yaw, pitch),
        RIFLE.max_range,
        positions,
        ARENA.box_min,
        ARENA.box_max,
        present,
    )
    expected = (int(ids[hit.victim]), hit.hitbox) if hit.kind == HIT_PLAYER else (-1, 0)
    assert hitscan_verdict(eye, yaw, pitch, ids, positions, present, ARENA) == expected


def flight(
    target: list[tuple[float, float, float]] | None = None,
    moved_after: float | None = None,
    arena: Any = None,
) -> tuple[int, int]:
    """A launcher shot from (0, 0) at a target 9 m east, through 1 s of rendered frames."""
    eye = np.array([0.0, 0.0, EYE_HEIGHT])
    yaw, pitch = chest_aim(eye, (9.0, 0.0, 0.2))  # aim high: it drops about 0.2 m
    times = np.arange(61) / RATE
    positions = np.zeros((61, 1, 3))
    positions[:, 0] = (9.0, 0.0, 0.0)
    if moved_after is not None:
        positions[times > moved_after, 0] = (9.0, 3.0, 0.0)
    return fly_projectile(
        eye,
        aim_direction(yaw, pitch) * LAUNCHER.speed,
        LAUNCHER.gravity,
        0.0,
        LAUNCHER.lifetime,
        times,
        positions,
        np.ones((61, 1), dtype=bool),
        arena or open_arena(),
        LAUNCHER.flight_step,
    )


def test_a_projectile_hits_a_stationary_target() -> None:
    assert flight() == (0, HITBOX_TORSO)


def test_a_projectile_misses_a_target_that_moved_out_of_its_path() -> None:
    assert flight(moved_after=0.1) == (-1, 0)  # it needs 0.2 s to get there


def test_a_projectile_stops_at_a_wall() -> None:
    assert flight(arena=open_arena([WALL])) == (-1, 0)


def test_a_projectile_with_no_rendered_frames_hits_nothing() -> None:
    result = fly_projectile(
        np.zeros(3),
        np.array([45.0, 0.0, 0.0]),
        9.81,
        0.0,
        3.0,
        np.zeros(0),
        np.zeros((0, 1, 3)),
        np.zeros((0, 1), dtype=bool),
        open_arena(),
        LAUNCHER.flight_step,
    )
    assert result == (-1, 0)


@pytest.mark.parametrize(
    ("client_victim", "server_result", "server_victim", "agrees"),
    [
        (-1, "miss", -1, True),
        (-1, "world", -1, True),
        (-1, "rejected", -1, True),
        (-1, "hit", 3, False),  # the server saw a hit the shooter did not
        (3, "hit", 3, True),
        (3, "hit", 4, False),  # both hit, but different players
        (3, "miss", -1, False),
        (3, "world", -1, False),
        (3, "rejected", -1, False),
    ],
)
def test_shot_record_agreement(
    client_victim: int, server_result: str, server_victim: int, agrees: bool
) -> None:
    record = ShotRecord(0, 0, 50.0, client_victim, 0, 1.0, server_result, server_victim)
    assert record.client_hit == (client_victim >= 0)
    assert record.server_hit == (server_result == "hit")
    assert record.agrees is agrees


# -- the swarm's book of shots --------------------------------------------------------------------

ME, TARGET, OTHER = 4, 7, 9
MY_FEET = np.array([-26.0, -20.0, 0.0])
TARGET_FEET = (-26.0, -10.0, 0.0)  # 10 m north, nothing in between


def entity_records(players: dict[int, tuple[float, float, float]]) -> np.ndarray:
    ids = sorted(players)
    n = len(ids)
    return records_of(
        np.array(ids),
        np.array([players[i] for i in ids]),
        np.zeros((n, 3)),
        np.zeros(n),
        np.zeros(n),
        np.full(n, 100),
        np.ones(n, dtype=bool),
    )


def rendered(players: dict[int, tuple[float, float, float]], time: float = 1.0):
    ids = sorted(players)
    return InterpolatedView(
        time,
        time,
        np.array(ids),
        np.array([players[i] for i in ids], dtype=float),
        np.ones(len(ids), dtype=bool),
        True,
    )


def book(launcher_share: float = 0.0) -> SwarmShooting:
    skill = AimSkill(error_deg=0.0, launcher_share=launcher_share)
    return SwarmShooting(2, ARENA, skill, np.random.default_rng(1))


def shot(
    seq: int,
    result: str,
    victim: int = -1,
    shooter: int = ME,
    weapon: int = 0,
    kill: bool = False,
    **fields: Any,
) -> ShotEvent:
    """The server's verdict on a shot of ``shooter``, fired from my eye at time 1.0 and
    taken as claimed (a hit deals damage unless told otherwise)."""
    event: dict[str, Any] = {
        "hitbox": 0,
        "damage": 25 if result == "hit" else 0,
        "kill": kill,
        "view_time": 1.0,
        "judged": "claimed",
        "origin": tuple((MY_FEET + (0.0, 0.0, EYE_HEIGHT)).tolist()),
        "shooter_rtt": 0.05,
    }
    return ShotEvent(shooter, seq, weapon, result, victim=victim, **{**event, **fields})  # type: ignore[arg-type]


def summary(
    weapon: int,
    rtt: float,
    client_hit: bool,
    result: str | None,
    agrees: bool,
    cause: str | None = None,
    rule: str | None = None,
) -> ShotSummary:
    """A finished shot of the book: fired over a 100 ms link, the server measured 50 ms."""
    server_rtt = 50.0 if result is not None else math.nan
    return ShotSummary(weapon, rtt, client_hit, result, agrees, 100.0, rule, cause, server_rtt)


def no_view() -> None:
    return None


def fire_rifle(shooting: SwarmShooting, seq: int = 12) -> tuple[float, float, int, float] | None:
    view = rendered({ME: tuple(MY_FEET), TARGET: TARGET_FEET})
    return shooting.fire(0, ME, seq, MY_FEET, view, TARGET, 80.0, 100.0, RATE, lambda t: [])


def test_fire_aims_at_the_target_and_claims_the_time_it_drew() -> None:
    shooting = book()
    fired = fire_rifle(shooting)
    assert fired is not None
    yaw, pitch, buttons, view_time = fired
    assert buttons == BUTTON_FIRE and view_time == 1.0
    assert yaw == quantize_angle(math.pi / 2, math.pi)
    assert pitch == quantize_angle(math.atan2(CHEST_HEIGHT - EYE_HEIGHT, 10.0), math.pi / 2)
    record = shooting.awaiting[0][(12, RIFLE.id)]
    assert (record.client_victim, record.client_hitbox, record.rtt_ms) == (
        TARGET,
        HITBOX_TORSO,
        80.0,
    )
    assert fire_rifle(shooting, seq=13) is None  # the rifle's cooldown, in inputs
    assert fire_rifle(shooting, seq=18) is not None


def test_the_server_s_verdict_settles_the_record_with_the_same_seq_and_weapon() -> None:
    shooting = book()
    fire_rifle(shooting)
    records = entity_records({ME: tuple(MY_FEET), TARGET: TARGET_FEET})
    for unrelated in (shot(12, "miss", weapon=1), shot(11, "miss"), shot(12, "miss", shooter=9)):
        shooting.on_snapshot(0, ME, 1.1, records, (unrelated,), MY_FEET, no_view)
        assert shooting.finished == [] and len(shooting.awaiting[0]) == 1
    respawned = shooting.on_snapshot(
        0, ME, 1.2, records, (shot(12, "hit", TARGET),), MY_FEET, no_view
    )
    assert respawned is False
    assert shooting.finished == [summary(0, 80.0, True, "hit", True)]
    assert shooting.awaiting[0] == {}


def test_a_server_miss_of_a_shot_the_shooter_saw_hit_is_a_disagreement() -> None:
    shooting = book()
    fire_rifle(shooting)
    records = entity_records({ME: tuple(MY_FEET), TARGET: TARGET_FEET})
    shooting.on_snapshot(0, ME, 1.2, records, (shot(12, "miss", tick=72),), MY_FEET, no_view)
    (finished,) = shooting.finished
    assert finished.detail is not None  # (listed whole in the report: see below)
    assert replace(finished, detail=None, disputed=None) == summary(
        0, 80.0, True, "miss", False, "unexplained"
    )
    # Listed among the disputed shots, where a match log has it: tick and shooter.
    assert finished.disputed == {
        "tick": 72, "shooter": ME, "seq": 12,
        "victim": {"client": TARGET, "server": -1},
        "verdict": {"client": "hit", "server": "miss"},
        "server_damage": 0, "cause": "unexplained",
        "rtt_ms": {"client": 80.0, "server": 50.0},
    }  # fmt: skip


def test_a_shot_both_verdicts_agree_on_is_not_disputed() -> None:
    shooting = book()
    fire_rifle(shooting)
    records = entity_records({ME: tuple(MY_FEET), TARGET: TARGET_FEET})
    shooting.on_snapshot(0, ME, 1.2, records, (shot(12, "hit", TARGET),), MY_FEET, no_view)
    (finished,) = shooting.finished
    assert finished.disputed is None


def test_a_kill_on_me_stops_my_shooting_until_i_respawn() -> None:
    shooting = book()
    records = entity_records({ME: tuple(MY_FEET)})
    killed = shot(3, "hit", victim=ME, shooter=OTHER, kill=True)
    assert shooting.on_snapshot(1, ME, 1.0, records, (killed,), MY_FEET, no_view) is False
    assert shooting.alive.tolist() == [True, False]
    assert shooting.hits_received == 1
    others = RespawnEvent(OTHER)
    assert shooting.on_snapshot(1, ME, 1.1, records, (others,), MY_FEET, no_view) is False
    assert not shooting.alive[1]
    mine = RespawnEvent(ME)
    assert shooting.on_snapshot(1, ME, 1.2, records, (mine,), MY_FEET, no_view) is True
    assert shooting.alive.tolist() == [True, True]


def test_a_hit_without_a_kill_keeps_me_alive_and_a_miss_on_me_is_no_hit() -> None:
    shooting = book()
    records = entity_records({ME: tuple(MY_FEET)})
    events = (shot(3, "hit", victim=ME, shooter=OTHER), shot(4, "miss", shooter=OTHER))
    shooting.on_snapshot(0, ME, 1.0, records, events, MY_FEET, no_view)
    assert shooting.alive[0] and shooting.hits_received == 1


@pytest.mark.parametrize(("my_feet", "behind"), [((8.0, 15.0, 0.0), 1), ((8.0, -5.0, 0.0), 0)])
def test_hits_received_behind_a_wall_on_my_own_screen_are_counted(
    my_feet: tuple[float, float, float], behind: int
) -> None:
    # The shooter stands at (8, 0); the wall from x 4 to 12 at y 8..9 hides y = 15.
    shooting = book()
    view = rendered({ME: my_feet, OTHER: (8.0, 0.0, 0.0)})
    feet = np.array(my_feet)
    records = entity_records({ME: my_feet, OTHER: (8.0, 0.0, 0.0)})
    event = shot(3, "hit", victim=ME, shooter=OTHER)
    shooting.on_snapshot(0, ME, 1.0, records, (event,), feet, lambda: view)
    assert (shooting.hits_received, shooting.hits_behind_cover) == (1, behind)


def test_a_hit_from_a_shooter_i_do_not_see_is_not_judged_for_cover() -> None:
    shooting = book()
    view = rendered({ME: (8.0, 15.0, 0.0)})
    records = entity_records({ME: (8.0, 15.0, 0.0)})
    event = shot(3, "hit", victim=ME, shooter=OTHER)
    shooting.on_snapshot(0, ME, 1.0, records, (event,), np.array([8.0, 15.0, 0.0]), lambda: view)
    assert (shooting.hits_received, shooting.hits_behind_cover) == (1, 0)


def test_a_launcher_shot_is_judged_on_the_frames_rendered_during_its_flight() -> None:
    shooting = book(launcher_share=1.0)
    target = (-26.0, -15.0, 0.0)  # 5 m: about 0.11 s of flight
    players = {ME: tuple(MY_FEET), TARGET: target}
    records = entity_records(players)
    buffer = SnapshotBuffer()
    buffer.push(1.0, records)
    view = buffer.view(1.0)
    assert view is not None
    fired = shooting.fire(0, ME, 0, MY_FEET, view, TARGET, 120.0, 100.0, RATE, buffer.since)
    assert fired is not None and fired[2] == BUTTON_ALT_FIRE
    record = shooting.awaiting[0][(0, LAUNCHER.id)]
    assert record.velocity is not None and len(record.track_frames) == 1  # the fire frame
    for k in range(1, 12):
        shooting.on_snapshot(0, ME, 1.0 + k / RATE, records, (), MY_FEET, no_view)
    verdict = shot(0, "hit", TARGET, weapon=LAUNCHER.id)
    shooting.on_snapshot(0, ME, 1.2, records, (verdict,), MY_FEET, no_view)
    assert len(record.track_times) == 13  # the fire frame and twelve snapshots
    assert record.client_victim == TARGET and record.client_hitbox == HITBOX_TORSO
    assert shooting.finished == [summary(LAUNCHER.id, 120.0, True, "hit", True)]


def test_close_reports_shots_still_awaiting_a_verdict_as_unresolved() -> None:
    shooting = book()
    fire_rifle(shooting)
    shooting.close()
    assert shooting.finished == [summary(0, 80.0, True, None, False)]
    assert shooting.awaiting == [{}, {}]
    shooting.close()
    assert len(shooting.finished) == 1


def test_only_engaged_living_bots_past_their_reaction_time_pull_the_trigger() -> None:
    skill = AimSkill(error_deg=0.0, reaction_s=0.25, fire_rate_hz=1e9)  # certain to fire
    shooting = SwarmShooting(4, ARENA, skill, np.random.default_rng(0))
    brain = Brain(4, ARENA, np.random.default_rng(0))
    brain.has_threat[:] = [True, True, False, True]
    brain.threat_since[:] = [0.0, 0.9, 0.0, 0.0]
    shooting.alive[3] = False
    assert shooting.shooters(np.arange(4), brain, 1.0, RATE).tolist() == [0]


# -- why verdicts differ ----------------------------------------------------------------------


def settle_rifle(**fields: Any) -> ShotSummary:
    """Fire at the target (a hit on my screen) and settle it with the server's event."""
    shooting = book()
    fire_rifle(shooting)
    records = entity_records({ME: tuple(MY_FEET), TARGET: TARGET_FEET})
    result = fields.pop("result", "hit")
    victim = fields.pop("victim", TARGET if result == "hit" else -1)
    event = shot(12, result, victim, **fields)
    shooting.on_snapshot(0, ME, 1.2, records, (event,), MY_FEET, no_view)
    (finished,) = shooting.finished
    return finished


@pytest.mark.parametrize(
    ("fields", "rule", "cause"),
    [
        ({}, None, None),
        ({"result": "rejected"}, "shooter_dead", "shooter_dead"),
        ({"result": "miss", "judged": "capped"}, "beyond_cap", "beyond_cap"),
        ({"judged": "capped"}, "beyond_cap", None),  # capped, and it agrees all the same
        ({"damage": 0}, "victim_already_dead", "victim_already_dead"),
        ({"result": "miss", "judged": "clamped"}, None, "claim_clamped"),
        ({"result": "miss", "origin": (-26.0, -20.5, EYE_HEIGHT)}, None, "shooter_position"),
        # A trade: the shooter was killed before its input was applied, and the server
        # fired from where it fell (the bot had moved on); from the bot's own eye, it is
        # no rule's doing.
        (
            {"result": "miss", "origin": (-26.0, -20.5, EYE_HEIGHT), "traded": True},
            "shooter_dead",
            "shooter_dead",
        ),
        ({"result": "miss", "traded": True}, None, "unexplained"),
        ({"result": "miss", "origin": (-26.0, -20.0005, EYE_HEIGHT)}, None, "unexplained"),
        ({"result": "miss"}, None, "unexplained"),
        # The server's ray went on to a player this bot was not sent (interest management).
        ({"victim": 9}, "victim_not_shown", "victim_not_shown"),
    ],
)
def test_each_disagreement_has_one_cause_and_rules_are_told_apart(
    fields: dict[str, Any], rule: str | None, cause: str | None
) -> None:
    finished = settle_rifle(**fields)
    assert (finished.rule, finished.cause) == (rule, cause)
    assert finished.server_rtt_ms == 50.0 and finished.link_rtt_ms == 100.0
    # Only an unexplained disagreement carries its verdicts whole, for the report to list.
    assert (finished.detail is not None) is (cause == "unexplained")
    if finished.detail is not None:
        assert finished.detail["server_result"] == "miss"
        assert finished.detail["client_victim"] == TARGET
        origin = fields.get("origin", tuple(MY_FEET + (0.0, 0.0, EYE_HEIGHT)))
        assert finished.detail["server_origin"] == [round(v, 4) for v in origin]
        assert finished.detail["server_view_time"] == 1.0


def test_a_launcher_shot_is_flown_from_the_time_the_server_spawned_it() -> None:
    """The target stands 5 m away until 1.05 s and is gone (far away) after: flown from the
    bot's claim (1.0) it is hit, from the server's spawn time (1.1) it is missed."""
    shooting = book(launcher_share=1.0)
    near, far = (-26.0, -15.0, 0.0), (20.0, 20.0, 0.0)
    buffer = SnapshotBuffer()
    buffer.push(1.0, entity_records({ME: tuple(MY_FEET), TARGET: near}))
    view = buffer.view(1.0)
    assert view is not None
    shooting.fire(0, ME, 0, MY_FEET, view, TARGET, 120.0, 100.0, RATE, buffer.since)
    gone = entity_records({ME: tuple(MY_FEET), TARGET: far})
    for k in range(4, 40):
        shooting.on_snapshot(0, ME, 1.0 + k / RATE, gone, (), MY_FEET, no_view)
    verdict = shot(0, "miss", weapon=LAUNCHER.id, view_time=1.1, judged="clamped")
    shooting.on_snapshot(0, ME, 1.7, gone, (verdict,), MY_FEET, no_view)
    (finished,) = shooting.finished
    assert (finished.client_hit, finished.agrees, finished.cause) == (False, True, None)


def test_a_launcher_shot_can_hit_a_player_who_appears_during_its_flight() -> None:
    """OTHER is not in the fire frame (it joins, or respawns, just after) but stands in the
    projectile's path when it passes: the bot's verdict, like the server's, is a hit."""
    shooting = book(launcher_share=1.0)
    buffer = SnapshotBuffer()
    buffer.push(1.0, entity_records({ME: tuple(MY_FEET), TARGET: (20.0, 20.0, 0.0)}))
    view = buffer.view(1.0)
    assert view is not None
    shooting.fire(0, ME, 0, MY_FEET, view, TARGET, 120.0, 100.0, RATE, buffer.since)
    record = shooting.awaiting[0][(0, LAUNCHER.id)]
    assert record.velocity is not None
    direction = record.velocity / np.linalg.norm(record.velocity)
    in_path = MY_FEET + direction * 5.0 * np.array([1.0, 1.0, 0.0])  # 5 m along, on the floor
    later = entity_records({ME: tuple(MY_FEET), OTHER: tuple(in_path)})
    for k in range(1, 30):
        shooting.on_snapshot(0, ME, 1.0 + k / RATE, later, (), MY_FEET, no_view)
    verdict = shot(0, "hit", OTHER, weapon=LAUNCHER.id)
    shooting.on_snapshot(0, ME, 1.5, later, (verdict,), MY_FEET, no_view)
    (finished,) = shooting.finished
    assert record.client_victim == OTHER
    assert (finished.agrees, finished.cause) == (True, None)


def launched_at_target(
    players: dict[int, tuple[float, float, float]],
) -> tuple[SwarmShooting, np.ndarray]:
    """A launcher shot of mine at TARGET, from the world of 1.0 s, its flight tracked
    through 11 more snapshots of ``players`` as they stand (to 1.183 s); the records."""
    shooting = book(launcher_share=1.0)
    records = entity_records(players)
    buffer = SnapshotBuffer()
    buffer.push(1.0, records)
    view = buffer.view(1.0)
    assert view is not None
    shooting.fire(0, ME, 0, MY_FEET, view, TARGET, 120.0, 100.0, RATE, buffer.since)
    for k in range(1, 12):
        shooting.on_snapshot(0, ME, 1.0 + k / RATE, records, (), MY_FEET, no_view)
    return shooting, records


def test_a_launcher_kill_counts_although_the_verdict_s_snapshot_shows_the_victim_dead() -> None:
    """The server judges a tick's impacts before it applies their kills, so the snapshot
    that carries the kill already shows the victim dead: alive in the one before, it was
    there to be hit."""
    shooting, records = launched_at_target({ME: tuple(MY_FEET), TARGET: (-26.0, -15.0, 0.0)})
    dead = records.copy()
    dead["flags"][dead["id"] == TARGET] = 0
    kill = shot(0, "hit", TARGET, weapon=LAUNCHER.id, kill=True)
    shooting.on_snapshot(0, ME, 1.2, dead, (kill,), MY_FEET, no_view)
    (finished,) = shooting.finished
    assert (finished.client_hit, finished.agrees) == (True, True)


@pytest.mark.parametrize("left_out", [True, False])
def test_a_projectile_s_victim_left_out_of_a_snapshot_of_its_flight_was_not_shown(
    left_out: bool,
) -> None:
    """The server's projectile hit OTHER, who stands far off the bot's flight: a bot that
    was sent OTHER in every snapshot of the flight saw its own flight miss (unexplained);
    one that was not sent OTHER in one of them could not have judged it (a rule)."""
    shooting = book(launcher_share=1.0)
    buffer = SnapshotBuffer()
    far = (20.0, 20.0, 0.0)
    buffer.push(1.0, entity_records({ME: tuple(MY_FEET), TARGET: TARGET_FEET, OTHER: far}))
    view = buffer.view(1.0)
    assert view is not None
    shooting.fire(0, ME, 0, MY_FEET, view, TARGET, 120.0, 100.0, RATE, buffer.since)
    for k in range(1, 30):
        shown = {ME: tuple(MY_FEET), TARGET: TARGET_FEET}
        if not (left_out and k == 10):
            shown[OTHER] = far
        shooting.on_snapshot(0, ME, 1.0 + k / RATE, entity_records(shown), (), MY_FEET, no_view)
    verdict = shot(0, "hit", OTHER, weapon=LAUNCHER.id)
    every = entity_records({ME: tuple(MY_FEET), TARGET: TARGET_FEET, OTHER: far})
    shooting.on_snapshot(0, ME, 1.5, every, (verdict,), MY_FEET, no_view)
    (finished,) = shooting.finished
    expected = ("victim_not_shown", "victim_not_shown") if left_out else (None, "unexplained")
    assert (finished.rule, finished.cause) == expected
    if not left_out:  # the report's detail: both victims alive in every frame, and when
        assert finished.detail is not None  # each frame came
        assert finished.detail["client_victim"] == TARGET
        assert finished.detail["server_victim_frames"] == "A" * 31
        assert finished.detail["client_victim_frames"] == "A" * 31
        assert finished.detail["frame_ms"][:2] == [0.0, round(1e3 / RATE, 1)]
        assert finished.detail["frame_ms"][-1] == 500.0


def test_an_unexplained_shot_s_detail_tells_each_victim_s_state_in_each_frame() -> None:
    """Alive (A), dead (D) or not drawn (-) in each snapshot the flight was flown through,
    with when each came: the data to tell a death or an absence the verdicts disagree on."""
    alive = entity_records({TARGET: TARGET_FEET, OTHER: (20.0, 20.0, 0.0)})
    dead = alive.copy()
    dead["flags"][dead["id"] == OTHER] ^= ENTITY_FLAG_ALIVE
    record = ShotRecord(3, LAUNCHER.id, 50.0, TARGET, 2, 1.0, "hit", OTHER)
    record.track_times = [1.0, 1.05, 1.1]
    record.track_frames = [alive, dead, alive[alive["id"] == TARGET]]
    detail = shot_detail(record)
    assert detail["frame_ms"] == [0.0, 50.0, 100.0]
    assert (detail["client_victim_frames"], detail["server_victim_frames"]) == ("AAA", "AD-")
    record.server_victim = -1
    assert shot_detail(record)["server_victim_frames"] == ""


@pytest.mark.parametrize(("killed_in", "hit"), [(73, TARGET), (74, OTHER)])
def test_a_player_killed_before_the_verdict_s_tick_is_no_obstacle_in_its_last_stretch(
    killed_in: int, hit: int
) -> None:
    """OTHER stands just in front of TARGET and is shown dead in the verdict's snapshot
    (tick 74). Killed in tick 73, it was dead in the history the server flew the last
    stretch through, and the projectile went on to TARGET; killed in tick 74, the
    server judged the flight before that kill, and OTHER was still in the way."""
    # (Up to 1.183 s: OTHER alive; the projectile reaches both after that.)
    players = {ME: tuple(MY_FEET), TARGET: TARGET_FEET, OTHER: (-26.0, -10.8, 0.0)}
    shooting, records = launched_at_target(players)
    dead = records.copy()
    dead["flags"][dead["id"] == OTHER] = 0
    other_killed = shot(3, "hit", OTHER, shooter=TARGET, kill=True, tick=killed_in)
    verdict = shot(0, "hit", TARGET, weapon=LAUNCHER.id, tick=74)
    shooting.on_snapshot(
        0, ME, 74 / RATE, dead, (verdict,), MY_FEET, no_view,
        tick=74, told=(other_killed, verdict),
    )  # fmt: skip
    (finished,) = shooting.finished
    assert finished.detail is None or finished.detail["client_victim"] == hit
    assert finished.client_hit and (finished.agrees == (hit == TARGET))
