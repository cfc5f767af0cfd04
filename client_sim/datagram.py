"""A bot's connection over UDP: the same seat protocol as over WebSocket, on sealed datagrams.

A connection asks the node for a connect token (``POST /connect`` on its HTTP(S) port),
handshakes with one of the token's addresses (:class:`~shared.datagram.ClientHandshake`),
then carries the seat protocol's frames on the channel's lanes: what the bot sends is an
input (``REDUNDANT``: every datagram repeats the inputs the node has not acknowledged) or
anything else (``RELIABLE``); snapshots come ``UNRELIABLE``. :class:`DatagramConnection`
offers what :class:`~client_sim.bot.Bot` uses of a WebSocket (``send_many``, ``closed``,
``close``, ``abort``), so the bot's seat logic (join, resume with the seat token, spares,
failover) is the same code for both transports.

The bot's modelled link acts on datagrams here (:class:`~client_sim.link.DatagramLink`):
each one sent or received is dropped, delayed or duplicated by it, through the swarm's
:class:`~client_sim.pump.DeliveryPump`, and nothing is retransmitted but what the channel
itself resends. The socket is ``connect``-ed to the node's address, so a node that is gone
(its port closed) says so at once, like a TCP reset; a silent one is noticed by the
channel's time-out or the bot's own probes.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit

import aiohttp

from client_sim.link import DatagramLink
from client_sim.pump import DeliveryPump
from client_sim.websocket import HandshakeError, TlsTrust
from shared import protocol
from shared.datagram import mmsg
from shared.datagram.channel import Channel, Lane
from shared.datagram.handshake import ClientHandshake
from shared.datagram.tokens import ConnectToken
from shared.protocol.datagram_spec import lane_of_frame

__all__ = [
    "SERVICE_INTERVAL_S",
    "DatagramConnection",
    "DatagramMeter",
    "TokenBook",
    "connect",
    "connect_url",
    "lane_of",
    "request_token",
]

#: How often a connection sends what is due without being asked (handshake resends,
#: keep-alives, reliable resends) and checks its time-out.
SERVICE_INTERVAL_S = 0.05
#: The most datagrams read from the socket in one wake-up.
RECEIVE_BATCH = 16
#: A datagram's largest size read (the node never sends more than MAX_PAYLOAD).
RECEIVE_SIZE = 2048
#: Inputs the channel repeats until acknowledged: at 60 inputs a second, 0.5 s of them,
#: so a bot with a 250 ms round trip still loses none to a dropped datagram.
INPUT_REDUNDANCY = 32
#: A token this close to its expiry is renewed before a handshake.
TOKEN_MARGIN_S = 2.0
_INPUT_PREFIX = protocol.encode_input(
    seq=0, tick=0, move=(0.0, 0.0), yaw=0.0, pitch=0.0, buttons=0, view_time=0.0, ack_tick=0
)[:12]


def lane_of(frame: bytes) -> Lane:
    """Which lane a frame the bot sends takes: inputs ``REDUNDANT``, pings and probe echoes
    ``UNRELIABLE`` (a resent one would measure the resend), the rest ``RELIABLE``."""
    return Lane.REDUNDANT if frame[:12] == _INPUT_PREFIX else lane_of_frame(frame)


def connect_url(server_url: str) -> str:
    """The node's ``/connect`` for its player URL (``ws[s]://host:port/ws``)."""
    parts = urlsplit(server_url)
    scheme = {"ws": "http", "wss": "https"}.get(parts.scheme, parts.scheme)
    return urlunsplit((scheme, parts.netloc, "/connect", "", ""))


def node_address(server_url: str) -> tuple[str, int]:
    """The UDP address a node's URL names (the UDP port is the TCP port's number)."""
    parts = urlsplit(server_url)
    secure = parts.scheme in ("wss", "https")
    return parts.hostname or "", parts.port or (443 if secure else 80)


async def request_token(
    server_url: str, body: dict[str, Any], tls: TlsTrust, within_s: float
) -> ConnectToken:
    """POST ``body`` to the node's ``/connect``; its connect token. A refusal is a
    :class:`HandshakeError` (with the wait a 429 or 503 asked for)."""
    url = connect_url(server_url)
    try:
        async with aiohttp.ClientSession() as session:
            async with session.post(
                url, json=body, timeout=aiohttp.ClientTimeout(total=within_s), ssl=tls.context()
            ) as answer:
                if answer.status != 200:
                    retry = answer.headers.get("Retry-After")
                    wait = float(retry) if retry and retry.isdigit() else None
                    raise HandshakeError(
                        f"{url} answered {answer.status}", wait, answer.status == 503
                    )
                data = await answer.json(content_type=None)
    except aiohttp.ClientError as error:
        raise HandshakeError(f"{url}: {error}") from None
    try:
        return ConnectToken.from_json(data)
    except ValueError as error:
        raise HandshakeError(f"{url}: {error}") from None


class DatagramMeter(Protocol):
    """Who counts a connection's bytes and inputs (the bot, for its report): inputs
    repeated in a later datagram (``inputs_resent``), inputs whose first datagram the
    modelled link dropped (so the node can only have them from a repeat:
    ``inputs_first_lost``), and inputs the channel gave up before an acknowledgement."""

    bytes_down: int
    bytes_up: int
    inputs_resent: int
    inputs_first_lost: int
    inputs_given_up: int


class TokenBook:
    """A bot's connect token and where it was used: a token opens a connection once per
    node, so a second connection to a node where it was used (or one not listed in it, or
    one after it expired) asks that node for a new token. While the bot plays over UDP its
    node sends it fresh ones (``connect_token``), each :meth:`renewed` here."""

    __slots__ = ("token", "used")

    def __init__(self) -> None:
        self.token: ConnectToken | None = None
        self.used: set[tuple[str, int]] = set()

    def usable_at(self, address: tuple[str, int], now: float) -> bool:
        token = self.token
        return (
            token is not None
            and address in token.addresses
            and address not in self.used
            and now < token.expires_at - TOKEN_MARGIN_S
        )

    def renewed(self, token: ConnectToken) -> None:
        self.token, self.used = token, set()


class DatagramConnection:
    """One connection to one node over UDP, its datagrams through the bot's link model."""

    def __init__(
        self,
        token: ConnectToken,
        address: tuple[str, int],
        on_message: Callable[[bytes], None],
        on_close: Callable[[], None],
        *,
        link: DatagramLink,
        pump: DeliveryPump,
        meter: DatagramMeter,
        resolved: tuple[int, Any] | None = None,
    ) -> None:
        """``address``: the node as the token lists it; ``resolved``: its socket family
        and address (default: ``address`` itself, a literal IP)."""
        self._loop = asyncio.get_running_loop()
        self._on_message = on_message
        self._on_close = on_close
        self._link = link
        self._pump = pump
        self._meter = meter
        self.address = address
        if resolved is None:
            family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
            resolved = (family, address)
        self._sock = socket.socket(resolved[0], socket.SOCK_DGRAM)
        self._sock.setblocking(False)
        self._sock.connect(resolved[1])  # (a closed port answers: ECONNREFUSED, like a reset)
        self.handshake = ClientHandshake(token, address, time.time(), redundancy=INPUT_REDUNDANCY)
        self.channel: Channel | None = None
        self.established: asyncio.Future[None] = self._loop.create_future()
        self._closed = False
        self._outgoing: list[tuple[bytes, tuple[str, int]]] = []
        self._counted = (0, 0)  # the channel's repeats and give-ups already metered
        #: Seconds of silence after which this connection counts as gone, when shorter
        #: than the channel's time-out (None: the time-out alone). See :meth:`watch_silence`.
        self.silence_limit_s: float | None = None
        self._loop.add_reader(self._sock.fileno(), self._readable)
        self._timer: asyncio.TimerHandle | None = None
        self._service()

    # -- the surface the bot uses ----------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed

    def send_many(self, payloads: list[bytes]) -> bool:
        """Queue each frame on its lane and send what the channel makes of them now."""
        channel = self.channel
        if self._closed or channel is None:
            return False
        inputs = 0
        for payload in payloads:
            lane = lane_of(payload)
            inputs += lane is Lane.REDUNDANT
            channel.send(payload, lane)
        first_arrives = self._send_due(channel.datagrams(time.time()))
        if inputs and not first_arrives:
            self._meter.inputs_first_lost += inputs  # (the channel packs new inputs first)
        return True

    def watch_silence(self, limit_s: float | None) -> None:
        """End the connection (as a close) once nothing authentic came for ``limit_s``.

        A node sends every connection a keep-alive at least every ``RESEND_INTERVAL_S``, so
        a long silence means it is gone. The close a dead node's closed port would send
        (ICMP port unreachable) cannot be relied on: Linux sends one per peer address a
        second (``net.ipv4.icmp_ratelimit``), outside loopback, so of many clients behind
        one address most never hear it; and a node restarted on the same port ignores the
        old connection's datagrams. A parked spare needs this: without it, it passes for
        alive until the channel's time-out, and a failover waits for it in vain."""
        self.silence_limit_s = limit_s

    def abort(self) -> None:
        """Drop the connection at once, telling the node nothing."""
        self._end(notify=False)

    async def close(self) -> None:
        """A clean disconnect: the channel's few disconnect datagrams, then the socket."""
        if self._closed:
            return
        if self.channel is not None:
            with_link = [(d, self.address) for d in self.channel.disconnect()]
            self._try_send(with_link)  # (not through the link: the socket closes now)
        self._end(notify=False)

    @property
    def stats(self) -> dict[str, Any]:
        """The channel's counters (empty before the handshake finished)."""
        return self.channel.stats if self.channel is not None else {}

    # -- the link: datagrams through the modelled delays -------------------------------------

    def _readable(self) -> None:
        """Drain what waits on the socket (at most :data:`RECEIVE_BATCH` datagrams).

        ``recv`` a datagram at a time, not ``recvmmsg``: a bot's socket holds one or two
        datagrams per wake-up, and ``mmsg.receive_batch`` sets up its ctypes buffers for a
        whole batch each call (measured: 69 µs a call against about 2 µs for ``recv``).
        """
        sock, now, down, pump = self._sock, self._loop.time(), self._link.down, self._pump
        for _ in range(RECEIVE_BATCH):
            try:
                data = sock.recv(RECEIVE_SIZE)
            except BlockingIOError:
                return
            except OSError:  # ECONNREFUSED: nothing listens there any more
                self._end(notify=True)
                return
            for due in down.fates(now):
                pump.at(due, self._arrive, data)

    def _arrive(self, data: bytes) -> None:
        if self._closed:
            return
        self._meter.bytes_down += len(data)
        now = time.time()
        if self.channel is None:
            payloads = self.handshake.on_datagram(data, now)
            if self.handshake.state == "connected":
                self.channel = self.handshake.channel
                if not self.established.done():
                    self.established.set_result(None)
            elif self.handshake.state != "connecting":
                self._end(notify=True)
                return
        else:
            payloads = self.channel.receive(data, now)
        for _, payload in payloads:
            if self._closed:
                return
            self._on_message(payload)
        if self.channel is not None and self.channel.closed:
            self._end(notify=True)

    def _send_due(self, datagrams: list[bytes]) -> bool:
        """Each datagram through the up line; whether the first of them arrives."""
        now, up, pump = self._loop.time(), self._link.up, self._pump
        first_arrives = False
        for index, datagram in enumerate(datagrams):
            fates = up.fates(now)
            if index == 0:
                first_arrives = bool(fates)
            for due in fates:
                pump.at(due, self._leave, datagram)
        if datagrams and self.channel is not None:
            self._count_repeats(self.channel.stats)
        return first_arrives

    def _count_repeats(self, stats: dict[str, Any]) -> None:
        resent, given_up = stats["redundant_resent"], stats["redundant_given_up"]
        meter = self._meter
        meter.inputs_resent += resent - self._counted[0]
        meter.inputs_given_up += given_up - self._counted[1]
        self._counted = (resent, given_up)

    def _leave(self, datagram: bytes) -> None:
        """A datagram's modelled delay is over: it leaves with the others due now, in one
        system call (the pump releases every due datagram in one pass)."""
        if self._closed:
            return
        if not self._outgoing:
            self._loop.call_soon(self._flush)
        self._outgoing.append((datagram, self.address))

    def _flush(self) -> None:
        items, self._outgoing = self._outgoing, []
        if not self._closed and not self._try_send(items):
            self._end(notify=True)

    def _try_send(self, items: list[tuple[bytes, tuple[str, int]]]) -> bool:
        """Send ``items`` in one system call: ``sendmmsg`` for several, ``send`` for one
        (the common case: sendmmsg's ctypes set-up costs 70 µs a call, ``send`` a few)."""
        try:
            if len(items) == 1:
                self._sock.send(items[0][0])
            else:
                mmsg.send_batch(self._sock, items)
        except BlockingIOError:
            return True  # (the send buffer is full: dropped, as a lossy link would)
        except OSError:  # ECONNREFUSED: the node's port closed
            return False
        self._meter.bytes_up += sum(len(d) for d, _ in items)
        return True

    def _service(self) -> None:
        """Send what is due unasked (handshake resends, keep-alives, reliable resends) and
        end a connection the node stopped answering."""
        self._timer = None
        if self._closed:
            return
        now = time.time()
        if self.channel is None:
            datagrams = self.handshake.datagrams(now)
            if self.handshake.state != "connecting":
                self._end(notify=True)
                return
        elif self.channel.timed_out(now) or self.channel.closed or self._gone_silent(now):
            self._end(notify=True)
            return
        else:
            datagrams = self.channel.datagrams(now)
        self._send_due(datagrams)
        self._timer = self._loop.call_later(SERVICE_INTERVAL_S, self._service)

    def _gone_silent(self, now: float) -> bool:
        limit, channel = self.silence_limit_s, self.channel
        return limit is not None and channel is not None and now - channel.last_received_at > limit

    def _end(self, *, notify: bool) -> None:
        if self._closed:
            return
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._loop.remove_reader(self._sock.fileno())
        self._sock.close()
        if not self.established.done():
            state = self.handshake.state
            why = self.handshake.refusal or state
            self.established.set_exception(HandshakeError(f"UDP handshake ended: {why}"))
            self.established.exception()  # (retrieved: a caller that gave up never reads it)
        elif notify:
            self._on_close()


async def connect(
    token: ConnectToken,
    address: tuple[str, int],
    on_message: Callable[[bytes], None],
    on_close: Callable[[], None],
    *,
    link: DatagramLink,
    pump: DeliveryPump,
    meter: DatagramMeter,
) -> DatagramConnection:
    """Handshake with the node at ``address`` (a name is looked up first, off the loop);
    returns once connected. Bound it with ``asyncio.timeout``: a cancelled connect closes
    the socket."""
    found = await asyncio.get_running_loop().getaddrinfo(
        address[0], address[1], type=socket.SOCK_DGRAM
    )
    if not found:
        raise HandshakeError(f"{address[0]}: no address")
    family, _, _, _, sockaddr = found[0]
    connection = DatagramConnection(
        token, address, on_message, on_close, link=link, pump=pump, meter=meter,
        resolved=(family, sockaddr),
    )  # fmt: skip
    try:
        await asyncio.shield(connection.established)
    except BaseException:
        connection.abort()
        raise
    return connection
