"""Seating a swarm through the directory: measure, ask, go where it says.

Each bot has a home location (``--population``). It times every region's probe through its
own modelled link to that region (the latency matrix, :mod:`client_sim.geography`), asks
the directory for a seat with those *measured* RTTs, and then plays on the node it was
given, joining with the seat reservation. The bot's link to the game is then the link to
that region. What the routing cost each player is in the report: the RTT of the region it
got, the best it measured, and the difference (regret).

Several directories sharing one registry (``arena-directory --registry etcd://``) are given
comma-separated (``--directory URL,URL``): :class:`Directories` asks one, and a seat request
it cannot answer goes once to the next (``docs/routing.md``).
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass
from typing import Any

import aiohttp
import numpy as np

from client_sim.geography import (
    BotHome,
    DirectoryError,
    NoCapacity,
    draw_geography,
    fetch_probes,
    measure_rtts,
    params_for_region,
    region_location,
    request_seat,
)
from client_sim.latency import BotParams, LinkProfile
from shared.directory import Seat, directory_urls

__all__ = ["Directories", "Route", "route_bots", "routing_figures"]

_CONCURRENT_SEATINGS = 32
# The errors that say "this directory could not answer" rather than "no seat": worth the
# same request at another directory (503 unavailable: it cannot reach the shared registry).
_FAILOVER_CODES = frozenset({"unreachable", "bad_answer", "unavailable"})


class Directories:
    """The directories to ask, in order of preference (``URL[,URL...]``).

    A seat request the current directory cannot answer (unreachable, a garbled answer, 503
    ``unavailable``) is sent once more, to the next directory, which is asked first from
    then on. ``requests``, ``retries`` and ``failures`` (requests that failed on the retry
    too) count what happened, for the report and the tests.
    """

    def __init__(self, spec: str) -> None:
        self.urls = directory_urls(spec)
        self._current = 0
        self.requests = 0
        self.retries = 0
        self.failures = 0

    @property
    def current(self) -> str:
        return self.urls[self._current]

    def _failed(self, url: str) -> None:
        """Move past ``url``, unless a concurrent request already did."""
        if self.urls[self._current] == url:
            self._current = (self._current + 1) % len(self.urls)

    async def probes(self, session: aiohttp.ClientSession) -> dict[str, str]:
        """Region -> probe URL from the first directory that answers."""
        for attempt in range(len(self.urls)):
            url = self.current
            try:
                return await fetch_probes(url, session=session)
            except DirectoryError as error:
                if error.code not in _FAILOVER_CODES or attempt == len(self.urls) - 1:
                    raise
                self._failed(url)
        raise AssertionError("the loop returns or raises")

    async def seat(
        self, player: str, rtt_ms: dict[str, float], session: aiohttp.ClientSession
    ) -> Seat:
        """``POST /seat`` at the current directory, and once more at the next if it failed."""
        self.requests += 1
        tries = 2 if len(self.urls) > 1 else 1
        for attempt in range(tries):
            url = self.current
            try:
                return await request_seat(url, player, rtt_ms, session=session)
            except DirectoryError as error:
                if error.code not in _FAILOVER_CODES or attempt == tries - 1:
                    if error.code in _FAILOVER_CODES:
                        self.failures += 1
                    raise
                self.retries += 1
                self._failed(url)
        raise AssertionError("the loop returns or raises")


@dataclass(frozen=True, slots=True)
class Route:
    """Where the directory sent one bot, and what the bot measured on the way."""

    url: str  # the node's WebSocket URL
    reservation: str
    region: str
    node_id: str
    rtt_ms: float  # measured to the region it got
    best_region: str
    best_rtt_ms: float  # measured to the best region it saw
    overflow: bool


async def _seat_one(
    session: aiohttp.ClientSession,
    directory: Directories,
    probes: dict[str, str],
    home: BotHome,
    name: str,
    regions: dict[str, str] | None,
) -> Route:
    def modelled(region: str) -> float:
        return home.rtt_to(region_location(region, regions))

    rtt_ms = await measure_rtts(probes, modelled, session=session)
    if not rtt_ms:
        raise DirectoryError("no_probe", "no region's probe answered")
    for attempt in range(20):
        try:
            seat = await directory.seat(name, rtt_ms, session)
            break
        except NoCapacity:
            if attempt == 19:
                raise
            await asyncio.sleep(0.25)
    best = min(rtt_ms, key=lambda region: rtt_ms[region])
    return Route(
        seat.endpoint,
        seat.reservation,
        seat.region,
        seat.node_id,
        rtt_ms[seat.region],
        best,
        rtt_ms[best],
        seat.overflow,
    )


async def route_bots(
    *,
    directory: str | Directories,
    population: str,
    count: int,
    seed: int,
    profile: LinkProfile,
    name_prefix: str = "bot",
    regions: dict[str, str] | None = None,
) -> tuple[list[BotParams], list[Route]]:
    """Seat ``count`` bots through the directory (``URL[,URL...]``: :class:`Directories`);
    their links follow the regions they got."""
    directories = directory if isinstance(directory, Directories) else Directories(directory)
    homes = draw_geography(population, count, seed)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        probes = await directories.probes(session)
        if not probes:
            where = directories.current
            raise DirectoryError("no_region", f"the directory at {where} knows no live region")
        gate = asyncio.Semaphore(_CONCURRENT_SEATINGS)

        async def seat(home: BotHome) -> Route:
            async with gate:
                return await _seat_one(
                    session, directories, probes, home, f"{name_prefix}-{home.index}", regions
                )

        routes = await asyncio.gather(*(seat(home) for home in homes))
    retried = (
        f" ({directories.retries} seat request(s) retried on another directory)"
        if directories.retries
        else ""
    )
    print(
        f"arena-bots: {count} bots seated in {len({r.region for r in routes})} region(s)" + retried,
        file=sys.stderr,
        flush=True,
    )
    params = [
        params_for_region(home, region_location(route.region, regions), seed=seed, profile=profile)
        for home, route in zip(homes, routes, strict=True)
    ]
    return params, list(routes)


def routing_figures(routes: list[Route]) -> dict[str, Any]:
    """The report's ``routing`` section (RTTs as the bots measured them)."""
    if not routes:
        return {}
    by_region: dict[str, int] = {}
    by_node: dict[str, int] = {}
    for route in routes:
        by_region[route.region] = by_region.get(route.region, 0) + 1
        by_node[route.node_id] = by_node.get(route.node_id, 0) + 1
    got = np.array([r.rtt_ms for r in routes])
    best = np.array([r.best_rtt_ms for r in routes])
    return {
        "players_by_region": dict(sorted(by_region.items())),
        "players_by_node": dict(sorted(by_node.items())),
        "mean_rtt_ms": round(float(got.mean()), 3),
        "mean_best_rtt_ms": round(float(best.mean()), 3),
        "regret_ms": round(float((got - best).mean()), 3),
        "overflowed": sum(r.overflow for r in routes),
    }
