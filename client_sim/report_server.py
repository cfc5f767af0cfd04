"""The server's tick durations as the bots' report sees them: the node's ``/metrics``
histogram, read once a second during the run.

``/health`` gives a p50 and a p99 over the last minute of ticks; a histogram read every
second gives the run's whole distribution (the delta between the first and the last read)
and a time series (the delta between two reads). Quantiles from buckets are interpolated
within a bucket, as Prometheus' ``histogram_quantile`` does: good to the bucket's width.
The parsing is sans-I/O; :class:`ServerWatch` is the thin poller.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import aiohttp

from client_sim.websocket import TlsTrust

__all__ = ["Histogram", "ServerWatch", "http_url", "parse_tick_histogram", "server_figures"]

METRIC = "arena_tick_duration_seconds"
_BUCKET = re.compile(rf'^{METRIC}_bucket{{le="([^"]+)"}}\s+(\S+)$', re.MULTILINE)


@dataclass(frozen=True, slots=True)
class Histogram:
    """Cumulative bucket counts of tick durations: ``counts[i]`` ticks took <= ``bounds[i]``
    seconds (the last bound is +inf)."""

    bounds: tuple[float, ...]
    counts: tuple[int, ...]

    @property
    def total(self) -> int:
        return self.counts[-1] if self.counts else 0

    def minus(self, earlier: Histogram) -> Histogram:
        """The ticks between two reads of the same node (a restarted counter: all of them)."""
        if earlier.bounds != self.bounds or earlier.total > self.total:
            return self
        steps = zip(self.counts, earlier.counts, strict=True)
        return Histogram(self.bounds, tuple(a - b for a, b in steps))

    def plus(self, other: Histogram) -> Histogram:
        if not other.counts:
            return self
        if not self.counts:
            return other
        if other.bounds != self.bounds:
            return self  # (another server version's buckets: not comparable)
        return Histogram(
            self.bounds, tuple(a + b for a, b in zip(self.counts, other.counts, strict=True))
        )

    def quantile_ms(self, q: float) -> float | None:
        """The ``q``-th percentile, interpolated inside its bucket (None: no ticks)."""
        if self.total == 0:
            return None
        rank = q / 100.0 * self.total
        low, below = 0.0, 0
        for bound, count in zip(self.bounds, self.counts, strict=True):
            if count >= rank:
                if bound == float("inf"):
                    return round(low * 1000.0, 3)  # beyond the last bound: its lower edge
                share = (rank - below) / (count - below) if count > below else 1.0
                return round((low + (bound - low) * share) * 1000.0, 3)
            low, below = bound, count
        return round(low * 1000.0, 3)


def parse_tick_histogram(text: str) -> Histogram | None:
    """The tick-duration histogram in a Prometheus text exposition (None: not there)."""
    pairs = sorted((float(le), int(float(count))) for le, count in _BUCKET.findall(text))
    if not pairs:
        return None
    return Histogram(tuple(p[0] for p in pairs), tuple(p[1] for p in pairs))


def http_url(ws_url: str, path: str) -> str:
    """The node's HTTP URL for ``path``, from its WebSocket URL (ws -> http, wss -> https)."""
    parts = urlsplit(ws_url)
    scheme = {"ws": "http", "wss": "https"}.get(parts.scheme, parts.scheme or "http")
    return urlunsplit((scheme, parts.netloc, path, "", ""))


@dataclass(frozen=True, slots=True)
class _Read:
    at: float  # wall clock
    node: str  # which node answered
    histogram: Histogram


@dataclass(slots=True)
class ServerWatch:
    """Reads the tick histogram of the node whose admin URL ``where()`` names (the one the
    bots play on; "": none known, nothing read) once a second until cancelled."""

    where: Callable[[], str]
    tls: TlsTrust
    interval_s: float = 1.0
    reads: list[_Read] = field(default_factory=list)

    async def run(self) -> None:
        async with aiohttp.ClientSession() as session:
            while True:
                url = self.where()
                if not url:
                    await asyncio.sleep(self.interval_s)
                    continue
                try:
                    async with session.get(
                        http_url(url, "/metrics"),
                        timeout=aiohttp.ClientTimeout(total=self.interval_s),
                        ssl=self.tls.context(),
                    ) as r:
                        text = await r.text() if r.status == 200 else ""
                except (aiohttp.ClientError, TimeoutError, ValueError):
                    text = ""  # a dead or busy node: a gap in the series, not an error
                self.note(url, text, time.time())
                await asyncio.sleep(self.interval_s)

    def note(self, node: str, metrics: str, at: float) -> None:
        """One read of ``node``'s /metrics text at wall time ``at`` (nothing: a gap)."""
        histogram = parse_tick_histogram(metrics)
        if histogram is not None:
            self.reads.append(_Read(at, node, histogram))


def server_figures(watch: ServerWatch | None, origin: float) -> dict[str, Any]:
    """The run's tick-duration histogram (every node the bots played on, summed) and its
    per-second series, ``t`` in seconds since ``origin`` (wall clock)."""
    reads = watch.reads if watch is not None else []
    whole = Histogram((), ())
    first: dict[str, _Read] = {}
    last: dict[str, _Read] = {}
    out: dict[str, list[Any]] = {"t": [], "node": [], "ticks": [], "p50_ms": [], "p99_ms": []}
    previous: _Read | None = None
    for read in reads:
        first.setdefault(read.node, read)
        last[read.node] = read
        if previous is not None and previous.node == read.node:
            step = read.histogram.minus(previous.histogram)
            out["t"].append(round(read.at - origin, 3))
            out["node"].append(read.node)
            out["ticks"].append(step.total)
            out["p50_ms"].append(step.quantile_ms(50))
            out["p99_ms"].append(step.quantile_ms(99))
        previous = read
    for node, read in last.items():
        whole = whole.plus(read.histogram.minus(first[node].histogram))
    return {
        "histogram": (
            {"le_ms": [b * 1000.0 for b in whole.bounds[:-1]], "counts": list(whole.counts)}
            if whole.total
            else None
        ),
        **{f"p{q}_ms": whole.quantile_ms(q) for q in (50, 90, 95, 99)},
        "series": out,
    }
