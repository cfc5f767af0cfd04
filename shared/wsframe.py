"""RFC 6455 framing for the two hot paths that read and write WebSocket frames themselves:
the node's seated players (:mod:`server.net.player_stream`) and the bots' lean client
(:mod:`client_sim.websocket`). Sans-I/O: bytes in, messages out, no sockets here.

The subset is what the game needs: binary and text messages (fragmented or not), ping,
pong and close; no extensions (so no compression). A peer's protocol fault raises
:class:`FrameFault` with the close code to answer with.
"""

from __future__ import annotations

import functools
import os
import struct
from collections.abc import Callable

__all__ = [
    "CLOSE_NORMAL",
    "CLOSE_PROTOCOL_ERROR",
    "CLOSE_TOO_BIG",
    "OP_BINARY",
    "OP_CLOSE",
    "OP_CONTINUATION",
    "OP_PING",
    "OP_PONG",
    "OP_TEXT",
    "FrameFault",
    "FrameReader",
    "close_code",
    "frame",
    "header",
    "mask",
]

OP_CONTINUATION, OP_TEXT, OP_BINARY = 0x0, 0x1, 0x2
OP_CLOSE, OP_PING, OP_PONG = 0x8, 0x9, 0xA

CLOSE_NORMAL = 1000
CLOSE_PROTOCOL_ERROR = 1002
CLOSE_TOO_BIG = 1009

_FIN = 0x80
_MASKED = 0x80
_CONTROL = (OP_CLOSE, OP_PING, OP_PONG)


class FrameFault(Exception):
    """The peer broke the framing rules; close the connection with ``code``."""

    def __init__(self, code: int, why: str) -> None:
        super().__init__(why)
        self.code = code


@functools.lru_cache(maxsize=256)  # a tick's snapshots to one match all have one size
def header(opcode: int, length: int, *, masked: bool) -> bytes:
    """The header of one final (unfragmented) frame: FIN, ``opcode``, the mask bit (set
    by clients, never by servers) and ``length`` in the shortest encoding. A masked frame's
    4-byte key follows the header."""
    mask_bit = _MASKED if masked else 0
    if length < 126:
        return bytes((_FIN | opcode, mask_bit | length))
    if length < 1 << 16:
        return struct.pack("!BBH", _FIN | opcode, mask_bit | 126, length)
    return struct.pack("!BBQ", _FIN | opcode, mask_bit | 127, length)


def mask(payload: bytes, key: bytes) -> bytes:
    """XOR ``payload`` with the 4-byte ``key`` repeated (one big-integer XOR, no loop);
    masking twice gives the payload back."""
    n = len(payload)
    if not n:
        return b""
    stream = (key * ((n >> 2) + 1))[:n]
    return (int.from_bytes(payload, "little") ^ int.from_bytes(stream, "little")).to_bytes(
        n, "little"
    )


class _MaskKeys:
    """Masking keys from the OS's random source, fetched 1,024 at a time."""

    __slots__ = ("_at", "_block")

    def __init__(self) -> None:
        self._block, self._at = b"", 0

    def next(self) -> bytes:
        if self._at >= len(self._block):
            self._block, self._at = os.urandom(4096), 0
        at = self._at
        self._at = at + 4
        return self._block[at : at + 4]


_mask_keys = _MaskKeys()


def frame(opcode: int, payload: bytes, *, masked: bool) -> bytes:
    """One whole frame, masked with a fresh random key when a client sends it."""
    if not masked:
        return header(opcode, len(payload), masked=False) + payload
    key = _mask_keys.next()
    return header(opcode, len(payload), masked=True) + key + mask(payload, key)


def _sendable_close_code(code: int) -> bool:
    """Codes an endpoint may put in a close frame (RFC 6455 §7.4): not 1004-1006 or 1015."""
    return (1000 <= code <= 1014 and code not in (1004, 1005, 1006)) or 3000 <= code <= 4999


def close_code(payload: bytes) -> int | None:
    """The status code of a close frame's payload (None: none given); faults if invalid."""
    if not payload:
        return None
    if len(payload) == 1:
        raise FrameFault(CLOSE_PROTOCOL_ERROR, "a close frame with a one-byte payload")
    code = int.from_bytes(payload[:2], "big")
    if not _sendable_close_code(code):
        raise FrameFault(CLOSE_PROTOCOL_ERROR, f"close code {code} may not be sent")
    return code


class FrameReader:
    """Whole messages out of a byte stream: ``on_message(opcode, payload)`` for each binary
    or text message (fragments joined), ``on_control(opcode, payload)`` for each ping,
    pong and close frame. ``masked``: whether the peer must mask (a client) or must not
    (a server). After a :class:`FrameFault` or a close frame the reader takes nothing more.
    """

    __slots__ = (
        "_buffer",
        "_done",
        "_fragment_opcode",
        "_fragment_size",
        "_fragments",
        "_masked",
        "_max_size",
        "_on_control",
        "_on_message",
    )

    def __init__(
        self,
        *,
        masked: bool,
        max_size: int,
        on_message: Callable[[int, bytes], None],
        on_control: Callable[[int, bytes], None],
    ) -> None:
        self._masked = masked
        self._max_size = max_size
        self._on_message = on_message
        self._on_control = on_control
        self._buffer = b""
        self._fragments: list[bytes] | None = None
        self._fragment_opcode = OP_BINARY
        self._fragment_size = 0
        self._done = False

    @property
    def idle(self) -> bool:
        """Between messages: no partial frame or message pending, and still reading."""
        return not self._buffer and self._fragments is None and not self._done

    def feed(self, data: bytes) -> None:
        """Take the next bytes of the stream; raises :class:`FrameFault` on a fault."""
        if self._done:
            return
        if self._buffer:
            data = self._buffer + data
            self._buffer = b""
        pos, end, limit, masked = 0, len(data), self._max_size, self._masked
        try:
            while end - pos >= 2:
                first, second = data[pos], data[pos + 1]
                if bool(second & 0x80) is not masked:
                    why = "an unmasked client frame" if masked else "a masked server frame"
                    raise FrameFault(CLOSE_PROTOCOL_ERROR, why)
                length, head = second & 0x7F, 2
                if length == 126:
                    if end - pos < 4:
                        break
                    length, head = int.from_bytes(data[pos + 2 : pos + 4], "big"), 4
                elif length == 127:
                    if end - pos < 10:
                        break
                    length, head = int.from_bytes(data[pos + 2 : pos + 10], "big"), 10
                if length > limit:
                    raise FrameFault(CLOSE_TOO_BIG, f"a frame of {length} bytes")
                if masked:
                    head += 4
                stop = pos + head + length
                if stop > end:
                    break
                payload = data[pos + head : stop]
                if masked:
                    payload = mask(payload, data[pos + head - 4 : pos + head])
                pos = stop
                if first == 0x82 and self._fragments is None:  # FIN + binary: the usual
                    self._on_message(OP_BINARY, payload)
                else:
                    self._frame(first, payload)
                    if self._done:
                        return
        except FrameFault:
            self._done = True
            raise
        if pos < end:
            self._buffer = data[pos:]

    def _frame(self, first: int, payload: bytes) -> None:
        if first & 0x70:
            raise FrameFault(CLOSE_PROTOCOL_ERROR, "RSV bits set, no extension was agreed")
        fin, opcode = first & _FIN, first & 0x0F
        if opcode in (OP_BINARY, OP_TEXT):
            if self._fragments is not None:
                raise FrameFault(CLOSE_PROTOCOL_ERROR, "a new message inside a fragmented one")
            if fin:
                self._on_message(opcode, payload)
            else:
                self._fragments, self._fragment_opcode = [payload], opcode
                self._fragment_size = len(payload)
        elif opcode == OP_CONTINUATION:
            if self._fragments is None:
                raise FrameFault(CLOSE_PROTOCOL_ERROR, "a continuation with nothing to continue")
            self._fragment_size += len(payload)
            if self._fragment_size > self._max_size:
                raise FrameFault(CLOSE_TOO_BIG, f"a message of {self._fragment_size}+ bytes")
            self._fragments.append(payload)
            if fin:
                message, self._fragments = b"".join(self._fragments), None
                self._on_message(self._fragment_opcode, message)
        elif opcode in _CONTROL:
            if not fin or len(payload) > 125:
                raise FrameFault(CLOSE_PROTOCOL_ERROR, "a fragmented or long control frame")
            if opcode == OP_CLOSE:
                self._done = True  # nothing after a close counts
            self._on_control(opcode, payload)
        else:
            raise FrameFault(CLOSE_PROTOCOL_ERROR, f"unknown opcode {opcode:#x}")
