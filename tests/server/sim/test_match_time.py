"""No more movement or fire than time allows: speed and fire-rate hacks against the match.

A hostile client may send inputs faster than the tick rate (any ``seq`` it likes, a fire
button on each). The server must move its player no further than the ticks that passed
allow, and fire its weapon no faster than the weapon's interval in server time; while an
honest client that catches up after a stall still ends where its prediction put it
(``test_match.py`` has those cases). Everything is measured in simulated ticks.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from server.sim.match import Match, MatchConfig
from shared.arena_map import default_map
from shared.movement import BUTTON_FIRE, MovementParams
from shared.protocol import InputMessage, ShotEvent
from shared.weapons import RIFLE

ARENA = default_map()
RATE = 60
SECONDS = 2
TICKS = SECONDS * RATE
MAX_SPEED = MovementParams().max_speed
# Spawn 0 is (-26, -26): running +x along y = -26 meets no box for far more than 2 s allow.
RUN = (1.0, 0.0)


def new_match(**config: Any) -> Match:
    return Match(MatchConfig(arena=ARENA, tick_rate=RATE, max_players=4, **config))


def message(seq: int, buttons: int = 0, view_time: float = 0.0) -> InputMessage:
    return InputMessage(
        seq=seq,
        tick=seq,
        move=RUN,
        yaw=0.0,
        pitch=0.0,
        buttons=buttons,
        view_time=view_time,
        ack_tick=-1,
    )


def play(match: Match, per_tick: int, ticks: int, buttons: int = 0) -> tuple[list[float], int]:
    """Seat 0 sends ``per_tick`` inputs before each of ``ticks`` ticks (sequence numbers
    always rising; a refused one is sent again, as a client does). Returns the distance
    it moved in each tick and the shots it fired."""
    slot = 0
    seq = match.seats[slot].inputs.acked + 1 + len(match.seats[slot].inputs.pending)
    steps, shots = [], 0
    for _ in range(ticks):
        for _ in range(per_tick):
            verdict = match.receive_input(
                slot, message(seq, buttons, match.server_time), match.server_time
            )
            seq += verdict.usable
        before = match.world.pos[slot, :2].copy()
        result = match.tick()
        steps.append(float(np.hypot(*(match.world.pos[slot, :2] - before))))
        shots += sum(isinstance(e, ShotEvent) and e.shooter == slot for e in result.events)
    return steps, shots


@pytest.mark.parametrize("per_tick", [3, 10])
def test_a_speed_hack_moves_no_faster_than_the_movement_rules_allow(per_tick: int) -> None:
    match, honest = new_match(), new_match()
    seat, _ = match.join("cheat", 0.1), honest.join("honest", 0.1)
    start = match.world.pos[seat.slot, :2].copy()

    steps, _ = play(match, per_tick, TICKS)
    honest_steps, _ = play(honest, 1, TICKS)

    distance = float(np.hypot(*(match.world.pos[seat.slot, :2] - start)))
    assert distance / SECONDS <= MAX_SPEED * 1.02
    assert max(steps) * RATE <= MAX_SPEED * 1.02  # not within any one tick either
    # One input per tick was applied, exactly as for an honest client's one a tick; the
    # surplus was dropped (the oldest first), so the cheat's inputs wait no longer either.
    assert match.counters["input_applied"] == TICKS
    waiting = match.config.input_max_depth - 1  # the newest, for the next ticks
    assert match.counters["input_dropped_late"] == (per_tick - 1) * TICKS - waiting
    assert seat.inputs.acked == per_tick * TICKS - 1 - waiting
    assert match.world.pos[seat.slot].tolist() == honest.world.pos[0].tolist()
    assert steps == honest_steps


def test_a_seat_that_banked_time_gains_no_more_than_the_cap() -> None:
    """Silence earns at most ``input_max_catch_up`` ticks of catch-up: a client that idles
    and then floods moves, over the whole stretch, no more ticks than passed."""
    match = new_match()
    seat = match.join("cheat", 0.1)
    start = match.world.pos[seat.slot, :2].copy()
    for _ in range(30):
        match.tick()  # silent: its time is banked, at most 12 ticks of it
    steps, _ = play(match, 10, TICKS)
    assert match.counters["input_applied"] == TICKS + match.config.input_max_catch_up
    assert max(steps) <= (1 + match.config.input_max_catch_up) * MAX_SPEED / RATE * 1.02
    distance = float(np.hypot(*(match.world.pos[seat.slot, :2] - start)))
    assert distance <= MAX_SPEED * 1.02 * (30 + TICKS) / RATE


@pytest.mark.parametrize("per_tick", [1, 4])
def test_a_fire_rate_hack_fires_no_faster_than_the_weapon(per_tick: int) -> None:
    """Fire on every input, ``per_tick`` inputs a tick for 2 s: the rifle's 10 shots a
    second at most, as many as an honest client pulling the trigger on every input."""
    match = new_match()
    match.join("cheat", 0.1)
    _, shots = play(match, per_tick, TICKS, BUTTON_FIRE)
    rate = 1.0 / RIFLE.fire_interval
    assert shots <= rate * 1.02 * SECONDS + 1
    assert shots == math.ceil(TICKS / RIFLE.interval_inputs(RATE))  # one every 6 ticks


def test_fire_inputs_caught_up_in_one_tick_fire_once() -> None:
    """A late burst is caught up within one tick, at that tick's server time: however far
    apart their sequence numbers, its fire inputs fire one shot."""
    match = new_match(input_max_depth=1)  # a burst is caught up whole
    seat = match.join("late", 0.1)
    for _ in range(8):
        match.tick()  # starved: 8 ticks banked
    for seq in range(0, 9 * 6, 6):  # nine inputs, six sequence numbers apart, all firing
        match.receive_input(seat.slot, message(seq, BUTTON_FIRE), match.server_time)
    result = match.tick()
    assert seat.inputs.acked == 48  # all nine applied: the time was there
    assert [e.seq for e in result.events if isinstance(e, ShotEvent)] == [0]
    assert match.combat.counters["shots_rate_limited"] == 8


def test_skipped_ticks_are_time_to_catch_up_in() -> None:
    """After a stall the node skips tick numbers; the inputs its clients sent meanwhile
    are applied as the ticks that passed allow (to within the buffer's depth)."""
    match = new_match()
    seat = match.join("a", 0.1)
    match.tick()
    for seq in range(12):
        match.receive_input(seat.slot, message(seq), match.server_time)
    match.tick(match.tick_number + 10)
    assert seat.inputs.acked == 12 - match.config.input_max_depth


def told_position(match: Match, slot: int) -> np.ndarray:
    """Where the seat's client is told it stands (its snapshots' ``you``: before any
    guesses, which its next inputs undo)."""
    _, states = match.inputs.told(np.array([slot]), match.world)
    return states[0, :2].copy()


def assert_walking_pace(track: list[np.ndarray]) -> None:
    """Over every second of ``track`` (a position a tick), no further than walking speed."""
    for start in range(len(track) - RATE):
        moved = float(np.hypot(*(track[start + RATE] - track[start])))
        assert moved <= MAX_SPEED * 1.0001, f"{moved} m in the second from tick {start}"


@pytest.mark.parametrize(
    ("per_tick", "gap", "comeback"), [(3, 12, 0), (3, 40, 0), (10, 12, 0), (10, 40, 4), (3, 12, 4)]
)
def test_a_speed_hack_that_reconnects_gains_nothing_from_the_gap(
    per_tick: int, gap: int, comeback: int
) -> None:
    """A client closed (for its offences) resumes its seat ``gap`` ticks later and floods
    again ``comeback`` ticks after that (its round trip, or a wait for its first snapshot
    back): over every second, from the resume on and across the gap, it moves no faster
    than walking speed. (Its time away, banked, once bought a catch-up on the first inputs
    back: 7.1 m/s over the second after each resume.)"""
    match = new_match()
    seat = match.join("cheat", 0.1)
    track = [told_position(match, seat.slot)]
    for _ in range(RATE):
        play(match, per_tick, 1)
        track.append(told_position(match, seat.slot))
    seat.inputs.restore(seat.inputs.acked)  # its connection is gone: what it queued too
    for _ in range(gap):
        match.tick()
        track.append(told_position(match, seat.slot))
    seat.inputs.resume()  # back on a new connection
    for _ in range(comeback):
        match.tick()
        track.append(told_position(match, seat.slot))
    for _ in range(2 * RATE):
        play(match, per_tick, 1)
        track.append(told_position(match, seat.slot))
    assert_walking_pace(track)
    assert match.counters["input_applied"] == 3 * RATE  # one a tick it sent inputs in


@pytest.mark.parametrize("lead", [2, RATE])
@pytest.mark.parametrize("pause", [1, 4, 8, 12])
def test_a_speed_hack_that_pauses_gains_nothing_from_its_backlog(pause: int, lead: int) -> None:
    """A client that sends 3 inputs a tick for ``lead`` ticks, sends nothing for ``pause``
    ticks (its own lag switch, or its event loop held up), then its backlog at once, and
    floods on: over every second it moves no faster than walking speed. (The ticks it
    stood still in, banked, once bought a catch-up on its backlog: up to 6.9 m/s over
    the second from the burst.)"""
    per_tick = 3
    match = new_match()
    seat = match.join("cheat", 0.1)
    track = [told_position(match, seat.slot)]
    for _ in range(lead):
        play(match, per_tick, 1)
        track.append(told_position(match, seat.slot))
    for _ in range(pause):
        match.tick()
        track.append(told_position(match, seat.slot))
    play(match, per_tick * (pause + 1), 1)  # the backlog, with this tick's own
    track.append(told_position(match, seat.slot))
    for _ in range(2 * RATE):
        play(match, per_tick, 1)
        track.append(told_position(match, seat.slot))
    assert_walking_pace(track)
