"""Input frames held until the tick: the inbox, and which reads a player's stream holds."""

from __future__ import annotations

import itertools

from server.net.player_stream import PlayerStream
from server.sim.inbox import InputInbox
from shared import protocol
from shared.protocol import InputMessage, PingMessage
from shared.wsframe import OP_BINARY, OP_PING, OP_PONG, frame
from tests.server.net.test_player_stream import Behind, FakeTransport


def an_input(seq: int) -> bytes:
    message = InputMessage(seq, seq, (0.5, 0.0), 0.0, 0.0, 0, 1.0, -1)
    return frame(OP_BINARY, protocol.encode(message), masked=True)


class Taker:
    def __init__(self) -> None:
        self.batches: list[tuple[list[object], list[bytes], list[float]]] = []

    def __call__(self, owners: list[object], frames: list[bytes], arrivals: list[float]) -> None:
        self.batches.append((owners, frames, arrivals))


def test_a_flush_hands_over_every_held_frame_in_arrival_order_with_its_time() -> None:
    taker, clock = Taker(), itertools.count(1.0)
    inbox: InputInbox[str] = InputInbox(taker, lambda: next(clock))
    assert inbox.hold("a", b"1") == inbox.hold("b", b"2") == 0
    assert len(inbox) == 2 and taker.batches == []
    inbox.flush()
    assert taker.batches == [(["a", "b"], [b"1", b"2"], [1.0, 2.0])]
    assert inbox.generation == 1 and len(inbox) == 0
    inbox.flush()  # nothing held: nothing handed over, same generation
    assert len(taker.batches) == 1 and inbox.generation == 1


def test_a_full_inbox_flushes_without_waiting_for_the_tick() -> None:
    taker = Taker()
    inbox: InputInbox[str] = InputInbox(taker, lambda: 0.0, limit=3)
    generations = [inbox.hold("a", bytes([i])) for i in range(4)]
    assert [len(frames) for _, frames, _ in taker.batches] == [3]
    # The third frame went out with the flush it caused; the fourth waits for the next.
    assert generations == [0, 0, 0, 1] and len(inbox) == 1


class Seated:
    """A player's stream with an inbox in front of a recording handler."""

    def __init__(self) -> None:
        self.taker = Taker()
        self.inbox: InputInbox[object] = InputInbox(self.taker, lambda: 0.0)
        self.transport = FakeTransport(Behind())
        self.read_now: list[bytes] = []
        stream = PlayerStream.take_over(
            self.transport, self.on_binary, lambda: False, 1024, self.inbox, owner="me"
        )
        assert stream is not None
        self.stream = stream

    def on_binary(self, payload: bytes) -> bool:
        self.read_now.append(payload)
        return False

    def held(self) -> list[bytes]:
        return [read for _, reads, _ in self.taker.batches for read in reads]


async def test_inputs_are_held_and_a_ping_is_answered_at_once() -> None:
    player = Seated()
    first, both = an_input(1), an_input(2) + an_input(3)  # (two inputs in one read)
    player.stream.data_received(first)
    player.stream.data_received(both)
    assert player.read_now == [] and len(player.inbox) == 2
    ping = protocol.encode(PingMessage(7, 1.0))
    player.stream.data_received(frame(OP_BINARY, ping, masked=True))
    assert player.read_now == [ping] and len(player.inbox) == 2  # answered now; no input
    third, pong_ping = an_input(4), frame(OP_BINARY, ping, masked=True)
    player.stream.data_received(third + pong_ping)  # an input and a ping in one read
    assert player.read_now == [ping, ping]
    player.inbox.flush()
    assert player.held() == [first, both, third]


async def test_a_read_that_is_not_whole_frames_comes_after_the_held_inputs() -> None:
    player = Seated()
    held = an_input(1)
    player.stream.data_received(held)
    cut = an_input(2)
    player.stream.data_received(cut[:50])  # the start of a frame: read the ordinary way...
    assert player.held() == [held]  # ...after what was held went to the batch
    player.stream.data_received(cut[50:])
    assert len(player.read_now) == 1 and len(player.inbox) == 0


async def test_a_frame_split_across_reads_is_read_the_ordinary_way() -> None:
    player = Seated()
    data = an_input(1)
    player.stream.data_received(data[:40])
    player.stream.data_received(data[40:])  # completes a frame the reader began: not held
    assert len(player.inbox) == 0 and len(player.read_now) == 1


async def test_control_frames_and_a_closing_stream_are_never_held() -> None:
    player = Seated()
    player.stream.data_received(frame(OP_PING, b"x" * 100, masked=True))
    assert len(player.inbox) == 0
    assert player.transport.writes and player.transport.writes[0][0] & 0x0F == OP_PONG
    player.stream.close(1000)
    player.stream.data_received(an_input(1))
    assert len(player.inbox) == 0 and player.read_now == []


async def test_a_held_read_given_back_is_read_like_any_other() -> None:
    player = Seated()
    player.stream.data_received(an_input(1))
    player.inbox.flush()
    player.stream.feed(player.held()[0])
    assert len(player.read_now) == 1
