"""Which moment a shot is judged in: the view-time rule of lag compensation (sans-I/O).

A client says when it saw the world (its view time, the claim). The server accepts any
claim an honest client could have made and clamps the others into that window:

* **Never later than what it had received.** Every input names the newest snapshot its
  client held (``ack_tick``); an honest client draws no world newer than that one, so the
  claim is cut to that tick's time (an ack the server had not even sent by the input's
  arrival is cut to the newest tick it had).
* **Never older than what it must have held.** An honest client renders
  ``interp_delay`` behind its newest snapshot, or shows that snapshot when its buffer runs
  dry, so its claim is at least ``ack time - interp_delay``; and since a snapshot reaches a
  client half a round trip after it is sent and the input takes the other half back, the
  claim is at least ``arrival - rtt/2 - max(interp_delay, rtt/2)``. The round trip is the
  server's own measurement (:mod:`server.sim.rtt`, probes the client cannot answer early),
  so a client that lies about its acks gains nothing (and one that does not answer the
  probes is judged as having no latency at all). Both bounds give way by a ``slack`` of
  one snapshot interval (a client's newest snapshot may be that much older than the tick)
  plus the spread the probes measured (a jittery or lossy link earns more).
* **Never beyond the cap.** Whatever the claim, a shot is judged no further back than
  ``max_rewind`` before its input arrived (the server stamps the arrival).

``interp_delay`` itself is the client's to choose, up to ``max_interp_delay``: a client
asking for more is granted that much, and judged by it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["LagCompensation", "LinkEstimate", "ViewTimeVerdict"]


class ViewTimeVerdict(enum.Enum):
    CLAIMED = "claimed"  # judged at the claim itself
    CLAMPED = "clamped"  # the claim lay outside what the client could have seen
    CAPPED = "capped"  # older than the rewind cap allows


@dataclass(frozen=True, slots=True)
class LinkEstimate:
    """What the server measured of one client's link: the round trip (a low percentile of
    recent probes) and how much it varies (a high percentile less that one), seconds."""

    rtt: float
    spread: float


#: How a client no probe has measured yet is judged: as if it had no latency.
UNMEASURED = LinkEstimate(0.0, 0.0)


@dataclass(frozen=True, slots=True)
class LagCompensation:
    max_rewind: float = 0.200  # seconds; Photon Fusion's default, Valve caps at 1 s
    trade_window: float = 0.0  # seconds a dead shooter's shots still count after death
    max_interp_delay: float = 0.100  # seconds; Source's default cl_interp

    def grant_interp_delay(self, asked: float) -> float:
        """The interpolation delay a client is judged by: what it asked, up to the bound."""
        return min(asked, self.max_interp_delay)

    def window(
        self,
        arrival: float,
        ack_time: float | None,
        link: LinkEstimate | None,
        interp_delay: float,
        period: float,
    ) -> tuple[float, float]:
        """``(earliest, latest)`` view time an honest client's input arriving at
        ``arrival`` could claim; ``ack_time``: its newest snapshot's time (None: it has
        none), ``link``: the server's measurement (None: no probe answered yet),
        ``period``: one snapshot interval. A link faster than an old ack admits wins: the window is
        never wider than the measured round trip allows."""
        measured = link if link is not None else UNMEASURED
        slack = period + measured.spread
        half = measured.rtt / 2.0
        earliest = arrival - half - max(interp_delay, half) - slack
        if ack_time is not None:
            earliest = max(earliest, ack_time - interp_delay - slack)
        latest = ack_time if ack_time is not None else arrival  # nothing from the future
        return earliest, max(earliest, latest)

    def view_time(
        self,
        claim: float,
        arrival: float,
        ack_time: float | None,
        link: LinkEstimate | None,
        interp_delay: float,
        period: float,
    ) -> tuple[float, ViewTimeVerdict]:
        """The time to rewind to, and whether the claim was taken as it was."""
        earliest, latest = self.window(arrival, ack_time, link, interp_delay, period)
        time, verdict = claim, ViewTimeVerdict.CLAIMED
        if not earliest <= claim <= latest:
            time, verdict = min(max(claim, earliest), latest), ViewTimeVerdict.CLAMPED
        if time < arrival - self.max_rewind:
            time, verdict = arrival - self.max_rewind, ViewTimeVerdict.CAPPED
        return time, verdict

    def may_fire(self, view_time: float, death_time: float | None) -> bool:
        """Dead players do not shoot, except within the trade window after they died."""
        return death_time is None or view_time <= death_time + self.trade_window
