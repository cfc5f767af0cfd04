"""The authoritative match: seats, ticks, snapshots, untrusted inputs and RTT probes."""

from __future__ import annotations

import collections
import math
from typing import Any

import msgpack
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from server.sim.inputs import InputVerdict
from server.sim.match import Match, MatchConfig, MatchFull
from shared.arena_map import default_map
from shared.movement import BUTTON_FIRE
from shared.protocol import (
    InputMessage,
    InvalidField,
    JoinEvent,
    LeaveEvent,
    ShotEvent,
    SnapshotMessage,
    decode_client,
    decode_server,
)
from shared.protocol.deltas import POSITION_STEP_M
from shared.protocol.inputs import quantize_move
from tests.server.frames import players_shown, snapshot_for

ARENA = default_map()
RATE = 60


def new_match(max_players: int = 4, **config: Any) -> Match:
    return Match(MatchConfig(arena=ARENA, tick_rate=RATE, max_players=max_players, **config))


def msg(
    seq: int,
    move: tuple[float, float] = (1.0, 0.0),
    yaw: float = 0.0,
    pitch: float = 0.0,
    buttons: int = 0,
    ack_tick: int = -1,
) -> InputMessage:
    return InputMessage(
        seq=seq,
        tick=seq,
        move=move,
        yaw=yaw,
        pitch=pitch,
        buttons=buttons,
        view_time=0.0,
        ack_tick=ack_tick,
    )


def world_state(match: Match) -> tuple[Any, ...]:
    w = match.world
    arrays = (w.active, w.alive, w.pos, w.vel, w.yaw, w.pitch, w.health, w.move, w.buttons)
    acks = tuple((slot, seat.inputs.acked) for slot, seat in sorted(match.seats.items()))
    return (match.tick_number, w.state_hash(), *(a.tobytes() for a in arrays), acks)


# -- seats --------------------------------------------------------------------------------


def test_joins_get_distinct_slots_at_successive_spawn_points() -> None:
    match = new_match(max_players=4)
    seats = [match.join(f"p{i}", 0.1) for i in range(4)]
    assert [s.slot for s in seats] == [0, 1, 2, 3]
    for i, seat in enumerate(seats):
        x, y = ARENA.spawn_point(i)
        assert match.world.pos[seat.slot].tolist() == [x, y, 0.0]
        assert match.world.vel[seat.slot].tolist() == [0.0, 0.0, 0.0]
        assert match.world.active[seat.slot] and match.world.alive[seat.slot]
    assert len({tuple(match.world.pos[s.slot]) for s in seats}) == 4
    assert match.world.player_count == 4
    assert seats[2].name == "p2" and seats[2].interp_delay == 0.1


def test_joining_a_full_match_raises_match_full() -> None:
    match = new_match(max_players=2)
    match.join("a", 0.1)
    match.join("b", 0.1)
    before = world_state(match)
    with pytest.raises(MatchFull):
        match.join("c", 0.1)
    assert world_state(match) == before
    assert len(match.seats) == 2


def test_leaving_frees_the_slot_and_emits_a_leave_event() -> None:
    match = new_match(max_players=2)
    a = match.join("a", 0.1)
    b = match.join("b", 0.1)
    first = match.tick()
    assert first.events == [
        JoinEvent(a.slot),
        JoinEvent(b.slot),
    ]
    match.leave(a.slot)
    assert not match.world.active[a.slot] and a.slot not in match.seats
    result = match.tick()
    assert result.events == [LeaveEvent(a.slot)]
    snapshot = decode_server(snapshot_for(match, result, b.slot))
    assert snapshot.events == (LeaveEvent(a.slot),)
    assert players_shown(match, result, b.slot)["id"].tolist() == [b.slot]
    # The slot is free again, and the next join takes it.
    c = match.join("c", 0.1)
    assert c.slot == a.slot
    assert match.tick().events == [JoinEvent(c.slot)]


def test_leaving_twice_or_an_empty_slot_is_harmless() -> None:
    match = new_match()
    seat = match.join("a", 0.1)
    match.leave(seat.slot)
    match.leave(seat.slot)
    match.leave(3)
    assert match.tick().events == [
        JoinEvent(seat.slot),
        LeaveEvent(seat.slot),
    ]


# -- ticks and snapshots ------------------------------------------------------------------


def test_ticks_advance_and_server_time_is_tick_based() -> None:
    match = new_match()
    results = [match.tick() for _ in range(3)]
    assert [r.tick for r in results] == [1, 2, 3]
    assert [r.server_time for r in results] == [1 / RATE, 2 / RATE, 3 / RATE]
    explicit = match.tick(100)
    assert (explicit.tick, explicit.server_time, match.server_time) == (100, 100 / RATE, 100 / RATE)


def test_snapshot_for_decodes_with_tick_ack_and_own_state() -> None:
    match = Match(MatchConfig(arena=ARENA, tick_rate=RATE, max_players=4), epoch=7)
    seat = match.join("a", 0.1)
    other = match.join("b", 0.1)
    for seq in range(4):  # within the jitter depth: one input released per tick
        match.receive_input(seat.slot, msg(seq, move=(0.6, 0.8), yaw=1.0), arrival=0.0)
    results = [match.tick() for _ in range(3)]

    snapshot = decode_server(snapshot_for(match, results[-1], seat.slot))
    assert isinstance(snapshot, SnapshotMessage)
    assert (snapshot.tick, snapshot.server_time, snapshot.epoch) == (3, 3 / RATE, 7)
    assert snapshot.ack == 2 == seat.inputs.acked  # three ticks, one input each
    you = np.concatenate((match.world.pos[seat.slot], match.world.vel[seat.slot]))
    assert np.array(snapshot.you).tobytes() == you.tobytes()  # bit-exact
    assert match.world.pos[seat.slot, 0] > ARENA.spawn_point(0)[0]  # it did move
    records = players_shown(match, results[-1], seat.slot)
    assert records["id"].tolist() == [seat.slot, other.slot]
    assert abs(records["x"][0] - match.world.pos[seat.slot, 0]) <= POSITION_STEP_M / 2
    assert decode_server(snapshot_for(match, results[-1], other.slot)).ack == -1


def test_while_guessed_a_player_is_told_where_its_acknowledged_input_left_it() -> None:
    match = new_match()
    seat = match.join("a", 0.1)
    match.receive_input(seat.slot, msg(0, move=(1.0, 0.0)), 0.0)
    match.tick()
    acked_state = np.concatenate((match.world.pos[seat.slot], match.world.vel[seat.slot]))
    result = match.tick()  # starved: the player runs on, as a guess
    assert match.world.pos[seat.slot, 0] > acked_state[0]
    snapshot = decode_server(snapshot_for(match, result, seat.slot))
    assert isinstance(snapshot, SnapshotMessage) and snapshot.ack == 0
    assert np.array(snapshot.you).tobytes() == acked_state.tobytes()
    records = players_shown(match, result, seat.slot)  # the others see the guess
    assert abs(records["x"][0] - match.world.pos[seat.slot, 0]) <= POSITION_STEP_M / 2


def test_every_client_gets_the_same_body_with_its_own_header() -> None:
    match = new_match()
    a, b = match.join("a", 0.1), match.join("b", 0.1)
    match.receive_input(a.slot, msg(0), 0.0)
    result = match.tick()
    frame_a, frame_b = snapshot_for(match, result, a.slot), snapshot_for(match, result, b.slot)
    assert frame_a.endswith(result.body) and frame_b.endswith(result.body)
    sa, sb = decode_server(frame_a), decode_server(frame_b)
    assert (sa.ack, sb.ack) == (0, -1)
    assert sa.you[:3] == tuple(match.world.pos[a.slot])
    assert sb.you[:3] == tuple(match.world.pos[b.slot])


def test_a_tick_goes_only_to_the_players_seated_when_it_was_computed() -> None:
    """A node publishes a tick after awaiting its standbys; a player who joins meanwhile
    (or leaves and whose seat is taken) is not in that tick's body and is not sent it."""
    match = new_match()
    a, b = match.join("a", 0.1), match.join("b", 0.1)
    result = match.tick()
    late = match.join("late", 0.1)
    match.leave(b.slot)
    taken = match.join("taker", 0.1)
    assert taken.slot == b.slot  # the same slot, another player
    assert match.snapshot_head(result, late.slot) is None
    assert match.snapshot_head(result, taken.slot) is None
    with pytest.raises(LookupError, match="not seated"):
        snapshot_for(match, result, late.slot)
    assert decode_server(snapshot_for(match, result, a.slot)).you[:3] == tuple(
        match.world.pos[a.slot]
    )
    following = match.tick()
    assert late.slot in players_shown(match, following, late.slot)["id"].tolist()
    assert match.snapshot_head(following, taken.slot) is not None


def test_the_history_ring_keeps_each_snapshot_where_its_clients_decoded_it() -> None:
    # 60 ms at 30 snapshots a second: 2 + 1 snapshots kept, the ticks between never.
    match = new_match(history_seconds=0.06, snapshot_interval=2)
    walker, watcher = match.join("a", 0.1), match.join("b", 0.1)
    capacity = match.history.capacity
    assert capacity == 3
    for tick in range(1, 13):
        match.receive_input(walker.slot, msg(tick - 1, move=(0.3, 1.0)), 0.0)
        result = match.tick()
        ring = match.history
        assert len(ring) == min(tick // 2, capacity)
        if tick % 2:
            assert tick == 1 or ring.newest_tick == tick - 1
            continue
        assert ring.newest_tick == tick
        newest = (ring.start + len(ring) - 1) % capacity
        assert ring.times[newest] == tick / RATE
        # Quantised, so not where the walker is, but bit for bit where the watcher drew it.
        shown = players_shown(match, result, watcher.slot)
        drawn = shown[shown["id"] == walker.slot][0]
        feet = np.array([drawn["x"], drawn["y"], drawn["z"]], dtype=np.float64)
        assert not np.array_equal(ring.positions[newest, walker.slot], match.world.pos[walker.slot])
        assert np.array_equal(ring.positions[newest, walker.slot], feet)
        assert ring.alive[newest].tolist() == [1, 1, 0, 0]
    assert 12 - 2 * capacity not in ring.ticks  # the oldest went


def test_an_idle_player_repeats_its_last_input() -> None:
    match = new_match()
    seat = match.join("a", 0.1)
    match.receive_input(seat.slot, msg(0, move=(1.0, 0.0)), 0.0)
    match.tick()
    x1 = match.world.pos[seat.slot, 0]
    match.tick()  # no input arrived: keep running
    assert match.world.pos[seat.slot, 0] > x1
    assert match.counters["input_repeated"] == 1
    assert seat.inputs.acked == 0


def test_a_burst_of_inputs_is_caught_up_within_one_tick() -> None:
    match, twin = new_match(input_max_depth=2), new_match(input_max_depth=2)
    seat, twin_seat = match.join("a", 0.1), twin.join("a", 0.1)
    moves = [(1.0, 0.0), (0.0, 1.0), (-0.6, 0.8), (0.0, -1.0)]
    match.tick()
    match.tick()  # two ticks without inputs: the client's first ones are late
    for seq, move in enumerate(moves):
        match.receive_input(seat.slot, msg(seq, move=move), 0.0)
    match.tick()  # releases 3 inputs (4 - depth 2 + 1), in the 3 ticks that passed
    assert seat.inputs.acked == 2
    for seq, move in enumerate(moves[:3]):  # the twin gets them one tick each
        twin.receive_input(twin_seat.slot, msg(seq, move=move), 0.0)
        twin.tick()
    assert match.world.pos.tobytes() == twin.world.pos.tobytes()
    assert match.world.vel.tobytes() == twin.world.vel.tobytes()
    assert match.world.move[seat.slot].tolist() == [quantize_move(v) for v in moves[2]]


def test_a_tick_finished_without_publishing_leaves_the_same_world() -> None:
    """A replay finishes its ticks with ``publish=False``: no snapshot is coded for
    clients, and the world, its hash and the events are those of a published tick."""
    from server.sim.combat import judge

    match, twin = new_match(), new_match()
    shots = 0
    for m in (match, twin):
        for name in ("a", "b"):
            m.join(name, 0.1)
    for seq in range(12):
        for m in (match, twin):
            for slot in (0, 1):
                buttons = BUTTON_FIRE if seq % 3 == slot else 0
                m.receive_input(slot, msg(seq, move=(1.0, 0.5 * slot), buttons=buttons), 0.0)
        published = match.tick()
        batch = twin.advance()
        if not batch.empty:
            judge([batch], twin.history_view(), twin.validator)
        quiet = twin.finish(batch, publish=False)
        assert quiet.body == b"" and quiet.shown is None
        assert quiet.state_hash == published.state_hash != ""
        assert quiet.events == published.events
        assert world_state(twin) == world_state(match)
        shots += sum(isinstance(e, ShotEvent) for e in quiet.events)
    assert shots >= 4
    assert twin.snapshot_parts(quiet, quiet.seats) == {}


def shot_origins(match: Match) -> list[tuple[float, ...]]:
    """Tick once; the eyes of the shots it judged."""
    return [e.origin for e in match.tick().events if isinstance(e, ShotEvent)]


def run_until_acked(match: Match, slot: int, seq: int, limit: int = 50) -> list[tuple[float, ...]]:
    origins: list[tuple[float, ...]] = []
    for _ in range(limit):
        if match.seats[slot].inputs.acked >= seq:
            return origins
        origins += shot_origins(match)
    raise AssertionError(f"input {seq} never applied")


@pytest.mark.parametrize("late", [1, 3, 8, 12, 15, 16, 18])
def test_late_inputs_undo_the_guesses_and_the_player_ends_where_its_inputs_put_it(
    late: int,
) -> None:
    """Inputs 3 to 3 + late - 1 arrive ``late`` ticks late, all at once: meanwhile the
    server guesses (repeats input 2, then holds still), then undoes its guesses; the
    player ends exactly where a twin that got every input on time ends, and its shot
    leaves from the same eye. Up to 15 ticks late (12 banked, one due, 3 that may wait),
    every input is applied; later than that the oldest late ones had no time and are
    dropped: the twin then never sent them."""
    dropped = range(3, 3 + max(0, late - 15))
    rng = np.random.default_rng(late)
    moves = [tuple(rng.uniform(-0.7, 0.7, 2).tolist()) for _ in range(3 + late + 4)]
    last = len(moves) - 1
    inputs = [msg(seq, move=move) for seq, move in enumerate(moves)]
    inputs[last] = msg(last, move=moves[last], buttons=BUTTON_FIRE)
    match, twin = new_match(), new_match()
    seat, twin_seat = match.join("a", 0.1), twin.join("a", 0.1)
    twin_origins = []
    for message in inputs:
        if message.seq not in dropped:
            twin.receive_input(twin_seat.slot, message, twin.server_time)
        twin_origins += shot_origins(twin)
    held, origins = inputs[3 : 3 + late], []
    for seq, message in enumerate(inputs):
        if 3 <= seq < 3 + late:
            origins += shot_origins(match)  # starved: a guess
            continue
        if seq == 3 + late:
            for late_input in held:
                match.receive_input(seat.slot, late_input, match.server_time)
        match.receive_input(seat.slot, message, match.server_time)
        origins += shot_origins(match)
    origins += run_until_acked(match, seat.slot, last)
    assert match.counters["input_guesses_undone"] == 1
    assert match.counters["input_dropped_late"] == len(dropped)
    assert len(twin_origins) == 1 and origins == twin_origins
    assert match.world.pos[seat.slot].tolist() == twin.world.pos[twin_seat.slot].tolist()
    assert match.world.vel[seat.slot].tolist() == twin.world.vel[twin_seat.slot].tolist()


def test_a_player_killed_while_guessed_stays_where_it_fell() -> None:
    match = new_match()
    seat = match.join("a", 0.1)
    match.receive_input(seat.slot, msg(0), match.server_time)
    match.tick()
    match.tick()  # a guess
    match.world.alive[seat.slot] = False  # (as combat does on a kill)
    fell_at = match.world.pos[seat.slot].tolist()
    match.receive_input(seat.slot, msg(1), match.server_time)
    match.tick()
    assert match.world.pos[seat.slot].tolist() == fell_at
    assert match.counters["input_guesses_undone"] == 0


# -- untrusted input ----------------------------------------------------------------------


bad_inputs = st.one_of(
    # Bad view angles, whatever else the input says.
    st.builds(
        lambda seq, move, yaw, pitch: ("angle", seq, move, yaw, pitch),
        st.integers(10, 20),
        st.tuples(st.floats(-5, 5), st.floats(-5, 5)),
        st.one_of(st.floats(3.1416, 1e6), st.floats(-1e6, -3.1416)),
        st.floats(-1.5, 1.5),
    ),
    st.builds(
        lambda seq, move, yaw, pitch: ("angle", seq, move, yaw, pitch),
        st.integers(10, 20),
        st.tuples(st.floats(-5, 5), st.floats(-5, 5)),
        st.floats(-3.1, 3.1),
        st.one_of(st.floats(1.5708, 1e6), st.floats(-1e6, -1.5708)),
    ),
    # Replays of sequence numbers already received, with any content.
    st.builds(
        lambda seq, move: ("stale", seq, move, 0.0, 0.0),
        st.integers(0, 5),
        st.tuples(st.floats(-1, 1), st.floats(-1, 1)),
    ),
    # Sequence numbers from far in the future.
    st.builds(
        lambda seq, move: ("ahead", seq, move, 0.0, 0.0),
        st.integers(5 + 121, 2**31 - 1),
        st.tuples(st.floats(-1, 1), st.floats(-1, 1)),
    ),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(bad_inputs, min_size=1, max_size=6), st.integers(0, 3))
def test_a_rejected_input_changes_nothing_in_the_world(
    bad: list[tuple[str, int, tuple[float, float], float, float]], ticks: int
) -> None:
    matches = [new_match(), new_match()]
    for m in matches:
        m.join("a", 0.1)
        m.join("b", 0.1)
        for seq in range(6):  # inputs 0..5 received; some already applied
            m.receive_input(0, msg(seq, move=(0.6, -0.8), buttons=1), arrival=0.0)
        for _ in range(ticks):
            m.tick()
    attacked, control = matches
    expected = {"angle": InputVerdict.BAD_ANGLE, "stale": InputVerdict.STALE}
    expected["ahead"] = InputVerdict.TOO_FAR_AHEAD
    for kind, seq, move, yaw, pitch in bad:
        verdict = attacked.receive_input(0, msg(seq, move, yaw, pitch, buttons=3), arrival=1.0)
        assert verdict is expected[kind]
        assert not verdict.usable
    assert world_state(attacked) == world_state(control)
    for _ in range(8):  # ...and nothing later either: the queues were untouched
        ra, rc = attacked.tick(), control.tick()
        assert ra.body == rc.body
        assert world_state(attacked) == world_state(control)


def test_counters_record_each_verdict() -> None:
    match = new_match()
    seat = match.join("a", 0.1)
    match.receive_input(seat.slot, msg(0), 0.0)
    match.receive_input(seat.slot, msg(1, move=(3.0, 4.0)), 0.0)
    match.receive_input(seat.slot, msg(1), 0.0)
    match.receive_input(seat.slot, msg(2, yaw=4.0), 0.0)
    match.receive_input(seat.slot, msg(500), 0.0)
    assert {k: v for k, v in match.counters.items() if k.startswith("input_")} == {
        "input_accepted": 1,
        "input_clamped": 1,
        "input_stale": 1,
        "input_bad_angle": 1,
        "input_too_far_ahead": 1,
    }


def test_a_clamped_move_is_applied_at_unit_length() -> None:
    fast, unit = new_match(), new_match()
    for m, move in ((fast, (300.0, 400.0)), (unit, (0.6, 0.8))):
        m.join("a", 0.1)
        assert m.receive_input(0, msg(0, move=move), 0.0).usable
        m.tick()
    assert fast.world.move[0].tolist() == [quantize_move(0.6), quantize_move(0.8)]
    assert fast.world.pos.tobytes() == unit.world.pos.tobytes()


def test_the_client_has_no_way_to_send_a_position() -> None:
    assert not {"pos", "position", "vel", "velocity", "health", "x", "y", "z"} & set(
        InputMessage.FIELDS
    )
    wire = msg(0).to_wire()
    wire["pos"] = [100.0, 100.0, 0.0]
    with pytest.raises(InvalidField) as info:
        decode_client(msgpack.packb(wire, use_bin_type=True))
    assert "'pos'" in str(info.value)


# -- RTT ------------------------------------------------------------------------------------


def test_a_new_seat_is_probed_at_once_and_its_echoes_make_its_rtt() -> None:
    match = new_match()
    a, b = match.join("a", 0.1), match.join("b", 0.1)
    assert match.probes.estimate(a.slot) is None
    slots, ids = match.probes.due(1.0)
    assert slots.tolist() == [a.slot, b.slot]
    match.probes.echo(a.slot, int(ids[0]), 1.05)
    match.probes.echo(b.slot, int(ids[1]), 1.30)
    rtts = [match.probes.estimate(s) for s in (a.slot, b.slot)]
    assert [r.rtt if r else None for r in rtts] == [pytest.approx(0.05), pytest.approx(0.30)]
    match.leave(a.slot)
    assert match.probes.due(10.0)[0].tolist() == [b.slot]  # an empty seat is not probed


def test_a_seat_is_granted_at_most_the_largest_interpolation_delay() -> None:
    match = new_match()
    assert match.join("modest", 0.05).interp_delay == 0.05
    assert match.join("greedy", 1.0).interp_delay == match.config.lag_compensation.max_interp_delay


def test_rewind_inputs_stay_within_the_server_s_clock() -> None:
    # An input's view_time is a claim; a huge or non-finite one never reaches the match.
    for view_time in (math.inf, math.nan, -1.0, 2e9):
        wire = msg(0).to_wire()
        wire["view_time"] = view_time
        with pytest.raises(InvalidField):
            decode_client(msgpack.packb(wire, use_bin_type=True))


# -- inputs decoded in a batch --------------------------------------------------------------

batch_rows = st.lists(
    st.tuples(
        st.integers(0, 3),  # slot
        st.integers(0, 12),  # seq: repeats and reorderings give stale verdicts
        st.integers(-1, 6),  # ack_tick
        st.floats(-2.0, 2.0),  # move x: beyond 1 gets clamped
        st.floats(-2.0, 2.0),
        st.floats(-4.0, 4.0),  # yaw: beyond pi is a bad angle
        st.floats(-2.0, 2.0),  # pitch
        st.integers(0, 255),  # buttons
        st.floats(0.0, 0.2),  # arrival after the tick went out
    ),
    max_size=24,
)


@settings(max_examples=150)
@given(batch_rows)
def test_a_batch_of_decoded_inputs_does_what_receiving_each_does(rows: list[tuple]) -> None:
    one_by_one, batched = new_match(), new_match()
    for match in (one_by_one, batched):
        for name in "abcd":
            match.join(name, 0.1)
    expected = []
    for slot, seq, ack, mx, my, yaw, pitch, buttons, late in rows:
        message = InputMessage(seq, seq, (mx, my), yaw, pitch, buttons, 0.5, ack)
        expected.append(one_by_one.receive_input(slot, message, 0.1 + late))
    verdicts = batched.receive_decoded(
        np.array([r[0] for r in rows], dtype=np.int64).reshape(-1),
        np.array([(r[1], r[1], r[2], r[7]) for r in rows], dtype=np.int64).reshape(-1, 4),
        np.array([(r[3], r[4], r[5], r[6], 0.5) for r in rows]).reshape(-1, 5),
        np.array([0.1 + r[8] for r in rows]).reshape(-1),
    )
    assert verdicts == +collections.Counter(expected)
    assert batched.counters == one_by_one.counters
    for slot in range(4):
        a, b = one_by_one.seats[slot], batched.seats[slot]
        assert list(a.inputs.pending) == list(b.inputs.pending)
    one_by_one.tick(), batched.tick()
    assert world_state(one_by_one) == world_state(batched)


def test_every_seating_of_a_slot_is_a_seat_of_its_own() -> None:
    match = new_match()
    first = match.join("ada", 0.1)
    match.leave(first.slot)
    again = match.join("ada", 0.1)  # the same slot, name and delay: another player still

    assert again.slot == first.slot and again.seat_id != first.seat_id
    assert match.world.seat_id[again.slot] == again.seat_id  # what standbys are sent
    # A promoted standby at the join count its primary left off: new seats differ from
    # those the deposed primary gave out after its last replicated tick.
    deposed, promoted = new_match(), new_match()
    promoted.epoch = deposed.epoch + 1
    assert promoted.join("ada", 0.1).seat_id != deposed.join("ada", 0.1).seat_id
