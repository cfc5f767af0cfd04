"""The server's own measurement of each client's round trip: probes (sans-I/O).

Every :attr:`RttProbes.interval` each seat is sent a ``probe`` with a fresh id, in the
same write as its next snapshot (one send, not two), and its client echoes it at once.
The time from the tick the probe went out with to the echo's arrival is one sample: it
holds the client's real latency and nothing the client can claim, so a client can only
look slower by really answering later. What a client says in its inputs (``ack_tick``) is
never used for it.

The estimate is robust rather than the minimum: a low percentile of the recent samples is
the round trip, and a high percentile less that one is the spread (jitter, retransmitted
packets). A sample that spans ticks skipped after a stall is dropped: the server was not
reading its sockets meanwhile, so the echo's arrival time says nothing about the link.
"""

from __future__ import annotations

import math

import numpy as np

from server.sim.lagcomp import LinkEstimate

__all__ = ["RttProbes"]

#: Percentiles of the recent samples: the round trip, and the top of its spread.
LOW, HIGH = 10.0, 95.0


def _percentile(ordered: list[float], q: float) -> float:
    """``np.percentile``'s default (linear) on an already sorted list: a fraction of its
    cost for the few dozen samples of one seat, once per echo."""
    at = (len(ordered) - 1) * q / 100.0
    below = int(at)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (ordered[above] - ordered[below]) * (at - below)


class RttProbes:
    """Every seat's probes in flight and recent samples, as arrays indexed by slot."""

    def __init__(
        self, slots: int, interval: float = 0.25, window: int = 32, in_flight: int = 8
    ) -> None:
        self.interval = interval
        self._due = np.zeros(slots)  # when each seat's next probe goes out
        self._next_id = np.zeros(slots, dtype=np.int64)
        self._flight_id = np.full((slots, in_flight), -1, dtype=np.int64)
        self._flight_sent = np.zeros((slots, in_flight))
        self._samples = np.zeros((slots, window))
        self._held = np.zeros(slots, dtype=np.int64)
        self._next_sample = np.zeros(slots, dtype=np.int64)
        self._active = np.zeros(slots, dtype=bool)
        self._slots = np.arange(slots)
        #: How many seats it probes (slots 0 .. capacity - 1).
        self.capacity = slots
        #: Per slot (rtt, spread), NaN while unknown: recomputed at each sample, so that
        #: reading it (every shot, every replicated tick) costs nothing.
        self._estimate = np.full((slots, 2), np.nan)
        #: The slots whose estimate was set since :meth:`take_changed` was last called.
        self._changed: set[int] = set()
        self._last_skip_at = -np.inf

    def reset(self, slot: int, now: float) -> None:
        """A new player in ``slot`` (or one this node has just taken over): nothing
        measured yet, the first probe due at once."""
        self._active[slot] = True
        self._due[slot] = now
        self._flight_id[slot] = -1
        self._held[slot] = 0
        self._next_sample[slot] = 0
        self._estimate[slot] = np.nan
        self._changed.add(slot)

    def forget(self, slot: int) -> None:
        """The seat is empty: probe it no more."""
        self._active[slot] = False
        self._held[slot] = 0
        self._estimate[slot] = np.nan
        self._changed.add(slot)

    def due(self, now: float, among: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The seats to probe with the tick of time ``now``, and each one's probe id; with
        ``among`` (slots), only those (the seats a snapshot goes to this tick: a probe
        rides with its seat's snapshot)."""
        due = self._active & (self._due <= now)
        if among is not None:
            due &= np.isin(self._slots, among)
        slots = np.flatnonzero(due)
        if not len(slots):
            return slots, slots
        ids = self._next_id[slots].copy()
        self._next_id[slots] += 1
        ring = ids % self._flight_id.shape[1]
        self._flight_id[slots, ring] = ids
        self._flight_sent[slots, ring] = now
        self._due[slots] = now + self.interval
        return slots, ids

    def echo(self, slot: int, probe_id: int, at: float) -> bool:
        """The echo of probe ``probe_id`` from ``slot`` arrived at ``at``; True when it
        made a sample (an unknown, repeated or stall-spanning echo does not)."""
        if not self._active[slot] or probe_id < 0:
            return False
        ring = probe_id % self._flight_id.shape[1]
        if self._flight_id[slot, ring] != probe_id:
            return False
        self._flight_id[slot, ring] = -1
        sent = float(self._flight_sent[slot, ring])
        if sent <= self._last_skip_at <= at or at < sent:
            return False
        window = self._samples.shape[1]
        self._samples[slot, self._next_sample[slot]] = at - sent
        self._next_sample[slot] = (self._next_sample[slot] + 1) % window
        held = self._held[slot] = min(self._held[slot] + 1, window)
        recent = sorted(self._samples[slot, :held].tolist())
        low, high = _percentile(recent, LOW), _percentile(recent, HIGH)
        self._estimate[slot] = (low, high - low)
        self._changed.add(slot)
        return True

    def note_skip(self, at: float) -> None:
        """Ticks were skipped at ``at`` (server time): echoes of probes sent before it
        are not samples."""
        self._last_skip_at = at

    def assume(self, slot: int, estimate: LinkEstimate | None) -> None:
        """Take the primary's estimate for ``slot`` (a standby's seats), used until this
        node's own probes have made a sample: a promoted standby judges its players' first
        shots by the link its predecessor measured, not as links of unknown latency."""
        if not self._held[slot]:
            self._estimate[slot] = np.nan if estimate is None else (estimate.rtt, estimate.spread)
            self._changed.add(slot)

    def take_changed(self) -> list[int]:
        """The slots whose estimate was set since the last call, in order: a match log
        keeps up with the estimates by looking at these instead of at every seat each tick
        (most ticks a few seats' echoes came in)."""
        changed, self._changed = self._changed, set()
        return sorted(changed)

    def estimate(self, slot: int) -> LinkEstimate | None:
        """The seat's round trip and spread (before its first sample: the one assumed, if
        any); None when nothing is known."""
        rtt, spread = self._estimate[slot].tolist()
        return None if math.isnan(rtt) else LinkEstimate(rtt, spread)

    def estimates(self, slots: np.ndarray) -> np.ndarray:
        """``(len(slots), 2)``: each seat's (rtt, spread), NaN where nothing is known."""
        return self._estimate[slots]
