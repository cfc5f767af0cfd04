"""RFC 6455's framing rules for a player's frames before it is seated.

aiohttp reads a player's join, but its reader takes unmasked frames from a client, which
RFC 6455 §5.1 says a server MUST close the connection on. So from the upgrade until the
first message is whole, a :class:`FirstFrameGuard` stands in front of aiohttp's protocol:
it reads every byte with the node's own frame reader (:class:`shared.wsframe.FrameReader`,
as a seated player's stream does afterwards) and passes it on unchanged. On a framing
fault (an unmasked frame, reserved bits, an unknown opcode, a frame over the size limit)
it closes the connection itself with the fault's code (1002, or 1009), and aiohttp only
hears that the connection is gone. After the first message it steps aside.

Frames a client sent before the server's 101 answer (RFC 6455 §4.1 forbids it) reach
aiohttp with the request, before any guard can stand there: they are not checked.
"""

from __future__ import annotations

import asyncio
from typing import cast

from shared.wsframe import OP_CLOSE, FrameFault, FrameReader, frame

__all__ = ["FirstFrameGuard"]


class FirstFrameGuard(asyncio.Protocol):
    """Checks a client's framing until its first message is whole (closing the connection
    on a fault), passing every byte on to the protocol ``behind`` it."""

    def __init__(
        self, transport: asyncio.Transport, behind: asyncio.Protocol, max_size: int
    ) -> None:
        self._transport = transport
        self._behind = behind
        self._reader = FrameReader(
            masked=True, max_size=max_size, on_message=self._whole, on_control=self._control
        )
        self._done = False

    @classmethod
    def install(
        cls, transport: asyncio.BaseTransport | None, max_size: int
    ) -> FirstFrameGuard | None:
        """Put a guard in front of the socket's protocol; None if the socket is gone."""
        if transport is None or transport.is_closing():
            return None
        # (uvloop's transports implement asyncio.Transport without deriving from it)
        stream = cast(asyncio.Transport, transport)
        guard = cls(stream, cast(asyncio.Protocol, transport.get_protocol()), max_size)
        transport.set_protocol(guard)
        return guard

    def _whole(self, opcode: int, payload: bytes) -> None:
        self._done = True

    def _control(self, opcode: int, payload: bytes) -> None:
        if opcode == OP_CLOSE:
            self._done = True  # aiohttp answers it

    def _step_aside(self) -> None:
        if self._transport.get_protocol() is self:
            self._transport.set_protocol(self._behind)

    # -- asyncio.Protocol ------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        try:
            self._reader.feed(data)
        except FrameFault as fault:
            self._step_aside()
            self._transport.write(frame(OP_CLOSE, fault.code.to_bytes(2, "big"), masked=False))
            self._transport.close()
            return
        if self._done:
            self._step_aside()
        self._behind.data_received(data)

    def eof_received(self) -> bool | None:
        return self._behind.eof_received()

    def pause_writing(self) -> None:
        self._behind.pause_writing()

    def resume_writing(self) -> None:
        self._behind.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        self._behind.connection_lost(exc)
