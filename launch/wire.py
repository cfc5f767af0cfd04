"""A WebSocket client written by hand, for hostile clients (:mod:`launch.adversary`).

Unlike the bots' client (:mod:`client_sim.websocket`), it lets its user break the rules:
it does its own upgrade and writes whatever frames, masked or not, in whatever runs of
bytes it is told to (:mod:`shared.wsframe` frames them). What the node sends back is
decoded as it arrives and kept: the welcome, every error code, the close code, the
snapshots, the pongs (for a clock estimate).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import math
import os
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import numpy as np

from client_sim.websocket import accept_key
from launch.health import base_url
from shared import protocol
from shared.arena_map import default_map
from shared.wsframe import OP_BINARY, OP_CLOSE, FrameFault, FrameReader, close_code, frame

__all__ = [
    "DEFAULT_TICK_RATE",
    "OPEN_TIMEOUT_S",
    "HandshakeRefused",
    "Wire",
    "connect",
    "first_of",
    "node_up",
    "open_tcp",
]

OPEN_TIMEOUT_S = 5.0  # the TCP connect and the 101 answer, on a busy 2-core machine
DEFAULT_TICK_RATE = 60  # until a welcome says otherwise


class HandshakeRefused(ConnectionError):
    """The node answered the upgrade with something other than 101 (503 while warming)."""


class Wire:
    """One WebSocket to the node, written and read by hand.

    What the node sends is decoded as it arrives: the welcome, every error code, the close
    code, the snapshots (handed to :attr:`on_snapshot`); probes are answered at once
    (``answer_probes``) and pongs kept for a clock estimate. :attr:`answered` is set by every
    error and by the close, so a caller can send one frame and wait for its answer.
    """

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader, self._writer = reader, writer
        self._loop = asyncio.get_running_loop()
        self._frames = FrameReader(
            masked=False,
            max_size=protocol.MAX_SERVER_FRAME_BYTES,
            on_message=self._message,
            on_control=self._control,
        )
        self.welcome: protocol.WelcomeMessage | None = None
        #: The seat's newest session token (the welcome's, then each renewal): what a
        #: resume of the seat joins with. ``resuming``: this connection's join carried one.
        self.token: str | None = None
        self.resuming = False
        self.errors: list[str] = []
        #: Each error's ``retry_after`` (0 where none was asked for), in order.
        self.retry_afters: list[float] = []
        self.close_code: int | None = None
        self.fault: str | None = None  # the node broke framing or the protocol (a finding)
        self.answered = asyncio.Event()
        #: The node ended the connection: its close frame came (and was echoed), or EOF.
        self.closed = asyncio.Event()
        self.welcomed = asyncio.Event()
        self.answer_probes = True
        self.on_snapshot: Callable[[protocol.SnapshotMessage], None] | None = None
        # The players held at each newest snapshot (the node's deltas decode against them;
        # the node runs the default map) and the newest snapshot's players, decoded.
        arena = default_map()
        self._codec = protocol.EntityCodec.for_bounds(arena.bounds_min, arena.bounds_max)
        self.baselines = protocol.EntityBaselines()
        self._values: protocol.PlayerValues | None = None
        self.records = np.empty(0, dtype=protocol.ENTITY_DTYPE)
        self._epoch_seen = -1
        self.latest_tick = -1
        self.latest_time = 0.0
        self.snapshots = 0
        self.rtts: list[float] = []
        self._offset = 0.0  # server time minus the loop clock
        self._best_rtt = math.inf
        self._ping_id = 0

    @property
    def tick_rate(self) -> int:
        return self.welcome.tick_rate if self.welcome is not None else DEFAULT_TICK_RATE

    @property
    def player(self) -> int:
        return self.welcome.player_id if self.welcome is not None else -1

    def server_now(self) -> float:
        """This client's estimate of server time now (welcome, then the fastest pong)."""
        return self._loop.time() + self._offset

    # -- writing ------------------------------------------------------------------------

    def write(self, data: bytes) -> None:
        if not self.closed.is_set() and not self._writer.is_closing():
            self._writer.write(data)

    def send(self, payload: bytes, opcode: int = OP_BINARY, *, masked: bool = True) -> None:
        self.write(frame(opcode, payload, masked=masked))

    async def drain(self) -> None:
        """Until the socket takes more (bounded: a node that stops reading must not hold
        the attack past its end)."""
        with contextlib.suppress(ConnectionError, OSError, TimeoutError):
            async with asyncio.timeout(1.0):
                await self._writer.drain()

    def ping(self) -> None:
        self._ping_id += 1
        self.send(protocol.encode(protocol.PingMessage(self._ping_id, self._loop.time())))

    def input_frame(
        self,
        seq: int,
        *,
        move: tuple[float, float] = (0.0, 0.0),
        yaw: float = 0.0,
        buttons: int = 0,
        view_time: float | None = None,
        ack_tick: int | None = None,
    ) -> bytes:
        """One masked ``input`` frame stamped as an honest client would stamp it, unless told
        otherwise (``view_time``, ``ack_tick``)."""
        now = self.server_now()
        granted = self.welcome.interp_delay if self.welcome is not None else 0.1
        payload = protocol.encode_input(
            seq=seq,
            tick=max(0, int(now * self.tick_rate)),
            move=move,
            yaw=yaw,
            pitch=0.0,
            buttons=buttons,
            view_time=max(0.0, now - granted) if view_time is None else max(0.0, view_time),
            ack_tick=self.latest_tick if ack_tick is None else ack_tick,
        )
        return frame(OP_BINARY, payload, masked=True)

    async def join(
        self,
        name: str,
        interp_delay: float = 0.1,
        within: float = OPEN_TIMEOUT_S,
        token: str | None = None,
    ) -> bool:
        """Ask for a seat (``token``: resume that seat); True once welcomed, False if
        refused (see :attr:`errors`)."""
        self.resuming = token is not None
        join = protocol.JoinMessage(
            protocol.PROTOCOL_VERSION, name, token=token, interp_delay=interp_delay
        )
        self.send(protocol.encode(join))
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(within):
                while self.welcome is None and not self.closed.is_set():
                    self.answered.clear()
                    waiters = (self.welcomed.wait(), self.answered.wait())
                    await first_of(*waiters)
        return self.welcome is not None and not self.closed.is_set()

    async def until_closed(self, within: float) -> bool:
        """Whether the node closed the connection within ``within`` seconds."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(within):
                await self.closed.wait()
        return self.closed.is_set()

    # -- reading ------------------------------------------------------------------------

    async def read(self) -> None:
        """Read the node's frames until the connection ends (the background task of
        :func:`connect`)."""
        try:
            while data := await self._reader.read(1 << 16):
                self._frames.feed(data)
        except FrameFault as fault:
            self.fault = f"server framing: {fault}"
        except (ConnectionError, OSError):
            pass
        finally:
            self.closed.set()
            self.answered.set()

    def _message(self, opcode: int, payload: bytes) -> None:
        if opcode != OP_BINARY:
            self.fault = "a text frame from the node"
            return
        try:
            message = protocol.decode_server(payload)
        except protocol.ProtocolError as error:
            self.fault = f"undecodable frame from the node: {error.code}"
            return
        if isinstance(message, protocol.SnapshotMessage):
            if self._values is None or message.epoch != self._epoch_seen:
                rate = self.welcome.snapshot_rate if self.welcome is not None else 60
                interval = max(1, self.tick_rate // rate)
                self._values = protocol.PlayerValues(self._codec, interval)
                self._epoch_seen = message.epoch
            try:
                self.records = self.baselines.apply(
                    message.epoch, message.tick, message.base, message.entities, self._values
                )
            except protocol.ProtocolError as error:
                self.fault = f"undecodable snapshot from the node: {error}"
                return
            self.snapshots += 1
            self.latest_tick, self.latest_time = message.tick, message.server_time
            if self.on_snapshot is not None:
                self.on_snapshot(message)
        elif isinstance(message, protocol.ProbeMessage):
            if self.answer_probes:
                self.send(protocol.encode(protocol.ProbeEchoMessage(message.id)))
        elif isinstance(message, protocol.PongMessage):
            now = self._loop.time()
            rtt = now - message.t
            self.rtts.append(rtt)
            if rtt <= self._best_rtt * 1.5:  # the fast samples set the offset
                self._best_rtt = min(self._best_rtt, rtt)
                self._offset = message.server_time + rtt / 2 - now
        elif isinstance(message, protocol.WelcomeMessage):
            self.welcome = message
            self.token = message.token
            self._offset = message.server_time - self._loop.time()
            self.welcomed.set()
        elif isinstance(message, protocol.TokenMessage):
            self.token = message.token
        elif isinstance(message, protocol.ErrorMessage):
            self.errors.append(message.code)
            self.retry_afters.append(message.retry_after)
            self.answered.set()

    def _control(self, opcode: int, payload: bytes) -> None:
        if opcode == OP_CLOSE:  # the node ends it: echo the close (RFC 6455 §5.5.1)
            try:
                self.close_code = close_code(payload)
            except FrameFault:
                self.fault = "a bad close frame from the node"
            self.send(payload[:2], OP_CLOSE)
            self.closed.set()
            self.answered.set()


@contextlib.asynccontextmanager
async def connect(url: str, path: str = "/ws") -> AsyncIterator[Wire]:
    """A :class:`Wire` upgraded at ``url``, read in the background until the block ends,
    then closed (its reader cancelled and awaited)."""
    reader, writer = await upgrade(url, path)
    try:
        wire = Wire(reader, writer)
        reading = asyncio.create_task(wire.read())
        try:
            yield wire
        finally:
            writer.close()
            reading.cancel()
            await asyncio.gather(reading, return_exceptions=True)
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await writer.wait_closed()


async def upgrade(
    url: str, path: str = "/ws", receive_buffer: int | None = None
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A raw WebSocket upgrade at ``url``: the socket once the node answered 101 with the
    key's accept value; :class:`HandshakeRefused` (the socket closed) for anything else.
    ``receive_buffer``: the socket's ``SO_RCVBUF``, set before it connects (a small one
    makes a client that stops reading back the node's writes up at once)."""
    reader, writer = await open_tcp(url, receive_buffer)
    key = base64.b64encode(os.urandom(16)).decode()
    writer.write(
        f"GET {path} HTTP/1.1\r\nHost: {urlsplit(url).netloc}\r\nUpgrade: websocket\r\n"
        f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
        "Sec-WebSocket-Version: 13\r\n\r\n".encode()
    )
    try:
        async with asyncio.timeout(OPEN_TIMEOUT_S):
            head = await reader.readuntil(b"\r\n\r\n")
    except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as e:
        writer.close()
        raise HandshakeRefused(f"no upgrade answer: {type(e).__name__}") from None
    if not head.startswith(b"HTTP/1.1 101") or accept_key(key).encode() not in head:
        writer.close()
        raise HandshakeRefused(head.split(b"\r\n", 1)[0].decode(errors="replace"))
    return reader, writer


async def open_tcp(
    url: str, receive_buffer: int | None = None
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    parts = urlsplit(url)
    async with asyncio.timeout(OPEN_TIMEOUT_S):
        if receive_buffer is None:
            return await asyncio.open_connection(parts.hostname, parts.port)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        sock.setblocking(False)
        try:
            await asyncio.get_running_loop().sock_connect(sock, (parts.hostname, parts.port))
        except BaseException:
            sock.close()
            raise
        return await asyncio.open_connection(sock=sock, limit=receive_buffer)


async def first_of(*waiters: Awaitable[Any]) -> None:
    """Until the first of ``waiters`` is done (the others cancelled and awaited)."""
    tasks = [asyncio.ensure_future(w) for w in waiters]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def node_up(url: str) -> bool:
    """Whether the node answers ``/health`` with 200 (ready, serving)."""
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5.0)) as session,
            session.get(base_url(url) + "/health") as response,
        ):
            return response.status == 200
    except (aiohttp.ClientError, TimeoutError):
        return False
