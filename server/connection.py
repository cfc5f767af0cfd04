"""One player's socket: its single write path, which never waits.

A frame is written only while the socket's send buffer has room for it; otherwise it is
dropped and counted. Snapshots are the bulk of the traffic and the next tick carries a
newer one, so "newest wins" needs no queue at all and a slow client can never stall the
tick (the approach of websockets' ``broadcast``).
"""

from __future__ import annotations

import asyncio

from aiohttp import web

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

    def _has_room(self, size: int) -> bool:
        transport = self.transport
        if not isinstance(transport, asyncio.WriteTransport) or transport.is_closing():
            return False
        _low, high = transport.get_write_buffer_limits()
        return transport.get_write_buffer_size() + size <= high

    async def send(self, frame: bytes) -> bool:
        """Write ``frame`` now if the socket has room; never waits. True when written."""
        if self.ws.closed or not self._has_room(len(frame)):
            return False
        # With room in the buffer, aiohttp writes synchronously: this await never suspends.
        await self.ws.send_bytes(frame)
        self._metrics.tally_bytes_out += len(frame)
        return True
