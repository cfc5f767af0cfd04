"""The client's estimate of server time, from ping/pong round trips (sans-I/O).

Each pong gives ``(send_local, server_time, recv_local)``: the ping's send time and the
pong's receive time on the client's clock, and the server's clock when it answered. If the
two legs took equally long, the server answered at the midpoint, so one offset sample is
``server_time + rtt/2 - recv_local`` and server time is ``local time + offset``.

Queueing makes legs unequal, and the error of a sample is at most half its excess RTT over
the path's floor. So (the NTP/Cristian idea) the estimate trusts the fastest round trips:
of the last ``window`` samples it keeps those whose RTT is within
``max(10 ms, 0.5 * min_rtt)`` of the window's minimum, and averages the offsets of the
``best`` fastest of those.

What the caller renders by must not jump: the first ``snap_samples`` samples set the
offset outright (the estimate starts out of nowhere), after that the offset in use *slews*
towards the estimate at most ``max_slew`` seconds per second. With ``max_slew < 1`` the
returned server time strictly increases with local time: render time never runs backwards
after sync, it runs at most 5 % (the default) fast or slow while it catches up.
"""

from __future__ import annotations

import math
from collections import deque

import numpy as np

__all__ = ["ClockSync", "server_times"]


class ClockSync:
    """Server-time estimator for one client; feed it pongs, ask it for server time."""

    __slots__ = (
        "_anchor_offset",
        "_anchor_time",
        "_best",
        "_count",
        "_horizon",
        "_margin_ratio",
        "_max_slew",
        "_min_margin",
        "_rtts",
        "_snap_samples",
        "_srtt",
        "_target",
        "_window",
    )

    def __init__(
        self,
        *,
        window: int = 16,
        best: int = 4,
        snap_samples: int = 3,
        max_slew: float = 0.05,
        min_margin: float = 0.010,
        margin_ratio: float = 0.5,
    ) -> None:
        if window < 1:
            raise ValueError(f"window must be >= 1, got {window}")
        if not 1 <= best <= window:
            raise ValueError(f"best must be in [1, window={window}], got {best}")
        if snap_samples < 1:
            raise ValueError(f"snap_samples must be >= 1, got {snap_samples}")
        if not 0.0 < max_slew < 1.0:
            raise ValueError(f"max_slew must be in (0, 1) so time never runs back, got {max_slew}")
        if not (math.isfinite(min_margin) and min_margin >= 0):
            raise ValueError(f"min_margin must be a finite number >= 0, got {min_margin}")
        if not (math.isfinite(margin_ratio) and margin_ratio >= 0):
            raise ValueError(f"margin_ratio must be a finite number >= 0, got {margin_ratio}")
        self._best = best
        self._snap_samples = snap_samples
        self._max_slew = float(max_slew)
        self._min_margin = float(min_margin)
        self._margin_ratio = float(margin_ratio)
        self._window: deque[tuple[float, float]] = deque(maxlen=window)  # (rtt, offset)
        self._rtts: list[float] = []
        self._srtt: float | None = None
        self._count = 0
        self._target = 0.0
        self._anchor_offset = 0.0
        self._anchor_time = -math.inf
        self._horizon = -math.inf

    # -- input

    def observe(self, send_local: float, server_time: float, recv_local: float) -> None:
        """Take one pong; ``send_local``/``recv_local`` on the client's clock, in seconds."""
        if not all(math.isfinite(x) for x in (send_local, server_time, recv_local)):
            raise ValueError("clock sync times must be finite")
        rtt = recv_local - send_local
        if rtt < 0:
            raise ValueError(f"pong received before its ping was sent (rtt {rtt!r})")
        self._rtts.append(rtt)
        # RFC 6298 smoothing (alpha = 1/8), over every sample: the RTT the bot lives with.
        self._srtt = rtt if self._srtt is None else self._srtt + (rtt - self._srtt) / 8.0
        self._window.append((rtt, server_time + rtt / 2.0 - recv_local))
        self._count += 1
        target = self._estimate()
        if self._count <= self._snap_samples:
            self._anchor_offset = target
            self._anchor_time = recv_local
        else:
            # Re-anchor where the caller has already seen time, so what it saw stays true.
            at = max(recv_local, self._anchor_time, self._horizon)
            self._anchor_offset = self._applied(at)
            self._anchor_time = at
        self._target = target

    def _estimate(self) -> float:
        min_rtt = min(rtt for rtt, _ in self._window)
        limit = min_rtt + max(self._min_margin, self._margin_ratio * min_rtt)
        # Newest first, and a stable sort: equal RTTs prefer recent samples, never an offset.
        fast = [s for s in reversed(self._window) if s[0] <= limit]
        kept = sorted(fast, key=lambda s: s[0])[: self._best]
        return math.fsum(offset for _, offset in kept) / len(kept)

    def _applied(self, now_local: float) -> float:
        gap = self._target - self._anchor_offset
        room = self._max_slew * max(0.0, now_local - self._anchor_time)
        if abs(gap) <= room:
            return self._target
        return self._anchor_offset + math.copysign(room, gap)

    # -- output

    def slew(self) -> tuple[float, float, float, float] | None:
        """What :meth:`server_time` follows, for :func:`server_times`: (the target offset,
        the offset anchored, the local time it was anchored at, the slew rate); None
        before a pong."""
        if not self._count:
            return None
        return self._target, self._anchor_offset, self._anchor_time, self._max_slew

    def offset(self, now_local: float) -> float:
        """The offset in use at ``now_local`` (server time minus local time)."""
        if not self._count:
            raise RuntimeError("clock not synced: no pong observed yet")
        return self._applied(now_local)

    def server_time(self, now_local: float) -> float:
        """Estimated server time at local time ``now_local`` (slewed, never runs back)."""
        offset = self.offset(now_local)
        if now_local > self._horizon:
            self._horizon = now_local
        return now_local + offset

    @property
    def target_offset(self) -> float | None:
        """The current best estimate of the offset, before slewing; ``None`` before a pong."""
        return self._target if self._count else None

    @property
    def synced(self) -> bool:
        """Whether the snap phase is over: enough samples, and time no longer jumps."""
        return self._count >= self._snap_samples

    @property
    def samples(self) -> int:
        return self._count

    @property
    def rtt_estimate(self) -> float | None:
        """Smoothed RTT (RFC 6298 SRTT) over all samples; ``None`` before a pong."""
        return self._srtt

    @property
    def min_rtt(self) -> float | None:
        """Lowest RTT in the window: the path's floor as far as recent pongs tell."""
        return min(rtt for rtt, _ in self._window) if self._window else None

    @property
    def rtt_samples(self) -> tuple[float, ...]:
        """Every RTT observed, in order, for the report's measured percentiles."""
        return tuple(self._rtts)


def server_times(local: np.ndarray, slews: np.ndarray) -> np.ndarray:
    """:meth:`ClockSync.server_time` of many clocks at once: ``local`` their local times,
    ``slews`` a row of each one's :meth:`ClockSync.slew`. The same float operations in
    the same order, so the same times bit for bit.

    The clocks' horizons are not advanced. A caller needs none that reads server time only
    at its present local time and observes each pong at a later one (a swarm: one loop
    clock), since a clock re-anchors at no earlier time than the pong's arrival."""
    target, anchor, since, rate = slews.T
    gap = target - anchor
    room = rate * np.maximum(0.0, local - since)
    return local + np.where(np.abs(gap) <= room, target, anchor + np.copysign(room, gap))
