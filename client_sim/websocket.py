"""A lean WebSocket client (RFC 6455) on a raw asyncio transport, for the bots' hot path.

Why not aiohttp's client here: a bot process moves about 36,000 frames a second at 300 bots,
and every frame aiohttp reads is queued, wakes a reader task and passes through an async
iterator with its own timeout before the bot sees it; every frame it writes goes through a
writer coroutine. Measured with ``bench/server_load.py``, that path was a quarter of the
bot process. Here a whole frame is handed to ``on_message`` straight from
``data_received``, and :meth:`WebSocketClient.send` writes one ready frame to the transport.

The subset is what a game client needs: the opening handshake (checked accept key), binary
and text messages (fragmented or not), ping/pong, the closing handshake, a message size
limit. No extensions (so no compression) and no subprotocols. Protocol faults from the
server close the connection with the RFC's close code and count as a lost connection.
``wss://`` is TLS, verified against the system's CAs or what a :class:`TlsTrust` names (a
test's self-signed certificate, say).
"""

from __future__ import annotations

import asyncio
import base64
import functools
import hashlib
import math
import os
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast
from urllib.parse import urlsplit

from shared.wsframe import (
    CLOSE_NORMAL,
    OP_BINARY,
    OP_CLOSE,
    OP_PING,
    OP_PONG,
    FrameFault,
    FrameReader,
    close_code,
    frame,
)

__all__ = [
    "SYSTEM_TRUST",
    "HandshakeError",
    "TlsTrust",
    "WebSocketClient",
    "accept_key",
    "connect",
]

_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
_MAX_HEADER_BYTES = 16 * 1024
_CLOSE_WAIT_S = 1.0  # how long close() waits for the server's close frame


class HandshakeError(ConnectionError):
    """The server did not accept the WebSocket upgrade (or answered something else);
    ``retry_after``: the seconds its ``Retry-After`` asked for (a 429 or 503), else None;
    ``unavailable``: a 503, that node not serving yet (warming up), which says nothing of
    the region's other nodes."""

    def __init__(
        self, why: str, retry_after: float | None = None, unavailable: bool = False
    ) -> None:
        super().__init__(why)
        self.retry_after = retry_after
        self.unavailable = unavailable


@dataclass(frozen=True, slots=True)
class TlsTrust:
    """Which ``wss://`` servers to believe: the system's CAs, plus ``ca`` (a PEM file of
    CAs or a self-signed certificate); ``insecure``: any certificate at all (tests only:
    it gives up TLS's protection against a man in the middle). Plain data, so a swarm's
    worker processes get it; each builds its context once."""

    ca: str = ""
    insecure: bool = False

    def context(self) -> ssl.SSLContext:
        """The client context (made once per process); OSError or SSLError for a bad CA."""
        return _context(self)


#: The system's CAs, nothing else.
SYSTEM_TRUST = TlsTrust()


@functools.cache
def _context(trust: TlsTrust) -> ssl.SSLContext:
    context = ssl.create_default_context()
    if trust.ca:
        context.load_verify_locations(cafile=trust.ca)
    if trust.insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def accept_key(key: str) -> str:
    """The ``Sec-WebSocket-Accept`` a server must answer to ``key`` (RFC 6455 §4.2.2)."""
    return base64.b64encode(hashlib.sha1(key.encode("ascii") + _GUID).digest()).decode("ascii")


class WebSocketClient(asyncio.Protocol):
    """One client connection: ``on_message(payload)`` per whole binary message, and
    ``on_close()`` once. Text messages are not used by the game and are ignored."""

    def __init__(
        self,
        request: bytes,
        expected_accept: str,
        on_message: Callable[[bytes], None],
        on_close: Callable[[], None],
        max_size: int,
    ) -> None:
        self._request = request
        self._expected_accept = expected_accept
        self._on_message = on_message
        self._on_close = on_close
        self._reader = FrameReader(
            masked=False, max_size=max_size, on_message=self._message, on_control=self._control
        )
        self._transport: asyncio.Transport | None = None
        self._buffer = b""  # the handshake answer, until it is whole
        self._upgraded = False
        self._close_sent = False
        self._lost = False
        self.handshake: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._gone: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        #: The close code the server sent (or ours, after a protocol fault), if any.
        self.close_code: int | None = None

    # -- state -----------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        """Closing or closed: nothing more can be sent."""
        return self._close_sent or self._lost

    # -- asyncio.Protocol ------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # (a stream transport: uvloop's implement asyncio.Transport without deriving from it)
        self._transport = stream = cast(asyncio.Transport, transport)
        stream.write(self._request)

    def data_received(self, data: bytes) -> None:
        if not self._upgraded:
            if self._buffer:
                data, self._buffer = self._buffer + data, b""
            data = self._read_handshake(data)
            if not data:
                return
        try:
            self._reader.feed(data)
        except FrameFault as fault:  # the server broke the rules: close with its code
            self.close_code = fault.code
            self._send_close(fault.code)
            self._close_transport()

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        if not self.handshake.done():
            self.handshake.set_exception(
                exc or HandshakeError("connection closed during the WebSocket handshake")
            )
        elif self._upgraded:
            self._on_close()
        if not self._gone.done():
            self._gone.set_result(None)

    # -- frames ----------------------------------------------------------------------------

    def _message(self, opcode: int, payload: bytes) -> None:
        if opcode == OP_BINARY:
            self._on_message(payload)

    def _control(self, opcode: int, payload: bytes) -> None:
        if opcode == OP_PING:
            self._write(OP_PONG, payload)
        elif opcode == OP_CLOSE:
            code = close_code(payload)  # (a FrameFault here closes with 1002)
            self.close_code = code
            self._send_close(CLOSE_NORMAL if code is None else code)
            self._close_transport()

    def _read_handshake(self, data: bytes) -> bytes:
        """Consume the HTTP 101 answer; returns the bytes after it (frames already sent)."""
        end = data.find(b"\r\n\r\n")
        if end < 0:
            if len(data) > _MAX_HEADER_BYTES:
                self._reject("the handshake answer is too long")
            else:
                self._buffer = data
            return b""
        lines = data[:end].decode("latin-1").split("\r\n")
        status = lines[0].split(" ", 2)
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if len(status) < 2 or status[1] != "101":
            self._reject(
                f"the server answered {lines[0]!r}, not 101 Switching Protocols",
                _retry_after(headers.get("retry-after")),
                unavailable=len(status) >= 2 and status[1] == "503",
            )
        elif headers.get("upgrade", "").lower() != "websocket" or "upgrade" not in {
            token.strip() for token in headers.get("connection", "").lower().split(",")
        }:
            self._reject("the server did not upgrade to websocket")
        elif headers.get("sec-websocket-accept") != self._expected_accept:
            self._reject("the server's Sec-WebSocket-Accept does not match our key")
        elif headers.get("sec-websocket-extensions"):
            self._reject("the server chose an extension that was not offered")
        elif not self.handshake.done():  # (done: the caller gave up waiting)
            self._upgraded = True
            self.handshake.set_result(None)
            return data[end + 4 :]
        return b""

    def _reject(
        self, why: str, retry_after: float | None = None, unavailable: bool = False
    ) -> None:
        if not self.handshake.done():
            self.handshake.set_exception(HandshakeError(why, retry_after, unavailable))
        self._close_transport()

    # -- sending ---------------------------------------------------------------------------

    def _write(self, opcode: int, payload: bytes) -> None:
        if self._transport is None or self._lost:
            return
        self._transport.write(frame(opcode, payload, masked=True))

    def send(self, payload: bytes) -> bool:
        """Send one binary message; False (and nothing sent) once the connection is closing."""
        if self._close_sent or self._lost:
            return False
        self._write(OP_BINARY, payload)
        return True

    def send_many(self, payloads: list[bytes]) -> bool:
        """Send several binary messages in one write (one TCP segment when they fit, as a
        game client's command packet); False (and nothing sent) once closing."""
        if self._close_sent or self._lost or self._transport is None:
            return False
        self._transport.write(b"".join([frame(OP_BINARY, p, masked=True) for p in payloads]))
        return True

    def _send_close(self, code: int) -> None:
        if not self._close_sent:
            self._write(OP_CLOSE, code.to_bytes(2, "big"))
            self._close_sent = True

    def _close_transport(self) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.close()

    def abort(self) -> None:
        """Drop the connection at once, without a closing handshake."""
        if self._transport is not None:
            self._transport.abort()

    async def close(self, code: int = CLOSE_NORMAL) -> None:
        """The closing handshake: our close frame, then wait (bounded) for the server's."""
        self._send_close(code)
        try:
            async with asyncio.timeout(_CLOSE_WAIT_S):
                await asyncio.shield(self._gone)
        except TimeoutError:
            self.abort()


def _retry_after(value: str | None) -> float | None:
    """A ``Retry-After`` header's seconds (RFC 9110 §10.2.3; its HTTP-date form, which no
    node sends, reads as None)."""
    try:
        seconds = float(value) if value is not None else math.nan
    except ValueError:
        return None
    return seconds if 0 <= seconds <= 86400 else None


async def connect(
    url: str,
    on_message: Callable[[bytes], None],
    on_close: Callable[[], None],
    *,
    max_size: int,
    tls: TlsTrust = SYSTEM_TRUST,
) -> WebSocketClient:
    """Open ``ws://`` or ``wss://`` ``url`` (or the same over ``http(s)://``; TLS verified
    as ``tls`` says); returns once the server accepted the upgrade.

    Bound it with ``asyncio.timeout``: a cancelled connect drops the socket.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("ws", "wss", "http", "https") or not parts.hostname:
        raise ValueError(f"not a WebSocket URL: {url!r}")
    secure = parts.scheme in ("wss", "https")  # (http URLs are upgraded, as aiohttp does)
    port = parts.port or (443 if secure else 80)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    host = parts.hostname if parts.port is None else f"{parts.hostname}:{parts.port}"
    key = base64.b64encode(os.urandom(16)).decode("ascii")
    request = (
        f"GET {path} HTTP/1.1\r\n"
        f"Host: {host}\r\n"
        "Upgrade: websocket\r\n"
        "Connection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {key}\r\n"
        "Sec-WebSocket-Version: 13\r\n"
        "\r\n"
    ).encode("ascii")
    loop = asyncio.get_running_loop()
    _, client = await loop.create_connection(
        lambda: WebSocketClient(request, accept_key(key), on_message, on_close, max_size),
        parts.hostname,
        port,
        ssl=tls.context() if secure else None,
    )
    try:
        await client.handshake
    except BaseException:
        client.abort()
        raise
    return client
