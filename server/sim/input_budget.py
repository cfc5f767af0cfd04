"""Per-connection budgets in server time: how many frames of a kind a client may send.

A seated client sends one ``input`` a tick and a few pings and probe echoes a second. A
client that sends more gains nothing but costs the node CPU that every other player
shares, so each connection gets a token bucket per kind of frame, refilled by server time
(the classic token bucket of RFC 2697's single-rate meter, without its colours): a frame
takes a token or is dropped before anything decodes it. The bucket starts full, so a client
that stalled and catches up, or resends what a failover left unacknowledged, is served at
once up to the burst.

Dropping costs the sender only its own surplus; it is not an offence by itself. A client
that *keeps* sending over budget is: a second of server time (each whole second) in which
more of its frames were dropped than the budget refills in a second is a flooded second,
and every flooded second that directly follows another is an offence (a single burst fills
one second at most, so it never is).

A connection that sends far more than that (more frames dropped in the current second than
:data:`FLOOD_FACTOR` seconds of its budget: :attr:`Budget.flooding`) is one the edge stops
reading for a while, so its surplus waits in its own socket, not in the node's CPU; and
while it waits its budget earns nothing (:meth:`Budget.forfeit`), so the pause is no lag
switch: the frames read after it are not a refilled bucket's burst, the player's inputs do
not come in bunches the jitter buffer's catch-up would apply at once, and a flood gains
nothing. A client a few times over budget (three inputs a tick, say) is not paused: reading
it costs little, and its surplus is dropped as before.

Sans-I/O: the time is a parameter; a time that stands still or goes backwards refills
nothing.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

from shared.protocol import ProtocolError

__all__ = [
    "FLOOD_FACTOR",
    "PING_ALLOWANCE",
    "Allowance",
    "Budget",
    "FrameKind",
    "RateLimited",
    "SeatBudgets",
    "TokenBucket",
    "input_allowance",
]


class FrameKind(enum.Enum):
    """What a frame is charged to, told by its message ``type`` before it is decoded
    (:func:`server.sim.input_frames.split_read`), never by its size: a compact input is as
    short as 73 bytes, a sighting or a join may be longer than a bot's input."""

    INPUT = "input"  # a binary message whose type is "input"
    PING = "ping"  # any other frame but a close: pings, probe echoes, sightings, control


class RateLimited(ProtocolError):
    """The offence of a client that kept sending more than its budget allows."""

    code = "rate_limited"


@dataclass(frozen=True, slots=True)
class Allowance:
    """A budget's shape: ``rate`` tokens a second of server time, at most ``burst`` saved."""

    rate: float
    burst: int

    def __post_init__(self) -> None:
        if not (self.rate > 0 and math.isfinite(self.rate)):
            raise ValueError(f"a budget's rate must be positive and finite, not {self.rate!r}")
        if self.burst < 1:
            raise ValueError(f"a budget's burst must be at least one frame, not {self.burst!r}")


def input_allowance(tick_rate: int) -> Allowance:
    """Inputs: one a tick, and a second's worth saved up (as much as a seat's jitter buffer
    holds at 60 Hz: what a client that stalled for a second sends when it catches up)."""
    return Allowance(float(tick_rate), tick_rate)


#: Pings, probe echoes and control frames together: a client pings 10/s until its clock is
#: synced (2/s after) and echoes 4 probes a second.
PING_ALLOWANCE = Allowance(20.0, 20)


#: A connection floods once it had more frames dropped in one second than this many
#: seconds of its budget: ten times over, far beyond a stalled client's catch-up.
FLOOD_FACTOR = 10


class TokenBucket:
    """Tokens refilled at ``rate`` a second of server time, up to ``burst``; full at first."""

    __slots__ = ("_last", "_rate", "burst", "tokens")

    def __init__(self, allowance: Allowance, now: float) -> None:
        self._rate = allowance.rate
        self.burst = allowance.burst
        self.tokens = float(allowance.burst)
        self._last = now  # the latest time seen: refills count from here, never back

    @property
    def last(self) -> float:
        """The latest server time the bucket was given (it never moves back)."""
        return self._last

    def forfeit(self, now: float) -> None:
        """Earn nothing for the time up to ``now``: the next refill counts from there."""
        self._last = max(self._last, now)

    def take(self, wanted: int, now: float) -> int:
        """Take up to ``wanted`` tokens at server time ``now``; returns how many it got."""
        if now > self._last:
            self.tokens = min(self.burst, self.tokens + (now - self._last) * self._rate)
            self._last = now
        granted = min(wanted, int(self.tokens))
        self.tokens -= granted
        return granted


class Budget:
    """One connection's budget for one kind of frame: its bucket, and the watch that tells
    a flood (an offence) from a burst (see the module)."""

    __slots__ = ("_bucket", "_counted", "_drops", "_previous_flooded", "_second", "_tolerance")

    def __init__(self, allowance: Allowance, now: float) -> None:
        self._bucket = TokenBucket(allowance, now)
        self._tolerance = allowance.rate  # drops in one second beyond which it is flooded
        self._second = math.floor(now)
        self._drops = 0  # in the current second
        self._previous_flooded = False  # the second before the current one was flooded
        self._counted = False  # the current second's offence was given

    @property
    def flooding(self) -> bool:
        """More frames were dropped in the current second than :data:`FLOOD_FACTOR`
        seconds of the budget refill."""
        return self._drops > FLOOD_FACTOR * self._tolerance

    def forfeit(self, now: float) -> None:
        """The tokens the time up to ``now`` would refill are not given (a connection that
        was not read meanwhile for flooding)."""
        self._bucket.forfeit(now)

    def admit(self, wanted: int, now: float) -> tuple[int, bool]:
        """``wanted`` frames arrived at server time ``now``: how many may be read (the
        first ones; the rest are dropped), and whether this makes an offence."""
        bucket = self._bucket
        granted = bucket.take(wanted, now)
        dropped = wanted - granted
        second = math.floor(bucket.last)
        if second != self._second:
            self._previous_flooded = second == self._second + 1 and self._drops > self._tolerance
            self._second, self._drops, self._counted = second, 0, False
        if not dropped:
            return granted, False
        self._drops += dropped
        if self._counted or not self._previous_flooded or self._drops <= self._tolerance:
            return granted, False
        self._counted = True
        return granted, True


class SeatBudgets:
    """A seated connection's two budgets, whatever its transport: its inputs (``inputs``:
    the intake's allowance) and everything else but a close (:data:`PING_ALLOWANCE`). A
    transport charges each frame or payload to the budget of its kind before anything
    decodes it, so both transports refuse the same surplus the same way."""

    __slots__ = ("_inputs", "_pings")

    def __init__(self, inputs: Allowance, now: float) -> None:
        self._inputs = Budget(inputs, now)
        self._pings = Budget(PING_ALLOWANCE, now)

    def of(self, kind: FrameKind) -> Budget:
        return self._inputs if kind is FrameKind.INPUT else self._pings

    def admit(self, kind: FrameKind, wanted: int, now: float) -> tuple[int, bool]:
        """:meth:`Budget.admit` of the budget for ``kind``."""
        return self.of(kind).admit(wanted, now)

    def forfeit(self, now: float) -> None:
        """Neither budget earns anything for the time up to ``now`` (a flood's pause)."""
        self._inputs.forfeit(now)
        self._pings.forfeit(now)
