"""Untrusted inputs: sanitising, the per-player jitter buffers and their guesses."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from server.sim.inputs import (
    FIRST_GUESS,
    FIRST_SEQ_MAX,
    GUESS,
    MOVE_ROUNDING,
    NO_GUESS,
    UNDO_GUESSES,
    VERDICTS,
    InputQueues,
    InputVerdict,
    to_microseconds,
)
from server.sim.world import World
from shared.protocol import InputMessage
from shared.protocol.inputs import ANGLE_STEP, MOVE_STEP, quantize_move


def msg(
    seq: int = 0,
    move: tuple[float, float] = (0.0, 0.0),
    yaw: float = 0.0,
    pitch: float = 0.0,
    buttons: int = 0,
) -> InputMessage:
    return InputMessage(
        seq=seq,
        tick=seq,
        move=move,
        yaw=yaw,
        pitch=pitch,
        buttons=buttons,
        view_time=0.0,
        ack_tick=-1,
    )


class OneSeat:
    """Slot 0 of an InputQueues, one input at a time."""

    def __init__(
        self,
        max_depth: int = 4,
        future_window: int = 120,
        capacity: int = 64,
        max_catch_up: int = 8,
        surplus_memory: int = 60,
    ) -> None:
        self.queues = InputQueues(
            1, max_depth, future_window, capacity, max_catch_up, surplus_memory
        )
        self.guesses: list[tuple[int, int]] = []  # each take's (guess code, ticks guessed)

    def offer(self, message: InputMessage, arrival: float = 0.0) -> InputVerdict:
        codes = self.queues.offer(
            np.array([0]),
            np.array([[message.seq, message.tick, message.ack_tick, message.buttons]]),
            np.array([[*message.move, message.yaw, message.pitch, message.view_time]]),
            np.array([arrival]),
        )
        return VERDICTS[int(codes[0])]

    def take(self, elapsed: int = 1) -> list[InputMessage]:
        released = self.queues.release(np.array([0]), elapsed)
        self.guesses.append((int(released.guess[0]), int(released.guessed[0])))
        assert released.depth.tolist() == list(range(len(released.slot)))
        return [
            InputMessage(seq, tick, (mx, my), yaw, pitch, buttons, view, ack)
            for (seq, tick, ack, buttons), (mx, my, yaw, pitch, view, _) in zip(
                released.ints.tolist(), released.floats.tolist(), strict=True
            )
        ]

    @property
    def pending(self) -> list[tuple[InputMessage, float]]:
        return self.queues.pending(0)

    @property
    def acked(self) -> int:
        return self.queues.seat(0).acked

    @property
    def starved_ticks(self) -> int:
        return self.queues.starved_ticks(0)

    @property
    def credit(self) -> int:
        return self.queues.credit(0)


def sanitize(message: InputMessage) -> tuple[InputVerdict, tuple[float, float] | None]:
    """The verdict on one input's angles and move, and the move the queue keeps (None:
    rejected), through the compiled queue kernel."""
    seat = OneSeat()
    verdict = seat.offer(message)
    if not verdict.usable:
        return verdict, None
    (kept,) = seat.take()
    return verdict, kept.move


finite = st.floats(allow_nan=False, allow_infinity=False)

# -- sanitize -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "move", [(0.0, 0.0), (1.0, 0.0), (0.0, -1.0), (0.59375, -0.796875), (0.3125, 0.1875)]
)
def test_moves_on_their_steps_within_the_unit_circle_are_accepted_unchanged(
    move: tuple[float, float],
) -> None:
    assert sanitize(msg(move=move, yaw=math.pi, pitch=-math.pi / 2)) == (
        InputVerdict.ACCEPTED,
        move,
    )


@given(st.floats(-1e6, 1e6), st.floats(-1e6, 1e6))
def test_a_move_longer_than_one_is_clamped_onto_the_unit_circle(mx: float, my: float) -> None:
    length = math.sqrt(mx * mx + my * my)
    verdict, move = sanitize(msg(seq=3, move=(mx, my), yaw=0.5, pitch=0.25, buttons=2))
    if length <= 1.0 + MOVE_ROUNDING:
        assert (verdict, move) == (InputVerdict.ACCEPTED, (quantize_move(mx), quantize_move(my)))
        return
    assert verdict is InputVerdict.CLAMPED and move is not None
    cx, cy = move
    assert 1.0 - 2 * MOVE_STEP <= math.hypot(cx, cy) <= 1.0
    # Same direction (Python's arithmetic), then kept to whole steps towards zero.
    assert (cx, cy) == (quantize_move(mx / length), quantize_move(my / length))
    # Nothing else about the input changes.
    seat = OneSeat()
    seat.offer(msg(seq=3, move=(mx, my), yaw=0.5, pitch=0.25, buttons=2))
    assert seat.take() == [msg(seq=3, move=(cx, cy), yaw=0.5, pitch=0.25, buttons=2)]


@given(st.floats(-1e6, 1e6), st.floats(-1e6, 1e6))
def test_a_clamped_move_offered_again_is_kept_bit_for_bit(mx: float, my: float) -> None:
    _, move = sanitize(msg(move=(mx, my)))
    assert move is not None
    assert sanitize(msg(move=move)) == (InputVerdict.ACCEPTED, move)


def test_clamping_a_concrete_move() -> None:
    assert sanitize(msg(move=(3.0, 4.0))) == (InputVerdict.CLAMPED, (614 / 1024, 819 / 1024))


@given(st.floats(-math.pi, math.pi), st.floats(-math.pi / 2, math.pi / 2))
def test_angles_are_kept_to_the_nearest_step_within_their_range(yaw: float, pitch: float) -> None:
    """A finer angle is kept to the nearest whole step (one step inside at the range's
    ends), and a kept angle offered again (a standby taking over) is kept bit for bit."""
    seat = OneSeat()
    seat.offer(msg(seq=1, yaw=yaw, pitch=pitch))
    (kept,) = seat.take()
    for value, held, limit in ((yaw, kept.yaw, math.pi), (pitch, kept.pitch, math.pi / 2)):
        assert (held / ANGLE_STEP).is_integer() and abs(held) <= limit
        assert abs(held - value) <= (
            ANGLE_STEP if abs(value) > limit - ANGLE_STEP else ANGLE_STEP / 2
        )
    again = OneSeat()
    again.offer(msg(seq=1, yaw=kept.yaw, pitch=kept.pitch))
    assert again.take() == [kept]


@given(finite, finite)
def test_angles_outside_their_ranges_are_rejected(yaw: float, pitch: float) -> None:
    verdict, move = sanitize(msg(move=(5.0, 0.0), yaw=yaw, pitch=pitch))
    in_range = -math.pi <= yaw <= math.pi and -math.pi / 2 <= pitch <= math.pi / 2
    if in_range:
        assert verdict is InputVerdict.CLAMPED
    else:
        assert verdict is InputVerdict.BAD_ANGLE and move is None
        seat = OneSeat()
        assert seat.offer(msg(move=(5.0, 0.0), yaw=yaw, pitch=pitch)) is verdict
        assert seat.pending == []


@pytest.mark.parametrize(
    ("yaw", "pitch"),
    [
        (math.nextafter(math.pi, 4.0), 0.0),
        (-math.nextafter(math.pi, 4.0), 0.0),
        (0.0, math.nextafter(math.pi / 2, 2.0)),
        (0.0, -math.nextafter(math.pi / 2, 2.0)),
        (7.0, 0.0),
        (0.0, -3.0),
    ],
)
def test_angles_just_outside_the_limits_are_bad(yaw: float, pitch: float) -> None:
    assert sanitize(msg(yaw=yaw, pitch=pitch))[0] is InputVerdict.BAD_ANGLE


def test_only_accepted_and_clamped_are_usable() -> None:
    assert {v for v in InputVerdict if v.usable} == {InputVerdict.ACCEPTED, InputVerdict.CLAMPED}


# -- the jitter buffer --------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(seconds=st.floats(-1e12, 1e12) | st.sampled_from([math.inf, -math.inf, math.nan, -0.0]))
def test_times_are_kept_to_the_microsecond_and_far_ones_as_they_are(seconds: float) -> None:
    (kept,) = to_microseconds(np.array([seconds])).tolist()
    if not math.isfinite(seconds) or abs(seconds) >= 2.0**32:
        assert kept == seconds or (math.isnan(kept) and math.isnan(seconds))
        return
    assert abs(kept - seconds) <= 0.5e-6 + 1e-9
    micro = round(kept * 1e6)
    assert micro / 1e6 == kept  # whole microseconds: what the match log stores in two bytes


def test_the_queues_keep_view_and_arrival_times_to_the_microsecond_not_the_callers() -> None:
    queues = InputQueues(1)
    floats = np.array([[0.0, 0.0, 0.0, 0.0, 1 / 3]])
    arrivals = np.array([12.345678912])
    queues.offer(np.array([0]), np.array([[0, 0, -1, 0]]), floats, arrivals)
    released = queues.release(np.array([0]))
    assert released.floats[0, 4] == 0.333333 and released.floats[0, 5] == 12.345679
    assert floats[0, 4] == 1 / 3 and arrivals[0] == 12.345678912  # the caller's untouched


def test_one_input_is_released_per_tick_in_order() -> None:
    buffer = OneSeat(max_depth=4)
    for seq in range(3):
        assert buffer.offer(msg(seq)) is InputVerdict.ACCEPTED
    released = [[m.seq for m in buffer.take()] for _ in range(3)]
    assert released == [[0], [1], [2]]
    assert buffer.acked == 2
    assert buffer.starved_ticks == 0


def test_an_empty_buffer_repeats_and_counts_starvation() -> None:
    buffer = OneSeat()
    assert buffer.acked == -1
    assert buffer.take() == []
    assert buffer.starved_ticks == 1
    buffer.offer(msg(0, move=(1.0, 0.0)))
    assert [m.seq for m in buffer.take()] == [0]
    assert buffer.take() == [] and buffer.take() == []
    assert buffer.starved_ticks == 3
    assert buffer.acked == 0  # repeating does not acknowledge anything new


@pytest.mark.parametrize("max_depth", [1, 2, 4, 8])
@pytest.mark.parametrize("burst", [1, 3, 9, 20])
def test_a_burst_after_starved_ticks_is_caught_up_at_once(max_depth: int, burst: int) -> None:
    """A client silent for ``burst - 1`` ticks sends its inputs at once: they catch up to
    within ``max_depth`` in one tick, as far as the ticks it was starved allow (at most
    ``max_catch_up`` of them); what time does not allow is dropped, the oldest first: the
    newest ``max_depth - 1`` wait, the ones before them are applied."""
    buffer = OneSeat(max_depth=max_depth, max_catch_up=8)
    for _ in range(burst - 1):
        assert buffer.take() == []
    assert buffer.credit == min(burst - 1, 8)
    for seq in range(burst):
        buffer.offer(msg(seq))
    first = [m.seq for m in buffer.take()]
    waiting = min(burst - 1, max_depth - 1)
    applied = min(burst - waiting, 1 + min(burst - 1, 8))
    assert first == list(range(burst - waiting - applied, burst - waiting))
    assert [m.seq for m, _ in buffer.pending] == list(range(burst - waiting, burst))
    assert buffer.acked == first[-1]
    rest = []
    while buffer.pending:
        taken = buffer.take()
        assert len(taken) == 1  # within depth: one per tick again
        rest.append(taken[0].seq)
    assert first + rest == list(range(burst - waiting - applied, burst))


def test_a_backlog_time_does_not_allow_adds_no_lasting_delay() -> None:
    """A client whose inputs were held up for 30 ticks (a link's hiccup, a node's stall
    while it reconnects) sends them at once, then one a tick as before. The seat catches
    up what its bank allows and drops the rest: from the next tick on, each input is
    applied within ``max_depth`` ticks of its arrival, as before the hiccup. Held instead,
    the 17 it had no time for would delay every later input by 17 ticks for good."""
    buffer = OneSeat(max_depth=4, max_catch_up=8)
    for _ in range(30):
        assert buffer.take() == []
    seq = 0
    for _ in range(30):
        buffer.offer(msg(seq))
        seq += 1
    assert [m.seq for m in buffer.take()] == list(range(18, 27))  # this tick's, 8 banked
    assert [m.seq for m, _ in buffer.pending] == [27, 28, 29]  # 0 to 17 dropped
    delays = []
    for _ in range(20):
        buffer.offer(msg(seq))
        seq += 1
        taken = buffer.take()
        assert len(taken) == 1
        delays.append(seq - 1 - taken[0].seq)  # ticks the newest input waits behind
    assert max(delays) <= 3
    assert delays[-1] == 3


def test_inputs_sent_faster_than_the_ticks_are_applied_one_a_tick() -> None:
    """Three inputs a tick from a seat that was never starved: one is applied per tick (no
    more than time allows), the newest waits, the oldest is dropped; the buffer never
    fills."""
    buffer = OneSeat(max_depth=2, capacity=8)
    seq, released, verdicts = 0, [], []
    for _ in range(10):
        for _ in range(3):
            verdict = buffer.offer(msg(seq))
            verdicts.append(verdict)
            seq += verdict is InputVerdict.ACCEPTED
        taken = buffer.take()
        assert len(taken) == 1 and buffer.credit == 0
        released += [m.seq for m in taken]
        assert [m.seq for m, _ in buffer.pending] == [seq - 1]
    assert released == [3 * tick + 1 for tick in range(10)]
    assert verdicts.count(InputVerdict.ACCEPTED) == 30
    assert buffer.guesses[-1] == (NO_GUESS, 0)


def test_a_burst_beyond_the_capacity_is_refused_as_overflow() -> None:
    buffer = OneSeat(max_depth=2, capacity=8)
    verdicts = [buffer.offer(msg(seq)) for seq in range(10)]
    assert verdicts == [InputVerdict.ACCEPTED] * 8 + [InputVerdict.OVERFLOW] * 2


def test_ticks_a_stall_skipped_are_time_to_catch_up_in() -> None:
    buffer = OneSeat(max_depth=4, max_catch_up=0)  # no banking: only the ticks passed
    for seq in range(12):
        buffer.offer(msg(seq))
    assert [m.seq for m in buffer.take(elapsed=10)] == list(range(9))  # to within depth
    assert [m.seq for m in buffer.take(elapsed=1)] == [9]
    with pytest.raises(ValueError):
        buffer.take(elapsed=0)


def test_time_without_inputs_is_banked_up_to_the_cap() -> None:
    buffer = OneSeat(max_depth=1, max_catch_up=3)
    for _ in range(10):
        assert buffer.take() == []
    assert buffer.credit == 3
    for seq in range(10):
        buffer.offer(msg(seq))
    assert [m.seq for m in buffer.take()] == [6, 7, 8, 9]  # this tick's, and 3 banked
    assert buffer.credit == 0 and buffer.pending == []  # 0 to 5: no time for them
    assert buffer.take() == []


@settings(deadline=None)
@given(
    st.lists(st.integers(0, 5), min_size=1, max_size=60),
    st.integers(1, 6),
    st.integers(0, 8),
    st.integers(0, 12),
)
def test_the_buffer_releases_accepted_inputs_in_order_at_most_once_and_in_time(
    arrivals: list[int], max_depth: int, max_catch_up: int, surplus_memory: int
) -> None:
    """Whatever the arrival pattern, inputs come out in sequence, none repeated; never more
    of them than ticks have passed, nor more in a tick than one plus the cap; the buffer
    holds at most max_depth - 1 after a tick; an input is dropped only when the tick that
    dropped it had used all its time; and for ``surplus_memory`` ticks after a tick that
    dropped some, the seat spends no credit (one input a tick at most) and banks none."""
    buffer = OneSeat(
        max_depth=max_depth, capacity=16, max_catch_up=max_catch_up, surplus_memory=surplus_memory
    )
    seq = 0
    released: list[int] = []
    starved = 0
    last_drop = None
    for tick, count in enumerate(arrivals, start=1):
        for _ in range(count):
            verdict = buffer.offer(msg(seq))  # a refused input is sent again next tick
            assert verdict is InputVerdict.ACCEPTED or (
                verdict is InputVerdict.OVERFLOW and len(buffer.pending) == 16
            )
            seq += verdict is InputVerdict.ACCEPTED
        waiting = len(buffer.pending)
        taken = buffer.take()
        starved += not taken
        released += [m.seq for m in taken]
        assert len(taken) <= 1 + max_catch_up
        assert len(released) <= tick
        left = [m.seq for m, _ in buffer.pending]
        assert len(left) <= max_depth - 1
        assert left == list(range(seq - len(left), seq))  # the newest wait
        if last_drop is not None and tick - last_drop <= surplus_memory:
            assert len(taken) <= 1  # a surplus lately: nothing banked to spend
            if tick - last_drop < surplus_memory:
                assert buffer.credit == 0
        if waiting - len(taken) - len(left):  # some dropped: the tick had used all its time
            assert buffer.credit == 0
            last_drop = tick
        assert buffer.acked == (released[-1] if released else -1)
    released += [m.seq for _ in range(seq) for m in buffer.take()]
    assert released == sorted(set(released))
    assert not released or released[-1] == seq - 1  # the newest is never dropped
    assert buffer.starved_ticks >= starved


def test_duplicates_and_old_sequence_numbers_are_stale() -> None:
    buffer = OneSeat()
    assert buffer.offer(msg(5)) is InputVerdict.ACCEPTED
    assert buffer.offer(msg(5)) is InputVerdict.STALE
    assert buffer.offer(msg(4)) is InputVerdict.STALE
    assert buffer.offer(msg(0)) is InputVerdict.STALE
    assert [m.seq for m, _ in buffer.pending] == [5]
    buffer.take()
    assert buffer.offer(msg(5)) is InputVerdict.STALE  # a replay after it was applied
    assert buffer.offer(msg(6)) is InputVerdict.ACCEPTED
    assert buffer.offer(msg(6)) is InputVerdict.STALE


def test_inputs_too_far_ahead_are_refused() -> None:
    buffer = OneSeat(future_window=120)
    assert buffer.offer(msg(10)) is InputVerdict.ACCEPTED
    assert buffer.offer(msg(10 + 121)) is InputVerdict.TOO_FAR_AHEAD
    assert buffer.offer(msg(10 + 120)) is InputVerdict.ACCEPTED  # a refusal moved nothing
    assert [m.seq for m, _ in buffer.pending] == [10, 130]


def test_the_first_input_may_start_high_but_not_so_high_the_seat_runs_out() -> None:
    buffer = OneSeat(future_window=4)
    assert buffer.offer(msg(1_000_000)) is InputVerdict.ACCEPTED  # a bot in a new seat
    assert buffer.offer(msg(1_000_005)) is InputVerdict.TOO_FAR_AHEAD
    jammer = OneSeat(future_window=4)
    assert jammer.offer(msg(2**31 - 1)) is InputVerdict.TOO_FAR_AHEAD
    assert jammer.offer(msg(FIRST_SEQ_MAX + 1)) is InputVerdict.TOO_FAR_AHEAD
    assert jammer.offer(msg(FIRST_SEQ_MAX)) is InputVerdict.ACCEPTED


def test_a_gap_in_sequence_numbers_is_accepted_and_later_fillers_are_stale() -> None:
    buffer = OneSeat()
    buffer.offer(msg(0))
    assert buffer.offer(msg(3)) is InputVerdict.ACCEPTED  # 1 and 2 were lost
    assert buffer.offer(msg(2)) is InputVerdict.STALE
    assert [m.seq for m in buffer.take()] == [0]
    assert [m.seq for m in buffer.take()] == [3]
    assert buffer.acked == 3


def test_a_full_buffer_refuses_more_until_a_tick_takes_some() -> None:
    buffer = OneSeat(max_depth=2, capacity=4)
    buffer.take()
    buffer.take()  # two ticks starved: time to catch up in
    assert [buffer.offer(msg(seq)) for seq in range(5)] == [InputVerdict.ACCEPTED] * 4 + [
        InputVerdict.OVERFLOW
    ]
    assert [m.seq for m in buffer.take()] == [0, 1, 2]  # catch-up to within max_depth
    assert buffer.offer(msg(4)) is InputVerdict.ACCEPTED  # the refused one, sent again


def test_a_restored_seat_continues_after_the_acknowledged_input() -> None:
    buffer = OneSeat()
    buffer.offer(msg(0))
    buffer.offer(msg(1))
    buffer.queues.seat(0).restore(7)  # another node applied up to 7
    assert buffer.pending == [] and buffer.acked == 7
    assert buffer.offer(msg(7)) is InputVerdict.STALE
    assert buffer.offer(msg(8)) is InputVerdict.ACCEPTED
    assert [m.seq for m in buffer.take()] == [8] and buffer.acked == 8


def test_a_new_player_in_a_slot_starts_afresh() -> None:
    buffer = OneSeat()
    buffer.offer(msg(5))
    buffer.take()
    buffer.take()  # a guess, left open
    buffer.queues.reset(0)
    seat = buffer.queues.seat(0)
    assert (seat.acked, seat.starved_ticks, seat.pending, buffer.credit) == (-1, 0, [], 0)
    assert buffer.offer(msg(0)) is InputVerdict.ACCEPTED
    buffer.take()
    assert buffer.guesses[-1] == (NO_GUESS, 0)  # nothing of the last player's to undo


def test_pending_inputs_keep_their_arrival_times() -> None:
    buffer = OneSeat()
    buffer.offer(msg(0), arrival=1.25)
    buffer.offer(msg(1), arrival=1.5)
    assert [(m.seq, arrival) for m, arrival in buffer.pending] == [(0, 1.25), (1, 1.5)]


# -- guesses -----------------------------------------------------------------------------


def test_a_starved_tick_is_a_guess_and_the_next_real_input_undoes_the_run() -> None:
    buffer = OneSeat()
    buffer.offer(msg(0))
    buffer.take()
    for _ in range(3):
        assert buffer.take() == []
    buffer.offer(msg(1))
    assert [m.seq for m in buffer.take()] == [1]
    buffer.take()
    assert buffer.guesses == [
        (NO_GUESS, 0),
        (FIRST_GUESS, 1),
        (GUESS, 2),
        (GUESS, 3),
        (UNDO_GUESSES, 0),
        (FIRST_GUESS, 1),
    ]


def test_before_the_first_input_nothing_is_guessed_from() -> None:
    buffer = OneSeat()
    buffer.take()
    buffer.offer(msg(0))
    buffer.take()
    # A player with no input yet stands still: it has nothing to repeat, but the first
    # real input still closes the run (restoring where it stood is a no-op).
    assert [code for code, _ in buffer.guesses] == [FIRST_GUESS, UNDO_GUESSES]


def test_a_respawned_seat_keeps_what_was_guessed() -> None:
    buffer = OneSeat(max_depth=1)
    buffer.offer(msg(0))
    buffer.take()
    buffer.take()
    assert buffer.credit == 1
    buffer.queues.keep_guesses(0)
    assert buffer.credit == 0  # the guessed tick stands: its time was spent
    buffer.offer(msg(1))
    buffer.offer(msg(2))
    assert [m.seq for m in buffer.take()] == [2]  # no time banked for 1
    assert [code for code, _ in buffer.guesses] == [NO_GUESS, FIRST_GUESS, NO_GUESS]


def test_a_follower_holds_the_guesses_its_primary_made() -> None:
    primary, follower = OneSeat(), OneSeat()
    primary.offer(msg(0))
    primary.take()
    primary.take()
    primary.take()
    guessed, before = primary.queues.guesses(0)
    assert guessed == 2
    follower.queues.seat(0).restore(0)
    follower.queues.restore_guesses(0, guessed, before)
    follower.offer(msg(1))
    follower.take()
    assert follower.guesses == [(UNDO_GUESSES, 0)]  # the primary's run, undone here


def test_a_head_tells_a_living_guessed_player_where_it_stood_before_its_guesses() -> None:
    """Seats 0-3: guessed and alive (told where it stood before the guesses, which will be
    undone), guessed and dead (told where it lies), not guessed (where it is), never
    acknowledged anything (ack -1)."""
    queues, world = InputQueues(4), World(4)
    world.pos[:] = np.arange(12, dtype=np.float64).reshape(4, 3)
    world.vel[:] = -world.pos
    world.alive[:] = [True, False, True, True]
    for slot, acked in ((0, 7), (1, 8), (2, 9)):
        queues.restore(slot, acked)
    before = [100.0, 101.0, 102.0, 103.0, 104.0, 105.0]
    queues.restore_guesses(0, 2, before)
    queues.restore_guesses(1, 3, before)
    acks, states = queues.told(np.array([3, 0, 1, 2]), world)
    assert acks.tolist() == [-1, 7, 8, 9]
    assert states[1].tolist() == before
    for row, slot in ((0, 3), (2, 1), (3, 2)):
        assert states[row].tolist() == [*world.pos[slot], *world.vel[slot]]


def test_a_follower_holds_the_catch_up_credit_its_primary_counted() -> None:
    primary, follower = OneSeat(max_depth=1), OneSeat(max_depth=1)
    primary.offer(msg(0))
    primary.take()
    for _ in range(3):
        primary.take()
    assert primary.credit == 3
    follower.queues.seat(0).restore(0)
    follower.queues.restore_credit(0, primary.credit, primary.queues.surplus(0))
    for seat in (primary, follower):
        for seq in range(1, 7):
            seat.offer(msg(seq))
    assert [m.seq for m in follower.take()] == [m.seq for m in primary.take()] == [3, 4, 5, 6]
    follower.queues.restore_credit(0, 99, 0)  # never more than this node's own cap
    assert follower.credit == 8


def test_a_follower_holds_the_surplus_its_primary_counted() -> None:
    primary, follower = OneSeat(max_depth=1), OneSeat(max_depth=1)
    for seq in range(3):
        primary.offer(msg(seq))
    assert [m.seq for m in primary.take()] == [2]  # 0 and 1 dropped: a surplus
    primary.take()
    assert primary.queues.surplus(0) == 59
    follower.queues.seat(0).restore(primary.acked)
    follower.queues.restore_credit(0, primary.credit, primary.queues.surplus(0))
    for _ in range(3):  # silent: neither banks
        assert primary.take() == follower.take() == []
    for seat in (primary, follower):
        for seq in range(3, 7):
            seat.offer(msg(seq))
    assert [m.seq for m in follower.take()] == [m.seq for m in primary.take()] == [6]
    follower.queues.restore_credit(0, 0, 999)  # never more than this node's own memory
    assert follower.queues.surplus(0) == 60


def test_a_resumed_seat_banks_nothing_of_the_time_its_player_was_away() -> None:
    buffer = OneSeat(max_depth=1, max_catch_up=12)
    buffer.offer(msg(0))
    buffer.take()
    buffer.queues.seat(0).restore(0)  # its connection is gone
    for _ in range(20):
        assert buffer.take() == []  # away
    assert buffer.credit == 12
    buffer.queues.seat(0).resume()  # back on a new connection
    assert buffer.credit == 0
    buffer.take()  # the round trip of its comeback, before its inputs are back: not banked
    assert buffer.credit == 0
    for seq in range(1, 30):  # everything it had not had applied, at once
        buffer.offer(msg(seq))
    assert [m.seq for m in buffer.take()] == [29]  # this tick's only
    assert buffer.pending == []
    for _ in range(buffer.queues.surplus_memory - 1):
        buffer.take()  # its backlog was a surplus: nothing banked for a second
        assert buffer.credit == 0
    buffer.take()  # then it banks as any seat
    assert buffer.credit == 1


@settings(deadline=None)
@given(
    st.lists(st.integers(0, 6), min_size=1, max_size=40),
    st.integers(0, 40),
    st.lists(st.integers(0, 6), min_size=1, max_size=40),
    st.integers(1, 6),
)
def test_after_a_resume_no_more_inputs_are_applied_than_ticks_have_passed(
    before: list[int], away: int, after: list[int], max_depth: int
) -> None:
    """Whatever a client sent before it left, however long it was away and however it
    sends after its resume: from the resume on, the seat applies no more inputs than
    ticks have passed since its first input back (neither its time away nor its
    comeback's round trip bought anything)."""
    buffer = OneSeat(max_depth=max_depth, capacity=16, max_catch_up=12)
    seq = 0

    def tick(count: int) -> int:
        nonlocal seq
        for _ in range(count):
            seq += buffer.offer(msg(seq)) is InputVerdict.ACCEPTED
        return len(buffer.take())

    for count in before:
        tick(count)
    buffer.queues.seat(0).restore(buffer.acked)
    seq = buffer.acked + 1  # (what its new connection resends from: the welcome's ack)
    for _ in range(away):
        assert tick(0) == 0
    buffer.queues.seat(0).resume()
    applied, first = 0, None
    for ticks, count in enumerate(after, start=1):
        applied += tick(count)
        first = ticks if first is None and applied else first
        assert first is None or applied <= ticks - first + 1
