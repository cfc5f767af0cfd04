"""One player's socket: its single write path, which never waits.

A frame is written only while the socket's send buffer has room for it; otherwise it is
dropped and counted. Snapshots are the bulk of the traffic and the next tick carries a
newer one, so "newest wins" needs no queue at all and a slow client can never stall the
tick (the approach of websockets' ``broadcast``).
"""

from __future__ import annotations

import asyncio

from aiohttp import web

from shared import wsframe

from .metrics import NodeMetrics

__all__ = ["Connection"]


class Connection:
    """One player's socket: its single, non-blocking write path and its offence count."""

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
        self._metrics = metrics
        # Room is the transport's high-water mark (set once, by aiohttp, at the upgrade).
        self._writer = transport if isinstance(transport, asyncio.WriteTransport) else None
        self._high_water = self._writer.get_write_buffer_limits()[1] if self._writer else 0

    def send(self, frame: bytes) -> bool:
        """Write ``frame`` as one binary WebSocket frame now, if the socket has room; never
        waits. True when written.

        The frame goes straight onto the transport (header + payload in one write), not
        through aiohttp's writer coroutine: this runs for every player every tick, and a
        whole frame is written or nothing, so it interleaves safely with aiohttp's own
        control frames.
        """
        size = len(frame)
        transport = self._writer
        if (
            transport is None
            or self.ws.closed
            or transport.is_closing()
            or transport.get_write_buffer_size() + size > self._high_water
        ):
            return False
        transport.write(wsframe.header(wsframe.OP_BINARY, size, masked=False) + frame)
        self._metrics.tally_bytes_out += size
        return True
