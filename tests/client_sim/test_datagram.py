"""A bot's UDP connection against a scripted node built from shared.datagram in-process:
token over HTTP, handshake, lanes, the link model on every datagram, a node that goes away."""

from __future__ import annotations

import asyncio
import secrets
import socket
import time
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from client_sim import datagram
from client_sim.latency import BotParams
from client_sim.link import DatagramLink
from client_sim.pump import DeliveryPump
from client_sim.websocket import SYSTEM_TRUST, HandshakeError
from shared import protocol
from shared.datagram import Channel, Lane, ServerHandshake, issue_connect_token
from shared.datagram.tokens import ConnectToken

REGION_KEY = secrets.token_bytes(32)


def input_frame(seq: int) -> bytes:
    return protocol.encode_input(
        seq=seq, tick=seq, move=(1.0, 0.0), yaw=0.5, pitch=0.0, buttons=0, view_time=1.0,
        ack_tick=0,
    )  # fmt: skip


class Meter:
    bytes_down = 0
    bytes_up = 0
    inputs_resent = 0
    inputs_first_lost = 0
    inputs_given_up = 0


class ScriptedNode:
    """A UDP node of one client: handshakes, answers a RELIABLE ``join`` with a RELIABLE
    ``welcome``, each other datagram with an UNRELIABLE ``tick`` (as a node's snapshots
    carry its acknowledgements), sends what ``send_frame`` asks; keeps what came."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.setblocking(False)
        self.address = self.sock.getsockname()
        self.handshake = ServerHandshake(REGION_KEY, [self.address])
        self.channel: Channel | None = None
        self.client: tuple[str, int] | None = None
        self.received: list[tuple[Lane, bytes]] = []
        self.loop = asyncio.get_running_loop()
        self.loop.add_reader(self.sock.fileno(), self._readable)

    def token(self, expires_in_s: float = 30.0) -> ConnectToken:
        return issue_connect_token(
            REGION_KEY, user_data=b"bot", addresses=[self.address], now=time.time(),
            expires_in_s=expires_in_s,
        )  # fmt: skip

    def _readable(self) -> None:
        while True:
            try:
                data, address = self.sock.recvfrom(2048)
            except BlockingIOError:
                return
            now = time.time()
            if self.channel is not None and address == self.client:
                for lane, payload in self.channel.receive(data, now):
                    self.received.append((lane, payload))
                    if lane is Lane.RELIABLE and payload == b"join":
                        self.channel.send(b"welcome", Lane.RELIABLE)
                self.channel.send(b"tick", Lane.UNRELIABLE)
                self._send(self.channel.datagrams(now))
                continue
            step = self.handshake.on_datagram(data, address, now)
            if step.reply is not None:
                self.sock.sendto(step.reply, address)
            if step.established is not None:
                self.channel, self.client = step.established.channel, address
                self._send(self.channel.datagrams(now))

    def _send(self, datagrams: list[bytes]) -> None:
        assert self.client is not None
        for data in datagrams:
            self.sock.sendto(data, self.client)

    def send_frame(self, payload: bytes, lane: Lane = Lane.UNRELIABLE) -> None:
        assert self.channel is not None
        self.channel.send(payload, lane)
        self._send(self.channel.datagrams(time.time()))

    def close(self) -> None:
        if self.sock.fileno() >= 0:
            self.loop.remove_reader(self.sock.fileno())
            self.sock.close()


@pytest.fixture
async def node() -> AsyncIterator[ScriptedNode]:
    scripted = ScriptedNode()
    yield scripted
    scripted.close()


def link(loss: float = 0.0, duplicate: float = 0.0) -> DatagramLink:
    params = BotParams(0, 0.02, 0.0, 0.001, loss, link_seed=7, duplicate=duplicate)
    return DatagramLink.for_bot(params)


async def open_connection(
    node: ScriptedNode, messages: list[bytes], closes: list[bool], the_link: DatagramLink,
    meter: Meter,
) -> datagram.DatagramConnection:  # fmt: skip
    async with asyncio.timeout(5):
        return await datagram.connect(
            node.token(), node.address, messages.append, lambda: closes.append(True),
            link=the_link, pump=DeliveryPump(asyncio.get_running_loop()), meter=meter,
        )  # fmt: skip


async def until(condition: object, seconds: float = 5.0) -> None:
    async with asyncio.timeout(seconds):
        while not condition():  # type: ignore[operator]
            await asyncio.sleep(0.01)


def test_inputs_take_the_redundant_lane_round_trips_the_unreliable_one_the_rest_reliable() -> None:
    assert datagram.lane_of(input_frame(3)) is Lane.REDUNDANT
    assert datagram.lane_of(protocol.encode(protocol.PingMessage(1, 2.0))) is Lane.UNRELIABLE
    echo = protocol.encode(protocol.ProbeEchoMessage(7))
    assert datagram.lane_of(echo) is Lane.UNRELIABLE
    sighting_like = b"\x81\xa4type\xa8sighting"
    assert datagram.lane_of(sighting_like) is Lane.RELIABLE
    assert datagram.lane_of(b"\x00not a message") is Lane.RELIABLE
    join = protocol.JoinMessage(protocol.PROTOCOL_VERSION, "bot-0")
    assert datagram.lane_of(protocol.encode(join)) is Lane.RELIABLE


def test_the_connect_url_and_the_udp_address_come_from_the_node_url() -> None:
    assert datagram.connect_url("ws://10.0.0.2:7777/ws") == "http://10.0.0.2:7777/connect"
    assert datagram.connect_url("wss://arena.example/ws") == "https://arena.example/connect"
    assert datagram.node_address("ws://10.0.0.2:7777/ws") == ("10.0.0.2", 7777)
    assert datagram.node_address("wss://arena.example/ws") == ("arena.example", 443)


async def test_a_bot_connects_joins_and_its_inputs_arrive_in_order_over_a_lossy_link(
    node: ScriptedNode,
) -> None:
    messages: list[bytes] = []
    closes: list[bool] = []
    meter = Meter()
    connection = await open_connection(node, messages, closes, link(loss=0.2), meter)
    assert connection.send_many([b"join"])
    await until(lambda: b"welcome" in messages)
    for seq in range(60):
        assert connection.send_many([input_frame(seq)])
        await asyncio.sleep(0.01)
    await until(lambda: sum(lane is Lane.REDUNDANT for lane, _ in node.received) == 60)
    inputs = [payload for lane, payload in node.received if lane is Lane.REDUNDANT]
    assert inputs == [input_frame(seq) for seq in range(60)]  # none lost, in send order
    assert meter.inputs_resent > 0 and meter.inputs_first_lost > 0
    assert meter.inputs_given_up == 0
    assert meter.bytes_up > 0 and meter.bytes_down > 0
    assert not closes
    await connection.close()
    assert connection.closed and not connection.send_many([b"late"])


async def test_snapshots_come_unreliable_once_each_even_when_duplicated(node: ScriptedNode) -> None:
    messages: list[bytes] = []
    connection = await open_connection(node, messages, [], link(duplicate=0.5), Meter())
    connection.send_many([b"join"])
    await until(lambda: node.channel is not None and b"join" in [p for _, p in node.received])
    for n in range(20):
        node.send_frame(b"snapshot-%d" % n)
    await until(lambda: sum(m.startswith(b"snapshot") for m in messages) == 20)
    await asyncio.sleep(0.1)  # (duplicates, had any got through, would be here by now)
    assert sorted(m for m in messages if m.startswith(b"snapshot")) == sorted(
        b"snapshot-%d" % n for n in range(20)
    )
    await connection.close()


async def test_a_node_that_goes_away_ends_the_connection(node: ScriptedNode) -> None:
    closes: list[bool] = []
    connection = await open_connection(node, [], closes, link(), Meter())
    node.close()  # its port closes: the next datagram is refused
    for seq in range(5):
        connection.send_many([input_frame(seq)])
        await asyncio.sleep(0.05)
    await until(lambda: bool(closes), 2.0)
    assert connection.closed


async def test_a_watched_connection_ends_when_its_node_falls_silent_with_its_port_open(
    node: ScriptedNode,
) -> None:
    """A node restarted on the same port ignores the old connection's datagrams and no
    port-unreachable comes back: only silence tells. The channel's time-out is seconds;
    a spare watched for silence ends after its limit, and a live one does not."""
    closes: list[bool] = []
    connection = await open_connection(node, [], closes, link(), Meter())
    connection.watch_silence(0.3)
    await asyncio.sleep(0.6)  # (the node answers every keep-alive: never silent this long)
    assert not closes
    node.loop.remove_reader(node.sock.fileno())  # deaf, its port still bound
    began = time.monotonic()
    await until(lambda: bool(closes), 2.0)
    assert connection.closed and time.monotonic() - began < 1.0
    assert connection.channel is not None and connection.channel.timeout_s > 1.0


async def test_an_unwatched_connection_outlasts_a_short_silence(node: ScriptedNode) -> None:
    closes: list[bool] = []
    connection = await open_connection(node, [], closes, link(), Meter())
    connection.watch_silence(0.3)
    connection.watch_silence(None)  # (a spare that became the active connection)
    node.loop.remove_reader(node.sock.fileno())
    await asyncio.sleep(0.6)
    assert not closes and not connection.closed
    connection.abort()


async def test_a_handshake_nobody_answers_fails_within_the_callers_bound() -> None:
    silent = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    silent.bind(("127.0.0.1", 0))  # bound, never read: no answer, no refusal
    try:
        token = issue_connect_token(
            REGION_KEY, user_data=b"", addresses=[silent.getsockname()], now=time.time()
        )
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.3):
                await datagram.connect(
                    token, silent.getsockname(), lambda _: None, lambda: None, link=link(),
                    pump=DeliveryPump(asyncio.get_running_loop()), meter=Meter(),
                )  # fmt: skip
    finally:
        silent.close()


def test_a_token_is_used_once_per_node_and_renewed_before_it_expires() -> None:
    book = datagram.TokenBook()
    address = ("127.0.0.1", 4000)
    assert not book.usable_at(address, time.time())
    token = issue_connect_token(
        REGION_KEY, user_data=b"", addresses=[address, ("127.0.0.1", 4001)], now=time.time()
    )
    book.renewed(token)
    assert book.usable_at(address, time.time())
    assert not book.usable_at(("127.0.0.1", 4002), time.time())  # not listed
    book.used.add(address)
    assert not book.usable_at(address, time.time())
    assert book.usable_at(("127.0.0.1", 4001), time.time())  # the standby: still good
    assert not book.usable_at(("127.0.0.1", 4001), token.expires_at - 1.0)


async def test_a_token_comes_from_the_nodes_connect_and_a_refusal_says_when_to_return() -> None:
    token = issue_connect_token(
        REGION_KEY, user_data=b"", addresses=[("127.0.0.1", 4000)], now=time.time()
    )
    asked: list[dict[str, str]] = []
    busy = [False]

    async def connect(request: web.Request) -> web.Response:
        asked.append(await request.json())
        if busy[0]:
            return web.json_response({"error": "not_ready"}, status=503,
                                     headers={"Retry-After": "3"})  # fmt: skip
        return web.json_response(token.to_json())

    app = web.Application()
    app.router.add_post("/connect", connect)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        url = f"ws://127.0.0.1:{port}/ws"
        got = await datagram.request_token(url, {"name": "bot-1"}, SYSTEM_TRUST, 5.0)
        assert got == token and asked == [{"name": "bot-1"}]
        busy[0] = True
        with pytest.raises(HandshakeError) as refused:
            await datagram.request_token(url, {"name": "bot-1"}, SYSTEM_TRUST, 5.0)
        assert refused.value.retry_after == 3.0
        assert refused.value.unavailable  # (a 503: that node, not the region)
    finally:
        await runner.cleanup()
