"""The primary's end of replication: one link per standby, and the commit set's edge.

Each tick the primary queues its record on every link and, in synchronous mode, waits
until every member of the commit set (:mod:`server.replication.commit`) acknowledged it
before the tick may be shown, and then only until the lease that those acknowledgements
granted runs out. A member that misses the acknowledgement bound is told so
(``OutOfSync``) and waited for until it has answered or its link ended: logged, counted,
visible in ``/health``; never a silent fallback.

No send ever blocks the tick: each link has its own writer task and a bounded outbox.
When a standby reads too slowly (paused, or cut off) the queued records are dropped; the
standby sees the gap and asks for a full state, which takes it out of the set.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import cast

from aiohttp import WSMsgType, web

from server.logs import EventLogger
from server.net.metrics import NodeMetrics
from server.replication import messages
from server.replication.commit import CommitSet, Decision, Verdict

__all__ = ["OUTBOX_BYTES", "ReplicationHub", "StandbyLink"]

log = EventLogger("arena.replication")

#: Records queued for one standby before they are dropped (about 400 ticks at 300 players).
OUTBOX_BYTES = 16 << 20


@dataclass(slots=True)
class StandbyLink:
    node: str
    ws: web.WebSocketResponse
    transport: asyncio.BaseTransport | None
    outbox: collections.deque[tuple[bool, bytes]] = field(default_factory=collections.deque)
    queued_bytes: int = 0
    _ready: asyncio.Event = field(default_factory=asyncio.Event)

    def post(self, data: bytes, *, record: bool = False) -> None:
        """Queue ``data`` for the writer; records (not control messages) are dropped
        when the standby does not read them (it sees the gap and asks for a full state)."""
        if record and self.queued_bytes + len(data) > OUTBOX_BYTES:
            self.drop_records()
        self.outbox.append((record, data))
        self.queued_bytes += len(data)
        self._ready.set()

    def drop_records(self) -> None:
        """Forget the queued records (control messages stay): a full state is on its way,
        or the standby stopped reading."""
        self.outbox = collections.deque(item for item in self.outbox if not item[0])
        self.queued_bytes = sum(len(item[1]) for item in self.outbox)

    async def write(self) -> None:
        """The link's one write path (runs as long as the link)."""
        while True:
            await self._ready.wait()
            self._ready.clear()
            while self.outbox:
                _, data = self.outbox.popleft()
                self.queued_bytes -= len(data)
                await self.ws.send_bytes(data)

    def abort(self) -> None:
        """End the link now, without the closing handshake a dead peer never answers."""
        transport = cast(asyncio.WriteTransport | None, self.transport)
        if transport is not None and not transport.is_closing():
            transport.abort()


class ReplicationHub:
    def __init__(
        self,
        commit: CommitSet,
        metrics: NodeMetrics,
        log_fields: Mapping[str, object],
        clock: Callable[[], float],
    ) -> None:
        self.commit = commit
        self.metrics = metrics
        self.log_fields = log_fields
        self.clock = clock
        self.links: dict[str, StandbyLink] = {}
        self.fenced_epoch: int | None = None
        self.stopping = False
        self._progress = asyncio.Event()

    def stop_waiting(self) -> None:
        """The node stops: no tick is shown any more, so none waits for an acknowledgement
        and no standby is told it is late. aiohttp drops whatever arrives once its shutdown
        began, acknowledgements included: a standby that holds every tick shown must not
        lose its eligibility for an ack the stop itself threw away."""
        self.stopping = True
        self._progress.set()

    def describe(self) -> list[dict[str, object]]:
        links = self.links
        return [
            {
                **entry,
                "queued_bytes": links[str(entry["node"])].queued_bytes
                if entry["node"] in links
                else 0,
            }
            for entry in self.commit.describe()
        ]

    async def serve(
        self, link: StandbyLink, full_state: Callable[[], bytes], promise: float = 0.0
    ) -> None:
        """Run one standby's link: send it the full state, then read its acknowledgements
        (and send a full state again whenever it asks for one)."""
        previous = self.links.pop(link.node, None)
        if previous is not None:
            previous.abort()
        self.links[link.node] = link
        self.commit.join(link.node, promise)
        log.info("standby_connected", standby=link.node, **self.log_fields)
        writer = asyncio.create_task(self._write(link), name=f"replicate-to-{link.node}")
        try:
            link.post(full_state())
            await self._read(link, full_state)
        finally:
            writer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await writer
            if self.links.get(link.node) is link:
                del self.links[link.node]
                self.commit.leave(link.node)
            log.info("standby_disconnected", standby=link.node, **self.log_fields)
            self._progress.set()

    async def _write(self, link: StandbyLink) -> None:
        try:
            await link.write()
        except (ConnectionError, RuntimeError) as error:  # the link closed under us
            log.info(
                "standby_link_failed",
                standby=link.node,
                error=type(error).__name__,
                **self.log_fields,
            )
            link.abort()

    async def _read(self, link: StandbyLink, full_state: Callable[[], bytes]) -> None:
        async for message in link.ws:
            if message.type is not WSMsgType.BINARY:
                continue
            try:
                reply = messages.decode(message.data)
            except messages.MessageError:
                continue  # an authenticated standby of another version: its loss
            if isinstance(reply, messages.Ack):
                self.commit.acked(link.node, reply.tick)
            elif isinstance(reply, messages.Resync):
                self.commit.resynced(link.node)
                log.info("standby_resync", standby=link.node, **self.log_fields)
                link.drop_records()
                link.post(full_state())
            elif isinstance(reply, messages.Fenced):
                self.fenced_epoch = max(self.fenced_epoch or 0, reply.epoch)
            self._progress.set()

    async def replicate(self, tick: int, record: bytes, wait: bool) -> Decision:
        """Send tick ``tick`` to every standby; with ``wait``, until the commit set holds
        it or has said what else to do. The decision says whether (and until when) the
        tick may be shown."""
        for node in self.commit.admissions(tick):
            self.links[node].post(messages.encode(messages.InSync(tick)))
            log.info("standby_in_sync", standby=node, tick=tick, **self.log_fields)
        for link in self.links.values():
            link.post(record, record=True)
            self.metrics.replication_bytes.inc(len(record))
        self.commit.sent(tick, self.clock())
        stalled = False
        while True:
            if self.stopping:
                return Decision(Verdict.STOPPING)
            decision = self.commit.decide(tick, self.clock(), wait=wait)
            for node in decision.late:
                self._tell_out_of_sync(node, tick)
            if decision.verdict is not Verdict.WAIT or self.fenced_epoch is not None:
                return decision
            if not stalled:
                stalled = True
                self.metrics.ticks_stalled.inc()
            self._progress.clear()
            timeout = None if decision.wake_at is None else decision.wake_at - self.clock()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._progress.wait()

    def _tell_out_of_sync(self, node: str, tick: int) -> None:
        member = self.commit.members[node]
        self.metrics.standby_out_of_sync.inc()
        log.warning(
            "standby_out_of_sync",
            standby=node,
            tick=tick,
            acked=member.acked_tick,
            decision="waiting until it answers or its link ends",
            **self.log_fields,
        )
        link = self.links.get(node)
        if link is not None:
            link.post(messages.encode(messages.OutOfSync(tick)))

    async def close(self) -> None:
        for link in list(self.links.values()):
            link.abort()
        self.links.clear()
        for node in list(self.commit.members):
            self.commit.leave(node)
