"""Untrusted inputs: sanitising and the per-player jitter buffer."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from server.inputs import InputBuffer, InputVerdict, sanitize
from shared.protocol import InputMessage


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


finite = st.floats(allow_nan=False, allow_infinity=False)

# -- sanitize -----------------------------------------------------------------------------


@pytest.mark.parametrize("move", [(0.0, 0.0), (1.0, 0.0), (0.0, -1.0), (0.6, -0.8), (0.3, 0.2)])
def test_moves_within_the_unit_circle_are_accepted_unchanged(move: tuple[float, float]) -> None:
    message = msg(move=move, yaw=math.pi, pitch=-math.pi / 2)
    result = sanitize(message)
    assert result.verdict is InputVerdict.ACCEPTED
    assert result.message is message


@given(st.floats(-1e6, 1e6), st.floats(-1e6, 1e6))
def test_a_move_longer_than_one_is_clamped_onto_the_unit_circle(mx: float, my: float) -> None:
    length = math.sqrt(mx * mx + my * my)
    message = msg(seq=3, move=(mx, my), yaw=0.5, pitch=0.25, buttons=2)
    result = sanitize(message)
    if length <= 1.0:
        assert result.verdict is InputVerdict.ACCEPTED and result.message is message
        return
    assert result.verdict is InputVerdict.CLAMPED
    assert result.message is not None
    cx, cy = result.message.move
    assert math.hypot(cx, cy) == pytest.approx(1.0, abs=1e-12)
    assert (cx, cy) == (mx / length, my / length)  # same direction
    # Nothing else about the input changes.
    assert result.message == msg(seq=3, move=(cx, cy), yaw=0.5, pitch=0.25, buttons=2)


def test_clamping_a_concrete_move() -> None:
    result = sanitize(msg(move=(3.0, 4.0)))
    assert result.verdict is InputVerdict.CLAMPED
    assert result.message is not None and result.message.move == (0.6, 0.8)


@given(finite, finite)
def test_angles_outside_their_ranges_are_rejected(yaw: float, pitch: float) -> None:
    result = sanitize(msg(move=(5.0, 0.0), yaw=yaw, pitch=pitch))
    in_range = -math.pi <= yaw <= math.pi and -math.pi / 2 <= pitch <= math.pi / 2
    if in_range:
        assert result.verdict is InputVerdict.CLAMPED
    else:
        assert result.verdict is InputVerdict.BAD_ANGLE
        assert result.message is None


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
    assert sanitize(msg(yaw=yaw, pitch=pitch)).verdict is InputVerdict.BAD_ANGLE


def test_only_accepted_and_clamped_are_usable() -> None:
    assert {v for v in InputVerdict if v.usable} == {InputVerdict.ACCEPTED, InputVerdict.CLAMPED}


# -- the jitter buffer --------------------------------------------------------------------


def test_one_input_is_released_per_tick_in_order() -> None:
    buffer = InputBuffer(max_depth=4)
    for seq in range(3):
        assert buffer.offer(msg(seq)) is InputVerdict.ACCEPTED
    released = [[m.seq for m in buffer.take()] for _ in range(3)]
    assert released == [[0], [1], [2]]
    assert buffer.acked == 2
    assert buffer.starved_ticks == 0


def test_an_empty_buffer_repeats_and_counts_starvation() -> None:
    buffer = InputBuffer()
    assert buffer.acked == -1
    assert buffer.take() == []
    assert buffer.starved_ticks == 1
    buffer.offer(msg(0, move=(1.0, 0.0)))
    assert [m.seq for m in buffer.take()] == [0]
    assert buffer.take() == [] and buffer.take() == []
    assert buffer.starved_ticks == 3
    assert buffer.acked == 0  # repeating does not acknowledge anything new
    assert buffer.last_applied is not None and buffer.last_applied.move == (1.0, 0.0)


@pytest.mark.parametrize("max_depth", [1, 2, 4, 8])
@pytest.mark.parametrize("burst", [1, 3, 9, 20])
def test_a_burst_deeper_than_max_depth_is_caught_up_at_once(max_depth: int, burst: int) -> None:
    buffer = InputBuffer(max_depth=max_depth)
    for seq in range(burst):
        buffer.offer(msg(seq))
    first = [m.seq for m in buffer.take()]
    assert first == list(range(max(1, burst - max_depth + 1)))
    assert len(buffer.pending) == min(burst - 1, max_depth - 1)
    assert buffer.acked == first[-1]
    rest = []
    while buffer.pending:
        taken = buffer.take()
        assert len(taken) == 1  # once within depth, one per tick again
        rest.append(taken[0].seq)
    assert first + rest == list(range(burst))


@given(st.lists(st.integers(0, 5), min_size=1, max_size=60), st.integers(1, 6))
def test_the_buffer_releases_every_accepted_input_once_in_order(
    arrivals: list[int], max_depth: int
) -> None:
    """Whatever the arrival pattern, inputs come out in sequence, none lost or repeated,
    and the buffer never holds more than max_depth - 1 after a tick."""
    buffer = InputBuffer(max_depth=max_depth)
    seq = 0
    released: list[int] = []
    starved = 0
    for count in arrivals:
        for _ in range(count):
            assert buffer.offer(msg(seq)) is InputVerdict.ACCEPTED
            seq += 1
        taken = buffer.take()
        starved += not taken
        released += [m.seq for m in taken]
        assert len(buffer.pending) <= max_depth - 1
        assert buffer.acked == (released[-1] if released else -1)
    released += [m.seq for _ in range(seq) for m in buffer.take()]
    assert released == list(range(seq))
    assert buffer.starved_ticks >= starved


def test_duplicates_and_old_sequence_numbers_are_stale() -> None:
    buffer = InputBuffer()
    assert buffer.offer(msg(5)) is InputVerdict.ACCEPTED
    assert buffer.offer(msg(5)) is InputVerdict.STALE
    assert buffer.offer(msg(4)) is InputVerdict.STALE
    assert buffer.offer(msg(0)) is InputVerdict.STALE
    assert [m.seq for m, _ in buffer.pending] == [5]
    buffer.take()
    assert buffer.offer(msg(5)) is InputVerdict.STALE  # a replay after it was applied
    assert buffer.offer(msg(6)) is InputVerdict.ACCEPTED
    assert buffer.last_received == 6


def test_inputs_too_far_ahead_are_refused() -> None:
    buffer = InputBuffer(future_window=120)
    assert buffer.offer(msg(10)) is InputVerdict.ACCEPTED
    assert buffer.offer(msg(10 + 121)) is InputVerdict.TOO_FAR_AHEAD
    assert buffer.last_received == 10  # a refused input moves nothing
    assert buffer.offer(msg(10 + 120)) is InputVerdict.ACCEPTED
    assert [m.seq for m, _ in buffer.pending] == [10, 130]


def test_the_first_input_may_start_at_any_sequence_number() -> None:
    buffer = InputBuffer(future_window=4)
    assert buffer.offer(msg(1_000_000)) is InputVerdict.ACCEPTED
    assert buffer.offer(msg(1_000_005)) is InputVerdict.TOO_FAR_AHEAD


def test_a_gap_in_sequence_numbers_is_accepted_and_later_fillers_are_stale() -> None:
    buffer = InputBuffer()
    buffer.offer(msg(0))
    assert buffer.offer(msg(3)) is InputVerdict.ACCEPTED  # 1 and 2 were lost
    assert buffer.offer(msg(2)) is InputVerdict.STALE
    assert [m.seq for m in buffer.take()] == [0]
    assert [m.seq for m in buffer.take()] == [3]
    assert buffer.acked == 3
