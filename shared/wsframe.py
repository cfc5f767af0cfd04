"""RFC 6455 frame headers, for the two hot paths that write WebSocket frames themselves:
the node's per-tick snapshots and the bots' lean client (:mod:`client_sim.websocket`)."""

from __future__ import annotations

import struct

__all__ = ["OP_BINARY", "OP_CLOSE", "OP_CONTINUATION", "OP_PING", "OP_PONG", "OP_TEXT", "header"]

OP_CONTINUATION, OP_TEXT, OP_BINARY = 0x0, 0x1, 0x2
OP_CLOSE, OP_PING, OP_PONG = 0x8, 0x9, 0xA

_FIN = 0x80
_MASKED = 0x80


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
