"""A seated player's stream charges every frame to its connection's budgets before
anything decodes it: a flood in one read costs one pass over its headers and a budget's
worth of handling, the surplus is dropped and reported, a sustained flood ends in 1008."""

from __future__ import annotations

import asyncio

import msgpack
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import shared.wsframe
from server.net.player_stream import PlayerStream
from server.sim.hitreg import make_validator
from server.sim.input_budget import PING_ALLOWANCE, FrameKind
from server.sim.intake import DEFAULT_LIMIT, InputIntake
from server.sim.match import MatchConfig
from server.sim.matchset import MatchSet
from shared import protocol
from shared.arena_map import default_map
from shared.protocol import InputMessage, PingMessage
from shared.wsframe import OP_BINARY, OP_CLOSE, OP_PING, OP_PONG, frame
from tests.server.net.test_player_stream import Behind, FakeTransport

TICK_RATE = 60
INPUT_BURST = TICK_RATE  # a second's worth (input_allowance)


def an_input(seq: int) -> bytes:
    message = InputMessage(seq, seq, (0.5, 0.0), 0.0, 0.0, 0, 1.0, -1)
    return frame(OP_BINARY, protocol.encode(message), masked=True)


def a_ping(ping_id: int) -> bytes:
    return frame(OP_BINARY, protocol.encode(PingMessage(ping_id, 1.0)), masked=True)


class Seated:
    """A seated player's stream on a fake socket, with a real intake and match, a handler
    that counts what it is given, a hand-set server clock and a record of what was
    reported over budget (``max_offences`` of those drop the player, as the sessions do)."""

    def __init__(self, max_offences: int = 3) -> None:
        config = MatchConfig(arena=default_map(), tick_rate=TICK_RATE, max_players=2)
        self.intake = InputIntake(MatchSet(config, 1, make_validator("reference")))
        _, self.seat = self.intake.matches.join("me", 0.1)
        self.match, self.slot = 0, self.seat.slot
        self.transport = FakeTransport(Behind())
        self.handled: list[bytes] = []
        self.dropped = {FrameKind.INPUT: 0, FrameKind.PING: 0}
        self.offences, self.max_offences = 0, max_offences
        self.now = 0.0
        stream = PlayerStream.take_over(
            self.transport,
            self.on_binary,
            lambda: False,
            1 << 16,
            self.intake,
            self,
            lambda: self.now,
            self.over_budget,
        )
        assert stream is not None
        self.stream = stream

    # (the stream's owner, as the intake sees it)
    def reading(self) -> bool:
        return not self.stream.closing

    def read_now(self, data: bytes) -> None:
        self.stream.feed(data)

    def on_binary(self, payload: bytes) -> bool:
        self.handled.append(payload)
        return False

    def over_budget(self, kind: FrameKind, dropped: int, offence: bool) -> bool:
        self.dropped[kind] += dropped
        self.offences += offence
        return self.offences >= self.max_offences

    def held(self) -> int:
        """How many input frames the intake held (and has now queued, or refused)."""
        self.intake.drain()
        return sum(self.intake.take_tally()[0].values())

    def queued(self) -> list[int]:
        """The sequence numbers queued in the seat's jitter buffer so far."""
        self.intake.drain()
        return [message.seq for message, _ in self.seat.inputs.pending]

    def opcodes_written(self) -> list[int]:
        return [data[0] & 0x0F for data in self.transport.writes]


async def test_a_64_kib_read_of_tiny_frames_is_dropped_unread_beyond_the_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tiny = frame(OP_BINARY, b"\x00", masked=True)  # 7 bytes: no message of ours
    count = (64 * 1024) // len(tiny)
    player = Seated()
    unmasked = []  # the ordinary reader unmasks every frame it reads
    real_mask = shared.wsframe.mask

    def counting_mask(payload: bytes, key: bytes) -> bytes:
        unmasked.append(payload)
        return real_mask(payload, key)

    monkeypatch.setattr(shared.wsframe, "mask", counting_mask)
    player.stream.data_received(tiny * count)
    assert len(player.handled) == PING_ALLOWANCE.burst
    assert len(unmasked) == PING_ALLOWANCE.burst
    assert player.dropped[FrameKind.PING] == count - PING_ALLOWANCE.burst
    assert player.offences == 0 and not player.stream.closing  # one burst is no offence


async def test_a_64_kib_read_of_inputs_holds_a_burst_of_them_for_the_batch() -> None:
    player = Seated()
    data = b"".join(an_input(seq) for seq in range(1, 600))
    assert len(data) > 64 * 1024
    player.stream.data_received(data)
    assert player.handled == [] and len(player.intake) == 1  # one read held, nothing decoded
    assert player.dropped[FrameKind.INPUT] == 599 - INPUT_BURST
    assert player.queued() == list(range(1, INPUT_BURST + 1))  # the first ones, in order


async def test_command_packets_are_held_whole_and_charged_per_input() -> None:
    player = Seated()
    for first in range(1, 60, 2):  # a client's command packets: two inputs a read
        player.stream.data_received(an_input(first) + an_input(first + 1))
    assert len(player.intake) == 30 and player.handled == []
    assert player.queued() == list(range(1, 61))
    # The burst is spent: of the next packet's two inputs, the one a refill allows passes.
    player.now = 1.0 / TICK_RATE
    player.stream.data_received(an_input(61) + an_input(62))
    assert player.queued()[-1] == 61
    assert player.dropped[FrameKind.INPUT] == 1


async def test_one_connection_cannot_fill_the_intake_for_everyone() -> None:
    player = Seated()
    for seq in range(1, DEFAULT_LIMIT + 1):  # one input a read, all at one instant
        player.stream.data_received(an_input(seq))
    assert len(player.intake) == INPUT_BURST
    assert player.dropped[FrameKind.INPUT] == DEFAULT_LIMIT - INPUT_BURST


async def test_the_budget_refills_with_server_time() -> None:
    player = Seated()
    player.stream.data_received(b"".join(an_input(seq) for seq in range(1, 61)))
    player.stream.data_received(an_input(61))  # the burst is spent
    assert player.held() == 60
    player.now = 0.5  # half a second later: 30 more
    player.stream.data_received(b"".join(an_input(seq) for seq in range(62, 122)))
    assert player.held() == 30
    assert player.dropped[FrameKind.INPUT] == 1 + 30


async def test_an_honest_player_loses_nothing() -> None:
    player = Seated()
    for seq in range(1, 600):
        player.now = seq / TICK_RATE
        data = an_input(seq) + (a_ping(seq) if seq % 30 == 0 else b"")
        player.stream.data_received(data)
        if seq % 6 == 0:
            player.intake.drain()
    assert player.dropped == {FrameKind.INPUT: 0, FrameKind.PING: 0}
    assert len(player.handled) == 599 // 30


async def test_a_sustained_flood_ends_with_1008() -> None:
    player = Seated()
    seq = 1
    while not player.stream.closing and player.now < 10:
        player.stream.data_received(b"".join(an_input(seq + k) for k in range(20)))
        seq, player.now = seq + 20, player.now + 1 / TICK_RATE
    assert player.stream.closing and 3 <= player.now < 5  # an offence a second from the 2nd
    assert player.stream.close_code == 1008
    assert player.transport.writes[-1] == frame(
        OP_CLOSE, (1008).to_bytes(2, "big") + b"offences", masked=False
    )


async def test_websocket_pings_share_the_ping_budget_and_a_close_always_passes() -> None:
    player = Seated()
    data = frame(OP_PING, b"?", masked=True) * 1000 + frame(OP_CLOSE, b"", masked=True)
    player.stream.data_received(data)
    assert player.opcodes_written() == [OP_PONG] * PING_ALLOWANCE.burst + [OP_CLOSE]
    assert player.dropped[FrameKind.PING] == 1000 - PING_ALLOWANCE.burst


async def test_frames_cut_across_reads_are_charged_once_whole() -> None:
    player = Seated()
    data = b"".join(an_input(seq) for seq in range(1, 5)) + a_ping(1)
    for at in range(0, len(data), 37):
        player.stream.data_received(data[at : at + 37])
    assert player.queued() == [1, 2, 3, 4] and len(player.handled) == 1
    assert player.dropped == {FrameKind.INPUT: 0, FrameKind.PING: 0}


async def test_a_framing_fault_after_frames_that_pass_still_closes() -> None:
    player = Seated()
    player.stream.data_received(an_input(1) + a_ping(1) + frame(OP_BINARY, b"x", masked=False))
    assert player.stream.close_code == 1002
    # What came before the fault is read first, in order, the ordinary way.
    read = [type(protocol.decode_client(payload)) for payload in player.handled]
    assert read == [InputMessage, PingMessage] and len(player.intake) == 0


async def test_a_fragmented_message_is_read_in_order_and_charged_per_frame() -> None:
    player = Seated()
    payload = protocol.encode(PingMessage(5, 1.0))
    first = bytes([0x02]) + frame(OP_BINARY, payload[:4], masked=True)[1:]  # not final
    last = bytes([0x80]) + frame(OP_BINARY, payload[4:], masked=True)[1:]  # continuation
    player.stream.data_received(an_input(1))
    player.stream.data_received(first + last)
    assert player.handled == [payload] and player.queued() == [1]
    # A message that never ends, in 10,000 empty fragments: a budget's worth is read.
    empty = bytes([0x00, 0x80]) + b"\x00" * 4
    player.stream.data_received(first + empty * 10_000)
    assert player.dropped[FrameKind.PING] == 10_001 - (PING_ALLOWANCE.burst - 2)
    assert player.handled == [payload] and not player.stream.closing


class Queueing(Seated):
    """As the sessions do: an input read the ordinary way is queued at once."""

    def on_binary(self, payload: bytes) -> bool:
        message = protocol.decode_client(payload)
        if isinstance(message, InputMessage):
            self.intake.receive(self, message, self.now)
        else:
            self.handled.append(payload)
        return False


def a_long_input(seq: int) -> bytes:
    """An input over 125 bytes (wide integers and float64s, as plain msgpack writes them)."""
    fields = {"type": "input", "seq": seq, "tick": 2**40, "ack_tick": 2**40, "buttons": 0}
    fields |= {"move": [0.5, 0.0], "yaw": 0.0, "pitch": 0.0, "view_time": 1.0}
    payload = msgpack.packb(fields)
    assert len(payload) > 125
    return frame(OP_BINARY, payload, masked=True)


@given(
    st.lists(st.sampled_from(["input", "long", "ping", "ws_ping", "fragmented"]), max_size=16),
    st.lists(st.integers(1, 400), max_size=8),
)
@settings(max_examples=200, deadline=None)
def test_however_a_stream_is_cut_into_reads_every_frame_within_budget_arrives_in_order(
    kinds: list[str], cuts: list[int]
) -> None:
    # Within budget when nothing is cut: each fragment of a fragmented ping is a frame.
    small = kinds.count("ping") + kinds.count("ws_ping") + 2 * kinds.count("fragmented")
    assume(small <= PING_ALLOWANCE.burst)

    async def run() -> None:
        player = Queueing()
        parts, seq, pings = [], 0, []
        for kind in kinds:
            if kind in ("input", "long"):
                seq += 1
                parts.append(an_input(seq) if kind == "input" else a_long_input(seq))
            elif kind == "ping":
                parts.append(a_ping(len(parts)))
                pings.append(protocol.encode(PingMessage(len(parts) - 1, 1.0)))
            elif kind == "ws_ping":
                parts.append(frame(OP_PING, b"!", masked=True))
            else:  # a ping in two fragments
                payload = protocol.encode(PingMessage(len(parts), 1.0))
                pings.append(payload)
                head = frame(OP_BINARY, payload[:3], masked=True)
                tail = frame(OP_BINARY, payload[3:], masked=True)
                parts.append(bytes([0x02]) + head[1:] + bytes([0x80]) + tail[1:])
        data, at = b"".join(parts), 0
        for cut in [*sorted(cuts), len(data)]:
            if cut > at:
                player.now += 10.0  # (every budget full again)
                player.stream.data_received(data[at:cut])
                at = cut
        assert player.queued() == list(range(1, seq + 1))
        assert player.handled == pings
        assert player.opcodes_written() == [OP_PONG] * kinds.count("ws_ping")
        assert player.dropped == {FrameKind.INPUT: 0, FrameKind.PING: 0}

    asyncio.run(run())


@given(
    st.lists(st.sampled_from(["input", "ping", "ws_ping"]), min_size=2, max_size=8),
    st.integers(0, 8),
    st.integers(0, 8),
)
@settings(max_examples=150, deadline=None)
def test_a_few_frames_in_one_read_fare_as_the_kernel_split_would(
    kinds: list[str], inputs_left: int, pings_left: int
) -> None:
    """The plain-Python path for a command packet with a ping or a sighting in it
    (``few_frames``) holds, reads, answers and drops what the general split does, whatever
    is left of the budgets."""
    parts, seq = [], 0
    for kind in kinds:
        if kind == "input":
            seq += 1
            parts.append(an_input(seq))
        else:
            ping = a_ping(len(parts)) if kind == "ping" else frame(OP_PING, b"!", masked=True)
            parts.append(ping)
    data = b"".join(parts)

    async def outcome(split: bool) -> tuple[object, ...]:
        player = Queueing(max_offences=1000)
        # Spend most of each budget first, with reads the two paths treat alike.
        for spent in range(INPUT_BURST - inputs_left):
            player.stream.data_received(an_input(1000 + spent))
        for _ in range(PING_ALLOWANCE.burst - pings_left):
            player.stream.data_received(frame(OP_PING, b"", masked=True))
        player.transport.writes.clear()
        player.held()  # (what those left in the intake)
        if split:
            stream = player.stream
            stream._carry_out(
                stream._reads.split(data, player.now, stream._reader.idle), player.now
            )
        else:
            player.stream.data_received(data)
        held = player.held()
        return held, player.handled, player.opcodes_written(), player.dropped

    assume(any(kind != "input" for kind in kinds))  # (all inputs: the command packet's path)
    assert asyncio.run(outcome(split=False)) == asyncio.run(outcome(split=True))


# -- the compact honest client ----------------------------------------------------------------


def compact(fields: dict[str, object]) -> bytes:
    """A masked frame of ``fields`` as a compact client writes it: plain msgpack, each
    whole number a msgpack integer in its shortest encoding."""
    return frame(OP_BINARY, msgpack.packb(fields), masked=True)


def compact_input(seq: int, now: float) -> bytes:
    tick = int(now * TICK_RATE)
    fields = {"type": "input", "seq": seq, "tick": tick, "ack_tick": max(-1, tick - 3)}
    fields |= {"move": [seq % 2, 0], "yaw": 0, "pitch": 0, "buttons": 0, "view_time": int(now)}
    return compact(fields)


@pytest.mark.parametrize("per_read", [1, 2])
async def test_a_compact_honest_client_stays_seated(per_read: int) -> None:
    """Integer-valued numbers as msgpack integers (inputs of 73-90 bytes, as short as the
    protocol allows), 60 inputs a second alone or two a read, 10 pings a second and 4 probe
    echoes: every frame is charged to its own kind's budget, nothing is dropped, nothing is
    an offence, the connection stays open. (Told by size, such inputs were charged to the
    pings' budget and the client was closed with 1008 within seconds.)"""
    player = Queueing(max_offences=1)
    sizes, pings, seq, decoded = set(), 0, 0, 0
    for step in range(10 * TICK_RATE // per_read):  # 10 s of server time
        player.now = step * per_read / TICK_RATE
        frames = []
        for _ in range(per_read):
            seq += 1
            frames.append(compact_input(seq, player.now))
            sizes.add(len(frames[-1]) - 6)
        if step % (TICK_RATE // per_read // 10) == 0:  # 10 pings a second
            frames.append(compact({"type": "ping", "id": step, "t": int(player.now)}))
            pings += 1
        if step % (TICK_RATE // per_read // 4) == 1:  # 4 probe echoes a second
            frames.append(compact({"type": "probe_echo", "id": step}))
            pings += 1
        player.stream.data_received(b"".join(frames))
        if step % 3 == 0:
            decoded += player.held()  # (the tick: a verdict for each input)
    decoded += player.held()
    assert max(sizes) < 93  # (what the size rule took for pings)
    assert not player.stream.closing and player.offences == 0
    assert player.dropped == {FrameKind.INPUT: 0, FrameKind.PING: 0}
    assert decoded == seq and len(player.handled) == pings


# -- refusing cheaply -------------------------------------------------------------------------


class Offended(Seated):
    """Every message read is one offence too many (``max_offences`` reached)."""

    def on_binary(self, payload: bytes) -> bool:
        self.handled.append(payload)
        return True


async def test_once_closed_for_offences_nothing_more_is_unmasked_or_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    player = Offended()
    pings, more = b"".join(a_ping(k) for k in range(10)), a_ping(11) * 100
    unmasked = []
    real_mask = shared.wsframe.mask

    def counting_mask(payload: bytes, key: bytes) -> bytes:
        unmasked.append(payload)
        return real_mask(payload, key)

    monkeypatch.setattr(shared.wsframe, "mask", counting_mask)
    player.stream.data_received(pings)
    assert len(unmasked) == len(player.handled) == 1  # the frame that decided it, no other
    assert player.stream.closing and not player.transport.reading  # reading stops at once
    assert player.transport.writes[-1] == frame(
        OP_CLOSE, (1008).to_bytes(2, "big") + b"offences", masked=False
    )
    player.stream.data_received(more)  # (what the kernel held before the pause)
    assert len(unmasked) == 1 and player.held() == 0


async def test_a_flood_closed_for_offences_stops_being_read_at_once() -> None:
    player = Seated()
    seq = 1
    while not player.stream.closing:
        player.stream.data_received(b"".join(an_input(seq + k) for k in range(20)))
        seq, player.now = seq + 20, player.now + 1 / TICK_RATE
    assert not player.transport.reading and player.stream.close_code == 1008
    dropped = dict(player.dropped)
    player.stream.data_received(b"".join(an_input(seq + k) for k in range(600)))
    assert player.dropped == dropped and player.held() <= INPUT_BURST  # not even charged


async def test_a_close_the_client_does_not_take_drops_the_socket(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("server.net.player_stream._CLOSE_WAIT_S", 0.01)
    player = Seated()
    player.stream.close(1008, b"offences")
    assert player.transport.closed and not player.transport.aborted
    await asyncio.sleep(0.05)  # (the client never reads: the close is never flushed)
    assert player.transport.aborted


async def test_a_flooding_connection_is_not_read_for_a_while_and_earns_nothing_meanwhile(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its surplus waits in its own socket (TCP slows the sender), not in the node's CPU;
    and the pause is no lag switch: its budget earns nothing while it lasts. Three inputs
    a tick are no flood (cheap to read: the surplus is dropped as ever)."""
    monkeypatch.setattr("server.net.player_stream.FLOOD_PAUSE_S", 0.01)
    player = Seated(max_offences=1000)
    for tick in range(TICK_RATE):
        player.now = tick / TICK_RATE
        player.stream.data_received(b"".join(an_input(3 * tick + k) for k in (1, 2, 3)))
    assert player.transport.reading and player.dropped[FrameKind.INPUT] > INPUT_BURST
    player.stream.data_received(b"".join(an_input(seq) for seq in range(1000, 1600)))  # 64 KiB
    assert not player.transport.reading and not player.stream.closing
    player.now += 1.0  # (a second of server time while it is not read)
    await asyncio.sleep(0.05)
    assert player.transport.reading  # read again: a flood goes on being charged
    dropped = player.dropped[FrameKind.INPUT]
    player.stream.data_received(an_input(2000))
    assert player.dropped[FrameKind.INPUT] == dropped + 1  # nothing was earned meanwhile
    player.now += 2 / TICK_RATE
    player.stream.data_received(an_input(2001))  # the budget refills from the resume on
    assert player.dropped[FrameKind.INPUT] == dropped + 1
