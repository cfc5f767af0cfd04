"""The join's frame follows RFC 6455 as docs/protocol.md says: a text frame is answered
``malformed_frame`` (1008), an unmasked frame closes the connection with 1002 and seats
nobody, whatever aiohttp's own reader would have taken."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest

from launch.wire import upgrade
from shared import protocol
from shared.wsframe import (
    OP_BINARY,
    OP_CLOSE,
    OP_PING,
    OP_PONG,
    OP_TEXT,
    FrameReader,
    close_code,
    frame,
)
from tests.server.replication.test_replication_link import WAIT_S, bind, cluster, health

JOIN = protocol.encode(protocol.JoinMessage(protocol.PROTOCOL_VERSION, "raw"))


@dataclass
class RawClient:
    """A WebSocket client by hand: it sends whatever frames it is told to, masked or not."""

    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    messages: list[tuple[int, bytes]] = field(default_factory=list)
    close: int | None = None

    @classmethod
    async def upgrade(cls, base_url: str) -> RawClient:
        async with asyncio.timeout(WAIT_S):
            reader, writer = await upgrade(base_url)
        return cls(reader, writer)

    def send(self, opcode: int, payload: bytes, *, masked: bool) -> None:
        self.writer.write(frame(opcode, payload, masked=masked))

    async def until_closed(self) -> None:
        """Read the server's frames until it closes the connection (or its close frame)."""

        def control(opcode: int, payload: bytes) -> None:
            if opcode == OP_CLOSE:
                self.close = close_code(payload)

        frames = FrameReader(
            masked=False, max_size=1 << 20, on_message=self._message, on_control=control
        )
        async with asyncio.timeout(WAIT_S):
            while self.close is None and (data := await self.reader.read(65536)):
                frames.feed(data)
        self.writer.close()

    def _message(self, opcode: int, payload: bytes) -> None:
        self.messages.append((opcode, payload))

    def decoded(self) -> list[protocol.ServerMessage]:
        assert all(opcode == OP_BINARY for opcode, _ in self.messages)
        return [protocol.decode_server(payload) for _, payload in self.messages]


async def next_frame(client: RawClient) -> tuple[int, bytes]:
    """The server's next frame (unmasked, unfragmented): its first byte and its payload."""
    async with asyncio.timeout(WAIT_S):
        first, length = await client.reader.readexactly(2)
        assert not length & 0x80  # a server never masks
        if length == 126:
            length = int.from_bytes(await client.reader.readexactly(2), "big")
        return first, await client.reader.readexactly(length)


async def test_a_masked_join_is_welcomed() -> None:
    # The raw client itself is right: masked, it plays.
    async with cluster() as (nodes, _session):
        node = await nodes.start(bind(), node_id="alpha", role="primary")
        client = await RawClient.upgrade(node.url)
        client.send(OP_BINARY, JOIN, masked=True)

        first, welcome = await next_frame(client)

        assert first == 0x80 | OP_BINARY
        assert isinstance(protocol.decode_server(welcome), protocol.WelcomeMessage)
        client.writer.close()


@pytest.mark.parametrize(
    ("opcode", "payload"),
    [(OP_BINARY, JOIN), (OP_TEXT, b"join"), (OP_PING, b"")],
    ids=["join", "text", "ping"],
)
async def test_an_unmasked_first_frame_closes_with_1002_and_seats_nobody(
    opcode: int, payload: bytes
) -> None:
    async with cluster() as (nodes, session):
        node = await nodes.start(bind(), node_id="alpha", role="primary")
        client = await RawClient.upgrade(node.url)
        client.send(opcode, payload, masked=False)

        await client.until_closed()

        assert client.close == 1002
        assert client.messages == []  # no welcome, no error: a framing fault
        assert (await health(session, node.admin_url))["players"] == 0


async def test_a_text_first_frame_is_malformed_and_closes_with_1008() -> None:
    async with cluster() as (nodes, session):
        node = await nodes.start(bind(), node_id="alpha", role="primary")
        client = await RawClient.upgrade(node.url)
        client.send(OP_TEXT, b'{"type": "join", "v": 1, "name": "json"}', masked=True)

        await client.until_closed()

        (error,) = client.decoded()
        assert isinstance(error, protocol.ErrorMessage)
        assert (error.code, error.fatal) == ("malformed_frame", True)
        assert client.close == 1008
        assert (await health(session, node.admin_url))["players"] == 0
        registry = node.node.metrics.registry
        counted = registry.get_sample_value(
            "arena_protocol_errors_total", {"code": "malformed_frame"}
        )
        assert counted == 1


async def test_a_text_first_frame_that_is_not_utf8_closes_with_1007() -> None:
    # RFC 6455 §8.1: text must be UTF-8 (msgpack bytes in a text frame are not, mostly).
    async with cluster() as (nodes, session):
        node = await nodes.start(bind(), node_id="alpha", role="primary")
        client = await RawClient.upgrade(node.url)
        client.send(OP_TEXT, b"\x82\xa4type\xa4join\xa1v\xff", masked=True)

        await client.until_closed()

        assert client.close == 1007
        assert client.messages == []
        assert (await health(session, node.admin_url))["players"] == 0


async def test_a_join_split_over_reads_after_a_masked_ping_is_welcomed() -> None:
    # The guard reads the stream as it comes: a ping first, then the join in two writes.
    async with cluster() as (nodes, session):
        node = await nodes.start(bind(), node_id="alpha", role="primary")
        client = await RawClient.upgrade(node.url)
        join = frame(OP_BINARY, JOIN, masked=True)
        client.writer.write(frame(OP_PING, b"hi", masked=True) + join[:5])
        await client.writer.drain()
        assert await next_frame(client) == (0x80 | OP_PONG, b"hi")
        client.writer.write(join[5:])

        first, welcome = await next_frame(client)

        assert first == 0x80 | OP_BINARY
        assert isinstance(protocol.decode_server(welcome), protocol.WelcomeMessage)
        assert (await health(session, node.admin_url))["players"] == 1
        client.writer.close()
