"""A node's UDP socket: datagrams read in batches, a loop turn's datagrams sent in one.

The socket is read with ``loop.add_reader`` and drained with ``recvmmsg``
(:func:`shared.datagram.mmsg.receive_batch`), up to :data:`READ_BATCHES` batches a
wake-up so a flood cannot starve the tick. A datagram from a connected address goes to
its :class:`~server.net.udp.link.UdpLink`; anything else to the handshake
(:class:`shared.datagram.ServerHandshake`), whose replies are never larger than what the
address sent. What the sessions queue on the links (a tick's snapshots to every UDP
player, a pong) is sealed and sent once per loop turn, all of it in one ``sendmmsg``
(:func:`~shared.datagram.mmsg.send_batch`): one system call where the WebSocket path
makes one write per player.

Every :data:`SERVICE_INTERVAL_S` while a client is connected the endpoint also gives each
channel its keep-alives and resends, ends the links that went silent for their token's
timeout, sends each seated player whose connect token has half its life or less left a
fresh one (issued by the node as ``POST /connect`` issues them), and counts the channels'
refusals in ``arena_udp_refused_total``; a node with no UDP client is not woken for it.
Every refused datagram is counted by cause, none is answered.
"""

from __future__ import annotations

import asyncio
import math
import socket
import time
from collections import deque
from collections.abc import Awaitable, Callable

from server.logs import EventLogger
from server.net.links import GOING_AWAY
from server.net.metrics import NodeMetrics
from server.net.udp.link import UdpLink
from shared.datagram import ConnectToken, Established, Lane, ServerHandshake
from shared.datagram.mmsg import enable_drop_count, kernel_drops, receive_batch, send_batch
from shared.datagram.packets import Kind

__all__ = ["READ_BATCHES", "SERVICE_INTERVAL_S", "UdpEndpoint"]

log = EventLogger("arena.server")

Address = tuple[str, int]

#: ``recvmmsg`` calls (of up to :data:`BATCH` datagrams) per wake-up of the reader.
READ_BATCHES = 8
BATCH = 64
#: How often keep-alives, resends and time-outs are looked at (keep-alives are due every
#: 0.1 s of silence).
SERVICE_INTERVAL_S = 0.05
#: Snapshot copies due this soon leave with those due now (one batch, one wake-up).
REPEAT_BATCH_S = 0.002
_HANDSHAKE_KINDS = (int(Kind.REQUEST), int(Kind.RESPONSE))


class UdpEndpoint:
    """The node's UDP endpoint: ``serve(link)`` runs each connected client's session."""

    def __init__(
        self,
        sock: socket.socket,
        handshake: ServerHandshake,
        metrics: NodeMetrics,
        serve: Callable[[UdpLink], Awaitable[None]],
        clock: Callable[[], float] = time.time,
        issue: Callable[[bytes, float], ConnectToken] | None = None,
        repeat_after_s: float = 1 / 60,
    ) -> None:
        """``issue(user_data, now)``: a connect token of the region, for the renewals
        (None: none are sent). ``repeat_after_s``: how long after a snapshot its copy to a
        lossy path leaves (half the node's snapshot interval)."""
        self.sock = sock
        self.handshake = handshake
        self.clock = clock  # unix seconds: tokens expire in them
        self._metrics = metrics
        self._serve = serve
        self._issue = issue
        self.links: dict[Address, UdpLink] = {}
        self._replies: list[tuple[bytes, Address]] = []
        self._dirty: dict[UdpLink, None] = {}
        self._flush_scheduled = False
        self.repeat_after_s = repeat_after_s
        #: Snapshots to send again, (due on the loop's clock, link, snapshot) in due order.
        self._repeats: deque[tuple[float, UdpLink, bytes]] = deque()
        self._repeat_timer: asyncio.TimerHandle | None = None
        self._sessions: set[asyncio.Task[None]] = set()
        self._service: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.closed = False
        metrics.udp_clients.set_function(lambda: len(self.links))
        metrics.udp_kernel_drops.set_function(lambda: kernel_drops(self.sock))

    @property
    def port(self) -> int:
        return int(self.sock.getsockname()[1])

    def start(self) -> None:
        """Read the socket from now on (on the running loop)."""
        self.sock.setblocking(False)
        enable_drop_count(self.sock)
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(self.sock.fileno(), self._readable)

    # -- reading ---------------------------------------------------------------------------

    def _readable(self) -> None:
        received = size = 0
        for _ in range(READ_BATCHES):
            try:
                batch = receive_batch(self.sock, BATCH, 1500)
            except OSError:
                break  # (an ICMP error reported on the socket: nothing to read)
            if not batch:
                break
            now = self.clock()
            for data, address in batch:
                received += 1
                size += len(data)
                self._datagram(data, address, now)
            if len(batch) < BATCH:
                break
        if received:
            self._metrics.udp_datagrams.labels("in").inc(received)
            self._metrics.udp_bytes.labels("in").inc(size)
        if self._replies:
            self._schedule_flush()

    def _datagram(self, data: bytes, address: Address, now: float) -> None:
        link = self.links.get(address)
        if link is not None and (not data or data[0] not in _HANDSHAKE_KINDS):
            link.datagram(data, now)
            return
        step = self.handshake.on_datagram(data, address, now)
        if step.refused is not None:
            self._metrics.udp_refused.labels(step.refused).inc()
        if step.reply is not None:
            self._replies.append((step.reply, address))
        if step.established is not None:
            if link is not None:
                link.lost()  # the same address connected again: its old channel is over
            self._connected(step.established)

    def _connected(self, established: Established) -> None:
        address, token = established.address, established.token
        link = UdpLink(
            address, established.channel, self, self._metrics,
            token_expires_at=token.expires_at, user_data=token.user_data,
        )  # fmt: skip
        self.links[address] = link
        if self._service is None and self._loop is not None:
            self._service = self._loop.call_later(SERVICE_INTERVAL_S, self._service_pass)
        task = asyncio.get_running_loop().create_task(self._session(link))
        self._sessions.add(task)
        task.add_done_callback(self._sessions.discard)

    async def _session(self, link: UdpLink) -> None:
        try:
            await self._serve(link)
        except Exception:
            log.exception("udp_session_failed", address=link.peer[0])
        finally:
            if not link.closing:
                link.close(GOING_AWAY, b"")

    # -- writing ---------------------------------------------------------------------------

    def wake(self, link: UdpLink) -> None:
        """``link`` queued something: it leaves with this loop turn's batch."""
        self._dirty[link] = None
        self._schedule_flush()

    def repeat_later(self, link: UdpLink, snapshot: bytes) -> None:
        """Send ``snapshot`` to ``link`` once more, :attr:`repeat_after_s` from now: never
        in the datagram of the first copy, so that independent loss takes both at the
        square of its rate. The copies due together leave in one batch."""
        if self._loop is None or self.closed:
            return
        due = self._loop.time() + self.repeat_after_s
        self._repeats.append((due, link, snapshot))
        if self._repeat_timer is None:
            self._repeat_timer = self._loop.call_at(due, self._send_repeats)

    def _send_repeats(self) -> None:
        assert self._loop is not None
        self._repeat_timer = None
        repeats, now = self._repeats, self._loop.time()
        sent = 0
        while repeats and repeats[0][0] <= now + REPEAT_BATCH_S:
            _, link, snapshot = repeats.popleft()
            if link.peer in self.links and link.reading():
                link.channel.send(snapshot, Lane.UNRELIABLE)
                self._dirty[link] = None
                sent += 1
        if repeats:
            self._repeat_timer = self._loop.call_at(repeats[0][0], self._send_repeats)
        if sent:
            self._metrics.udp_snapshot_repeats.inc(sent)
            self.flush()

    def _schedule_flush(self) -> None:
        if not self._flush_scheduled and self._loop is not None and not self.closed:
            self._flush_scheduled = True
            self._loop.call_soon(self.flush)

    def flush(self) -> None:
        """Send the handshake replies and every woken link's datagrams, in one batch."""
        self._flush_scheduled = False
        items, self._replies = self._replies, []
        if self._dirty:
            now = self.clock()
            dirty, self._dirty = self._dirty, {}
            for link in dirty:
                if link.peer in self.links:
                    peer = link.peer
                    items.extend((datagram, peer) for datagram in link.channel.datagrams(now))
        self._send(items)

    def _send(self, items: list[tuple[bytes, Address]]) -> None:
        if not items:
            return
        try:
            sent = send_batch(self.sock, items)
        except OSError:
            sent = 0
        metrics = self._metrics
        if sent:
            metrics.udp_datagrams.labels("out").inc(sent)
            metrics.udp_bytes.labels("out").inc(sum(len(data) for data, _ in items[:sent]))
        if sent < len(items):
            metrics.udp_send_failures.inc(len(items) - sent)

    def _service_pass(self) -> None:
        """Keep-alives and resends, links gone silent, connect tokens renewed, the channels'
        refusals counted."""
        now = self.clock()
        items, self._replies = self._replies, []
        self._dirty = {}
        refused = self._metrics.udp_refused
        for peer, link in list(self.links.items()):
            channel = link.channel
            if channel.timed_out(now):
                link.lost()
                continue
            if self._issue is not None and link.connect_token_due(now):
                self._renew_token(link, self._issue, now)
            items.extend((datagram, peer) for datagram in channel.datagrams(now))
            counts = channel.refused
            if counts != link.refusals_counted:
                for cause, times in counts.items():
                    if times > link.refusals_counted.get(cause, 0):
                        refused.labels(cause).inc(times - link.refusals_counted.get(cause, 0))
                link.refusals_counted = counts
        self._send(items)
        self._service = None
        if self.links and not self.closed and self._loop is not None:
            self._service = self._loop.call_later(SERVICE_INTERVAL_S, self._service_pass)

    def _renew_token(
        self, link: UdpLink, issue: Callable[[bytes, float], ConnectToken], now: float
    ) -> None:
        try:
            token = issue(link.user_data, now)
        except ValueError:  # (an address the token cannot list: /connect refuses it too)
            log.exception("connect_token_renewal_failed", address=link.peer[0])
            link.token_expires_at = math.inf  # (not tried again for this client)
            return
        link.renew_connect_token(token)
        self._dirty.pop(link, None)  # (it leaves in this pass's batch)

    # -- links ending ----------------------------------------------------------------------

    def disconnect(self, link: UdpLink) -> None:
        """A clean close: what the link still has queued, then its disconnect packets."""
        if self.links.get(link.peer) is link:
            now = self.clock()
            items = [(datagram, link.peer) for datagram in link.channel.datagrams(now)]
            items += [(datagram, link.peer) for datagram in link.channel.disconnect()]
            self._send(items)
            del self.links[link.peer]

    def forget(self, link: UdpLink) -> None:
        if self.links.get(link.peer) is link:
            del self.links[link.peer]

    async def close(self) -> None:
        """Disconnect every client cleanly, stop reading, close the socket."""
        if self.closed:
            return
        for link in list(self.links.values()):
            self.disconnect(link)
            link.lost()
        self.closed = True
        if self._service is not None:
            self._service.cancel()
        if self._repeat_timer is not None:
            self._repeat_timer.cancel()
        if self._loop is not None:
            self._loop.remove_reader(self.sock.fileno())
        for task in list(self._sessions):
            task.cancel()
        await asyncio.gather(*self._sessions, return_exceptions=True)
        self.sock.close()
