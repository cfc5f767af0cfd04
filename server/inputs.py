"""Untrusted player inputs: sanitising and the per-player jitter buffer (sans-I/O).

The server never takes a position, velocity or health from a client. What a client may
say is what it pressed; this module decides which of those claims are usable:

* :func:`sanitize` clamps a move vector longer than 1 back onto the unit circle and rejects
  view angles outside their range (the codec has already rejected NaN and wrong types).
* :class:`InputBuffer` orders inputs by sequence number and releases one per tick, so
  network jitter does not turn into jerky movement. When a player's inputs stop arriving
  the last one repeats (the usual server behaviour, it keeps a running player running);
  when they pile up beyond ``max_depth`` (a burst after a stall), the surplus is applied
  in the same tick so the player catches up instead of lagging further behind.
"""

from __future__ import annotations

import enum
import math
from collections import deque
from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np

from shared.protocol import InputMessage

__all__ = ["InputBuffer", "InputVerdict", "SanitizeResult", "sanitize", "sanitize_columns"]

HALF_PI = math.pi / 2.0


class InputVerdict(enum.Enum):
    ACCEPTED = "accepted"
    CLAMPED = "clamped"
    STALE = "stale"  # a sequence number already received: a duplicate or a replay
    TOO_FAR_AHEAD = "too_far_ahead"
    BAD_ANGLE = "bad_angle"

    @property
    def usable(self) -> bool:
        return self in (InputVerdict.ACCEPTED, InputVerdict.CLAMPED)


class SanitizeResult(NamedTuple):
    """A verdict, and the input to queue (None when rejected). A tuple: one per input."""

    verdict: InputVerdict
    message: InputMessage | None


def sanitize(message: InputMessage) -> SanitizeResult:
    """Clamp what can be clamped, reject what cannot; never trust the client."""
    if not (-math.pi <= message.yaw <= math.pi and -HALF_PI <= message.pitch <= HALF_PI):
        return SanitizeResult(InputVerdict.BAD_ANGLE, None)
    mx, my = message.move
    length = math.sqrt(mx * mx + my * my)
    if length > 1.0:
        clamped = replace(message, move=(mx / length, my / length))
        return SanitizeResult(InputVerdict.CLAMPED, clamped)
    return SanitizeResult(InputVerdict.ACCEPTED, message)


def sanitize_columns(
    move_x: np.ndarray, move_y: np.ndarray, yaw: np.ndarray, pitch: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`sanitize` for many inputs at once, with the same arithmetic (so the same
    bits): ``(bad_angle, clamped, move_x, move_y)``, the moves clamped where ``clamped``."""
    bad_angle = ~((-math.pi <= yaw) & (yaw <= math.pi) & (-HALF_PI <= pitch) & (pitch <= HALF_PI))
    length = np.sqrt(move_x * move_x + move_y * move_y)
    clamped = (length > 1.0) & ~bad_angle
    if clamped.any():
        scale = np.where(clamped, length, 1.0)
        move_x, move_y = (
            np.where(clamped, move_x / scale, move_x),
            np.where(clamped, move_y / scale, move_y),
        )
    return bad_angle, clamped, move_x, move_y


@dataclass(slots=True)
class InputBuffer:
    """One player's pending inputs, released one per tick in sequence order."""

    max_depth: int = 4
    future_window: int = 120  # two seconds of inputs at 60 Hz; further ahead is a lie
    pending: deque[tuple[InputMessage, float]] = None  # type: ignore[assignment]
    last_received: int = -1
    last_applied: InputMessage | None = None
    restored_ack: int = -1  # the acknowledged sequence of a seat taken over from a primary
    starved_ticks: int = 0

    def __post_init__(self) -> None:
        self.pending = deque()

    @property
    def acked(self) -> int:
        """Highest sequence number applied to the world (-1 before the first)."""
        return self.restored_ack if self.last_applied is None else self.last_applied.seq

    def restore(self, acked: int) -> None:
        """Continue a seat another node served: inputs up to ``acked`` were applied there."""
        self.pending.clear()
        self.last_applied = None
        self.restored_ack = acked
        self.last_received = acked

    def offer(self, message: InputMessage, arrival: float = 0.0) -> InputVerdict:
        """Queue a sanitised input that arrived at ``arrival`` (server time), or say why not.

        The arrival time travels with the input: lag compensation judges a shot by when it
        arrived, not by when the jitter buffer released it.
        """
        if message.seq <= self.last_received:
            return InputVerdict.STALE
        if self.last_received >= 0 and message.seq > self.last_received + self.future_window:
            return InputVerdict.TOO_FAR_AHEAD
        self.last_received = message.seq
        self.pending.append((message, arrival))
        return InputVerdict.ACCEPTED

    def take(self) -> list[InputMessage]:
        """The inputs to apply this tick, oldest first; empty means "repeat the last one"."""
        return [message for message, _ in self.take_with_arrival()]

    def take_with_arrival(self) -> list[tuple[InputMessage, float]]:
        """Like :meth:`take`, each input with the server time it arrived at."""
        pending = self.pending
        if len(pending) == 1:  # the steady state: one input a tick
            taken = [pending.popleft()]
            self.last_applied = taken[0][0]
            return taken
        if not pending:
            self.starved_ticks += 1
            return []
        count = max(1, len(pending) - self.max_depth + 1)
        taken = [self.pending.popleft() for _ in range(count)]
        self.last_applied = taken[-1][0]
        return taken
