"""The bots' latency geography: where each bot lives, how far each region is, and asking the
directory for a seat with RTTs the bot *measured*.

Every bot gets a home location (``--population na:0.4,eu:0.3,...``, drawn by
:func:`shared.geo.draw_homes`). Its round-trip time to a node in a region is

    RTT = matrix(home, region's location) * factor  [+ last_mile]

* ``matrix`` is ``shared/data/latency_matrix.json``: typical medians between hubs, whose
  diagonal (25-40 ms) is a consumer's RTT to a data centre on its own continent. The
  matrix therefore already contains a typical access network.
* ``factor`` is the bot's own: lognormal with median 1 and ``sigma`` (default
  :data:`DEFAULT_SPREAD` = 0.15, so 90 % of bots lie within x0.78-x1.28 of the median),
  drawn once per bot from its seed. It stands for the quality of the bot's access network
  and route (fibre or a busy Wi-Fi, a good or a roundabout ISP), which stretches or shrinks
  every path the bot takes alike. Multiplying rather than adding keeps a near region near
  and a far one far: one factor for all regions never reorders them, so a bot's best region
  is its home's nearest, and the routing regret in the report measures routing, not noise.
* ``last_mile`` (optional, default none) adds a per-bot draw from a foundation ``--latency``
  distribution for a known extra hop (mobile, satellite, a VPN). It is not added by
  default: the foundation's default spec (a 40/140 ms two-continent mix) is a whole
  path, and adding it to the matrix would count the distance twice.

Jitter, loss and the clock offset come from the foundation's :class:`LinkProfile`, drawn from
the same per-bot streams as :func:`~client_sim.latency.draw_bot`, so bot ``i`` has the same
clock and the same packet-by-packet jitter whatever region it plays in. Everything is
seeded: the same (seed, index, specs) give bit-identical bots.

On loopback every region is local, so the bot's link layer applies the modelled RTT to
whatever node it talks to (:func:`params_for_region`). The RTTs the bot reports to the
directory are still *measured* (:func:`measure_rtts` times real HTTP probes and sleeps the
modelled delay inside the timing), never read from the model: the directory must be
exercised exactly as a real client would use it.

Regions are named after their location (``na``, ``eu``, ``asia``) or ``name@location``
(``us-east@na``): :func:`parse_regions`.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import aiohttp
import numpy as np

from client_sim.latency import BotParams, Constant, Distribution, LinkProfile, draw_bot
from shared.directory import ErrorAnswer, MessageError, RegionListing, Seat, SeatRequest
from shared.geo import (
    GeoError,
    LatencyMatrix,
    default_matrix,
    draw_homes,
    parse_population,
    parse_regions,
    split_region,
)

__all__ = [
    "DEFAULT_SPREAD",
    "BotHome",
    "DirectoryError",
    "GeoError",
    "NoCapacity",
    "draw_geography",
    "fetch_probes",
    "measure_rtts",
    "params_for_region",
    "parse_regions",
    "region_location",
    "request_seat",
]

#: Sigma of the per-bot lognormal factor on the matrix RTT (median 1).
DEFAULT_SPREAD = 0.15
#: The per-bot stream of the factor and last mile; draw_bot uses 0 (RTT), 1 (clock), 2 (link).
_GEO_STREAM = 3


# -- regions and locations ---------------------------------------------------------------


def region_location(
    region: str, regions: Mapping[str, str] | None = None, matrix: LatencyMatrix | None = None
) -> str:
    """The location of ``region``: from ``regions`` (:func:`parse_regions`) when it is
    listed there, else the region's own name (or ``name@location``) must say it."""
    if regions is not None and region in regions:
        return regions[region]
    return split_region(region, matrix or default_matrix())[1]


def _region_rtt(home: str, region_location: str, matrix: LatencyMatrix | None = None) -> float:
    """Typical RTT in **seconds** from a player at ``home`` to a node at ``region_location``
    (the matrix alone, no per-bot variation)."""
    return (matrix or default_matrix()).rtt_ms(home, region_location) / 1000.0


# -- the bots' homes ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BotHome:
    """Where bot ``index`` lives and what its access network does to every path.

    ``factor``: per-bot multiplier on the matrix RTT; ``last_mile``: seconds added.
    """

    index: int
    home: str
    factor: float
    last_mile: float = 0.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.factor) and self.factor > 0):
            raise ValueError(f"factor must be a finite number > 0, got {self.factor!r}")
        if not (math.isfinite(self.last_mile) and self.last_mile >= 0):
            raise ValueError(f"last_mile must be finite and >= 0, got {self.last_mile!r}")

    def rtt_to(self, location: str, matrix: LatencyMatrix | None = None) -> float:
        """This bot's modelled RTT (seconds) to a node at ``location``."""
        return _region_rtt(self.home, location, matrix) * self.factor + self.last_mile


def _stream(seed: int, index: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(index, _GEO_STREAM)))


def draw_geography(
    population: str | Mapping[str, float],
    n: int,
    seed: int,
    *,
    spread: float = DEFAULT_SPREAD,
    last_mile: Distribution | None = None,
) -> tuple[BotHome, ...]:
    """Bots ``0 .. n-1``: homes from ``population`` (a ``--population`` spec or weights),
    factors and last miles from each bot's own stream. Deterministic in (seed, index)."""
    if not (math.isfinite(spread) and 0 <= spread <= 2):
        raise GeoError(f"spread must be between 0 and 2 (sigma of log RTT), got {spread!r}")
    if last_mile is not None and not (last_mile.positive or last_mile == Constant(0.0)):
        raise GeoError(f"last mile can draw values <= 0: {last_mile.describe()}")
    weights = parse_population(population) if isinstance(population, str) else population
    homes = draw_homes(weights, n, seed)
    bots = []
    for index, home in enumerate(homes):
        rng = _stream(seed, index)
        factor = float(np.exp(spread * rng.standard_normal()))
        extra = float(last_mile.sample(rng, 1)[0]) if last_mile is not None else 0.0
        bots.append(BotHome(index, home, factor, max(0.0, extra)))
    return tuple(bots)


def params_for_region(
    bot: BotHome,
    location: str,
    *,
    seed: int,
    profile: LinkProfile | None = None,
    matrix: LatencyMatrix | None = None,
) -> BotParams:
    """The bot's link when it plays on a node at ``location``.

    The base RTT is :meth:`BotHome.rtt_to`; jitter, loss, clock offset and the link seed are
    exactly what :func:`~client_sim.latency.draw_bot` gives bot ``bot.index`` of ``seed``.
    """
    rtt = Constant(bot.rtt_to(location, matrix))
    return draw_bot(bot.index, seed=seed, rtt=rtt, profile=profile)


# -- measuring, and asking for a seat ----------------------------------------------------


def _http_url(url: str) -> str:
    scheme, sep, rest = url.partition("://")
    if scheme in ("ws", "wss"):
        return f"{'https' if scheme == 'wss' else 'http'}{sep}{rest}"
    return url


async def _time_probe(
    session: aiohttp.ClientSession, url: str, modelled: float, samples: int, limit: float
) -> float | None:
    loop = asyncio.get_running_loop()
    best: float | None = None
    for _ in range(samples):
        began = loop.time()
        try:
            async with asyncio.timeout(limit):
                async with session.get(url, allow_redirects=False) as response:
                    await response.read()
        except (aiohttp.ClientError, OSError, TimeoutError):
            continue
        # On loopback the wire takes microseconds: the bot's modelled path is slept here,
        # inside the timing, as its link layer would delay the request and the answer.
        await asyncio.sleep(modelled)
        took = loop.time() - began
        best = took if best is None else min(best, took)
    return best


async def measure_rtts(
    probes: Mapping[str, str],
    rtt_for_region: Callable[[str], float],
    samples: int = 3,
    *,
    session: aiohttp.ClientSession | None = None,
    probe_timeout: float = 2.0,
) -> dict[str, float]:
    """Round-trip times in **milliseconds** (ready for ``POST /seat``) to each region's probe.

    ``probes``: region -> probe URL (:func:`fetch_probes`; ``ws://`` is timed as ``http://``).
    ``rtt_for_region(region)``: the bot's modelled RTT to that region in seconds (e.g.
    ``lambda r: home.rtt_to(region_location(r, regions))``); it is asked up front, so a
    region the bot cannot place fails before any request is sent. Each sample is a real
    ``GET`` plus the modelled delay; the result is the minimum of ``samples`` (the first
    request also pays for the TCP handshake; the minimum is the path, not the queue).
    Any HTTP answer counts as a round trip. Regions are timed concurrently; one whose probe
    never answers within ``probe_timeout`` is left out (the directory then skips it).
    """
    if samples < 1:
        raise ValueError(f"samples must be >= 1, got {samples}")
    modelled = {region: float(rtt_for_region(region)) for region in probes}
    for region, value in modelled.items():
        if not (math.isfinite(value) and value >= 0):
            raise ValueError(f"modelled RTT to {region!r} must be finite and >= 0, got {value}")
    own = session is None
    client = session or aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
    try:
        timed = await asyncio.gather(
            *(
                _time_probe(client, _http_url(url), modelled[region], samples, probe_timeout)
                for region, url in probes.items()
            )
        )
    finally:
        if own:
            await client.close()
    return {
        region: took * 1000.0
        for region, took in zip(probes, timed, strict=True)
        if took is not None
    }


class DirectoryError(Exception):
    """The directory could not be asked, or refused the request. ``code``: the directory's
    error code (``invalid_field``, ...), ``unreachable`` or ``bad_answer``."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class NoCapacity(DirectoryError):
    """503 from ``POST /seat``: ``no_capacity`` (every region within the slack of the best is
    full; ``best_region``/``best_rtt_ms`` say which was best) or ``no_region`` (none of the
    measured regions has a live primary: fetch the probes and measure again). Retry after
    ``retry_after`` seconds."""

    def __init__(
        self,
        code: str,
        message: str,
        best_region: str | None = None,
        best_rtt_ms: float | None = None,
        retry_after: float = 1.0,
    ) -> None:
        super().__init__(code, message)
        self.best_region = best_region
        self.best_rtt_ms = best_rtt_ms
        self.retry_after = retry_after


async def _get_json(
    session: aiohttp.ClientSession | None,
    method: str,
    url: str,
    payload: object,
    limit: float,
) -> tuple[int, str | None, object]:
    """``(status, Retry-After header, decoded JSON body or None)``."""
    own = session is None
    client = session or aiohttp.ClientSession()
    try:
        async with asyncio.timeout(limit):
            async with client.request(method, url, json=payload) as response:
                try:
                    body: object = await response.json(content_type=None)
                except ValueError:
                    body = None
                return response.status, response.headers.get("Retry-After"), body
    except (aiohttp.ClientError, OSError, TimeoutError) as error:
        raise DirectoryError(
            "unreachable", f"cannot reach the directory at {url}: {type(error).__name__}"
        ) from None
    finally:
        if own:
            await client.close()


async def fetch_probes(
    directory_url: str,
    *,
    session: aiohttp.ClientSession | None = None,
    request_timeout: float = 5.0,
) -> dict[str, str]:
    """Region -> the probe URL to time, from ``GET /regions`` (regions with a live node)."""
    url = directory_url.rstrip("/") + "/regions"
    status, _, body = await _get_json(session, "GET", url, None, request_timeout)
    if status != 200:
        raise DirectoryError("bad_answer", f"GET {url} answered {status} without a region list")
    try:
        listing = RegionListing.parse(body)
    except MessageError as error:
        raise DirectoryError("bad_answer", f"GET {url}: {error}") from None
    return listing.probes()


async def request_seat(
    directory_url: str,
    player: str,
    rtt_ms: Mapping[str, float],
    *,
    session: aiohttp.ClientSession | None = None,
    request_timeout: float = 5.0,
) -> Seat:
    """``POST /seat`` with the RTTs the player measured (ms, :func:`measure_rtts`).

    Raises :class:`NoCapacity` on 503 and :class:`DirectoryError` on anything else that is
    not a seat (the directory's one-line message included).
    """
    url = directory_url.rstrip("/") + "/seat"
    try:
        payload = SeatRequest(player, rtt_ms).to_json()
    except MessageError as error:  # the directory would refuse it the same way
        raise DirectoryError(error.code, str(error)) from None
    status, retry_after, body = await _get_json(session, "POST", url, payload, request_timeout)
    if status == 200:
        try:
            return Seat.parse(body)
        except MessageError as error:
            raise DirectoryError("bad_answer", f"POST {url}: {error}") from None
    try:
        refusal = ErrorAnswer.parse(body)
    except MessageError:
        refusal = ErrorAnswer("bad_answer", f"POST {url} answered {status}")
    if status == 503:
        try:
            retry = float(retry_after or 1.0)
        except ValueError:
            retry = 1.0
        raise NoCapacity(
            refusal.error,
            refusal.message,
            best_region=refusal.best_region,
            best_rtt_ms=refusal.best_rtt_ms,
            retry_after=retry,
        )
    raise DirectoryError(refusal.error, refusal.message)
