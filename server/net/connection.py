"""One player's socket: its single write path, which never waits.

A frame is written only while the socket's send buffer has room for it; otherwise it is
dropped and counted. Snapshots are the bulk of the traffic and the next tick carries a
newer one, so "newest wins" needs no queue at all and a slow client can never stall the
tick (the approach of websockets' ``broadcast``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import cast

from aiohttp import web

from server.net.metrics import NodeMetrics
from server.net.player_stream import OverBudget, PlayerStream
from server.sim.intake import InputIntake
from shared import wsframe

__all__ = ["WS_MAX_MESSAGE_BYTES", "Connection"]

# Frames above this close the connection (1009), whether aiohttp or the player's stream
# reads them; our codec's own, far smaller limit is what a client normally meets, with an
# error it can read.
WS_MAX_MESSAGE_BYTES = 64 * 1024


class Connection:
    """One player's socket: its single, non-blocking write path and its offence count; the
    owner of its held input reads (:class:`server.sim.intake.HeldReader`)."""

    def __init__(
        self,
        ws: web.WebSocketResponse,
        transport: asyncio.BaseTransport | None,
        slot: int,
        metrics: NodeMetrics,
        match: int = 0,
    ) -> None:
        self.ws = ws
        self.transport = transport
        self.slot = slot
        self.match = match
        self.offences = 0
        #: Seated on its own seat (set and cleared by the sessions): its inputs count.
        self.seated = False
        #: When (unix time) the player's current session token was issued: the sessions
        #: renew it once it has used half its life.
        self.token_issued_at = 0.0
        self._metrics = metrics
        #: Once the player is seated, the stream that reads its frames (see take_over).
        self.stream: PlayerStream | None = None
        # Room is the transport's high-water mark (set once, by aiohttp, at the upgrade).
        # (uvloop's transports implement asyncio's interface without deriving from it)
        self._writer = cast(asyncio.WriteTransport | None, transport)
        self._high_water = self._writer.get_write_buffer_limits()[1] if self._writer else 0

    def send(self, frame: bytes, tail: bytes = b"", then: bytes = b"") -> bool:
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

    def reading(self) -> bool:
        return self.seated and self.stream is not None and not self.stream.closing

    def read_now(self, data: bytes) -> None:
        if self.stream is not None:
            self.stream.feed(data)

    def take_over(
        self,
        on_binary: Callable[[bytes], bool],
        on_text: Callable[[], bool],
        max_size: int,
        intake: InputIntake,
        now: Callable[[], float],
        on_over_budget: OverBudget | None = None,
    ) -> PlayerStream | None:
        """Read this player's frames with a :class:`PlayerStream` from now on, its inputs
        held in ``intake`` under this connection, stamped with ``now()`` (server time); the
        frames over its budgets are reported to ``on_over_budget``."""
        self.stream = PlayerStream.take_over(
            self.transport, on_binary, on_text, max_size, intake, self, now, on_over_budget
        )
        return self.stream

    async def close(self, code: int, reason: bytes) -> None:
        """The closing handshake, with ``code``; returns once the socket is closed."""
        if self.stream is not None:
            self.stream.close(code, reason)
            await self.stream.wait_closed()
        else:
            await self.ws.close(code=code, message=reason)
