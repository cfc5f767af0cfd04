"""A player's WebSocket as a :class:`~server.net.links.PlayerLink`: its single write path,
which never waits, and the stream that reads it once seated.

aiohttp reads the join (behind a :class:`~server.net.first_frame.FirstFrameGuard`) and
writes a refusal; once the player is seated a :class:`~server.net.player_stream.PlayerStream`
takes the socket over and reads its frames.

A frame is written only while the socket's send buffer has room for it; otherwise it is
dropped and counted. Snapshots are the bulk of the traffic and the next tick carries a
newer one, so "newest wins" needs no queue at all and a slow client can never stall the
tick (the approach of websockets' ``broadcast``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import cast

import aiohttp
from aiohttp import WSMsgType, web

from server.net.first_frame import FirstFrameGuard
from server.net.links import SeatEvents
from server.net.metrics import NodeMetrics
from server.net.player_stream import PlayerStream
from server.sim.intake import HeldReader, InputIntake
from shared import wsframe
from shared.protocol import MalformedFrame

__all__ = ["WS_MAX_MESSAGE_BYTES", "WebSocketLink"]

# Frames above this close the connection (1009), whether aiohttp or the player's stream
# reads them; our codec's own, far smaller limit is what a client normally meets, with an
# error it can read.
WS_MAX_MESSAGE_BYTES = 64 * 1024


class WebSocketLink:
    """One player's WebSocket: its join read by aiohttp, then its frames by a
    :class:`PlayerStream`; its single, non-blocking write path."""

    def __init__(
        self,
        ws: web.WebSocketResponse,
        transport: asyncio.BaseTransport | None,
        metrics: NodeMetrics,
        address: str | None = None,
    ) -> None:
        self.ws = ws
        self.transport = transport
        self._address = address
        self._metrics = metrics
        #: Once the player is seated, the stream that reads its frames (see seat).
        self.stream: PlayerStream | None = None
        self._closing: asyncio.Future[bool] | None = None  # aiohttp's close, if unseated
        # Room is the transport's high-water mark (set once, by aiohttp, at the upgrade).
        # (uvloop's transports implement asyncio's interface without deriving from it)
        self._writer = cast(asyncio.WriteTransport | None, transport)
        self._high_water = self._writer.get_write_buffer_limits()[1] if self._writer else 0

    @classmethod
    def upgraded(
        cls, request: web.Request, ws: web.WebSocketResponse, metrics: NodeMetrics
    ) -> WebSocketLink:
        """The link of a socket just upgraded: RFC 6455's framing rules are checked (masked
        client frames) until its join is whole, which aiohttp reads."""
        FirstFrameGuard.install(request.transport, WS_MAX_MESSAGE_BYTES)
        return cls(ws, request.transport, metrics, request.remote)

    @property
    def address(self) -> str | None:
        return self._address

    # -- before the seat -------------------------------------------------------------------

    async def receive(self) -> bytes | None:
        message = await self.ws.receive()
        if message.type is WSMsgType.TEXT:
            raise MalformedFrame("text frames are not used: send binary frames")
        if message.type is WSMsgType.BINARY:
            return cast(bytes, message.data)
        return None  # closed (by the client, or by the guard: a framing fault)

    async def refuse(self, message: bytes, code: int, reason: bytes) -> None:
        """Tell the client why, then close; a client that already hung up is left alone."""
        if self.ws.closed:
            return
        with contextlib.suppress(ConnectionError, aiohttp.ClientConnectionResetError):
            await self.ws.send_bytes(message)
            await self.ws.close(code=code, message=reason)

    # -- seated ----------------------------------------------------------------------------

    def seat(
        self,
        owner: HeldReader,
        events: SeatEvents,
        intake: InputIntake,
        now: Callable[[], float],
    ) -> asyncio.Future[None] | None:
        """Read this player's frames with a :class:`PlayerStream` from now on (taken over
        before the welcome: a client sends nothing else until it has one)."""
        self.stream = PlayerStream.take_over(
            self.transport,
            events.frame,
            lambda: events.refused(MalformedFrame("text frames are not used")),
            WS_MAX_MESSAGE_BYTES,
            intake,
            owner,
            now,
            events.over_budget,
        )
        return None if self.stream is None else self.stream.closed

    def reading(self) -> bool:
        return self.stream is not None and not self.stream.closing

    def read_now(self, data: bytes) -> None:
        if self.stream is not None:
            self.stream.feed(data)

    def send(self, message: bytes) -> bool:
        return self._write(message, b"", b"")

    def send_snapshot(self, head: bytes, body: bytes, probe: bytes = b"") -> bool:
        return self._write(head, body, probe)

    def _write(self, frame: bytes, tail: bytes, then: bytes) -> bool:
        """Write ``frame`` + ``tail`` as one binary WebSocket frame now, and ``then`` (a
        second, whole message: a round-trip probe riding with a snapshot) after it in the
        same write, if the socket has room for both; never waits. True when written. (A
        snapshot is a per-player head and the tick's shared body.)

        The frames go straight onto the transport, not through aiohttp's writer
        coroutine: this runs for every player every snapshot, and a whole frame is written
        or nothing, so it interleaves safely with aiohttp's own control frames. Header,
        head and body go as one vectored write (``writelines``: uvloop hands the buffers
        to one ``writev``), so the shared body is never copied per player.
        """
        size = len(frame) + len(tail)
        transport = self._writer
        if (
            transport is None
            or self.closing
            or transport.get_write_buffer_size() + size + len(then) > self._high_water
        ):
            return False
        header = wsframe.header(wsframe.OP_BINARY, size, masked=False)
        parts: tuple[bytes, ...] = (header, frame, tail) if tail else (header, frame)
        if then:
            parts += (wsframe.header(wsframe.OP_BINARY, len(then), masked=False), then)
            size += len(then)
        transport.writelines(parts)
        self._metrics.tally_bytes_out += size
        return True

    @property
    def closing(self) -> bool:
        stream = self.stream
        if stream is not None:
            return stream.closing
        return self.ws.closed or self._writer is None or self._writer.is_closing()

    def close(self, code: int, reason: bytes) -> None:
        """The closing handshake, with ``code`` (see :meth:`PlayerStream.close`)."""
        if self.stream is not None:
            self.stream.close(code, reason)
        elif self._closing is None:
            self._closing = asyncio.ensure_future(self.ws.close(code=code, message=reason))

    async def wait_closed(self) -> None:
        if self.stream is not None:
            await self.stream.wait_closed()
        elif self._closing is not None:
            await self._closing
