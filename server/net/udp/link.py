"""One UDP client's channel as a :class:`~server.net.links.PlayerLink`.

The sessions seat a UDP player exactly as a WebSocket one: the same join, admission,
budgets, intake, offences and closes. What the link adds is the mapping of the seat
protocol's frames onto the channel's lanes (:class:`shared.datagram.Lane`, by
:func:`shared.protocol.datagram_spec.lane_of_frame`): snapshots go UNRELIABLE (a lost one
is superseded by the next; on a path that lost a datagram lately, each goes twice, the copy
half a snapshot interval later), so do the round-trip probes and pongs (a resent one would
measure the resend), every other message RELIABLE; from the
client, REDUNDANT payloads are inputs, charged to the input budget, the rest to the
other frames' budget, each payload once however many datagrams repeated it (the channel
delivers it once).

An input the channel delivers is held in the intake like a WebSocket input, so one numba
call decodes a tick's inputs from both transports: the intake reads client WebSocket
frames, so the link puts the 6-byte header of a masked frame with a zero key in front of
the payload (unmasking with it changes nothing). A payload too long for a 7-bit length
(no input is) is read the ordinary way, after this player's held inputs.

While its player is seated, the link keeps the client's connect token fresh: the endpoint
asks it each service pass (:meth:`UdpLink.connect_token_due`) and hands it a new token to
send (``connect_token``) once the one the client holds has half its life or less left, so a
failover at any time finds a live token for the promoted standby.

A link that floods (:attr:`~server.sim.input_budget.Budget.flooding`) has its datagrams
dropped unopened for :data:`~server.net.player_stream.FLOOD_PAUSE_S`, the datagram
counterpart of a WebSocket's paused reading; its budgets earn nothing meanwhile.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Callable
from typing import Protocol

from server.net.links import POLICY_VIOLATION, SeatEvents
from server.net.metrics import NodeMetrics
from server.net.player_stream import FLOOD_PAUSE_S
from server.sim.input_budget import FrameKind, SeatBudgets
from server.sim.intake import HeldReader, InputIntake
from server.sim.player_reads import charge
from shared import protocol
from shared.datagram import Channel, ConnectToken, Lane
from shared.datagram.constants import TOKEN_EXPIRES_IN_S
from shared.protocol.datagram_spec import lane_of_frame

__all__ = [
    "CLOSE_LINGER_CAP_S",
    "LOSSY_FOR_S",
    "RENEW_WITHIN_S",
    "LinkEndpoint",
    "UdpLink",
    "as_client_frame",
]

Address = tuple[str, int]

#: A link that lost a datagram this recently gets each snapshot twice, the copy half a
#: snapshot interval after it (:meth:`LinkEndpoint.repeat_later`): two snapshots in a row
#: lost would otherwise leave its player three intervals without one.
LOSSY_FOR_S = 5.0

#: Frames a client may send before it is seated (its join; a parked join's hang-up): more
#: are dropped unread.
_INBOX_LIMIT = 4
#: The longest a close waits for what was queued before it (the ``error`` saying why) to
#: reach the client before the disconnect packets go: a few round trips, at most this.
CLOSE_LINGER_CAP_S = 0.5
_CLOSE_WAIT_S = 1.0
#: A seated client whose connect token has this little life left is sent a new one: half
#: the life the node issues tokens with.
RENEW_WITHIN_S = TOKEN_EXPIRES_IN_S / 2
_SHORT_FRAME = 126  # a masked client frame's 7-bit length is below this
_FRAME_HEAD = b"\x82"  # FIN + binary
_ZERO_KEY = bytes(4)


def as_client_frame(payload: bytes) -> bytes:
    """``payload`` as a masked client WebSocket frame with a zero key (what the intake
    decodes); only for payloads shorter than :data:`_SHORT_FRAME` bytes."""
    return _FRAME_HEAD + bytes([0x80 | len(payload)]) + _ZERO_KEY + payload


class LinkEndpoint(Protocol):
    """What a link needs of the endpoint that reads and writes its datagrams."""

    def clock(self) -> float:
        """Unix seconds now (the channels' time)."""
        ...

    def wake(self, link: UdpLink) -> None:
        """``link`` queued something: send it with this loop turn's batch."""
        ...

    def disconnect(self, link: UdpLink) -> None:
        """Send what ``link`` still has queued, then its disconnect packets; forget it."""
        ...

    def forget(self, link: UdpLink) -> None:
        """``link`` is gone: its address is a stranger again."""
        ...

    def repeat_later(self, link: UdpLink, snapshot: bytes) -> None:
        """Send ``snapshot`` to ``link`` once more, half a snapshot interval from now."""
        ...


class UdpLink:
    """A connected UDP client: its channel, its seat's budgets once seated, and its end."""

    def __init__(
        self,
        peer: Address,
        channel: Channel,
        endpoint: LinkEndpoint,
        metrics: NodeMetrics,
        *,
        token_expires_at: float = math.inf,
        user_data: bytes = b"",
    ) -> None:
        """``token_expires_at`` and ``user_data``: those of the connect token the client
        connected with (a renewal carries the same user data)."""
        self.peer = peer
        self.channel = channel
        self._endpoint = endpoint
        self._metrics = metrics
        self._inbox: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._owner: HeldReader | None = None
        self._events: SeatEvents | None = None
        self._intake: InputIntake | None = None
        self._now: Callable[[], float] = lambda: 0.0
        self._budgets: SeatBudgets | None = None
        self._held = -1  # the intake generation this link last held an input in
        self._paused_until = 0.0  # (wall clock) a flood's pause: datagrams dropped unopened
        self._forfeit_due = False
        self._closing = False
        self._close_task: asyncio.Task[None] | None = None
        self.gone: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        #: The channel's refusals already counted in the node's metrics, by cause.
        self.refusals_counted: dict[str, int] = {}
        #: When the newest connect token the client holds expires (unix seconds).
        self.token_expires_at = token_expires_at
        self.user_data = user_data

    # -- PlayerLink: identity --------------------------------------------------------------

    @property
    def address(self) -> str | None:
        return self.peer[0]

    @property
    def closing(self) -> bool:
        return self._closing

    # -- datagrams in (from the endpoint) --------------------------------------------------

    def datagram(self, data: bytes, now: float) -> None:
        """A datagram from this link's address arrived at unix time ``now``."""
        if now < self._paused_until:
            self._metrics.udp_refused.labels("flooding").inc()
            return
        payloads = self.channel.receive(data, now)
        if self.channel.closed:
            self.lost()  # the client disconnected
            return
        if self._closing:
            return  # (its acknowledgements still count: what we queued gets through)
        for lane, payload in payloads:
            if self._events is None:
                self._before_seat(lane, payload)
            else:
                self._seated(lane, payload)
            if self._closing:
                return

    def _before_seat(self, lane: Lane, payload: bytes) -> None:
        if lane is Lane.RELIABLE and self._inbox.qsize() < _INBOX_LIMIT:
            self._inbox.put_nowait(payload)

    def _seated(self, lane: Lane, payload: bytes) -> None:
        now = self._now()
        if self._forfeit_due and self._budgets is not None:
            self._forfeit_due = False
            self._budgets.forfeit(now)
        intake, owner = self._intake, self._owner
        if lane is Lane.REDUNDANT:
            if not self._admit(FrameKind.INPUT, now):
                return
            if intake is not None and owner is not None and len(payload) < _SHORT_FRAME:
                self._held = intake.hold(owner, as_client_frame(payload), now)
                return
            if intake is not None and self._held == intake.generation:
                intake.drain()  # (read after this player's held inputs, in order)
            self._read(payload)
        elif self._admit(FrameKind.PING, now):
            self._read(payload)  # (no input read here may overtake one: none is held)

    def _admit(self, kind: FrameKind, now: float) -> bool:
        """Whether the budget for ``kind`` lets one more payload through now."""
        budgets = self._budgets
        if budgets is None:
            return True
        _, dropped = charge(budgets, kind, 1, now)  # (the WebSocket's charge, one payload)
        if dropped is None:
            return True
        events = self._events
        if events is not None and events.over_budget(kind, 1, dropped.offence):
            self.close(POLICY_VIOLATION, b"offences")
        elif dropped.flooding and not self._closing:
            self._paused_until = self._endpoint.clock() + FLOOD_PAUSE_S
            self._forfeit_due = True
        return False

    def _read(self, payload: bytes) -> None:
        events = self._events
        if events is not None and not self._closing and events.frame(payload):
            self.close(POLICY_VIOLATION, b"offences")

    # -- PlayerLink: before the seat -------------------------------------------------------

    async def receive(self) -> bytes | None:
        item = await self._inbox.get()
        if item is None:
            self._inbox.put_nowait(None)  # (every later call hears it too)
        return item

    async def refuse(self, message: bytes, code: int, reason: bytes) -> None:
        if self._closing:
            return
        self.send(message)
        self.close(code, reason)
        await self.wait_closed()

    # -- PlayerLink: seated ----------------------------------------------------------------

    def seat(
        self,
        owner: HeldReader,
        events: SeatEvents,
        intake: InputIntake,
        now: Callable[[], float],
    ) -> asyncio.Future[None] | None:
        if self._closing:
            return None
        self._owner, self._events, self._intake, self._now = owner, events, intake, now
        self._budgets = SeatBudgets(intake.allowance, now())
        return self.gone

    def reading(self) -> bool:
        return self._events is not None and not self._closing

    def read_now(self, data: bytes) -> None:
        """An input the intake could not decode in its batch: read it the ordinary way."""
        self._read(data[len(_FRAME_HEAD) + 1 + len(_ZERO_KEY) :])

    # -- PlayerLink: sending ---------------------------------------------------------------

    def send(self, message: bytes) -> bool:
        if self._closing:
            return False
        self.channel.send(message, lane_of_frame(message))
        self._metrics.tally_bytes_out += len(message)
        self._endpoint.wake(self)
        return True

    def send_snapshot(self, head: bytes, body: bytes, probe: bytes = b"") -> bool:
        if self._closing:
            return False
        snapshot = head + body
        try:
            self.channel.send(snapshot, Lane.UNRELIABLE)
        except ValueError:
            return False  # (larger than a datagram's 255 fragments: not sent)
        if self._endpoint.clock() - self.channel.last_loss_at <= LOSSY_FOR_S:
            self._endpoint.repeat_later(self, snapshot)
        sent = len(snapshot)
        if probe:
            self.channel.send(probe, Lane.UNRELIABLE)  # (a round trip: never resent)
            sent += len(probe)
        self._metrics.tally_bytes_out += sent
        self._endpoint.wake(self)
        return True

    # -- the connect token ---------------------------------------------------------------

    def connect_token_due(self, now: float) -> bool:
        """Whether the client is seated and its connect token has :data:`RENEW_WITHIN_S`
        or less left at unix time ``now``."""
        return now >= self.token_expires_at - RENEW_WITHIN_S and self.reading()

    def renew_connect_token(self, token: ConnectToken) -> None:
        """Send the client ``token`` (``connect_token``, on the reliable lane, resent until
        acknowledged): the one it holds from now on."""
        text = json.dumps(token.to_json(), separators=(",", ":"))
        if self.send(protocol.encode(protocol.ConnectTokenMessage(text))):
            self.token_expires_at = token.expires_at

    # -- the end ---------------------------------------------------------------------------

    def close(self, code: int, reason: bytes) -> None:
        """Stop reading, let what was queued reach the client for a few round trips, then
        send the disconnect packets and forget the address. (``code`` and ``reason`` went
        out in the ``error`` before the close, if any: a datagram close carries none.)"""
        if self._closing:
            return
        self._closing = True
        self._close_task = asyncio.get_running_loop().create_task(self._linger_and_end())

    async def _linger_and_end(self) -> None:
        await asyncio.sleep(min(CLOSE_LINGER_CAP_S, 0.05 + 3 * self.channel.rtt_s))
        self._endpoint.disconnect(self)
        self._end()

    def lost(self) -> None:
        """The client disconnected, or went silent for its timeout: gone, nothing sent."""
        self._closing = True
        if self._close_task is not None:
            self._close_task.cancel()
        self._endpoint.forget(self)
        self._end()

    def _end(self) -> None:
        if not self.gone.done():
            self.gone.set_result(None)
        self._inbox.put_nowait(None)

    async def wait_closed(self) -> None:
        try:
            async with asyncio.timeout(_CLOSE_WAIT_S):
                await asyncio.shield(self.gone)
        except TimeoutError:
            self.lost()
