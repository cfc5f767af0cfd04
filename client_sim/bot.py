"""One bot's connections: its modelled link, its clock, and carrying on after a failover.

Every packet in either direction passes through the bot's :class:`~client_sim.link.BotLink`
(delivered by the swarm's :class:`~client_sim.pump.DeliveryPump`), so the server sees the
bot's modelled latency and the RTTs the bot reports are measured through it. Opening a
connection costs two round trips (TCP handshake, WebSocket upgrade), and a closed
connection is noticed only after the data sent before the close has arrived.

Hot standby from the client's side: once welcomed, the bot keeps a *spare* connection to
one of the region's standbys (its welcome lists them), parked there with its session token.
When that standby is promoted it welcomes the bot on the spare at once, so the bot pays no
connection set-up during a failover: it switches its inputs to the spare and resends every
input the new primary had not acknowledged. Without a spare (or if it does not answer), it
tries the region's nodes one after the other. Each lost primary is a :class:`FailoverEvent`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

import aiohttp

from shared import protocol

from .clock_sync import ClockSync
from .interpolation import SnapshotBuffer
from .latency import BotParams
from .link import BotLink

if TYPE_CHECKING:
    from .swarm import Swarm

__all__ = ["Bot", "FailoverEvent"]

STALL_TIMEOUT_S = 0.5  # no snapshot for this long on a live socket: the primary is gone
SPARE_WAIT_S = 1.0  # after a loss, how long the parked spare gets to be welcomed
RECONNECT_BACKOFF_S = 0.05
SPARE_RETRY_S = 0.5
RECONNECT_GIVE_UP_S = 15.0
SENT_FRAMES_KEPT = 1024  # unacknowledged inputs kept for resending (17 s at 60 Hz)
#: Opening a connection costs a TCP handshake and the WebSocket upgrade: two round trips.
CONNECT_ROUND_TRIPS = 2
_CLOSED = b""  # sentinel in the down line: the server closed the connection


@dataclass(slots=True)
class FailoverEvent:
    """One lost primary, seen from one bot."""

    epoch_before: int
    tick_before: int  # the last tick this bot was shown before the loss
    ack_before: int  # the highest input the old primary acknowledged
    lost_at: float  # loop clock: the last snapshot before the loss
    epoch_after: int = -1
    ack_after: int = -1  # the new primary's acknowledged input for this seat (welcome.ack)
    stall_s: float | None = None  # last snapshot before -> first snapshot after
    via_spare: bool = False

    @property
    def resumed(self) -> bool:
        return self.stall_s is not None


@dataclass(slots=True)
class _Connection:
    id: int
    url: str
    ws: aiohttp.ClientWebSocketResponse
    closed: bool = False  # the close has reached the bot (through the down line)


class Bot:
    """One bot and its sockets; ``index`` is its row in the swarm's arrays."""

    def __init__(self, index: int, params: BotParams, swarm: Swarm) -> None:
        self.index = index
        self.params = params
        self.swarm = swarm
        self.link = BotLink.for_bot(params)
        routes = swarm.config.routes
        # Where to play: the node the directory gave this bot, or the swarm's one node.
        self.url = routes[index].url if routes else swarm.config.url
        self.first_token = routes[index].reservation if routes else None
        self.clock = ClockSync()
        self.snapshots = SnapshotBuffer()
        self.welcome: protocol.WelcomeMessage | None = None
        self.welcomed_local = 0.0
        self.latest_tick = -1
        self.epoch = 0
        self.max_ack = -1
        self.last_snapshot_at = 0.0  # loop time
        self.bytes_down = 0
        self.bytes_up = 0
        self.snapshot_count = 0
        self.inputs_sent = 0
        self.next_ping = 0.0
        self.ping_id = 0
        self.failovers: list[FailoverEvent] = []
        self.connect_failures = 0
        self.sent_frames: deque[tuple[int, bytes]] = deque(maxlen=SENT_FRAMES_KEPT)
        self._connections: dict[int, _Connection] = {}
        self._active: int | None = None  # where inputs go: the connection that welcomed us
        self._spare: int | None = None
        self._ids = itertools.count()
        self._delivering: int | None = None
        self._outbox: deque[tuple[int, bytes]] = deque()
        self._wake = asyncio.Event()
        self._changed = asyncio.Event()
        self._loop = asyncio.get_running_loop()

    def local_time(self) -> float:
        """This bot's own clock: the true one plus the modelled offset."""
        return self._loop.time() + self.params.clock_offset

    def server_time(self) -> float:
        """The bot's estimate of server time now (from pongs; from the welcome until then)."""
        now = self.local_time()
        if self.clock.samples:
            return self.clock.server_time(now)
        assert self.welcome is not None
        return self.welcome.server_time + (now - self.welcomed_local)

    @property
    def playing(self) -> bool:
        active = self._connections.get(self._active) if self._active is not None else None
        return active is not None and not active.closed

    # -- the link: everything goes through the delay lines ------------------------------

    def send(self, frame: bytes, connection: int | None = None) -> None:
        """Send on ``connection`` (default: the active one) through the up line."""
        target = self._active if connection is None else connection
        if target is None:
            return
        due = self.link.up.schedule(self._loop.time(), (target, frame))
        self.swarm.pump.at(due, self._release_up)

    def send_input(self, seq: int, frame: bytes) -> None:
        self.sent_frames.append((seq, frame))
        self.send(frame)
        self.inputs_sent += 1

    def _release_up(self, due: float) -> None:
        self._outbox.extend(self.link.up.pop_due(due))
        self._wake.set()

    def _release_down(self, due: float) -> None:
        for connection_id, data in self.link.down.pop_due(due):
            connection = self._connections.get(connection_id)
            if data is _CLOSED:
                if connection is not None:
                    connection.closed = True
                self._changed.set()
            else:
                self._delivering = connection_id
                self.swarm.deliver(self, data)
                self._delivering = None

    async def _write(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._outbox:
                connection_id, frame = self._outbox.popleft()
                connection = self._connections.get(connection_id)
                if connection is None or connection.ws.closed:
                    continue  # that connection is gone, and what was in flight with it
                try:
                    await connection.ws.send_bytes(frame)
                except (aiohttp.ClientError, ConnectionError):
                    continue
                self.bytes_up += len(frame)

    async def _read(self, connection: _Connection) -> None:
        with contextlib.suppress(aiohttp.ClientError, ConnectionError):
            async for message in connection.ws:
                if message.type is aiohttp.WSMsgType.BINARY:
                    due = self.link.down.schedule(self._loop.time(), (connection.id, message.data))
                    self.swarm.pump.at(due, self._release_down)
        # The close travels the same path as the data: the bot learns of it only after
        # everything sent before it has arrived.
        due = self.link.down.schedule(self._loop.time(), (connection.id, _CLOSED))
        self.swarm.pump.at(due, self._release_down)

    # -- what the swarm tells the bot ------------------------------------------------------

    def welcomed(self, welcome: protocol.WelcomeMessage) -> None:
        """A welcome arrived: the first one, or the new primary's after a failover."""
        source = self._delivering
        if source is not None and source != self._active:
            old = self._active
            self._active = source  # inputs go to whoever welcomed us last
            if source == self._spare:
                self._spare = None
            if old is not None and old in self._connections:
                self._retire(old)
        if self.welcome is not None and self.failovers and self.failovers[-1].epoch_after < 0:
            event = self.failovers[-1]
            event.epoch_after, event.ack_after = welcome.epoch, welcome.ack
            self._resend_after(welcome.ack)
        elif self.welcome is not None and welcome.epoch > self.epoch:
            # The spare was welcomed before the loss of the old primary was noticed.
            self.failovers.append(
                FailoverEvent(
                    self.epoch,
                    self.latest_tick,
                    self.max_ack,
                    self.last_snapshot_at,
                    welcome.epoch,
                    welcome.ack,
                    via_spare=True,
                )
            )
            self._resend_after(welcome.ack)
        self.welcome = welcome
        self.welcomed_local = self.local_time()
        self.epoch = max(self.epoch, welcome.epoch)
        self._changed.set()

    def _resend_after(self, ack: int) -> None:
        """Everything the new primary has not applied goes again, in order."""
        for seq, frame in list(self.sent_frames):
            if seq > ack:
                self.send(frame)

    def standbys_changed(self, message: protocol.StandbysMessage) -> None:
        """The primary names a new set of standbys: move the spare if it is elsewhere."""
        if self.welcome is None or message.epoch < self.epoch:
            return
        self.welcome = dataclasses.replace(self.welcome, standbys=message.urls)
        spare = self._connections.get(self._spare) if self._spare is not None else None
        if spare is not None and spare.url not in message.urls:
            self._retire(spare.id)
            self._spare = None
        self._changed.set()

    def snapshot_shown(self, tick: int, ack: int) -> None:
        self.latest_tick = tick
        self.snapshot_count += 1
        now = self._loop.time()
        if self.failovers and self.failovers[-1].stall_s is None:
            event = self.failovers[-1]
            if event.epoch_after >= 0:
                event.stall_s = now - event.lost_at
        self.last_snapshot_at = now
        if ack > self.max_ack:
            self.max_ack = ack
            while self.sent_frames and self.sent_frames[0][0] <= ack:
                self.sent_frames.popleft()

    # -- connections -----------------------------------------------------------------------

    def _retire(self, connection_id: int) -> None:
        connection = self._connections.pop(connection_id, None)
        if connection is not None and not connection.ws.closed:
            self._loop.create_task(connection.ws.close())

    async def _open(
        self, group: asyncio.TaskGroup, session: aiohttp.ClientSession, url: str
    ) -> int | None:
        """Connect to ``url`` and send a join (with our token once we have one)."""
        config = self.swarm.config
        try:
            async with asyncio.timeout(config.connect_timeout):
                ws = await session.ws_connect(
                    url,
                    compress=0,
                    max_msg_size=protocol.MAX_SERVER_FRAME_BYTES + 4096,
                    autoping=True,
                )
                await asyncio.sleep(CONNECT_ROUND_TRIPS * self.params.rtt)
        except (aiohttp.ClientError, OSError, TimeoutError) as error:
            if self.welcome is None:
                self.swarm.note_error(f"connect_failed:{type(error).__name__}")
            else:
                self.connect_failures += 1  # during a failover, dead nodes are expected
            return None
        connection = _Connection(next(self._ids), url, ws)
        self._connections[connection.id] = connection
        group.create_task(self._read(connection))
        join = protocol.JoinMessage(
            protocol.PROTOCOL_VERSION,
            f"{config.name_prefix}-{self.params.index}",
            token=self.welcome.token if self.welcome is not None else self.first_token,
            interp_delay=config.interp_delay,
        )
        self.send(protocol.encode(join), connection.id)
        return connection.id

    def _standby_url(self) -> str | None:
        if self.welcome is None or self._active is None:
            return None
        current = self._connections[self._active].url if self._active in self._connections else ""
        for url in self.welcome.standbys:
            if url != current:
                return url
        return None

    def _lost_active(self) -> bool:
        active = self._connections.get(self._active) if self._active is not None else None
        if active is None or active.closed:
            return self._active is not None or self.welcome is not None
        silent = self._loop.time() - max(self.last_snapshot_at, self.welcomed_at_loop)
        return silent > STALL_TIMEOUT_S

    @property
    def welcomed_at_loop(self) -> float:
        return self.welcomed_local - self.params.clock_offset

    async def run(self, session: aiohttp.ClientSession, stop: asyncio.Event) -> None:
        """Play until ``stop``, keeping a spare on a standby and switching on failover."""
        try:
            async with asyncio.TaskGroup() as group:
                writer = group.create_task(self._write())
                try:
                    await self._play(group, session, stop)
                finally:
                    writer.cancel()
                    for connection in list(self._connections.values()):
                        await connection.ws.close()
        except* (aiohttp.ClientError, ConnectionError) as lost:
            for cause in lost.exceptions:
                self.swarm.note_error(f"connection_lost:{type(cause).__name__}")

    async def _play(
        self, group: asyncio.TaskGroup, session: aiohttp.ClientSession, stop: asyncio.Event
    ) -> None:
        config = self.swarm.config
        give_up_at = self._loop.time() + config.connect_timeout
        self._active = await self._open(group, session, self.url)
        next_spare_at = 0.0
        while not stop.is_set():
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(0.1):
                    await self._changed.wait()
            now = self._loop.time()
            if self.welcome is None:
                if self._active is None or self._connections[self._active].closed:
                    if now > give_up_at:
                        return
                    await asyncio.sleep(RECONNECT_BACKOFF_S)
                    self._active = await self._open(group, session, self.url)
                continue
            spare = self._connections.get(self._spare) if self._spare is not None else None
            if spare is not None and spare.closed:
                self._retire(spare.id)
                self._spare, spare = None, None
            if spare is None and now >= next_spare_at and (url := self._standby_url()):
                self._spare = await self._open(group, session, url)
                next_spare_at = now + SPARE_RETRY_S
            if self._lost_active():
                await self._fail_over(group, session, stop)
                give_up_at = self._loop.time() + RECONNECT_GIVE_UP_S

    async def _fail_over(
        self, group: asyncio.TaskGroup, session: aiohttp.ClientSession, stop: asyncio.Event
    ) -> None:
        """The active connection is gone: the spare first, then every node in turn."""
        lost = self._active
        self._active = None
        if lost is not None:
            self._retire(lost)
        self.failovers.append(
            FailoverEvent(self.epoch, self.latest_tick, self.max_ack, self.last_snapshot_at)
        )
        event = self.failovers[-1]
        if self._spare is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(SPARE_WAIT_S):
                    while event.epoch_after < 0 and not stop.is_set():
                        self._changed.clear()
                        await self._changed.wait()
            if event.epoch_after >= 0:
                event.via_spare = True
                return
        standbys = self.welcome.standbys if self.welcome is not None else ()
        endpoints = list(dict.fromkeys([*standbys, self.url]))
        give_up = self._loop.time() + RECONNECT_GIVE_UP_S
        for url in itertools.cycle(endpoints):
            if stop.is_set() or self._loop.time() > give_up:
                return
            attempt = await self._open(group, session, url)
            if attempt is not None:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(4 * self.params.rtt + 0.5):
                        while event.epoch_after < 0 and not self._connections[attempt].closed:
                            self._changed.clear()
                            await self._changed.wait()
                if event.epoch_after >= 0:
                    return
                self._retire(attempt)
            await asyncio.sleep(RECONNECT_BACKOFF_S)
