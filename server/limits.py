"""The node's configuration limits, stated once: every command and config checks these.

Each limit is an inclusive range with a name for messages; :func:`check` raises the one
line a user sees (``tick rate 500 Hz is outside 20-128 Hz``).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MATCHES", "MAX_PLAYERS", "PORT", "TICK_RATE", "Limit"]


@dataclass(frozen=True, slots=True)
class Limit:
    """``low <= value <= high``, called ``name``, in ``unit`` (for the message)."""

    name: str
    low: int
    high: int
    unit: str = ""

    def __contains__(self, value: object) -> bool:
        return (
            isinstance(value, int)
            and not isinstance(value, bool)
            and (self.low <= value <= self.high)
        )

    def check(self, value: int) -> int:
        """``value`` if it is within the limit; else ValueError, one line."""
        if value not in self:
            unit = f" {self.unit}" if self.unit else ""
            raise ValueError(f"{self.name} {value}{unit} is outside {self.low}-{self.high}{unit}")
        return value


#: Ticks per second: slower is no shooter, faster than 128 Hz is beyond what a node keeps.
TICK_RATE = Limit("tick rate", 20, 128, "Hz")
#: Seats per match: slots are 16-bit ids on the wire.
MAX_PLAYERS = Limit("max players", 1, 65535)
#: Matches one node hosts on its one tick.
MATCHES = Limit("matches", 1, 64)
#: A TCP port (0: any free one).
PORT = Limit("port", 0, 65535)
