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

The session token is the bot's claim on its seat: the primary renews it while the bot plays
(a ``token`` message; the spare is parked again with the new one), and a node that refuses
it (``invalid_token``: the seat was freed, the token ran out, or the node resumed a state
without the seat) has said it will never work again: the bot's next join asks for a new
seat, and the bot counts a seat lost. A ``seat_in_use`` refusal keeps the token (the node
has not yet noticed the bot's old connection go). A bot kicked for idleness (``idle_kick``:
its seat is gone) or refused a seat that another try will not get (``address_limit``,
``reservation_required``) stops playing, its token dropped. A node that asks for a wait
(an error's ``retry_after``: a seat closed for offences is ``held_off``; an HTTP 429 or
503 with ``Retry-After``) gets it, and a little more, jittered: the bot tries no node
before then, so a held-off swarm does not storm the node when the wait ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import itertools
import json
import math
import random
import time
from collections import deque
from dataclasses import dataclass
from typing import Protocol

from client_sim import datagram, websocket
from client_sim.clock_sync import ClockSync
from client_sim.interpolation import SnapshotBuffer
from client_sim.latency import BotParams
from client_sim.link import BotLink, DatagramLink
from client_sim.pump import DeliveryPump
from shared import protocol
from shared.datagram.tokens import ConnectToken

__all__ = ["Bot", "BotHost", "BotSettings", "FailoverEvent", "ProcessBeat"]

MISSING_KEPT = 64  # skipped ticks a bot remembers, to count the ones that come late
STALL_TIMEOUT_S = 0.5  # no snapshot for this long on a live socket: a stall; probe the node
PROBE_TIMEOUT_S = 1.0  # a probe unanswered this long (plus two round trips): the node is gone
#: A probe unanswered this long is sent again: over UDP a ping or its pong may be lost (and
#: is never resent), which must not pass for a dead node.
PROBE_REPEAT_S = 0.25
STALL_GIVE_UP_S = 5.0  # answering probes but showing nothing this long: look elsewhere
SPARE_WAIT_S = 1.0  # after a loss, how long the parked spare gets to be welcomed
RECONNECT_BACKOFF_S = 0.05  # the first pause between attempts; doubled up to the cap, jittered
RECONNECT_BACKOFF_MAX_S = 2.0
SPARE_RETRY_S = 0.5
#: Over UDP, a parked spare that heard nothing (not even the node's keep-alives, ten a
#: second) this long is gone: its standby died or restarted (see
#: :meth:`client_sim.datagram.DatagramConnection.watch_silence`).
SPARE_SILENCE_S = 1.0
#: A join's answer takes a round trip (more on a busy node): one not answered in two round
#: trips plus this was parked by a standby.
JOIN_ANSWER_RTTS = 2
JOIN_ANSWER_SLACK_S = 0.3
RECONNECT_GIVE_UP_S = 60.0  # no node of the region answered at all for this long: give up
SYNC_PING_INTERVAL = 0.1  # seconds between pings until the clock is synced
SENT_FRAMES_KEPT = 1024  # unacknowledged inputs kept for resending (17 s at 60 Hz)
#: Opening a connection costs a TCP handshake and the WebSocket upgrade: two round trips.
CONNECT_ROUND_TRIPS = 2
_CLOSED = b""  # sentinel in the down line: the server closed the connection


class BotSettings(Protocol):
    """The settings a bot reads (the swarm's :class:`~client_sim.swarm.SwarmConfig`)."""

    @property
    def connect_timeout(self) -> float: ...
    @property
    def name_prefix(self) -> str: ...
    @property
    def interp_delay(self) -> float: ...
    @property
    def ping_interval(self) -> float: ...
    @property
    def tls(self) -> websocket.TlsTrust: ...
    @property
    def transport(self) -> str: ...


class ProcessBeat:
    """When the bots' own process last came back from a stall of its own (stopped, or
    starved for longer than a bot waits for a snapshot). Silence from before that is no
    evidence against a node: its snapshots may be waiting, unread, in the sockets. Every
    look at a bot's silence beats first, so the first look after a stall sees the gap."""

    __slots__ = ("_at", "resumed_at")

    def __init__(self) -> None:
        self._at: float | None = None
        self.resumed_at = -math.inf  # loop clock

    def beat(self, now: float) -> float:
        """Note that the process runs at ``now``; returns when it last resumed."""
        if self._at is not None and now - self._at > STALL_TIMEOUT_S:
            self.resumed_at = now
        self._at = now
        return self.resumed_at


class BotHost(Protocol):
    """What a bot needs from the swarm that runs it, and nothing more.

    The swarm owns the one timer for every bot's packets and reads what arrives (game
    messages concern the whole swarm's arrays); a bot owns its sockets and its link.
    """

    @property
    def config(self) -> BotSettings: ...
    @property
    def pump(self) -> DeliveryPump: ...
    @property
    def beat(self) -> ProcessBeat: ...

    def deliver(self, bot: Bot, data: bytes) -> None:
        """A frame reached ``bot`` after its modelled delay: decode it and act on it."""

    def note_error(self, code: str) -> None:
        """Count an error the report lists (``connect_failed:...`` and the like)."""

    def clock_changed(self, bot: Bot) -> None:
        """``bot``'s clock took a pong or a welcome (the swarm reads every bot's clock in
        one pass a tick)."""


@dataclass(slots=True)
class FailoverEvent:
    """One lost primary, seen from one bot."""

    tick_before: int  # the last tick this bot was shown before the loss
    ack_before: int  # the highest input the old primary acknowledged
    lost_at: float  # loop clock: the last snapshot before the loss
    epoch_after: int = -1
    ack_after: int = -1  # the new primary's acknowledged input for this seat (welcome.ack)
    stall_s: float | None = None  # last snapshot before -> first snapshot after
    seat_lost: bool = False  # the token was refused: the bot came back in a new seat
    epoch_before: int = -1  # the epoch the bot played at when it left (-1: not known)

    @property
    def resumed(self) -> bool:
        """Back in its own seat, playing (a bot that took a new seat lost its own)."""
        return self.stall_s is not None and not self.seat_lost


@dataclass(slots=True)
class _Connection:
    id: int
    url: str
    ws: websocket.WebSocketClient | datagram.DatagramConnection
    closed: bool = False  # the close has reached the bot (through the down line)
    token: str | None = None  # what its join carried (None: it asked for a new seat)


class Bot:
    """One bot and its sockets; ``index`` is its row in the swarm's arrays."""

    def __init__(
        self, index: int, params: BotParams, swarm: BotHost, url: str, token: str | None = None
    ) -> None:
        """``url``: where to play first; ``token``: the seat the directory reserved there."""
        self.index = index
        self.params = params
        self.swarm = swarm
        self._link = BotLink.for_bot(params)
        # Over UDP the link model acts on each datagram (client_sim.datagram), so frames
        # pass straight between the bot and its connection.
        self._datagrams = DatagramLink.for_bot(params) if swarm.config.transport == "udp" else None
        self._tokens = datagram.TokenBook()
        self.url = url
        # What the next join carries: the directory's reservation, then the seat's session
        # token (renewed by the primary); None once refused: a new seat.
        self._token = token
        self.clock = ClockSync()
        self.snapshots = SnapshotBuffer()
        # The players this bot held at each of its newest snapshots (deltas decode on them).
        self.baselines = protocol.EntityBaselines()
        self.welcome: protocol.WelcomeMessage | None = None
        self._welcomed_local = 0.0
        self.latest_tick = -1
        self.epoch = 0
        self._max_ack = -1
        self._last_snapshot_at = 0.0  # loop time
        self.bytes_down = 0
        self.bytes_up = 0
        self.snapshot_count = 0
        self.longest_gap = 0.0  # seconds: the longest wait between two snapshots shown
        self.snapshot_interval = 1  # ticks between two snapshots (from the welcome)
        self.snapshot_gaps = 0  # snapshots missing between two shown (by their ticks)
        self.snapshots_late = 0  # snapshots that came after a newer one was shown
        self._shown_epoch = -1  # the epoch of the snapshot shown last
        self._missing: dict[int, None] = {}  # ticks of its epoch skipped lately, oldest first
        self.inputs_sent = 0
        self.inputs_resent = 0  # inputs sent again: repeats in later datagrams, failovers
        self.inputs_first_lost = 0  # (UDP) inputs whose first datagram the link dropped
        self.inputs_given_up = 0  # (UDP) inputs dropped from the repeats unacknowledged
        self.next_ping = 0.0  # local time; the swarm's tick pings once it is reached
        self._ping_id = 0
        self.failovers: list[FailoverEvent] = []
        self._sent_frames: deque[tuple[int, bytes]] = deque(maxlen=SENT_FRAMES_KEPT)
        self._outbox: list[bytes] = []  # inputs held for the next command packet
        self._connections: dict[int, _Connection] = {}
        self._active: int | None = None  # where inputs go: the connection that welcomed us
        self._spare: int | None = None
        self._ids = itertools.count()
        self._delivering: int | None = None
        self._changed = asyncio.Event()
        self._next_spare_at = 0.0
        self._closing: set[asyncio.Task[None]] = set()
        self._loop = asyncio.get_running_loop()
        self._probe_at: float | None = None  # loop time of the stall's probe (a ping)
        self._probe_sent_at = -math.inf  # loop time the probe's latest ping left
        self._pong_at = -math.inf  # loop time of the last pong
        self._jitter = random.Random(params.index)
        self.stalls = 0  # stalls ridden out with a probe rather than a failover
        self.seats_lost = 0  # seats whose token a node refused (the bot took a new one)
        self._refused = False  # told it will not play (an idle kick, a final refusal)
        self._not_before = -math.inf  # loop time: a node asked us to wait until then
        #: Per node URL, loop time: a node that is not serving yet (warming up) asked us to
        #: wait until then; the region's other nodes are tried meanwhile.
        self._node_not_before: dict[str, float] = {}

    def local_time(self) -> float:
        """This bot's own clock: the true one plus the modelled offset."""
        return self._loop.time() + self.params.clock_offset

    def server_time(self, local: float | None = None) -> float:
        """The bot's estimate of server time at its local time ``local`` (default: now),
        from pongs, or from the welcome until the first pong."""
        now = self.local_time() if local is None else local
        if self.clock.samples:
            return self.clock.server_time(now)
        assert self.welcome is not None
        return self.welcome.server_time + (now - self._welcomed_local)

    @property
    def node_url(self) -> str | None:
        """The node this bot plays on now (None: between nodes), for the report's
        /health after a failover nobody in this process caused."""
        active = self._connections.get(self._active) if self._active is not None else None
        return None if active is None or active.closed else active.url

    @property
    def playing(self) -> bool:
        active = self._connections.get(self._active) if self._active is not None else None
        return active is not None and not active.closed

    # -- the link: everything goes through the delay lines ------------------------------

    def send(self, frame: bytes, connection: int | None = None) -> None:
        """Send on ``connection`` (default: the active one) through the up line, now."""
        self._send_packet([frame], connection)

    def _send_packet(self, frames: list[bytes], connection: int | None = None) -> None:
        """Frames that leave in one write, as one packet of the up line."""
        target = self._active if connection is None else connection
        if target is None or not frames:
            return
        if self._datagrams is not None:
            self._release_up((target, frames))
            return
        due = self._link.up.schedule(self._loop.time())
        self.swarm.pump.at(due, self._release_up, (target, frames))

    def hold_input(self, seq: int, frame: bytes) -> None:
        """An input for the next command packet (:meth:`flush`): a client sends its inputs
        at its command rate, each packet with every input since the last."""
        self._sent_frames.append((seq, frame))
        self._outbox.append(frame)
        self.inputs_sent += 1

    def flush(self, *extra: bytes) -> None:
        """Send the held inputs, and ``extra`` frames after them, in one packet."""
        if extra:
            self._outbox.extend(extra)
        if self._outbox:
            frames, self._outbox = self._outbox, []
            self._send_packet(frames)

    def _release_up(self, packet: tuple[int, list[bytes]]) -> None:
        connection = self._connections.get(packet[0])
        # A packet for a connection that is gone is lost with it, like data in flight.
        sent = connection is not None and connection.ws.send_many(packet[1])
        if sent and self._datagrams is None:  # (a datagram connection counts its own bytes)
            self.bytes_up += sum(map(len, packet[1]))

    def _arrived(self, connection_id: int, data: bytes) -> None:
        """A frame came off the socket: it reaches the bot when the down line releases it."""
        if self._datagrams is not None:
            self._release_down((connection_id, data))
            return
        due = self._link.down.schedule(self._loop.time())
        self.swarm.pump.at(due, self._release_down, (connection_id, data))

    def _ended(self, connection_id: int) -> None:
        """The socket closed: the bot learns of it after everything sent before the close."""
        self._arrived(connection_id, _CLOSED)

    def _release_down(self, packet: tuple[int, bytes]) -> None:
        connection_id, data = packet
        if data is _CLOSED:
            connection = self._connections.get(connection_id)
            if connection is not None:
                connection.closed = True
            self._changed.set()
        else:
            if self._datagrams is None:
                self.bytes_down += len(data)
            self._delivering = connection_id
            self.swarm.deliver(self, data)
            self._delivering = None

    # -- what the swarm tells the bot ------------------------------------------------------

    def welcomed(self, welcome: protocol.WelcomeMessage) -> bool:
        """A welcome arrived: the first one, or the new primary's after a failover. One from
        an epoch below the highest this bot was told of comes from a deposed primary (cut
        off, not yet told): that connection is dropped, and nothing else changes. True when
        it seats the bot anew, after its seat was lost (what the swarm knew of the old seat
        no longer holds)."""
        source = self._delivering
        if self.welcome is not None and welcome.epoch < self.epoch:
            if source is not None and source != self._active:
                if source == self._spare:
                    self._spare = None
                self._retire(source)
            return False
        joined = self._connections.get(source) if source is not None else None
        # Welcomed on a join without a token after our token was refused: another seat.
        reseated = self.welcome is not None and joined is not None and joined.token is None
        if reseated:
            self._sent_frames.clear()  # the lost seat's inputs: none of them is resent
            if self._spare is not None and self._spare != source:
                self._retire(self._spare)  # parked with the lost seat's token
                self._spare = None
        if source is not None and source != self._active:
            old = self._active
            self._active = source  # inputs go to whoever welcomed us last
            if source == self._spare:
                self._spare = None
                self._watch_spare(source, None)  # (active: the stall probes watch it)
            if old is not None and old in self._connections:
                self._retire(old)
        if self.welcome is not None and self.failovers and self.failovers[-1].epoch_after < 0:
            event = self.failovers[-1]
            event.epoch_after, event.ack_after = welcome.epoch, welcome.ack
            event.seat_lost = reseated
            self._resend_after(welcome.ack)
        elif self.welcome is not None and welcome.epoch > self.epoch:
            # The spare was welcomed before the loss of the old primary was noticed.
            self.failovers.append(
                FailoverEvent(
                    self.latest_tick,
                    self._max_ack,
                    self._last_snapshot_at,
                    welcome.epoch,
                    welcome.ack,
                    seat_lost=reseated,
                    epoch_before=self.epoch,
                )
            )
            self._resend_after(welcome.ack)
        self.welcome = welcome
        self.snapshot_interval = max(1, welcome.tick_rate // max(1, welcome.snapshot_rate))
        self._token = welcome.token
        self._welcomed_local = self.local_time()
        self._clock_changed()
        self.epoch = max(self.epoch, welcome.epoch)
        self._changed.set()
        return reseated

    def _resend_after(self, ack: int) -> None:
        """Everything the new primary has not applied goes again, in order."""
        self._outbox.clear()  # (held inputs are among them)
        again = [frame for seq, frame in self._sent_frames if seq > ack]
        self.inputs_resent += len(again)
        self._send_packet(again)

    def token_renewed(self, message: protocol.TokenMessage) -> None:
        """The primary renewed our session token: joins carry this one from now on, and the
        spare, parked with the old one (which would run out there), is parked again."""
        if self._delivering != self._active:
            return  # (a connection on its way out: not the node we play on)
        self._token = message.token
        if self._spare is not None:
            self._retire(self._spare)
            self._spare = None
            self._changed.set()

    def connect_token_renewed(self, message: protocol.ConnectTokenMessage) -> None:
        """The node sent a fresh connect token (UDP): the next handshake, at this node or at
        the promoted standby after a failover, uses it and asks no ``/connect``. One that
        does not parse is counted as an error, and the bot keeps the token it holds."""
        if self._delivering != self._active:
            return  # (a connection on its way out: not the node we play on)
        try:
            token = ConnectToken.from_json(json.loads(message.token))
        except (ValueError, RecursionError):  # (RecursionError: JSON nested too deep)
            self.swarm.note_error("bad_connect_token")
            return
        self._tokens.renewed(token)

    def token_refused(self) -> None:
        """A node refused the token our join carried (``invalid_token``): it will never be
        accepted again, so the next join asks for a new seat. A refused token we no longer
        use (a spare parked before a renewal) changes nothing."""
        joined = self._connections.get(self._delivering) if self._delivering is not None else None
        if joined is None or joined.token is None or joined.token != self._token:
            return
        self._token = None
        if self.welcome is not None:
            self.seats_lost += 1

    def hold_off(self, seconds: float, node: str | None = None) -> None:
        """A node asked us to wait ``seconds`` before we try again (``retry_after``): no
        join before then, plus up to a quarter more, jittered across the swarm. ``node``:
        only that node is not serving yet (``not_ready``, a 503): a failover tries the
        region's other nodes meanwhile, so that a standby warming up when the bot parked its
        spare there does not hold back the failover to another. (The spare itself is tried
        again every ``SPARE_RETRY_S`` regardless: parked the moment its node is warm, it is
        the fast way through the next failover.)"""
        until = self._loop.time() + seconds * self._jitter.uniform(1.0, 1.25)
        if node is None:
            self._not_before = max(self._not_before, until)
        else:
            self._node_not_before[node] = max(self._node_not_before.get(node, -math.inf), until)

    def delivering_url(self) -> str | None:
        """The node of the connection whose frame is being handled."""
        if self._delivering is None or (joined := self._connections.get(self._delivering)) is None:
            return None
        return joined.url

    def _wait_for(self, url: str) -> float:
        """Seconds before ``url`` may be tried (0: now)."""
        until = max(self._not_before, self._node_not_before.get(url, -math.inf))
        return max(0.0, until - self._loop.time())

    def refused(self) -> None:
        """A node ended our play for good (``idle_kick``, ``address_limit``,
        ``reservation_required``): the token is not tried again, and the bot stops."""
        self._token = None
        self._refused = True
        self._changed.set()

    def standbys_changed(self, message: protocol.StandbysMessage) -> None:
        """The primary names a new set of standbys: move the spare if it is elsewhere."""
        if self.welcome is None or message.epoch < self.epoch:
            return
        self.epoch = message.epoch  # told of it: snapshots of older epochs are refused now
        self.welcome = dataclasses.replace(self.welcome, standbys=message.urls)
        spare = self._connections.get(self._spare) if self._spare is not None else None
        if spare is not None and spare.url not in message.urls:
            self._retire(spare.id)
            self._spare = None
        self._changed.set()

    def shows(self, epoch: int, tick: int) -> bool:
        """Whether the bot would show a snapshot: never one from a deposed primary (a
        lower epoch), nor one older than the last shown, nor any before the first welcome."""
        if self.welcome is None:
            return False  # (over UDP a first snapshot can overtake the first welcome)
        return epoch > self.epoch or (epoch == self.epoch and tick > self.latest_tick)

    def accept_snapshot(self, epoch: int, tick: int, ack: int) -> bool:
        """Show this snapshot if the bot :meth:`shows` it (its tick is then what the bot
        acknowledges: a baseline it holds). Once shown, its ``ack`` frees the inputs it
        covers from the resend buffer."""
        if not self.shows(epoch, tick):
            return False
        now = self._loop.time()
        if self.snapshot_count and epoch > self._shown_epoch and not self._failing_over(epoch):
            # A new primary's snapshot before its welcome (over UDP it can overtake the
            # welcome to the spare): the failover starts here; the welcome completes it
            # and has the inputs the new primary lacks sent again.
            self.failovers.append(
                FailoverEvent(
                    self.latest_tick, self._max_ack, self._last_snapshot_at,
                    epoch_before=self._shown_epoch,
                )
            )  # fmt: skip
        if self.snapshot_count:
            self.longest_gap = max(self.longest_gap, now - self._last_snapshot_at)
            if epoch == self._shown_epoch:  # (across a failover the stall says it all)
                missed = (tick - self.latest_tick) // self.snapshot_interval - 1
                if missed > 0:
                    self.snapshot_gaps += missed
                    self._note_missing(tick, missed)
        if epoch != self._shown_epoch:
            self._missing.clear()
        self._shown_epoch = epoch
        self.epoch = epoch
        self.latest_tick = tick
        self.snapshot_count += 1
        if self.failovers and self.failovers[-1].stall_s is None:
            event = self.failovers[-1]
            if event.epoch_after >= 0:
                event.stall_s = now - event.lost_at
        self._last_snapshot_at = now
        if ack > self._max_ack:
            self._max_ack = ack
            while self._sent_frames and self._sent_frames[0][0] <= ack:
                self._sent_frames.popleft()
        return True

    def _failing_over(self, epoch: int) -> bool:
        """Whether a failover to ``epoch`` (or one still unanswered) is on record."""
        return bool(self.failovers) and self.failovers[-1].epoch_after in (-1, epoch)

    def _note_missing(self, tick: int, missed: int) -> None:
        """The ticks a gap before ``tick`` skipped, the newest :data:`MISSING_KEPT` of
        those still awaited: one that comes late was not lost after all."""
        missing = self._missing
        for back in range(min(missed, MISSING_KEPT), 0, -1):
            missing[tick - back * self.snapshot_interval] = None
        while len(missing) > MISSING_KEPT:
            del missing[next(iter(missing))]

    def note_unshown(self, epoch: int, tick: int) -> None:
        """A snapshot not shown: one of the newest shown epoch's ticks that a gap skipped
        came late (overtaken on the link), so it was not among those missing; a second
        copy of one shown (a node repeats snapshots on a lossy path) counts for nothing."""
        if epoch == self._shown_epoch:
            if tick in self._missing:
                del self._missing[tick]
                self.snapshots_late += 1

    @property
    def snapshots_lost(self) -> int:
        """Snapshots of the node's stream this bot never received, from the gaps in the
        ticks it showed (late ones were received, only not shown)."""
        return max(0, self.snapshot_gaps - self.snapshots_late)

    def echo_probe(self, probe: protocol.ProbeMessage) -> None:
        """Answer the server's probe at once, on the connection it came by: the server
        measures this bot's round trip from it."""
        self.send(protocol.encode(protocol.ProbeEchoMessage(probe.id)), self._delivering)

    def note_pong(self, pong: protocol.PongMessage) -> None:
        self._pong_at = self._loop.time()
        self.clock.observe(pong.t, pong.server_time, self.local_time())
        self._clock_changed()

    def _clock_changed(self) -> None:
        """Tell the swarm this bot's clock changed (it reads :meth:`server_time` of all
        bots in one pass: ``Swarm.clock_changed``), after a pong or a welcome."""
        if self.welcome is not None:
            self.swarm.clock_changed(self)

    @property
    def welcomed_local(self) -> float:
        """The bot's local time when its welcome came (its server time counts from it
        until the first pong)."""
        return self._welcomed_local

    def ping(self, local: float) -> None:
        """Ping now, with the held inputs (see :meth:`ping_frame`)."""
        self.flush(self.ping_frame(local))

    def ping_frame(self, local: float) -> bytes:
        """A ping at the bot's local time ``local``, and when the next one is due: a burst
        until the clock is synced, then the steady interval."""
        synced = self.clock.synced
        self.next_ping = local + (self.swarm.config.ping_interval if synced else SYNC_PING_INTERVAL)
        self._ping_id += 1
        return protocol.encode(protocol.PingMessage(self._ping_id, local))

    # -- connections -----------------------------------------------------------------------

    def _retire(self, connection_id: int) -> None:
        connection = self._connections.pop(connection_id, None)
        if connection is not None and not connection.ws.closed:
            closing = self._loop.create_task(connection.ws.close())
            self._closing.add(closing)
            closing.add_done_callback(self._closing.discard)

    async def _open(self, url: str) -> int | None:
        """Connect to ``url`` and send a join (with our token, while we hold one)."""
        config = self.swarm.config
        connection_id = next(self._ids)
        try:
            async with asyncio.timeout(config.connect_timeout):
                if self._datagrams is None:
                    ws: websocket.WebSocketClient | datagram.DatagramConnection
                    ws = await websocket.connect(
                        url,
                        functools.partial(self._arrived, connection_id),
                        functools.partial(self._ended, connection_id),
                        max_size=protocol.MAX_SERVER_FRAME_BYTES,
                        tls=config.tls,
                    )
                else:
                    ws = await self._connect_datagram(url, connection_id, self._datagrams)
        except (OSError, TimeoutError, ValueError) as error:  # ValueError: not a ws URL
            if isinstance(error, websocket.HandshakeError) and error.retry_after is not None:
                self.hold_off(error.retry_after, url if error.unavailable else None)
            if self.welcome is None:  # (during a failover, dead nodes are expected)
                self.swarm.note_error(f"connect_failed:{type(error).__name__}")
            return None
        if ws.closed:
            # Refused as soon as it opened (a node warming up answers the handshake, then
            # ``not_ready``): its close reached the bot before the connection was tracked,
            # so nothing would ever mark it closed, and a spare kept like that is waited
            # for at every failover and never welcomed.
            return None
        connection = _Connection(connection_id, url, ws)
        self._connections[connection_id] = connection
        if self._datagrams is None:
            # The handshake happened at loopback speed; the link charges its round trips.
            await asyncio.sleep(CONNECT_ROUND_TRIPS * self.params.rtt)
        connection.token = self._token
        join = protocol.JoinMessage(
            protocol.PROTOCOL_VERSION,
            f"{config.name_prefix}-{self.params.index}",
            token=connection.token,
            interp_delay=config.interp_delay,
        )
        self.send(protocol.encode(join), connection_id)
        return connection_id

    async def _connect_datagram(
        self, url: str, connection_id: int, link: DatagramLink
    ) -> datagram.DatagramConnection:
        """Handshake over UDP with the node at ``url``: with the connect token the bot holds
        (good at every node of the region, once each), or a new one from that node's
        ``/connect`` (its TCP round trips charged, as a WebSocket's opening is)."""
        config = self.swarm.config
        book = self._tokens
        address = datagram.node_address(url)
        if not book.usable_at(address, time.time()):
            body: dict[str, str] = {"name": f"{config.name_prefix}-{self.params.index}"}
            if self._token is not None:  # (the directory's reservation, or the seat's token)
                body["token"] = self._token
            book.renewed(
                await datagram.request_token(url, body, config.tls, config.connect_timeout)
            )
            await asyncio.sleep(CONNECT_ROUND_TRIPS * self.params.rtt)
        token = book.token
        assert token is not None
        if address not in token.addresses:
            address = token.addresses[0]  # (the node names itself first)
        book.used.add(address)
        return await datagram.connect(
            token,
            address,
            functools.partial(self._arrived, connection_id),
            functools.partial(self._ended, connection_id),
            link=link,
            pump=self.swarm.pump,
            meter=self,
        )

    def _park(self, connection_id: int | None) -> None:
        """Keep ``connection_id`` (None: the attempt failed) as the spare."""
        self._spare = connection_id
        if connection_id is not None:
            self._watch_spare(connection_id, SPARE_SILENCE_S)

    def _watch_spare(self, connection_id: int, limit_s: float | None) -> None:
        connection = self._connections.get(connection_id)
        if connection is not None and isinstance(connection.ws, datagram.DatagramConnection):
            connection.ws.watch_silence(limit_s)

    def _standby_url(self) -> str | None:
        """Where to park a spare; None without a token (a standby parks only a join that
        carries one)."""
        if self.welcome is None or self._active is None or self._token is None:
            return None
        current = self._connections[self._active].url if self._active in self._connections else ""
        for url in self.welcome.standbys:
            if url != current:
                return url
        return None

    def _stall(self) -> str:
        """``ok``, ``probe`` (a stall: ask the node whether it is alive before leaving it),
        ``reprobe`` (the probe unanswered for a while: ask again) or ``lost``. A slow node
        is not a dead one: the bot leaves only on evidence, a closed socket, a probe
        unanswered, or nothing shown for :data:`STALL_GIVE_UP_S`; a standby
        that took over says so itself, by welcoming the spare (:meth:`welcomed`)."""
        active = self._connections.get(self._active) if self._active is not None else None
        if active is None or active.closed:
            lost = self._active is not None or self.welcome is not None
            return "lost" if lost else "ok"
        now = self._loop.time()
        resumed = self.swarm.beat.beat(now)
        quiet_since = max(self._last_snapshot_at, self._welcomed_at_loop, resumed)
        silent = now - quiet_since
        if silent <= STALL_TIMEOUT_S:
            return "ok"
        if silent > STALL_GIVE_UP_S:
            return "lost"
        probe = self._probe_at
        if probe is None or probe < quiet_since:
            return "probe"
        if self._pong_at >= probe:  # it answered: alive, only slow; ask again in a while
            return "probe" if now - probe > PROBE_TIMEOUT_S else "ok"
        if now - probe > PROBE_TIMEOUT_S + 2 * self.params.rtt:
            return "lost"
        return "reprobe" if now - self._probe_sent_at >= PROBE_REPEAT_S else "ok"

    @property
    def _welcomed_at_loop(self) -> float:
        return self._welcomed_local - self.params.clock_offset

    def needs_attention(self, now: float) -> bool:
        """Whether :meth:`_play` has something to do now (the swarm's watchdog asks)."""
        if self.welcome is None:
            return False  # connecting: _play is awake already, or waits for the close
        if self._spare is None and now >= self._next_spare_at and self._standby_url():
            return True
        return self._stall() != "ok"

    def wake(self) -> None:
        self._changed.set()

    async def run(self, stop: asyncio.Event) -> None:
        """Play until ``stop``, keeping a spare on a standby and switching on failover."""
        try:
            await self._play(stop)
        finally:
            await asyncio.gather(
                *(connection.ws.close() for connection in self._connections.values()),
                *self._closing,
            )

    async def _play(self, stop: asyncio.Event) -> None:
        """React to what changed: a welcome, a close, a missing spare, a silent primary.

        Nothing here polls: deliveries and the swarm's watchdog set ``_changed``.
        """
        config = self.swarm.config
        give_up_at = self._loop.time() + config.connect_timeout
        self._active = await self._open(self.url)
        while not stop.is_set() and not self._refused:
            if self._active is None and self.welcome is None:
                if self._loop.time() > give_up_at:
                    return
                wait = max(RECONNECT_BACKOFF_S, self._wait_for(self.url))
                await asyncio.sleep(min(wait, give_up_at - self._loop.time()))
                self._active = await self._open(self.url)
                continue
            self._changed.clear()
            await self._changed.wait()
            if self._refused:
                return
            now = self._loop.time()
            if self.welcome is None:
                if self._active is not None and self._connections[self._active].closed:
                    self._retire(self._active)
                    self._active = None
                continue
            spare = self._connections.get(self._spare) if self._spare is not None else None
            if spare is not None and spare.closed:
                self._retire(spare.id)
                self._spare, spare = None, None
            if spare is None and now >= self._next_spare_at and (url := self._standby_url()):
                self._next_spare_at = now + SPARE_RETRY_S
                self._park(await self._open(url))
            state = self._stall()
            if state == "probe":
                self._probe_at = self._probe_sent_at = self._loop.time()
                self.stalls += 1
                self.ping(self.local_time())
            elif state == "reprobe":  # the probe's ping, or its pong, may have been lost
                self._probe_sent_at = self._loop.time()
                self.ping(self.local_time())
            elif state == "lost":
                await self._fail_over(stop)
                give_up_at = self._loop.time() + RECONNECT_GIVE_UP_S

    async def _until_welcomed(
        self,
        event: FailoverEvent,
        stop: asyncio.Event,
        attempt: int | None,
        round_trips: int,
        extra: float = JOIN_ANSWER_SLACK_S,
    ) -> None:
        """Wait up to ``round_trips`` of our RTT plus ``extra`` seconds for a welcome (on
        any connection), ``stop``, or the close of connection ``attempt``."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(round_trips * self.params.rtt + extra):
                while event.epoch_after < 0 and not stop.is_set():
                    tried = self._connections.get(attempt) if attempt is not None else None
                    if attempt is not None and (tried is None or tried.closed):
                        return
                    self._changed.clear()
                    await self._changed.wait()

    async def _fail_over(self, stop: asyncio.Event) -> None:
        """The active connection is gone: the spare first, then every node in turn."""
        lost = self._active
        self._active = None
        if lost is not None:
            self._retire(lost)
        pending = self.failovers[-1] if self.failovers else None
        if pending is None or pending.epoch_after >= 0 or pending.epoch_before >= self._shown_epoch:
            self.failovers.append(
                FailoverEvent(
                    self.latest_tick, self._max_ack, self._last_snapshot_at, epoch_before=self.epoch
                )
            )
        # (else a new primary's snapshot started this failover already: one event, from the
        # last tick the old primary showed)
        event = self.failovers[-1]
        if self._spare is not None:  # (a spare whose node died too: its close ends the wait)
            await self._until_welcomed(event, stop, self._spare, 0, SPARE_WAIT_S)
            if event.epoch_after >= 0:
                return
        standbys = self.welcome.standbys if self.welcome is not None else ()
        endpoints = list(dict.fromkeys([*standbys, self.url]))
        give_up = self._loop.time() + RECONNECT_GIVE_UP_S
        backoff = RECONNECT_BACKOFF_S
        for url in itertools.cycle(endpoints):
            over = stop.is_set() or self._refused or event.epoch_after >= 0
            if over or self._loop.time() > give_up:
                return
            parked = self._connections.get(self._spare) if self._spare is not None else None
            if parked is not None and parked.closed:
                self._retire(parked.id)
                self._spare, parked = None, None
            elif parked is not None:
                give_up = self._loop.time() + RECONNECT_GIVE_UP_S  # a standby holds our join
            if self._wait_for(url) > 0:
                if all(self._wait_for(other) > 0 for other in endpoints):
                    soonest = min(map(self._wait_for, endpoints))
                    await self._until_welcomed(event, stop, None, 0, soonest)  # (a spare may)
                continue  # another node, or this one once its wait is over
            if parked is None or parked.url != url:
                attempt = await self._open(url)
                if attempt is not None:
                    give_up = self._loop.time() + RECONNECT_GIVE_UP_S  # the region lives on
                    await self._until_welcomed(event, stop, attempt, JOIN_ANSWER_RTTS)
                    if event.epoch_after >= 0:
                        return
                    tried = self._connections.get(attempt)
                    if tried is not None and not tried.closed and self._spare is None:
                        # No answer: a standby parked the join. Kept as the spare, it is
                        # welcomed the moment that standby leads; the next node is tried
                        # at once (this one answered: the region is up, nothing to spread).
                        self._park(attempt)
                        continue
                    self._retire(attempt)
            # Capped exponential backoff with jitter: a region's bots do not come back as one.
            pause = backoff * self._jitter.uniform(0.5, 1.5)
            await self._until_welcomed(event, stop, None, 0, pause)
            backoff = min(2 * backoff, RECONNECT_BACKOFF_MAX_S)
