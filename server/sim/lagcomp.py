"""Which moment a shot is judged in: the view-time rule of lag compensation (sans-I/O).

A client says when it saw the world (its view time). The server expects that to be about
``arrival - rtt / 2 - interp_delay``: when the input arrived, less the time it travelled,
less how far in the past the client renders. A claim within ``tolerance`` of that is
believed; otherwise the server's own estimate is used. Either way the server never rewinds
further back than ``max_rewind`` before the present, nor into the future.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["LagCompensation", "ViewTimeVerdict"]


class ViewTimeVerdict(enum.Enum):
    ACCEPTED = "accepted"
    REPLACED = "replaced"  # the claim disagreed with the server's estimate
    CLAMPED = "clamped"  # older than the rewind cap, or in the future (after replacement)


@dataclass(frozen=True, slots=True)
class LagCompensation:
    max_rewind: float = 0.200  # seconds; Photon Fusion's default, Valve caps at 1 s
    tolerance: float = 0.050  # seconds between claim and estimate before it is replaced
    trade_window: float = 0.0  # seconds a dead shooter's shots still count after death

    def view_time(
        self,
        claim: float,
        arrival: float,
        rtt: float | None,
        interp_delay: float,
        present: float,
    ) -> tuple[float, ViewTimeVerdict]:
        """The time to rewind to, and whether the claim was taken as it was."""
        verdict = ViewTimeVerdict.ACCEPTED
        time = claim
        if rtt is not None:
            expected = arrival - rtt / 2.0 - interp_delay
            if abs(claim - expected) > self.tolerance:
                time, verdict = expected, ViewTimeVerdict.REPLACED
        if time < present - self.max_rewind:
            time, verdict = present - self.max_rewind, ViewTimeVerdict.CLAMPED
        elif time > present:  # a claim from the future: nobody has seen that world yet
            time, verdict = present, ViewTimeVerdict.CLAMPED
        return time, verdict

    def may_fire(self, view_time: float, death_time: float | None) -> bool:
        """Dead players do not shoot, except within the trade window after they died."""
        return death_time is None or view_time <= death_time + self.trade_window
