"""A seated player's WebSocket frames, read straight off the socket.

aiohttp does the opening handshake, the join and the welcome (and everything for
connections that are refused or parked). Once a player is seated, the node takes the
socket's protocol over: every input then goes from ``data_received`` through the frame
reader (:class:`shared.wsframe.FrameReader`) to the node's synchronous handler, instead of
through aiohttp's message queue, a task wake-up and an async iterator per message. At 300
players that path was about a sixth of the node's CPU (``bench/server_load.py``).

No read can make the node work without bound. What each read comes to is decided by
:class:`server.sim.player_reads.PlayerReads` (sans-I/O, as websockets splits its
``protocol.py`` from its transport): each read is first split into its frames, each told by
its header and its message ``type`` (one numba pass that unmasks a map's first bytes at
most; a read of one frame, or a command packet of a few, by a few lines of Python), every
frame is charged to the connection's budget for its kind (:mod:`server.sim.input_budget`:
inputs, or anything else), and the frames over budget are dropped there, before anything
decodes them. A flood of 64 KiB of tiny frames costs one pass over its headers and a
budget's worth of Python, not a decode per frame. This class carries the plan out: it
reports the drops, holds the inputs in the intake, feeds the frame reader, pauses and
closes the transport.

Refusing costs little too. A connection that floods (more frames of a kind dropped in the
current second than ten seconds of its budget: :attr:`Budget.flooding`) is not read for a
quarter of a second (``pause_reading``): its surplus waits in its own socket, and TCP's
flow control slows the sender, instead of the node reading and dropping it at line rate.
Its budgets earn nothing while it waits (:meth:`Budget.forfeit`: a pause must not become a
lag switch whose refilled burst the catch-up applies at once), and the reads after each
pause are charged as ever, so its offences still add up. Once its offences reach the
limit, the stream stops reading it for good, reads nothing more of what it already has
(not the rest of the read, not a frame the ordinary reader has not reached yet), sends
its close and drops the socket once that is written, or after a second if the client
does not take it.

aiohttp's own protocol stays behind this one: it hears of flow control and of the
connection's loss, so its bookkeeping (open connections, graceful shutdown) stays right.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import cast

from server.sim.input_budget import FrameKind
from server.sim.intake import HeldReader, InputIntake
from server.sim.player_reads import PlayerReads, ReadPlan
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

__all__ = ["FLOOD_PAUSE_S", "OverBudget", "PlayerStream"]

_CLOSE_WAIT_S = 1.0  # how long a close may take to be written before the socket is dropped
#: How long a flooding connection is not read at a time: short enough that a flood is
#: charged again within each second (its offences add up as ever).
FLOOD_PAUSE_S = 0.25
_POLICY_VIOLATION = 1008  # the close code for a player dropped for repeated offences

#: Told of frames dropped over budget: (their kind, how many, whether that is an offence);
#: True drops the player (its offences reached the limit).
OverBudget = Callable[[FrameKind, int, bool], bool]


class _Refused(Exception):
    """Raised out of the frame reader once the stream closed for offences: the rest of the
    bytes it was fed stay unread (caught in :meth:`PlayerStream.feed`)."""


class PlayerStream(asyncio.Protocol):
    """One seated player's socket: ``on_binary(payload)`` for each binary message (True:
    drop the player), ``on_text()`` for each text message (likewise); :attr:`closed`
    resolves once the connection is gone.

    With an ``intake``, each frame of a read must pass the connection's budget for its kind
    first (inputs: ``intake.allowance``; every other frame but a close:
    :data:`~server.sim.input_budget.PING_ALLOWANCE`), in server time ``now()``; those that
    do not are dropped unread and reported to ``on_over_budget``. The input frames that pass
    are held in the intake for the tick, under ``owner``, stamped with ``now()``, and the
    read's other frames are read at once; the tick gives back any it cannot decode through
    :meth:`feed`. A read whose frames must be read in order (a fragmented message, an input
    with a long length, a framing fault) is read at once, after this player's held inputs.
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
        on_over_budget: OverBudget | None = None,
    ) -> None:
        if (intake is None) != (owner is None) or (intake is None) != (now is None):
            raise ValueError("give an intake with its owner and clock, or none of them")
        self._transport = transport
        self._behind = behind
        self._on_binary = on_binary
        self._on_text = on_text
        self._max_size = max_size
        self._reader = FrameReader(
            masked=True, max_size=max_size, on_message=self._message, on_control=self._control
        )
        self._intake = intake
        self._owner = owner
        self._now = now
        self._held = -1  # the intake generation this stream last held a read in
        #: What each read comes to (sans-I/O): this class only carries it out.
        self._reads = PlayerReads(
            max_size,
            None if intake is None else intake.allowance,
            0.0 if now is None else now(),
        )
        self._on_over_budget = on_over_budget
        self._close_sent = False
        self._abort_timer: asyncio.TimerHandle | None = None
        self._resume_timer: asyncio.TimerHandle | None = None  # while a flood's pause lasts
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
        on_over_budget: OverBudget | None = None,
    ) -> PlayerStream | None:
        """Put a stream in front of the socket's current protocol; None if it is gone."""
        if transport is None or transport.is_closing():
            return None
        # (uvloop's transports implement asyncio.Transport without deriving from it)
        stream_transport = cast(asyncio.Transport, transport)
        behind = transport.get_protocol()
        stream = cls(
            stream_transport,
            behind,
            on_binary,
            on_text,
            max_size,
            intake,
            owner,
            now,
            on_over_budget,
        )
        transport.set_protocol(stream)
        return stream

    # -- asyncio.Protocol ------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        if self.closing:
            return  # (our close is sent: nothing the client sends now counts)
        now = 0.0 if self._now is None else self._now()
        self._carry_out(self._reads.receive(data, now, self._reader.idle), now)

    def feed(self, data: bytes) -> None:
        """Read ``data`` now, frame by frame (a fault closes the connection; so does an
        offence too many, and then the rest of ``data`` is not read)."""
        if self.closing:
            return
        try:
            self._reader.feed(data)
        except FrameFault as fault:
            self.close(fault.code)
        except _Refused:
            pass

    # -- a read's plan, carried out ------------------------------------------------------

    def _carry_out(self, plan: ReadPlan, now: float) -> None:
        """Report what was dropped over budget (and drop the player, when that was one
        offence too many; stop reading a flood a while), then hold and read what the plan
        says."""
        for dropped in plan.drops:
            report = self._on_over_budget
            if report is not None and report(dropped.kind, dropped.count, dropped.offence):
                self.close(_POLICY_VIOLATION, b"offences")
                return
            if dropped.flooding and self._resume_timer is None and not self.closing:
                self._transport.pause_reading()
                loop = asyncio.get_running_loop()
                self._resume_timer = loop.call_later(FLOOD_PAUSE_S, self._resume_reading)
        intake, owner = self._intake, self._owner
        if plan.hold and intake is not None and owner is not None:
            self._held = intake.hold(owner, plan.hold, now)
        if plan.read_now:
            self.feed(plan.read_now)
        if plan.read_in_order:
            self._in_order(plan.read_in_order)

    def _resume_reading(self) -> None:
        """A flood's pause is over: read again (unless closed meanwhile), the budgets
        having earned nothing while it lasted."""
        self._resume_timer = None
        if self.closing:
            return
        self._reads.resumed(0.0 if self._now is None else self._now())
        self._transport.resume_reading()

    def _in_order(self, data: bytes) -> None:
        """Read ``data`` now, after the inputs this player has held for the tick."""
        intake = self._intake
        if intake is not None and self._held == intake.generation:
            intake.drain()
        self.feed(data)

    def eof_received(self) -> bool | None:
        return None  # the client half-closed: close our side too

    def pause_writing(self) -> None:
        self._behind.pause_writing()

    def resume_writing(self) -> None:
        self._behind.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closing = True
        for timer in (self._abort_timer, self._resume_timer):
            if timer is not None:
                timer.cancel()
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
            raise _Refused  # (out of the frame reader: what follows is not unmasked)

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
        """Stop reading, send our close frame, and close the socket once it is flushed, or
        drop it if that takes over a second (the client's answer is not waited for:
        nothing it sends after a close counts)."""
        if self._close_sent:
            return
        self.closing = True
        transport = self._transport
        if not transport.is_closing():
            transport.pause_reading()  # (what the kernel holds or still gets stays unread)
            transport.write(frame(OP_CLOSE, code.to_bytes(2, "big") + reason, masked=False))
        self._close_sent = True
        if self.close_code is None:
            self.close_code = code
        transport.close()
        if not self.closed.done():
            loop = asyncio.get_running_loop()
            self._abort_timer = loop.call_later(_CLOSE_WAIT_S, transport.abort)

    async def wait_closed(self) -> None:
        """Until the connection is gone (bounded: then it is aborted)."""
        try:
            async with asyncio.timeout(_CLOSE_WAIT_S):
                await asyncio.shield(self.closed)
        except TimeoutError:
            self._transport.abort()
