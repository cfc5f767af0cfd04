"""The primary's end of replication: one link per standby, acknowledgements per tick.

Each tick the primary sends its record to every standby and, in synchronous mode, waits
(at most ``ack_timeout``) until every *live* standby has acknowledged it before it shows
the tick to any player. A standby that misses the bound is dropped to *lagging*: logged,
counted and no longer waited for, until it acknowledges a tick in time again. A new link
starts *catching up* with a full state and is waited for once it has acknowledged one.

Writes never wait for a slow standby either: if its socket buffer is full the link is
closed, and the standby reconnects and receives a full state.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

from aiohttp import WSMsgType, web

from server.net.metrics import NodeMetrics
from server.replication import messages

__all__ = ["ReplicationHub", "StandbyLink"]

log = logging.getLogger("arena.replication")


@dataclass(slots=True)
class StandbyLink:
    node: str
    ws: web.WebSocketResponse
    transport: asyncio.BaseTransport | None
    state: str = "catching_up"  # then "live"; "lagging" after a missed bound
    acked_tick: int = -1
    lag_events: int = 0

    def has_room(self, size: int) -> bool:
        # (uvloop's transports implement asyncio's interface without deriving from it)
        transport = cast(asyncio.WriteTransport | None, self.transport)
        if transport is None or transport.is_closing():
            return False
        _low, high = transport.get_write_buffer_limits()
        return transport.get_write_buffer_size() + size <= max(high, 4 * size)


class ReplicationHub:
    def __init__(self, ack_timeout: float, metrics: NodeMetrics, log_context: str) -> None:
        self.ack_timeout = ack_timeout
        self.metrics = metrics
        self.log_context = log_context
        self.links: dict[str, StandbyLink] = {}
        self.fenced_epoch: int | None = None
        self._progress = asyncio.Event()

    def describe(self) -> list[dict[str, object]]:
        return [
            {
                "node": link.node,
                "state": link.state,
                "acked_tick": link.acked_tick,
                "lag_events": link.lag_events,
            }
            for link in self.links.values()
        ]

    async def serve(self, link: StandbyLink, full_state: Callable[[], bytes]) -> None:
        """Run one standby's link: send it the full state, then read its acknowledgements
        (and send a full state again whenever it asks for one to repair a gap)."""
        previous = self.links.pop(link.node, None)
        if previous is not None:
            await previous.ws.close()
        self.links[link.node] = link
        log.info("event=standby_connected standby=%s %s", link.node, self.log_context)
        try:
            await link.ws.send_bytes(full_state())
            async for message in link.ws:
                if message.type is not WSMsgType.BINARY:
                    continue
                try:
                    reply = messages.decode(message.data)
                except messages.MessageError:
                    continue  # an authenticated standby of another version: its loss
                if isinstance(reply, messages.Ack):
                    link.acked_tick = max(link.acked_tick, reply.tick)
                    self._progress.set()
                elif isinstance(reply, messages.Resync):
                    link.state = "catching_up"
                    await link.ws.send_bytes(full_state())
                elif isinstance(reply, messages.Fenced):
                    self.fenced_epoch = max(self.fenced_epoch or 0, reply.epoch)
                    self._progress.set()
        finally:
            if self.links.get(link.node) is link:
                del self.links[link.node]
            log.info("event=standby_disconnected standby=%s %s", link.node, self.log_context)
            self._progress.set()

    async def replicate(self, tick: int, record: bytes, wait: bool) -> bool:
        """Send tick ``tick`` to every standby; with ``wait``, until the live ones acked it.

        True when at least one standby is live and every live standby acknowledged the
        tick: the tick is safe to publish. False otherwise (the caller then needs the
        coordinator's confirmation that it still leads).
        """
        for link in list(self.links.values()):
            if link.state == "lagging" and link.acked_tick >= tick - 1:
                link.state = "live"  # it kept up with the previous tick: wait for it again
                log.info("event=standby_live standby=%s %s", link.node, self.log_context)
            elif link.state == "catching_up" and link.acked_tick >= 0:
                link.state = "live"
            if not link.has_room(len(record)):
                log.warning("event=standby_overflow standby=%s %s", link.node, self.log_context)
                await link.ws.close()
                continue
            await link.ws.send_bytes(record)
            self.metrics.replication_bytes.inc(len(record))
        live = [link for link in self.links.values() if link.state == "live"]
        if not wait or not live:
            return bool(live)
        try:
            async with asyncio.timeout(self.ack_timeout):
                while self.fenced_epoch is None and any(
                    link.acked_tick < tick and not link.ws.closed for link in live
                ):
                    self._progress.clear()
                    await self._progress.wait()
        except TimeoutError:
            pass
        synced = True
        for link in live:
            if link.acked_tick < tick:
                synced = False
                if link.state == "live" and not link.ws.closed:
                    link.state = "lagging"
                    link.lag_events += 1
                    self.metrics.standby_lagging.inc()
                    log.warning(
                        "event=standby_lagging standby=%s tick=%d acked=%d %s",
                        link.node,
                        tick,
                        link.acked_tick,
                        self.log_context,
                    )
        return synced and self.fenced_epoch is None

    async def close(self) -> None:
        for link in list(self.links.values()):
            with contextlib.suppress(Exception):
                await link.ws.close()
        self.links.clear()
