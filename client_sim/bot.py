"""One bot's connection: its modelled link, its clock, and getting back in after a failover.

Every packet in either direction passes through the bot's :class:`~client_sim.link.BotLink`
(delivered by the swarm's :class:`~client_sim.pump.DeliveryPump`), so the server sees the
bot's modelled latency and the RTTs the bot reports are measured through it.

When the link breaks (the primary died) or goes silent (the primary is paused), the bot
tries the region's other nodes, which its welcome listed, with its session token; the new
primary gives it back its seat, and the bot resends every input the server had not
acknowledged. Each such episode is recorded as a :class:`FailoverEvent`.
"""

from __future__ import annotations

import asyncio
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
RECONNECT_BACKOFF_S = 0.05
RECONNECT_GIVE_UP_S = 15.0
SENT_FRAMES_KEPT = 1024  # unacknowledged inputs kept for resending (17 s at 60 Hz)


@dataclass(slots=True)
class FailoverEvent:
    """One lost primary, seen from one bot."""

    epoch_before: int
    tick_before: int  # the last tick this bot was shown before the loss
    ack_before: int  # the highest input the old primary acknowledged
    lost_at: float  # local clock: the last snapshot before the loss
    epoch_after: int = -1
    ack_after: int = -1  # the new primary's acknowledged input for this seat (welcome.ack)
    stall_s: float | None = None  # last snapshot before -> first snapshot after

    @property
    def resumed(self) -> bool:
        return self.stall_s is not None


class Bot:
    """One bot's socket and what it has seen; ``index`` is its row in the swarm's arrays."""

    def __init__(self, index: int, params: BotParams, swarm: Swarm) -> None:
        self.index = index
        self.params = params
        self.swarm = swarm
        self.link = BotLink.for_bot(params)
        self.clock = ClockSync()
        self.snapshots = SnapshotBuffer()
        self.ws: aiohttp.ClientWebSocketResponse | None = None
        self.welcome: protocol.WelcomeMessage | None = None
        self.welcomed_local = 0.0
        self.alive_link = False
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
        self.reconnect_attempts = 0
        self.sent_frames: deque[tuple[int, bytes]] = deque(maxlen=SENT_FRAMES_KEPT)
        self._session_welcomed = False
        self._outbox: deque[bytes] = deque()
        self._wake = asyncio.Event()
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
        return self.alive_link and self._session_welcomed

    # -- the link: everything goes through the delay lines ------------------------------

    def send(self, frame: bytes) -> None:
        self.swarm.pump.at(self.link.up.schedule(self._loop.time(), frame), self._release_up)

    def send_input(self, seq: int, frame: bytes) -> None:
        self.sent_frames.append((seq, frame))
        self.send(frame)
        self.inputs_sent += 1

    def _release_up(self, due: float) -> None:
        self._outbox.extend(self.link.up.pop_due(due))
        self._wake.set()

    def _release_down(self, due: float) -> None:
        for data in self.link.down.pop_due(due):
            self.swarm.deliver(self, data)

    async def _write(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._outbox and not ws.closed:
                frame = self._outbox.popleft()
                await ws.send_bytes(frame)
                self.bytes_up += len(frame)

    async def _read(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        async for message in ws:
            if message.type is aiohttp.WSMsgType.BINARY:
                due = self.link.down.schedule(self._loop.time(), message.data)
                self.swarm.pump.at(due, self._release_down)

    # -- what the swarm tells the bot ------------------------------------------------------

    def welcomed(self, welcome: protocol.WelcomeMessage) -> None:
        """A welcome arrived: the first one, or the new primary's after a failover."""
        if self.welcome is not None and self.failovers and self.failovers[-1].epoch_after < 0:
            event = self.failovers[-1]
            event.epoch_after, event.ack_after = welcome.epoch, welcome.ack
            # Everything the new primary has not applied goes again, in order.
            for seq, frame in list(self.sent_frames):
                if seq > welcome.ack:
                    self.send(frame)
        self.welcome = welcome
        self.welcomed_local = self.local_time()
        self.epoch = max(self.epoch, welcome.epoch)
        self._session_welcomed = True

    def snapshot_shown(self, tick: int, ack: int) -> None:
        self.latest_tick = tick
        self.snapshot_count += 1
        now = self._loop.time()
        if self.failovers and self.failovers[-1].stall_s is None and self._session_welcomed:
            event = self.failovers[-1]
            event.stall_s = now - event.lost_at
        self.last_snapshot_at = now
        if ack > self.max_ack:
            self.max_ack = ack
            while self.sent_frames and self.sent_frames[0][0] <= ack:
                self.sent_frames.popleft()

    # -- connecting, and reconnecting ------------------------------------------------------

    def _endpoints(self) -> list[str]:
        config_url = self.swarm.config.url
        others = list(self.welcome.standbys) if self.welcome is not None else []
        return list(dict.fromkeys([*others, config_url]))

    async def run(self, session: aiohttp.ClientSession, stop: asyncio.Event) -> None:
        """Play until ``stop``; after a lost primary, try the others until one takes us."""
        url = self.swarm.config.url
        attempt = 0
        give_up_at = self._loop.time() + self.swarm.config.connect_timeout
        while not stop.is_set() and self._loop.time() < give_up_at:
            played = await self._connect_and_play(session, url, stop)
            if stop.is_set():
                break
            if played:
                self._lost()
                give_up_at = self._loop.time() + RECONNECT_GIVE_UP_S
                attempt = 0
            endpoints = self._endpoints()
            url = endpoints[attempt % len(endpoints)]
            attempt += 1
            await asyncio.sleep(RECONNECT_BACKOFF_S)
        self.alive_link = False

    def _lost(self) -> None:
        self.failovers.append(
            FailoverEvent(self.epoch, self.latest_tick, self.max_ack, self.last_snapshot_at)
        )

    async def _connect_and_play(
        self, session: aiohttp.ClientSession, url: str, stop: asyncio.Event
    ) -> bool:
        """One connection; True when it got as far as playing (a welcome arrived)."""
        config = self.swarm.config
        try:
            async with asyncio.timeout(config.connect_timeout):
                ws = await session.ws_connect(
                    url,
                    compress=0,
                    max_msg_size=protocol.MAX_SERVER_FRAME_BYTES + 4096,
                    autoping=True,
                )
        except (aiohttp.ClientError, OSError, TimeoutError) as error:
            if self.welcome is None:  # during a failover, dead nodes are expected
                self.swarm.note_error(f"connect_failed:{type(error).__name__}")
            else:
                self.reconnect_attempts += 1
            return False
        self.ws = ws
        self.alive_link = True
        self._session_welcomed = False
        # What was in flight went down with the old connection; the join must go first.
        self._outbox.clear()
        self.link.up.drop_in_flight()
        join = protocol.JoinMessage(
            protocol.PROTOCOL_VERSION,
            f"{config.name_prefix}-{self.params.index}",
            token=self.welcome.token if self.welcome is not None else None,
            interp_delay=config.interp_delay,
        )
        try:
            async with asyncio.TaskGroup() as group:
                reader = group.create_task(self._read(ws))
                writer = group.create_task(self._write(ws))
                self.send(protocol.encode(join))
                await self._watch(reader, stop)
                self.alive_link = False
                writer.cancel()
                await ws.close()
                await reader
        except* (aiohttp.ClientError, ConnectionError) as lost:
            for cause in lost.exceptions:
                self.swarm.note_error(f"connection_lost:{type(cause).__name__}")
        self.alive_link = False
        return self._session_welcomed

    async def _watch(self, reader: asyncio.Task[None], stop: asyncio.Event) -> None:
        """Until stop, the socket closing, or a welcomed session going silent."""
        while not stop.is_set() and not reader.done():
            await asyncio.wait([reader], timeout=0.1)
            silent = self._loop.time() - max(self.last_snapshot_at, self.welcomed_at_loop)
            if self._session_welcomed and silent > STALL_TIMEOUT_S:
                self.swarm.note_error("primary_silent")
                return

    @property
    def welcomed_at_loop(self) -> float:
        return self.welcomed_local - self.params.clock_offset
