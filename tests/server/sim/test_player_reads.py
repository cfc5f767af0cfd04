"""The sans-I/O half of a seated player's stream: each read's plan, as data."""

from __future__ import annotations

from server.sim.input_budget import PING_ALLOWANCE, FrameKind, input_allowance
from server.sim.player_reads import PlayerReads, ReadPlan
from shared import protocol
from shared.protocol import InputMessage, PingMessage
from shared.wsframe import OP_BINARY, OP_CLOSE, frame

TICK_RATE = 60
MAX_SIZE = 1 << 16


def an_input(seq: int) -> bytes:
    message = InputMessage(seq, seq, (0.5, 0.0), 0.0, 0.0, 0, 1.0, -1)
    return frame(OP_BINARY, protocol.encode(message), masked=True)


def a_ping(ping_id: int) -> bytes:
    return frame(OP_BINARY, protocol.encode(PingMessage(ping_id, 1.0)), masked=True)


def budgeted() -> PlayerReads:
    return PlayerReads(MAX_SIZE, input_allowance(TICK_RATE), 0.0)


def test_an_input_is_held_between_messages_and_read_in_order_inside_one() -> None:
    reads = budgeted()
    data = an_input(1)
    assert reads.receive(data, 0.0, reader_idle=True) == ReadPlan(hold=data)
    assert reads.receive(data, 0.0, reader_idle=False) == ReadPlan(read_in_order=data)


def test_without_budgets_nothing_is_held_nor_charged() -> None:
    reads = PlayerReads(MAX_SIZE, None, 0.0)
    data = b"".join(an_input(seq) for seq in range(500))
    assert reads.receive(data, 0.0, reader_idle=True) == ReadPlan(read_in_order=data)


def test_a_ping_passes_the_held_inputs_and_a_close_is_never_charged() -> None:
    reads = budgeted()
    ping, close = a_ping(1), frame(OP_CLOSE, b"\x03\xe8", masked=True)
    assert reads.receive(ping, 0.0, reader_idle=True) == ReadPlan(read_now=ping)
    for _ in range(PING_ALLOWANCE.burst):
        reads.receive(ping, 0.0, reader_idle=True)
    assert reads.receive(ping, 0.0, True).drops[0].kind is FrameKind.PING  # spent
    assert reads.receive(close, 0.0, reader_idle=True) == ReadPlan(read_now=close)


def test_the_surplus_of_a_read_is_dropped_and_reported_with_its_flood() -> None:
    reads = budgeted()
    burst = input_allowance(TICK_RATE).burst
    frames = [an_input(seq) for seq in range(burst + 5)]
    plan = reads.receive(b"".join(frames), 0.0, reader_idle=True)
    assert plan.hold == b"".join(frames[:burst])  # the first ones, in order
    (dropped,) = plan.drops
    assert (dropped.kind, dropped.count, dropped.offence) == (FrameKind.INPUT, 5, False)
    assert not dropped.flooding  # five over: dropped, not worth a pause
    flood = reads.receive(b"".join(an_input(seq) for seq in range(2000)), 0.0, True)
    assert flood.hold == b"" and flood.drops[0].flooding


def test_a_frame_cut_short_waits_for_the_rest() -> None:
    reads = budgeted()
    first, second = an_input(1), an_input(2)
    data = first + second
    cut = len(first) + 3
    assert reads.receive(data[:cut], 0.0, reader_idle=True) == ReadPlan(hold=first)
    assert reads.receive(data[cut:-1], 0.0, reader_idle=True) == ReadPlan()
    assert reads.receive(data[-1:], 0.0, reader_idle=True) == ReadPlan(hold=second)


def test_a_mixed_read_holds_its_inputs_and_reads_its_pings_now() -> None:
    reads = budgeted()
    one, ping, two = an_input(1), a_ping(7), an_input(2)
    plan = reads.receive(one + ping + two, 0.0, reader_idle=True)
    assert plan == ReadPlan(hold=one + two, read_now=ping)
    assert reads.split(one + ping + two, 0.0, reader_idle=True) == plan
