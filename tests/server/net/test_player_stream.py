"""A seated player's frames read off the socket: messages, control frames, faults, and the
aiohttp protocol behind the stream kept informed."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from server.net.player_stream import PlayerStream
from server.sim.hitreg import make_validator
from server.sim.intake import InputIntake
from server.sim.match import MatchConfig
from server.sim.matchset import MatchSet
from shared import protocol
from shared.arena_map import default_map
from shared.protocol import InputMessage, PingMessage
from shared.wsframe import (
    CLOSE_PROTOCOL_ERROR,
    CLOSE_TOO_BIG,
    OP_BINARY,
    OP_CLOSE,
    OP_PING,
    OP_PONG,
    OP_TEXT,
    frame,
    header,
)

MAX_SIZE = 1024


class FakeTransport(asyncio.Transport):
    def __init__(self, protocol: asyncio.BaseProtocol) -> None:
        super().__init__()
        self.protocol = protocol
        self.writes: list[bytes] = []
        self.closed = False
        self.aborted = False
        self.reading = True

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self.protocol

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self.protocol = protocol

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.writes.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.aborted = self.closed = True

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True


class Behind(asyncio.Protocol):
    """Stands in for aiohttp's RequestHandler: records what it is told."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def connection_lost(self, exc: Exception | None) -> None:
        self.calls.append(("connection_lost", exc))

    def pause_writing(self) -> None:
        self.calls.append(("pause_writing", None))

    def resume_writing(self) -> None:
        self.calls.append(("resume_writing", None))


class Player:
    def __init__(self, drop_after: int = 10**9) -> None:
        self.behind = Behind()
        self.transport = FakeTransport(self.behind)
        self.binary: list[bytes] = []
        self.texts = 0
        self.drop_after = drop_after
        stream = PlayerStream.take_over(self.transport, self.on_binary, self.on_text, MAX_SIZE)
        assert stream is not None
        self.stream = stream

    def on_binary(self, payload: bytes) -> bool:
        self.binary.append(payload)
        return len(self.binary) >= self.drop_after

    def on_text(self) -> bool:
        self.texts += 1
        return False

    def written(self) -> list[tuple[int, bytes]]:
        """The frames the stream wrote: (opcode, payload), checked to be unmasked."""
        frames = []
        for data in self.transport.writes:
            assert data[1] & 0x80 == 0, "a server never masks"
            length, head = data[1] & 0x7F, 2
            if length == 126:
                length, head = int.from_bytes(data[2:4], "big"), 4
            frames.append((data[0] & 0x0F, data[head : head + length]))
        return frames


async def test_take_over_puts_the_stream_in_front_of_the_old_protocol() -> None:
    player = Player()
    assert player.transport.get_protocol() is player.stream
    player.transport.closed = True
    assert PlayerStream.take_over(player.transport, player.on_binary, player.on_text, 1) is None
    assert PlayerStream.take_over(None, player.on_binary, player.on_text, 1) is None


async def test_binary_messages_reach_the_handler_in_order_however_they_are_split() -> None:
    player = Player()
    data = b"".join(frame(OP_BINARY, f"input {i}".encode(), masked=True) for i in range(5))
    for at in range(0, len(data), 7):
        player.stream.data_received(data[at : at + 7])
    assert player.binary == [f"input {i}".encode() for i in range(5)]
    assert player.transport.writes == [] and not player.stream.closing


async def test_text_messages_go_to_their_own_handler() -> None:
    player = Player()
    player.stream.data_received(frame(OP_TEXT, b"hello", masked=True))
    assert player.texts == 1 and player.binary == []


async def test_a_handler_that_says_drop_closes_with_1008() -> None:
    player = Player(drop_after=2)
    player.stream.data_received(b"".join(frame(OP_BINARY, b"x", masked=True) for _ in range(3)))
    assert player.binary == [b"x", b"x"]  # the third is not read: the player is gone
    assert player.written() == [(OP_CLOSE, (1008).to_bytes(2, "big") + b"offences")]
    assert player.transport.closed and player.stream.closing


async def test_a_ping_is_answered_with_an_unmasked_pong() -> None:
    player = Player()
    player.stream.data_received(frame(OP_PING, b"are you there", masked=True))
    assert player.written() == [(OP_PONG, b"are you there")]


async def test_a_close_from_the_player_is_echoed_and_the_socket_closed() -> None:
    player = Player()
    player.stream.data_received(frame(OP_CLOSE, (1001).to_bytes(2, "big"), masked=True))
    assert player.written() == [(OP_CLOSE, (1001).to_bytes(2, "big"))]
    assert player.stream.close_code == 1001 and player.transport.closed
    player.stream.data_received(frame(OP_BINARY, b"after", masked=True))
    assert player.binary == []


@pytest.mark.parametrize(
    ("data", "code"),
    [
        pytest.param(
            frame(OP_BINARY, b"unmasked", masked=False), CLOSE_PROTOCOL_ERROR, id="unmasked"
        ),
        pytest.param(
            frame(OP_BINARY, b"x" * (MAX_SIZE + 1), masked=True), CLOSE_TOO_BIG, id="too-big"
        ),
        pytest.param(header(OP_BINARY, 1 << 20, masked=True), CLOSE_TOO_BIG, id="too-big-header"),
        pytest.param(frame(0x3, b"?", masked=True), CLOSE_PROTOCOL_ERROR, id="unknown-opcode"),
        pytest.param(
            frame(OP_CLOSE, b"\x03", masked=True), CLOSE_PROTOCOL_ERROR, id="1-byte-close"
        ),
    ],
)
async def test_a_framing_fault_closes_with_its_code_and_delivers_nothing(
    data: bytes, code: int
) -> None:
    player = Player()
    player.stream.data_received(data)
    assert player.binary == [] and player.texts == 0
    assert player.written() == [(OP_CLOSE, code.to_bytes(2, "big"))]
    assert player.transport.closed and player.stream.close_code == code


async def test_nothing_is_written_once_closing() -> None:
    player = Player()
    player.stream.close(1001, b"shutdown")
    player.stream.close(1000)  # a second close sends nothing more
    player.stream.write(OP_BINARY, b"late snapshot")
    assert player.written() == [(OP_CLOSE, (1001).to_bytes(2, "big") + b"shutdown")]


async def test_loss_and_flow_control_reach_the_protocol_behind() -> None:
    player = Player()
    player.stream.pause_writing()
    player.stream.resume_writing()
    error = ConnectionResetError()
    player.stream.connection_lost(error)
    assert player.behind.calls == [
        ("pause_writing", None),
        ("resume_writing", None),
        ("connection_lost", error),
    ]
    assert player.stream.closed.done() and player.stream.closing
    await player.stream.wait_closed()  # already closed: returns at once
    assert not player.transport.aborted


async def test_wait_closed_gives_up_and_aborts_a_socket_that_never_closes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("server.net.player_stream._CLOSE_WAIT_S", 0.01)
    player = Player()
    player.stream.close()
    await player.stream.wait_closed()
    assert player.transport.aborted


# -- inputs held for the tick's batch ----------------------------------------------------


def an_input(seq: int) -> bytes:
    message = InputMessage(seq, seq, (0.5, 0.0), 0.0, 0.0, 0, 1.0, -1)
    return frame(OP_BINARY, protocol.encode(message), masked=True)


class Seated:
    """A player's stream with an intake in front of a recording handler; the intake queues
    what it held into a real match's seat."""

    def __init__(self) -> None:
        matches = MatchSet(MatchConfig(arena=default_map(), max_players=2), 1, make_validator())
        self.intake = InputIntake(matches)
        _, self.seat = matches.join("me", 0.1)
        self.match, self.slot = 0, self.seat.slot
        self.transport = FakeTransport(Behind())
        self.handled: list[bytes] = []
        stream = PlayerStream.take_over(
            self.transport, self.on_binary, lambda: False, 1024, self.intake, self, lambda: 0.0
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

    def held(self) -> list[int]:
        """The sequence numbers the intake queued from what it held."""
        return [message.seq for message, _ in self.seat.inputs.pending]


async def test_inputs_are_held_and_a_ping_is_answered_at_once() -> None:
    player = Seated()
    first, both = an_input(1), an_input(2) + an_input(3)  # (two inputs in one read)
    player.stream.data_received(first)
    player.stream.data_received(both)
    assert player.handled == [] and len(player.intake) == 2
    ping = protocol.encode(PingMessage(7, 1.0))
    player.stream.data_received(frame(OP_BINARY, ping, masked=True))
    assert player.handled == [ping] and len(player.intake) == 2  # answered now; no input
    third, pong_ping = an_input(4), frame(OP_BINARY, ping, masked=True)
    player.stream.data_received(third + pong_ping)  # an input and a ping in one read
    assert player.handled == [ping, ping]
    player.intake.drain()
    assert player.held() == [1, 2, 3, 4]


async def test_a_frame_cut_across_reads_is_held_once_whole_after_the_ones_before() -> None:
    player = Seated()
    player.stream.data_received(an_input(1))
    cut, third = an_input(2), an_input(3)
    player.stream.data_received(cut[:50])  # the start of a frame: kept until it is whole
    assert len(player.intake) == 1 and player.handled == []
    player.stream.data_received(cut[50:] + third[:3])
    assert len(player.intake) == 2 and player.handled == []
    player.stream.data_received(third[3:])
    player.intake.drain()
    assert player.held() == [1, 2, 3] and player.handled == []


async def test_a_frame_split_in_its_header_is_held_once_whole() -> None:
    player = Seated()
    data = an_input(1)
    for at in range(len(data)):  # a byte a read
        player.stream.data_received(data[at : at + 1])
    assert len(player.intake) == 1 and player.handled == []


async def test_control_frames_and_a_closing_stream_are_never_held() -> None:
    player = Seated()
    player.stream.data_received(frame(OP_PING, b"x" * 100, masked=True))
    assert len(player.intake) == 0
    assert player.transport.writes and player.transport.writes[0][0] & 0x0F == OP_PONG
    player.stream.close(1000)
    player.stream.data_received(an_input(1))
    assert len(player.intake) == 0 and player.handled == []


async def test_a_held_read_given_back_is_read_like_any_other() -> None:
    player = Seated()
    held = an_input(1)
    player.stream.data_received(held)
    assert player.handled == [] and len(player.intake) == 1
    player.stream.feed(held)  # what the intake does with a read it cannot vouch for
    assert len(player.handled) == 1
