"""Light players: inputs decided for many at once, the same for a player in any split,
firing at the full bots' rate with the weapons' intervals kept."""

from __future__ import annotations

import itertools

import numpy as np

from client_sim.bot_random import BotStreams
from client_sim.light import DEFAULT_ENGAGED_SHARE, LightPlayers
from client_sim.marksman import AimSkill
from shared.arena_map import default_map
from shared.protocol.inputs import MOVE_STEP, quantize_moves
from shared.weapons import LAUNCHER, RIFLE

ARENA = default_map()
RATE = 60


def _players(population: list[int], skill: AimSkill | None = None) -> LightPlayers:
    streams = BotStreams(4, population)
    rows = np.arange(len(population))
    return LightPlayers(len(population), rows, ARENA, skill or AimSkill(), streams)


def _play(players: LightPlayers, ticks: int) -> list[tuple[np.ndarray, ...]]:
    rows = np.arange(players.count)
    out: list[tuple[np.ndarray, ...]] = []
    for tick in range(ticks):
        inputs = players.decide(rows, np.full(players.count, tick), tick / RATE, RATE)
        out.append((inputs.move.copy(), inputs.yaw.copy(), inputs.pitch.copy(), inputs.buttons))
    return out


def test_a_light_player_plays_the_same_in_any_split() -> None:
    whole = _play(_players([0, 1, 2, 3]), 400)
    alone = _play(_players([2]), 400)
    for (move, yaw, pitch, buttons), (move1, yaw1, pitch1, buttons1) in zip(
        whole, alone, strict=True
    ):
        assert np.array_equal(move[2], move1[0]) and yaw[2] == yaw1[0]
        assert pitch[2] == pitch1[0] and buttons[2] == buttons1[0]


def test_moves_are_full_speed_and_face_where_they_go() -> None:
    for move, yaw, pitch, _ in _play(_players(list(range(8))), 120):
        # Full speed but for the steps a move is kept to (towards zero), and kept to them.
        assert np.all(np.abs(np.hypot(move[:, 0], move[:, 1]) - 1.0) <= 2 * MOVE_STEP)
        assert np.array_equal(quantize_moves(move), move)
        assert np.allclose(np.arctan2(move[:, 1], move[:, 0]), yaw, atol=4 * MOVE_STEP)
        assert np.all(np.abs(pitch) <= 0.1)


def test_they_fire_at_the_engaged_rate_within_each_weapon_s_interval() -> None:
    players = _players(list(range(50)), AimSkill(fire_rate_hz=3.0, launcher_share=0.1))
    ticks = 1200  # 20 s
    fired: dict[int, list[tuple[int, int]]] = {RIFLE.button: [], LAUNCHER.button: []}
    for tick, (_, _, _, buttons) in enumerate(_play(players, ticks)):
        for button in fired:
            fired[button] += [(row, tick) for row in np.flatnonzero(buttons & button).tolist()]
    shots = len(fired[RIFLE.button]) + len(fired[LAUNCHER.button])
    expected = 50 * 20 * 3.0 * DEFAULT_ENGAGED_SHARE  # 900
    assert 0.8 * expected <= shots <= 1.1 * expected, shots  # (the intervals drop a few)
    assert 0.05 <= len(fired[LAUNCHER.button]) / shots <= 0.15
    for weapon in (RIFLE, LAUNCHER):
        by_row: dict[int, list[int]] = {}
        for row, tick in fired[weapon.button]:
            by_row.setdefault(row, []).append(tick)
        gaps = [b - a for ticks_ in by_row.values() for a, b in itertools.pairwise(ticks_)]
        assert min(gaps, default=10**9) >= weapon.interval_inputs(RATE)


def test_they_follow_the_full_bots_engaged_share() -> None:
    players = _players([0])
    for _ in range(2000):
        players.note_engaged(0.1)
    players.note_engaged(float("nan"))  # a tick no full bot was asked: no change
    assert abs(players.engaged_share - 0.1) < 1e-3
