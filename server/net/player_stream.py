"""A seated player's WebSocket frames, read straight off the socket.

aiohttp does the opening handshake, the join and the welcome (and everything for
connections that are refused or parked). Once a player is seated, the node takes the
socket's protocol over: every input then goes from ``data_received`` through the frame
reader (:class:`shared.wsframe.FrameReader`) to the node's synchronous handler, instead of
through aiohttp's message queue, a task wake-up and an async iterator per message. At 300
players that path was about a sixth of the node's CPU (``bench/server_load.py``).

aiohttp's own protocol stays behind this one: it hears of flow control and of the
connection's loss, so its bookkeeping (open connections, graceful shutdown) stays right.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import cast

from server.sim.input_frames import split_read
from server.sim.intake import HeldReader, InputIntake
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

__all__ = ["PlayerStream"]

_CLOSE_WAIT_S = 1.0  # how long wait_closed() waits before dropping the socket
_POLICY_VIOLATION = 1008  # the close code for a player dropped for repeated offences


class PlayerStream(asyncio.Protocol):
    """One seated player's socket: ``on_binary(payload)`` for each binary message (True:
    drop the player), ``on_text()`` for each text message (likewise); :attr:`closed`
    resolves once the connection is gone.

    With an ``intake``, the input-sized frames of a read of whole frames (inputs, as far as
    their sizes tell) are held there for the tick, under ``owner``, stamped with ``now()``
    (server time), and the read's other frames are read at once; the tick gives back any
    it cannot decode through :meth:`feed`.
    """

    def __init__(
        self,
        transport: asyncio.Transport,
        behind: asyncio.BaseProtocol,
        on_binary: Callable[[bytes], bool],
        on_text: Callable[[], bool],
        max_size: int,
        intake: InputIntake | None = None,
        owner: HeldReader | None = None,
        now: Callable[[], float] | None = None,
    ) -> None:
        if (intake is None) != (owner is None) or (intake is None) != (now is None):
            raise ValueError("give an intake with its owner and clock, or none of them")
        self._transport = transport
        self._behind = behind
        self._on_binary = on_binary
        self._on_text = on_text
        self._reader = FrameReader(
            masked=True, max_size=max_size, on_message=self._message, on_control=self._control
        )
        self._intake = intake
        self._owner = owner
        self._now = now
        self._held = -1  # the intake generation this stream last held a read in
        self._close_sent = False
        #: Closing or closed: nothing more is sent (a plain flag: checked per snapshot).
        self.closing = False
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        #: The close code of the closing handshake (the client's, or ours), if any.
        self.close_code: int | None = None

    @classmethod
    def take_over(
        cls,
        transport: asyncio.BaseTransport | None,
        on_binary: Callable[[bytes], bool],
        on_text: Callable[[], bool],
        max_size: int,
        intake: InputIntake | None = None,
        owner: HeldReader | None = None,
        now: Callable[[], float] | None = None,
    ) -> PlayerStream | None:
        """Put a stream in front of the socket's current protocol; None if it is gone."""
        if transport is None or transport.is_closing():
            return None
        # (uvloop's transports implement asyncio.Transport without deriving from it)
        stream_transport = cast(asyncio.Transport, transport)
        behind = transport.get_protocol()
        stream = cls(stream_transport, behind, on_binary, on_text, max_size, intake, owner, now)
        transport.set_protocol(stream)
        return stream

    # -- asyncio.Protocol ------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        intake, owner, now = self._intake, self._owner, self._now
        if intake is not None and owner is not None and now is not None:
            split = split_read(data) if self._reader.idle and not self.closing else None
            if split is not None:
                inputs, others = split
                if inputs:
                    self._held = intake.hold(owner, inputs, now())
                if others:
                    self.feed(others)
                return
            if self._held == intake.generation:
                intake.drain()  # this player's held inputs come before what this read holds
        self.feed(data)

    def feed(self, data: bytes) -> None:
        """Read ``data`` now, frame by frame (a fault closes the connection)."""
        try:
            self._reader.feed(data)
        except FrameFault as fault:
            self.close(fault.code)

    def eof_received(self) -> bool | None:
        return None  # the client half-closed: close our side too

    def pause_writing(self) -> None:
        self._behind.pause_writing()

    def resume_writing(self) -> None:
        self._behind.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closing = True
        if not self.closed.done():
            self.closed.set_result(None)
        self._behind.connection_lost(exc)

    # -- frames ----------------------------------------------------------------------------

    def _message(self, opcode: int, payload: bytes) -> None:
        if self.closing:
            return
        drop = self._on_binary(payload) if opcode == OP_BINARY else self._on_text()
        if drop:
            self.close(_POLICY_VIOLATION, b"offences")

    def _control(self, opcode: int, payload: bytes) -> None:
        if opcode == OP_PING:
            self.write(OP_PONG, payload)
        elif opcode == OP_CLOSE:
            code = close_code(payload)  # (a FrameFault here closes with 1002)
            self.close_code = code
            self.close(CLOSE_NORMAL if code is None else code)

    # -- writing ---------------------------------------------------------------------------

    def write(self, opcode: int, payload: bytes) -> None:
        if not self.closing:
            self._transport.write(frame(opcode, payload, masked=False))

    def close(self, code: int = CLOSE_NORMAL, reason: bytes = b"") -> None:
        """Our close frame, then the socket closes once it is flushed (the client's answer
        is not waited for: nothing it sends after a close counts)."""
        if self._close_sent:
            return
        self.closing = True
        if not self._transport.is_closing():
            self._transport.write(frame(OP_CLOSE, code.to_bytes(2, "big") + reason, masked=False))
        self._close_sent = True
        if self.close_code is None:
            self.close_code = code
        self._transport.close()

    async def wait_closed(self) -> None:
        """Until the connection is gone (bounded: then it is aborted)."""
        try:
            async with asyncio.timeout(_CLOSE_WAIT_S):
                await asyncio.shield(self.closed)
        except TimeoutError:
            self._transport.abort()
