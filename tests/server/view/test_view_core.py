"""The live view's core: shot traces, the shot log's pairing with sightings, the frames."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from server.sim.combat import ShotTrace
from server.sim.hitreg import make_validator
from server.sim.hitreg.backend import History
from server.sim.hitreg.reference import rewound_feet
from server.sim.match import MatchConfig
from server.sim.matchset import MatchSet
from server.view import frames
from server.view.shotlog import SIGHTING_WAIT_S, ShotLog
from server.view.tap import ViewTap
from shared.hitbox import HITBOX_HEAD
from shared.movement import BUTTON_FIRE
from shared.protocol import ShotEvent
from shared.weapons import BUTTON_ALT_FIRE, EYE_HEIGHT, aim_direction
from tests.server.sim.test_match_combat import (
    ARENA,
    HEAD_SHOT,
    RATE,
    SHOOTER,
    VICTIM,
    lob_pitch,
    new_match,
    send,
)

# Victim 7 walks from (0, 0, 0) at t = 1.0 to (1, 2, 0) at t = 1.1.
T0, T1 = 1.0, 1.1


def two_snapshot_history(players: int = 8, present: bool = True) -> History:
    positions = np.zeros((1, 4, players, 3))
    positions[0, 1, 7] = (1.0, 2.0, 0.0)
    alive = np.ones((1, 4, players), dtype=np.uint8)
    alive[0, :, 7] = 1 if present else 0
    return History(
        times=[[T0, T1, 0.0, 0.0]], positions=positions, alive=alive, start=[0], count=[2]
    )


def trace(result: str = "miss", victim: int = -1, seq: int = 5, view_time: float = 1.05,
          time: float = 1.2) -> ShotTrace:  # fmt: skip
    event = ShotEvent(SHOOTER, seq, 0, result, view_time, victim=victim,
                      hitbox=HITBOX_HEAD if victim >= 0 else 0)  # fmt: skip
    direction = np.array([1.0, 0.0, 0.0])
    return ShotTrace(event, direction, np.array([10.0, 0.0, 1.6]), round(time * RATE), time)


def test_the_target_is_rewound_as_the_kernels_rewind_it() -> None:
    history = two_snapshot_history()
    assert rewound_feet(history, 0, 1.05, 7).tolist() == pytest.approx([0.5, 1.0, 0.0])
    assert rewound_feet(history, 0, T0, 7).tolist() == [0.0, 0.0, 0.0]
    # Outside the ring there is nothing to show (not the clamped edge the kernels use).
    assert rewound_feet(history, 0, T0 - 0.01, 7) is None
    assert rewound_feet(history, 0, T1 + 0.01, 7) is None
    assert rewound_feet(history, 0, 1.05, 99) is None
    assert rewound_feet(two_snapshot_history(present=False), 0, 1.05, 7) is None


def test_a_hit_pairs_with_the_sighting_that_came_before_it() -> None:
    log, history = ShotLog(), two_snapshot_history()
    log.sighting(0, SHOOTER, 5, 7, np.array([0.5, 1.1, 0.0]), now=1.1)
    log.add(0, [trace("hit", victim=7)], history)
    (shot,) = log.due(1.2, history)
    assert shot.target == 7
    assert shot.server_feet.tolist() == pytest.approx([0.5, 1.0, 0.0])
    assert shot.seen_feet.tolist() == [0.5, 1.1, 0.0]
    assert shot.offset == pytest.approx(0.1)
    assert log.due(1.3, history) == []  # shown once


def test_a_miss_takes_its_target_from_the_sighting_even_a_late_one() -> None:
    log, history = ShotLog(), two_snapshot_history()
    log.add(0, [trace("miss")], history)
    assert log.due(1.2, history) == []  # waiting for the shooter's word
    log.sighting(0, SHOOTER, 5, 7, np.array([0.5, 1.0, 0.0]), now=1.21)
    (shot,) = log.due(1.21, history)
    assert (shot.target, shot.offset) == (7, 0.0)


def test_a_shot_without_a_sighting_is_shown_after_the_wait() -> None:
    log, history = ShotLog(), two_snapshot_history()
    log.add(0, [trace("miss")], history)
    assert log.due(1.2 + SIGHTING_WAIT_S / 2, history) == []
    (shot,) = log.due(1.2 + SIGHTING_WAIT_S, history)
    assert (shot.target, shot.server_feet, shot.seen_feet, shot.offset) == (-1, None, None, None)


def test_a_sighting_of_another_player_than_the_victim_is_not_drawn_as_its_box() -> None:
    log, history = ShotLog(), two_snapshot_history()
    log.sighting(0, SHOOTER, 5, 3, np.array([9.0, 9.0, 0.0]), now=1.1)
    log.add(0, [trace("hit", victim=7)], history)
    (shot,) = log.due(1.2, history)
    assert (shot.target, shot.seen_feet) == (7, None)


def test_sightings_of_other_inputs_matches_or_stale_ones_pair_with_nothing() -> None:
    log, history = ShotLog(), two_snapshot_history()
    log.sighting(0, SHOOTER, 4, 7, np.zeros(3), now=1.1)  # another input
    log.sighting(1, SHOOTER, 5, 7, np.zeros(3), now=1.1)  # another match
    log.sighting(0, SHOOTER, 6, 7, np.zeros(3), now=1.1)
    log.add(0, [trace("miss", seq=6, time=5.0)], history)
    (shot,) = log.due(5.0 + SIGHTING_WAIT_S, history)  # its sighting expired meanwhile
    assert shot.target == -1


def test_a_watched_match_traces_each_shot_s_line_and_an_unwatched_one_does_not() -> None:
    match = new_match()
    match.tick()
    send(match, SHOOTER, 0, BUTTON_FIRE, aim=HEAD_SHOT)
    match.tick()
    assert match.combat.traces is None
    for _ in range(6):  # the rifle's cooldown
        match.tick()
    match.combat.traces = []
    send(match, SHOOTER, 1, BUTTON_FIRE, aim=HEAD_SHOT)
    result = match.tick()
    (shot,) = match.combat.traces
    assert shot.event == next(e for e in result.events if e.KIND == "shot")
    assert (shot.tick, shot.time) == (result.tick, result.tick / RATE)
    eye = match.world.pos[SHOOTER] + (0.0, 0.0, EYE_HEIGHT)
    assert shot.direction.tolist() == pytest.approx(aim_direction(*HEAD_SHOT).tolist(), abs=1e-12)
    # The line stops on the victim's head (its front, 14 cm before its centre; the kept
    # angles pass a millimetre off the centre, which moves the front by microns).
    head = match.world.pos[VICTIM] + (0.0, 0.0, 1.62)
    assert float(np.linalg.norm(shot.end - head)) == pytest.approx(0.14, abs=1e-5)
    assert float(np.linalg.norm(shot.end - eye)) < float(np.linalg.norm(head - eye))


def test_a_projectile_s_line_ends_where_it_struck() -> None:
    match = new_match()
    match.tick()
    match.combat.traces = []
    send(match, SHOOTER, 0, BUTTON_ALT_FIRE, aim=(math.pi / 2, lob_pitch(52.0 - 0.22, 1.2)))
    for _ in range(90):
        match.tick()
    (shot,) = match.combat.traces
    assert (shot.event.result, shot.event.victim) == ("hit", VICTIM)
    assert abs(float(shot.end[1]) - (26.0 - 0.22)) < 0.5  # at the torso's face
    assert shot.direction[1] > 0.9


def test_the_tap_traces_only_while_watched_and_collects_rewound_hits() -> None:
    validator = make_validator("reference", box_min=ARENA.box_min, box_max=ARENA.box_max)
    matches = MatchSet(MatchConfig(ARENA, tick_rate=RATE, max_players=4), 1, validator)
    (match,) = matches.matches
    assert match.join("shooter", 0.1).slot == SHOOTER
    assert match.join("victim", 0.1).slot == VICTIM
    tap = ViewTap(matches)
    tap.watch(True)
    match.tick()
    tap.sighting(0, SHOOTER, 0, VICTIM, (-26.0, 26.0, 0.0))
    send(match, SHOOTER, 0, BUTTON_FIRE, aim=HEAD_SHOT)
    match.tick()
    (shot,) = tap.collect()
    assert (shot.target, shot.offset) == (VICTIM, 0.0)
    tap.watch(False)
    assert match.combat.traces is None
    tap.sighting(0, SHOOTER, 6, VICTIM, (0.0, 0.0, 0.0))  # nobody watches: ignored
    assert len(tap.log) == 0


def test_a_frame_is_json_with_every_player_and_the_shot_s_two_boxes() -> None:
    log, history = ShotLog(), two_snapshot_history()
    log.sighting(0, SHOOTER, 5, 7, np.array([0.5, 1.1, 0.0]), now=1.1)
    log.add(0, [trace("hit", victim=7)], history)
    match = new_match()
    view = frames.NodeView("eu", "eu-a", "primary", 3, 72, 1.2, 200.0)
    message = frames.frame(
        view, [match.world], [{0: "shooter", 1: "victim"}], log.due(1.2, history),
        [1.0, 2.0], 16.667,
    )  # fmt: skip
    message = json.loads(json.dumps(message))
    assert [(p["id"], p["name"], p["alive"]) for p in message["players"]] == [
        (0, "shooter", True), (1, "victim", True)
    ]  # fmt: skip
    (shot,) = message["shots"]
    assert shot["server_feet"] == [0.5, 1.0, 0.0] and shot["seen_feet"] == [0.5, 1.1, 0.0]
    assert (shot["offset_cm"], shot["rewind_ms"], shot["hitbox"]) == (10.0, 150.0, "head")
    assert (message["role"], message["epoch"], message["tick_ms"]) == ("primary", 3, [1.0, 2.0])
    hello = frames.hello(match.config.arena, RATE, 10.0, view)
    assert len(hello["map"]["boxes"]) == match.config.arena.box_count
    assert [h["name"] for h in hello["hitboxes"]] == ["head", "torso", "legs"]
