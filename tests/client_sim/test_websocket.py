"""The bots' lean WebSocket client: pure helpers, the protocol fed by hand, a real server."""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import WSCloseCode, WSMsgType, web
from hypothesis import given
from hypothesis import strategies as st

from client_sim import websocket
from client_sim.websocket import (
    HandshakeError,
    WebSocketClient,
    accept_key,
    connect,
)
from shared.wsframe import (
    CLOSE_NORMAL,
    CLOSE_PROTOCOL_ERROR,
    CLOSE_TOO_BIG,
    OP_BINARY,
    OP_CLOSE,
    OP_CONTINUATION,
    OP_PING,
    OP_PONG,
    OP_TEXT,
    header,
    mask,
)

RFC_KEY = "dGhlIHNhbXBsZSBub25jZQ=="  # the example of RFC 6455 §1.3
MAX_SIZE = 1 << 17

# -- pure helpers ------------------------------------------------------------------------


def test_accept_key_matches_the_rfc_example() -> None:
    assert accept_key(RFC_KEY) == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="


def xor_reference(payload: bytes, key: bytes) -> bytes:
    """RFC 6455 §5.3, byte by byte: ``payload[i] ^ key[i % 4]``."""
    return bytes(b ^ key[i % 4] for i, b in enumerate(payload))


@given(payload=st.binary(min_size=0, max_size=300), key=st.binary(min_size=4, max_size=4))
def test_mask_is_the_bytewise_xor_and_its_own_inverse(payload: bytes, key: bytes) -> None:
    masked = mask(payload, key)
    assert masked == xor_reference(payload, key)
    assert len(masked) == len(payload)
    assert mask(masked, key) == payload


@pytest.mark.parametrize(
    ("length", "expected_length_bytes"),
    [
        (0, bytes([0x80])),
        (125, bytes([0x80 | 125])),
        (126, bytes([0x80 | 126]) + struct.pack("!H", 126)),
        (65535, bytes([0x80 | 126]) + struct.pack("!H", 65535)),
        (65536, bytes([0x80 | 127]) + struct.pack("!Q", 65536)),
    ],
)
def test_frame_header_uses_the_shortest_length_encoding_and_the_mask_bit_clients_set(
    length: int, expected_length_bytes: bytes
) -> None:
    client = header(OP_BINARY, length, masked=True)
    assert client[0] == 0x80 | OP_BINARY  # FIN, no RSV bits
    assert client[1:] == expected_length_bytes
    server = header(OP_BINARY, length, masked=False)
    assert server[1] == client[1] & 0x7F and server[2:] == client[2:]  # servers never mask


# -- frames as the server writes them, frames as the client wrote them -----------------


def server_frame(
    payload: bytes,
    opcode: int = OP_BINARY,
    *,
    fin: bool = True,
    rsv: int = 0,
    mask_key: bytes | None = None,
) -> bytes:
    """One frame as a server sends it (unmasked unless ``mask_key``), shortest length."""
    first = (0x80 if fin else 0) | rsv | opcode
    mask_bit = 0x80 if mask_key is not None else 0
    n = len(payload)
    if n < 126:
        head = bytes((first, mask_bit | n))
    elif n < 1 << 16:
        head = struct.pack("!BBH", first, mask_bit | 126, n)
    else:
        head = struct.pack("!BBQ", first, mask_bit | 127, n)
    if mask_key is None:
        return head + payload
    return head + mask_key + xor_reference(payload, mask_key)


def close_payload(code: int, reason: bytes = b"") -> bytes:
    return code.to_bytes(2, "big") + reason


@dataclass(frozen=True)
class ClientFrame:
    """One frame the client wrote, unmasked."""

    fin: bool
    opcode: int
    payload: bytes


def read_client_frames(data: bytes) -> list[ClientFrame]:
    """Parse what the client wrote; every frame must be masked and complete."""
    frames, pos = [], 0
    while pos < len(data):
        first, second = data[pos], data[pos + 1]
        assert second & 0x80, "a client frame must be masked"
        assert not first & 0x70, "no RSV bits without an extension"
        length, pos = second & 0x7F, pos + 2
        if length == 126:
            length, pos = int.from_bytes(data[pos : pos + 2], "big"), pos + 2
        elif length == 127:
            length, pos = int.from_bytes(data[pos : pos + 8], "big"), pos + 8
        key, pos = data[pos : pos + 4], pos + 4
        payload = data[pos : pos + length]
        assert len(payload) == length, "truncated client frame"
        pos += length
        frames.append(ClientFrame(bool(first & 0x80), first & 0x0F, xor_reference(payload, key)))
    return frames


# -- a fake transport and a client wired to it -------------------------------------------


class FakeTransport(asyncio.Transport):
    """Records what the client writes; ``close``/``abort`` only flip flags."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.closed = False
        self.aborted = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        assert not self.closed, "write after close"
        self.writes.append(bytes(data))

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = self.aborted = True

    def is_closing(self) -> bool:
        return self.closed


REQUEST = b"GET / HTTP/1.1\r\nHost: test\r\n\r\n"  # the client writes it verbatim


def handshake_answer(
    accept: str = accept_key(RFC_KEY),
    *,
    status: str = "101 Switching Protocols",
    upgrade: str | None = "websocket",
    connection: str = "Upgrade",
    extra: str = "",
) -> bytes:
    lines = [f"HTTP/1.1 {status}", f"Connection: {connection}", f"Sec-WebSocket-Accept: {accept}"]
    if upgrade is not None:
        lines.append(f"Upgrade: {upgrade}")
    if extra:
        lines.append(extra)
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


@dataclass
class Harness:
    """A :class:`WebSocketClient` on a :class:`FakeTransport`, with what it delivered."""

    client: WebSocketClient
    transport: FakeTransport
    messages: list[bytes] = field(default_factory=list)
    closes: int = 0

    def feed(self, *chunks: bytes) -> None:
        for chunk in chunks:
            self.client.data_received(chunk)

    def sent_frames(self) -> list[ClientFrame]:
        """Frames written after the opening request."""
        assert self.transport.writes[0] == REQUEST
        return read_client_frames(b"".join(self.transport.writes[1:]))

    def assert_failed_with(self, code: int) -> None:
        """The client answered a protocol fault: one close frame, transport closed."""
        assert self.sent_frames() == [ClientFrame(True, OP_CLOSE, close_payload(code))]
        assert self.client.close_code == code
        assert self.client.closed
        assert self.transport.closed


def new_client(*, max_size: int = MAX_SIZE) -> Harness:
    """A client that has written its request and waits for the answer (needs a loop)."""
    transport = FakeTransport()
    harness: Harness

    def on_message(payload: bytes) -> None:
        harness.messages.append(payload)

    def on_close() -> None:
        harness.closes += 1

    client = WebSocketClient(REQUEST, accept_key(RFC_KEY), on_message, on_close, max_size)
    harness = Harness(client, transport)
    client.connection_made(transport)
    return harness


def open_client(*, max_size: int = MAX_SIZE) -> Harness:
    """A client past a valid handshake."""
    harness = new_client(max_size=max_size)
    harness.feed(handshake_answer())
    assert harness.client.handshake.done() and harness.client.handshake.exception() is None
    return harness


def split_points(length: int, edge: int = 16, stride: int = 997) -> Iterable[int]:
    """Every boundary of a short frame; for a long one, every boundary in its first and
    last ``edge`` bytes (header, start and end of payload) and a stride between them."""
    if length <= 4 * edge + 400:
        return range(length + 1)
    return sorted({*range(edge), *range(length - edge, length + 1), *range(0, length, stride)})


# -- the opening handshake ---------------------------------------------------------------


async def test_the_client_writes_its_request_on_connect() -> None:
    harness = new_client()
    assert harness.transport.writes == [REQUEST]
    assert not harness.client.handshake.done()


async def test_a_valid_answer_completes_the_handshake() -> None:
    harness = open_client()
    assert not harness.client.closed
    assert harness.messages == [] and harness.closes == 0
    assert not harness.transport.closed


async def test_a_handshake_answer_in_single_bytes_completes_it() -> None:
    harness = new_client()
    answer = handshake_answer() + server_frame(b"first")
    for i in range(len(answer)):
        harness.feed(answer[i : i + 1])
    assert harness.client.handshake.done() and harness.client.handshake.exception() is None
    assert harness.messages == [b"first"]


@pytest.mark.parametrize(
    "answer",
    [
        pytest.param(handshake_answer(accept_key("c29tZSBvdGhlciBub25jZQ==")), id="wrong-accept"),
        pytest.param(handshake_answer(status="200 OK"), id="not-101"),
        pytest.param(handshake_answer(status="404 Not Found"), id="404"),
        pytest.param(handshake_answer(upgrade=None), id="no-upgrade-header"),
        pytest.param(handshake_answer(upgrade="h2c"), id="other-upgrade"),
        pytest.param(handshake_answer(connection="keep-alive"), id="connection-not-upgrade"),
        pytest.param(
            handshake_answer(extra="Sec-WebSocket-Extensions: permessage-deflate"),
            id="unoffered-extension",
        ),
    ],
)
async def test_a_bad_handshake_answer_fails_the_handshake(answer: bytes) -> None:
    harness = new_client()
    harness.feed(answer + server_frame(b"must not arrive"))
    error = harness.client.handshake.exception()
    assert isinstance(error, HandshakeError)
    assert isinstance(error, ConnectionError)
    assert harness.transport.closed
    assert harness.messages == []
    harness.client.connection_lost(None)
    assert harness.closes == 0  # never upgraded, so never "closed"


async def test_an_endless_handshake_answer_fails_the_handshake() -> None:
    harness = new_client()
    harness.feed(b"HTTP/1.1 101 Switching Protocols\r\n" + b"X-Filler: " + b"x" * 20_000)
    assert isinstance(harness.client.handshake.exception(), HandshakeError)
    assert harness.transport.closed


async def test_a_connection_lost_during_the_handshake_fails_it() -> None:
    harness = new_client()
    harness.feed(b"HTTP/1.1 101 Switching")
    harness.client.connection_lost(None)
    assert isinstance(harness.client.handshake.exception(), HandshakeError)
    assert harness.closes == 0


# -- receiving -----------------------------------------------------------------------------


async def test_a_binary_frame_is_delivered_once() -> None:
    harness = open_client()
    harness.feed(server_frame(b"\x00snapshot\xff"))
    assert harness.messages == [b"\x00snapshot\xff"]
    assert harness.sent_frames() == []  # nothing to answer


@pytest.mark.parametrize(
    "size",
    [
        pytest.param(0, id="empty"),
        pytest.param(5, id="7-bit"),
        pytest.param(125, id="7-bit-max"),
        pytest.param(126, id="16-bit-min"),
        pytest.param(300, id="16-bit"),
        pytest.param(70_000, id="64-bit"),
    ],
)
async def test_a_frame_split_anywhere_across_two_reads_is_delivered_intact(size: int) -> None:
    payload = bytes(i * 7 % 251 for i in range(size))
    frame = server_frame(payload)
    harness = open_client()
    points = list(split_points(len(frame)))
    for at in points:
        harness.feed(frame[:at], frame[at:])
    assert len(harness.messages) == len(points)
    assert all(message == payload for message in harness.messages)
    assert harness.sent_frames() == []


async def test_a_frame_fed_one_byte_at_a_time_is_delivered_intact() -> None:
    payload = bytes(range(256)) + b"tail"  # 16-bit length
    frame = server_frame(payload)
    harness = open_client()
    for i in range(len(frame)):
        harness.feed(frame[i : i + 1])
        assert harness.messages == ([payload] if i == len(frame) - 1 else [])


async def test_several_frames_in_one_read_are_delivered_in_order() -> None:
    harness = open_client()
    harness.feed(
        server_frame(b"one")
        + server_frame(b"")
        + server_frame(b"x" * 200)
        + server_frame(b"y" * 70_000)
        + server_frame(b"last")
    )
    assert harness.messages == [b"one", b"", b"x" * 200, b"y" * 70_000, b"last"]


async def test_frames_in_the_same_read_as_the_handshake_answer_are_delivered() -> None:
    harness = new_client()
    harness.feed(handshake_answer() + server_frame(b"a") + server_frame(b"b" * 300) + b"\x82")
    assert harness.client.handshake.done() and harness.client.handshake.exception() is None
    assert harness.messages == [b"a", b"b" * 300]
    harness.feed(b"\x01c")  # the rest of the third frame
    assert harness.messages == [b"a", b"b" * 300, b"c"]


async def test_a_fragmented_binary_message_is_joined() -> None:
    harness = open_client()
    harness.feed(server_frame(b"he", OP_BINARY, fin=False))
    harness.feed(server_frame(b"ll", OP_CONTINUATION, fin=False))
    assert harness.messages == []
    harness.feed(server_frame(b"o", OP_CONTINUATION))
    assert harness.messages == [b"hello"]


async def test_a_ping_between_fragments_is_answered_and_the_message_still_joined() -> None:
    harness = open_client()
    harness.feed(
        server_frame(b"ab", OP_BINARY, fin=False)
        + server_frame(b"?", OP_PING)
        + server_frame(b"cd", OP_CONTINUATION)
    )
    assert harness.messages == [b"abcd"]
    assert harness.sent_frames() == [ClientFrame(True, OP_PONG, b"?")]


async def test_text_messages_are_ignored() -> None:
    harness = open_client()
    harness.feed(
        server_frame(b"hello", OP_TEXT)
        + server_frame(b"frag", OP_TEXT, fin=False)
        + server_frame(b"mented", OP_CONTINUATION)
        + server_frame(b"binary")
    )
    assert harness.messages == [b"binary"]
    assert harness.sent_frames() == []
    assert not harness.client.closed


@pytest.mark.parametrize("payload", [b"", b"ping-id-42", bytes(range(125))])
async def test_a_ping_is_answered_by_a_masked_pong_with_the_same_payload(payload: bytes) -> None:
    harness = open_client()
    harness.feed(server_frame(payload, OP_PING))
    assert harness.sent_frames() == [ClientFrame(True, OP_PONG, payload)]  # masked (checked)
    assert harness.messages == []
    assert not harness.client.closed


async def test_a_pong_is_ignored() -> None:
    harness = open_client()
    harness.feed(server_frame(b"unsolicited", OP_PONG) + server_frame(b"data"))
    assert harness.messages == [b"data"]
    assert harness.sent_frames() == []


# -- the closing handshake -----------------------------------------------------------------


async def test_a_close_from_the_server_is_echoed_and_the_transport_closed() -> None:
    harness = open_client()
    harness.feed(
        server_frame(close_payload(WSCloseCode.GOING_AWAY, b"shutting down"), OP_CLOSE)
        + server_frame(b"after the close")
    )
    assert harness.sent_frames() == [
        ClientFrame(True, OP_CLOSE, close_payload(WSCloseCode.GOING_AWAY))
    ]
    assert harness.client.close_code == WSCloseCode.GOING_AWAY
    assert harness.client.closed
    assert harness.transport.closed
    assert harness.messages == []
    assert harness.closes == 0  # until the connection is actually lost
    harness.client.connection_lost(None)
    assert harness.closes == 1


async def test_a_close_without_a_code_is_answered_with_normal_closure() -> None:
    harness = open_client()
    harness.feed(server_frame(b"", OP_CLOSE))
    assert harness.sent_frames() == [ClientFrame(True, OP_CLOSE, close_payload(CLOSE_NORMAL))]
    assert harness.client.close_code is None
    assert harness.transport.closed


async def test_on_close_is_called_once_when_the_connection_is_lost() -> None:
    harness = open_client()
    harness.client.connection_lost(ConnectionResetError())
    assert harness.closes == 1
    assert harness.client.closed


async def test_send_after_closing_returns_false_and_writes_nothing() -> None:
    harness = open_client()
    harness.feed(server_frame(close_payload(CLOSE_NORMAL), OP_CLOSE))
    written = list(harness.transport.writes)
    assert harness.client.send(b"too late") is False
    assert harness.transport.writes == written


async def test_send_after_the_connection_was_lost_returns_false_and_writes_nothing() -> None:
    harness = open_client()
    harness.client.connection_lost(None)
    assert harness.client.send(b"too late") is False
    assert harness.transport.writes == [REQUEST]


async def test_close_sends_a_close_frame_and_returns_when_the_connection_goes() -> None:
    harness = open_client()
    closing = asyncio.create_task(harness.client.close(WSCloseCode.GOING_AWAY))
    await asyncio.sleep(0)
    assert harness.sent_frames() == [
        ClientFrame(True, OP_CLOSE, close_payload(WSCloseCode.GOING_AWAY))
    ]
    assert harness.client.send(b"x") is False
    harness.feed(server_frame(close_payload(WSCloseCode.GOING_AWAY), OP_CLOSE))
    assert harness.transport.closed
    assert len(harness.sent_frames()) == 1  # the server's echo is not echoed again
    harness.client.connection_lost(None)
    async with asyncio.timeout(1.0):
        await closing
    assert not harness.transport.aborted
    assert harness.closes == 1


async def test_close_aborts_when_the_server_never_answers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(websocket, "_CLOSE_WAIT_S", 0.01)
    harness = open_client()
    async with asyncio.timeout(1.0):
        await harness.client.close()
    assert harness.transport.aborted
    assert harness.sent_frames() == [ClientFrame(True, OP_CLOSE, close_payload(CLOSE_NORMAL))]


# -- protocol faults by the server --------------------------------------------------------

LIMIT = 200  # max_size in these tests: above the 125 bytes a control frame may carry


@pytest.mark.parametrize(
    ("bad_frame", "code"),
    [
        pytest.param(
            server_frame(b"masked", mask_key=b"\x01\x02\x03\x04"), CLOSE_PROTOCOL_ERROR, id="masked"
        ),
        pytest.param(server_frame(b"r", rsv=0x40), CLOSE_PROTOCOL_ERROR, id="rsv1"),
        pytest.param(server_frame(b"r", rsv=0x20), CLOSE_PROTOCOL_ERROR, id="rsv2"),
        pytest.param(server_frame(b"r", rsv=0x10), CLOSE_PROTOCOL_ERROR, id="rsv3"),
        pytest.param(server_frame(b"?", 0x3), CLOSE_PROTOCOL_ERROR, id="reserved-data-opcode"),
        pytest.param(server_frame(b"?", 0xB), CLOSE_PROTOCOL_ERROR, id="reserved-control-opcode"),
        pytest.param(
            server_frame(b"orphan", OP_CONTINUATION), CLOSE_PROTOCOL_ERROR, id="lone-continuation"
        ),
        pytest.param(
            server_frame(b"p", OP_PING, fin=False), CLOSE_PROTOCOL_ERROR, id="fragmented-ping"
        ),
        pytest.param(server_frame(b"p" * 126, OP_PING), CLOSE_PROTOCOL_ERROR, id="long-ping"),
        pytest.param(server_frame(b"p" * 126, OP_PONG), CLOSE_PROTOCOL_ERROR, id="long-pong"),
        pytest.param(
            server_frame(b"\x03\xe8", OP_CLOSE, fin=False),
            CLOSE_PROTOCOL_ERROR,
            id="fragmented-close",
        ),
        pytest.param(server_frame(b"\x03", OP_CLOSE), CLOSE_PROTOCOL_ERROR, id="one-byte-close"),
        pytest.param(
            server_frame((1005).to_bytes(2, "big"), OP_CLOSE),
            CLOSE_PROTOCOL_ERROR,
            id="close-code-1005",
        ),
        pytest.param(server_frame(b"z" * (LIMIT + 1)), CLOSE_TOO_BIG, id="oversized"),
        pytest.param(
            server_frame(b"z" * (LIMIT + 1), OP_BINARY, fin=False),
            CLOSE_TOO_BIG,
            id="oversized-fragment",
        ),
        pytest.param(
            server_frame(b"z" * 120, OP_BINARY, fin=False)
            + server_frame(b"z" * (LIMIT - 119), OP_CONTINUATION),
            CLOSE_TOO_BIG,
            id="oversized-message",
        ),
        pytest.param(
            server_frame(b"z" * (LIMIT + 1))[:4], CLOSE_TOO_BIG, id="oversized-header-alone"
        ),  # the announced length is enough; the client need not wait for the payload
        pytest.param(
            struct.pack("!BBQ", 0x82, 127, 1 << 63), CLOSE_TOO_BIG, id="absurd-64-bit-length"
        ),
        pytest.param(
            server_frame(b"a", OP_BINARY, fin=False) + server_frame(b"b", OP_TEXT),
            CLOSE_PROTOCOL_ERROR,
            id="text-inside-fragmented-message",
        ),
    ],
)
async def test_a_protocol_fault_closes_with_its_code_and_delivers_nothing(
    bad_frame: bytes, code: int
) -> None:
    harness = open_client(max_size=LIMIT)
    harness.feed(bad_frame + server_frame(b"must not arrive"))
    assert harness.messages == []
    harness.assert_failed_with(code)
    assert harness.client.send(b"x") is False


async def test_a_whole_binary_frame_inside_a_fragmented_message_is_a_protocol_error() -> None:
    """RFC 6455 §5.4: only control frames may come between the fragments of a message.

    A text frame there is refused (see above); an unfragmented binary frame must be too.
    """
    harness = open_client()
    harness.feed(server_frame(b"first half ", OP_BINARY, fin=False))
    harness.feed(server_frame(b"interloper"))
    harness.feed(server_frame(b"second half", OP_CONTINUATION))
    assert harness.messages == []
    harness.assert_failed_with(CLOSE_PROTOCOL_ERROR)


async def test_a_fault_after_good_frames_keeps_what_was_delivered() -> None:
    harness = open_client()
    harness.feed(server_frame(b"good") + server_frame(b"bad", rsv=0x40) + server_frame(b"later"))
    assert harness.messages == [b"good"]
    harness.assert_failed_with(CLOSE_PROTOCOL_ERROR)
    harness.client.connection_lost(None)
    assert harness.closes == 1  # a fault counts as a lost connection


# -- sending -------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [0, 1, 125, 126, 65535, 65536])
async def test_a_sent_frame_is_masked_and_unmasks_to_the_payload(size: int) -> None:
    payload = bytes(i * 13 % 256 for i in range(size))
    harness = open_client()
    assert harness.client.send(payload) is True
    (written,) = harness.transport.writes[1:]
    assert written[:2] == header(OP_BINARY, size, masked=True)[:2]
    assert harness.sent_frames() == [ClientFrame(True, OP_BINARY, payload)]


async def test_each_sent_frame_has_its_own_mask_key() -> None:
    harness = open_client()
    for _ in range(8):
        harness.client.send(b"\x00" * 4)  # a zero payload shows the key itself
    keys = {write[2:6] for write in harness.transport.writes[1:]}
    assert len(keys) == 8


# -- against a real aiohttp server -----------------------------------------------------------


async def echo(request: web.Request) -> web.WebSocketResponse:
    ws = web.WebSocketResponse(max_msg_size=MAX_SIZE)
    await ws.prepare(request)
    async for message in ws:
        if message.type == WSMsgType.BINARY:
            await ws.send_bytes(message.data)
    return ws


async def goodbye(request: web.Request) -> web.WebSocketResponse:
    ws = web.WebSocketResponse()
    await ws.prepare(request)
    await ws.send_bytes(b"bye")
    await ws.close(code=WSCloseCode.GOING_AWAY)
    return ws


@pytest.fixture
async def server_url() -> AsyncIterator[str]:
    """``ws://127.0.0.1:PORT`` of an app with ``/echo`` and ``/goodbye`` (port from the OS)."""
    app = web.Application()
    app.router.add_get("/echo", echo)
    app.router.add_get("/goodbye", goodbye)
    runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=0.5)
    await runner.setup()
    try:
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        host, port = runner.addresses[0][:2]
        yield f"ws://{host}:{port}"
    finally:
        await runner.cleanup()


class Inbox:
    """``on_message`` into a queue, ``on_close`` into an event."""

    def __init__(self) -> None:
        self.messages: asyncio.Queue[bytes] = asyncio.Queue()
        self.closed = asyncio.Event()
        self.close_calls = 0

    def on_message(self, payload: bytes) -> None:
        self.messages.put_nowait(payload)

    def on_close(self) -> None:
        self.close_calls += 1
        self.closed.set()


async def test_payloads_of_every_length_encoding_come_back_from_an_echo_server(
    server_url: str,
) -> None:
    inbox = Inbox()
    async with asyncio.timeout(2.0):
        client = await connect(
            f"{server_url}/echo", inbox.on_message, inbox.on_close, max_size=MAX_SIZE
        )
        try:
            payloads = [bytes(i % 256 for i in range(n)) for n in (0, 1, 125, 126, 70_000)]
            for payload in payloads:
                assert client.send(payload) is True
            for payload in payloads:
                assert await inbox.messages.get() == payload
        finally:
            await client.close()
        await inbox.closed.wait()
    assert inbox.close_calls == 1
    assert client.closed
    assert client.send(b"after close") is False


async def test_an_http_url_is_upgraded_like_a_ws_url(server_url: str) -> None:
    """Nodes advertise their endpoints as http:// URLs; aiohttp's client took those too."""
    inbox = Inbox()
    async with asyncio.timeout(2.0):
        client = await connect(
            server_url.replace("ws://", "http://") + "/echo",
            inbox.on_message,
            inbox.on_close,
            max_size=MAX_SIZE,
        )
        try:
            assert client.send(b"ping?")
            assert await inbox.messages.get() == b"ping?"
        finally:
            await client.close()


async def test_a_server_initiated_close_reaches_on_close(server_url: str) -> None:
    inbox = Inbox()
    async with asyncio.timeout(2.0):
        client = await connect(
            f"{server_url}/goodbye", inbox.on_message, inbox.on_close, max_size=MAX_SIZE
        )
        await inbox.closed.wait()
    assert await inbox.messages.get() == b"bye"
    assert client.close_code == WSCloseCode.GOING_AWAY
    assert inbox.close_calls == 1
    async with asyncio.timeout(1.0):
        await client.close()  # already closed: returns at once


async def test_a_plain_http_404_fails_the_handshake(server_url: str) -> None:
    inbox = Inbox()
    with pytest.raises(HandshakeError, match="404"):
        async with asyncio.timeout(2.0):
            await connect(
                f"{server_url}/missing", inbox.on_message, inbox.on_close, max_size=MAX_SIZE
            )
    assert inbox.close_calls == 0


async def test_connecting_to_a_closed_port_raises_oserror() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # free a moment ago, nothing listens now
    inbox = Inbox()
    with pytest.raises(OSError):
        async with asyncio.timeout(2.0):
            await connect(
                f"ws://127.0.0.1:{port}/", inbox.on_message, inbox.on_close, max_size=MAX_SIZE
            )


@pytest.mark.parametrize("url", ["ftp://127.0.0.1/", "ws:///path", "127.0.0.1:80"])
async def test_connect_refuses_a_url_that_is_not_a_websocket_url(url: str) -> None:
    def ignore(*_: Any) -> None:
        pass

    with pytest.raises(ValueError, match="not a WebSocket URL"):
        await connect(url, ignore, ignore, max_size=MAX_SIZE)
