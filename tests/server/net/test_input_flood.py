"""A real node, an honest player and a client that floods it with inputs in large writes:
the flood is dropped over budget and counted, the flooder is closed with 1008 once its
offences add up, and the honest player keeps its snapshots all the while."""

from __future__ import annotations

import asyncio
import contextlib

from launch.wire import upgrade
from shared import protocol
from shared.wsframe import OP_BINARY, OP_CLOSE, FrameReader, close_code, frame
from tests.server.replication.test_replication_link import (
    WAIT_S,
    Player,
    background,
    bind,
    cluster,
    until,
)

FLOOD_PER_TICK = 100  # inputs in each write, one write a tick: 6,000 a second


class RawClient:
    """A client written from the wire protocol: its own handshake, and its frames written
    in whatever runs of bytes it likes."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.welcome: protocol.WelcomeMessage | None = None
        self.errors: list[protocol.ErrorMessage] = []
        self.close_code: int | None = None
        self.welcomed = asyncio.Event()
        self.closed = asyncio.Event()
        self._frames = FrameReader(
            masked=False, max_size=1 << 20, on_message=self._message, on_control=self._control
        )

    @classmethod
    async def connect(cls, base_url: str) -> RawClient:
        async with asyncio.timeout(WAIT_S):
            reader, writer = await upgrade(base_url)
        return cls(reader, writer)

    async def join(self, name: str) -> protocol.WelcomeMessage:
        self.send(
            frame(
                OP_BINARY,
                protocol.encode(protocol.JoinMessage(protocol.PROTOCOL_VERSION, name)),
                masked=True,
            )
        )
        async with asyncio.timeout(WAIT_S):
            await self.welcomed.wait()
        assert self.welcome is not None
        return self.welcome

    def send(self, data: bytes) -> None:
        if not self.closed.is_set():
            self.writer.write(data)

    async def read(self) -> None:
        """Read the node's frames until it closes the connection."""
        try:
            while data := await self.reader.read(1 << 16):
                self._frames.feed(data)
        except ConnectionError:
            pass
        finally:
            self.closed.set()

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(ConnectionError):
            await self.writer.wait_closed()

    def _message(self, opcode: int, payload: bytes) -> None:
        message = protocol.decode_server(payload)
        if isinstance(message, protocol.WelcomeMessage):
            self.welcome = message
            self.welcomed.set()
        elif isinstance(message, protocol.ErrorMessage):
            self.errors.append(message)

    def _control(self, opcode: int, payload: bytes) -> None:
        if opcode == OP_CLOSE:
            self.close_code = close_code(payload)


def inputs(first_seq: int, count: int) -> bytes:
    return b"".join(
        frame(
            OP_BINARY,
            protocol.encode(protocol.InputMessage(seq, seq, (1.0, 0.0), 0.0, 0.0, 0, 0.0, -1)),
            masked=True,
        )
        for seq in range(first_seq, first_seq + count)
    )


async def test_an_input_flood_is_dropped_and_closed_while_the_others_keep_playing() -> None:
    async with cluster() as (nodes, session):
        primary = await nodes.start(bind(), node_id="alpha", role="primary")
        honest = Player(session)
        assert isinstance(await honest.join(primary.url, "honest"), protocol.WelcomeMessage)
        flooder = await RawClient.connect(primary.url)
        try:
            async with background(flooder.read()):
                await flooder.join("flood")
                async with background(honest.read()):
                    await honest.until_snapshot(lambda snapshot: True)
                    before, first_tick = len(honest.snapshots), honest.snapshots[-1].tick
                    seq = 1
                    async with asyncio.timeout(WAIT_S * 2):
                        while not flooder.closed.is_set():
                            flooder.send(inputs(seq, FLOOD_PER_TICK))
                            seq += FLOOD_PER_TICK
                            with contextlib.suppress(ConnectionError):
                                await flooder.writer.drain()
                            await asyncio.sleep(1 / 60)
                    got, last_tick = len(honest.snapshots) - before, honest.snapshots[-1].tick

                    metrics = primary.node.metrics.registry

                    async def dropped() -> float:
                        labels = {"reason": "over_budget"}
                        return metrics.get_sample_value("arena_inputs_dropped_total", labels) or 0

                    assert await until(dropped, "the drops are counted") > FLOOD_PER_TICK
                    assert not honest.closed.is_set()
        finally:
            await flooder.close()
    assert flooder.close_code == 1008
    assert [error.code for error in flooder.errors][-3:] == ["rate_limited"] * 3
    assert flooder.errors[-1].fatal
    # The honest player saw (nearly) every snapshot of the flood (one every other tick, at
    # the default 30 Hz of a 60 Hz node).
    assert last_tick - first_tick >= 2 * 60
    assert got >= 0.8 * (last_tick - first_tick) / primary.node.config.snapshot_interval
