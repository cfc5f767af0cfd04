"""What a player's session needs from a transport, and the seated player the sessions keep.

The sessions (:mod:`server.net.sessions`) admit, seat, budget, publish to and close players
the same way whatever carries their frames: a WebSocket (:mod:`server.net.ws_link`) or a
UDP channel (:mod:`server.net.udp`). Each transport is a thin :class:`PlayerLink`: it hands
over the join, then, once seated, charges every frame to the seat's budgets
(:class:`~server.sim.input_budget.SeatBudgets`), holds the inputs in the intake and tells
the sessions of every other frame (:class:`SeatEvents`), and of its loss (the future
:meth:`PlayerLink.seat` returns). Frames are the seat protocol's messages, the same bytes
over either transport (:mod:`shared.protocol`).

Close codes are RFC 6455's numbers, which a WebSocket sends as they are and a datagram
link reports in its last message; the ``error`` message before a close says why anyway.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

from server.sim.input_budget import FrameKind
from server.sim.intake import HeldReader, InputIntake
from shared.protocol import ProtocolError

__all__ = [
    "GOING_AWAY",
    "POLICY_VIOLATION",
    "PROTOCOL_ERROR",
    "TRY_AGAIN_LATER",
    "Player",
    "PlayerLink",
    "SeatEvents",
]

GOING_AWAY = 1001  # the node shuts down or steps down
PROTOCOL_ERROR = 1002  # a protocol the node does not speak
POLICY_VIOLATION = 1008  # refused, or dropped for offences
TRY_AGAIN_LATER = 1013  # refused for now: a standby, a full node, a seat in use


class SeatEvents(Protocol):
    """What a link tells the sessions about a seated player's frames."""

    def frame(self, data: bytes) -> bool:
        """A frame (not an input the intake holds) to read now; True: drop the player."""
        ...

    def refused(self, error: ProtocolError) -> bool:
        """A frame the transport itself refuses; True: drop the player."""
        ...

    def over_budget(self, kind: FrameKind, dropped: int, offence: bool) -> bool:
        """Frames of ``kind`` dropped over budget (``offence``: kept up); True: drop."""
        ...


class PlayerLink(Protocol):
    """One player's transport, as the sessions use it: never waits to send (a frame the
    link has no room for is dropped and the send says so)."""

    @property
    def address(self) -> str | None:
        """The peer's address (its host), whose seats and offences are counted."""
        ...

    @property
    def closing(self) -> bool:
        """Closing or closed: nothing more is sent."""
        ...

    async def receive(self) -> bytes | None:
        """Before the seat: the next frame (the join); None once the link is gone. Raises
        :class:`~shared.protocol.ProtocolError` for a frame this transport does not carry."""
        ...

    async def refuse(self, message: bytes, code: int, reason: bytes) -> None:
        """Before the seat: send ``message`` (an ``error``), then close with ``code``."""
        ...

    def seat(
        self,
        owner: HeldReader,
        events: SeatEvents,
        intake: InputIntake,
        now: Callable[[], float],
    ) -> asyncio.Future[None] | None:
        """From now on read the player's frames: charged to its budgets, its inputs held in
        ``intake`` under ``owner`` stamped with ``now()`` (server time), the rest told to
        ``events``. Returns a future that resolves once the link is gone (None: gone)."""
        ...

    def reading(self) -> bool:
        """Seated and still read (not closing)."""
        ...

    def read_now(self, data: bytes) -> None:
        """Read a held input read the ordinary way, now (the intake gives it back)."""
        ...

    def send(self, message: bytes) -> bool:
        """One message of the seat protocol, delivered in order; True when sent."""
        ...

    def send_snapshot(self, head: bytes, body: bytes, probe: bytes = b"") -> bool:
        """One snapshot (its per-player head and the tick's shared body), and ``probe`` (a
        round-trip probe) riding with it; True when sent. A later one supersedes it."""
        ...

    def close(self, code: int, reason: bytes) -> None:
        """Start closing with ``code`` (nothing the peer sends counts any more)."""
        ...

    async def wait_closed(self) -> None:
        """Until the link is gone (bounded)."""
        ...


class Player:
    """A seated player: its link, its seat, and what follows the seat rather than the link
    (its offences); the owner of its held input reads
    (:class:`~server.sim.intake.HeldReader`)."""

    __slots__ = ("link", "match", "offences", "seated", "slot", "token_issued_at")

    def __init__(self, link: PlayerLink, slot: int, match: int = 0) -> None:
        self.link = link
        self.slot = slot
        self.match = match
        self.offences = 0
        #: Seated on its own seat (set and cleared by the sessions): its inputs count.
        self.seated = False
        #: When (unix time) the player's current session token was issued: the sessions
        #: renew it once it has used half its life.
        self.token_issued_at = 0.0

    @property
    def closing(self) -> bool:
        return self.link.closing

    def send(self, message: bytes) -> bool:
        return self.link.send(message)

    def send_snapshot(self, head: bytes, body: bytes, probe: bytes = b"") -> bool:
        return self.link.send_snapshot(head, body, probe)

    def reading(self) -> bool:
        return self.seated and self.link.reading()

    def read_now(self, data: bytes) -> None:
        self.link.read_now(data)

    async def close(self, code: int, reason: bytes) -> None:
        """Close with ``code``; returns once the link is gone."""
        self.link.close(code, reason)
        await self.link.wait_closed()
