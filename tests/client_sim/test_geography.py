"""The bots' latency geography: seeded homes, RTT composition, region names, probes, seats."""

from __future__ import annotations

import contextlib
import math
import socket
import time
from collections.abc import AsyncIterator
from typing import Any

import numpy as np
import pytest
from aiohttp import web

from client_sim.geography import (
    DEFAULT_SPREAD,
    BotHome,
    DirectoryError,
    GeoError,
    NoCapacity,
    draw_geography,
    fetch_probes,
    measure_rtts,
    params_for_region,
    parse_regions,
    region_location,
    request_seat,
)
from client_sim.latency import Constant, LinkProfile, draw_bot, parse_distribution
from server.directory import signed_heartbeat
from server.directory.auth import HeartbeatSequence
from server.directory.net.app import DIRECTORY, create_app
from server.directory.service import DirectoryConfig
from shared.directory import Heartbeat, Seat
from shared.geo import draw_homes, parse_population, rtt_ms

POPULATION = "na:0.4,eu:0.3,asia:0.2,sa:0.05,oce:0.05"
SECRET = b"geography-test-secret-0123456789"


# -- homes -------------------------------------------------------------------------------


def test_homes_are_seeded_and_drawn_as_shared_geo_draws_them() -> None:
    bots = draw_geography(POPULATION, 200, seed=7)
    assert bots == draw_geography(POPULATION, 200, seed=7)
    assert bots != draw_geography(POPULATION, 200, seed=8)
    assert tuple(b.home for b in bots) == draw_homes(parse_population(POPULATION), 200, 7)
    assert [b.index for b in bots] == list(range(200))


def test_a_bot_is_the_same_bot_however_many_are_drawn() -> None:
    assert draw_geography(POPULATION, 50, seed=3)[:10] == draw_geography(POPULATION, 10, seed=3)


def test_the_per_bot_factor_is_lognormal_with_median_one() -> None:
    factors = np.array([b.factor for b in draw_geography(POPULATION, 4000, seed=1)])
    logs = np.log(factors)
    assert abs(np.median(factors) - 1.0) < 0.02
    assert abs(logs.std() - DEFAULT_SPREAD) < 0.01
    assert all(b.factor == 1.0 for b in draw_geography(POPULATION, 20, seed=1, spread=0.0))


def test_bad_spread_and_last_mile_are_one_line_errors() -> None:
    with pytest.raises(GeoError, match="spread"):
        draw_geography(POPULATION, 3, seed=1, spread=-0.1)
    with pytest.raises(GeoError, match="last mile"):
        draw_geography(
            POPULATION, 3, seed=1, last_mile=parse_distribution("uniform(-5ms, 5ms)", signed=True)
        )
    with pytest.raises(GeoError, match="unknown location"):
        draw_geography("mars:1", 3, seed=1)


# -- RTT composition ---------------------------------------------------------------------


def test_a_typical_bots_rtt_is_the_matrix_in_seconds() -> None:
    typical = BotHome(index=0, home="eu", factor=1.0)
    assert typical.rtt_to("na") == rtt_ms("eu", "na") / 1000.0 == 0.09
    assert BotHome(index=1, home="na", factor=1.0).rtt_to("na") == 0.03
    with pytest.raises(GeoError, match="unknown location"):
        BotHome(index=2, home="atlantis", factor=1.0).rtt_to("na")


def test_a_bots_rtt_is_the_matrix_times_its_factor_plus_its_last_mile() -> None:
    bots = draw_geography(POPULATION, 30, seed=5, last_mile=Constant(0.010))
    for bot in bots:
        for location in ("na", "eu", "asia"):
            expected = rtt_ms(bot.home, location) / 1000.0 * bot.factor + 0.010
            assert bot.rtt_to(location) == pytest.approx(expected, rel=1e-12)
    # One factor for every region: the order of regions is the matrix's own.
    bot = BotHome(index=0, home="eu", factor=1.3)
    assert sorted(("na", "eu", "asia", "oce"), key=bot.rtt_to) == ["eu", "na", "asia", "oce"]


def test_a_drawn_last_mile_is_the_bots_own_and_seeded() -> None:
    spec = parse_distribution("lognormal(median=8ms, sigma=0.5)")
    a = draw_geography(POPULATION, 100, seed=9, last_mile=spec)
    assert a == draw_geography(POPULATION, 100, seed=9, last_mile=spec)
    miles = [b.last_mile for b in a]
    assert len(set(miles)) == 100 and 0.004 < float(np.median(miles)) < 0.016


def test_params_for_a_region_keep_the_bots_clock_jitter_and_link_seed() -> None:
    profile = LinkProfile(jitter_ms=3.0, loss=0.01)
    bot = draw_geography(POPULATION, 12, seed=21)[11]
    near = params_for_region(bot, bot.home, seed=21, profile=profile)
    far = params_for_region(bot, far_location(bot), seed=21, profile=profile)
    assert near.rtt == bot.rtt_to(bot.home) and far.rtt == bot.rtt_to(far_location(bot))
    assert far.rtt > near.rtt
    foundation = draw_bot(11, seed=21, rtt=Constant(0.05), profile=profile)
    for params in (near, far):
        assert params.index == 11
        assert params.clock_offset == foundation.clock_offset
        assert params.link_seed == foundation.link_seed
        assert (params.jitter, params.loss) == (0.003, 0.01)


def far_location(bot: BotHome) -> str:
    return "oce" if bot.home != "oce" else "af"


# -- region names ------------------------------------------------------------------------


def test_regions_are_named_after_locations_or_name_at_location() -> None:
    assert parse_regions("na,eu,asia") == {"na": "na", "eu": "eu", "asia": "asia"}
    assert parse_regions(" us-east@na , eu-west@eu,asia ") == {
        "us-east": "na",
        "eu-west": "eu",
        "asia": "asia",
    }
    regions = parse_regions("us-east@na,us-west@na")
    assert region_location("us-west", regions) == "na"
    assert region_location("eu") == "eu"
    assert region_location("frankfurt@eu") == "eu"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("", "empty"),
        ("na,,eu", "empty entry"),
        ("us-east", "is not a location .* e.g. us-east@na"),
        ("us-east@mars", "unknown location 'mars'"),
        ("US@na", "lowercase"),
        ("na,na", "given twice"),
        ("east@na,east@eu", "given twice"),
    ],
)
def test_bad_region_specs_are_one_line_errors(spec: str, message: str) -> None:
    with pytest.raises(GeoError, match=message) as caught:
        parse_regions(spec)
    assert "\n" not in str(caught.value)


def test_a_region_without_a_known_location_is_an_error() -> None:
    with pytest.raises(GeoError, match="us-east"):
        region_location("us-east", {"eu": "eu"})


# -- probes ------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.asynccontextmanager
async def serve(app: web.Application) -> AsyncIterator[str]:
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    try:
        await web.TCPSite(runner, "127.0.0.1", port).start()
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


@pytest.fixture
async def probe_server() -> AsyncIterator[tuple[str, list[str]]]:
    """A node's probe: ``GET /probe`` answers 204 at once; requests are counted."""
    seen: list[str] = []

    async def probe(request: web.Request) -> web.Response:
        seen.append(request.path)
        return web.Response(status=204)

    app = web.Application()
    app.router.add_get("/probe", probe)
    async with serve(app) as url:
        yield url, seen


async def test_measured_rtts_are_real_probes_plus_the_modelled_path(
    probe_server: tuple[str, list[str]],
) -> None:
    url, seen = probe_server
    modelled = {"eu": 0.030, "na": 0.090, "asia": 0.160}
    probes = {region: f"{url}/probe" for region in modelled}
    measured = await measure_rtts(probes, modelled.__getitem__, samples=3)
    assert set(measured) == set(modelled)
    for region, seconds in modelled.items():
        # Never below the model (the delay is slept inside the timing), and close above it:
        # the loopback request adds well under a few ms even on a busy 2-core machine.
        assert seconds * 1000 <= measured[region] < seconds * 1000 + 25, (region, measured)
    assert len(seen) == 9  # three real GETs per region


async def test_probes_accept_ws_urls_and_leave_out_a_region_that_never_answers(
    probe_server: tuple[str, list[str]],
) -> None:
    url, seen = probe_server
    dead = f"http://127.0.0.1:{free_port()}/probe"  # nothing listens there
    probes = {"eu": url.replace("http://", "ws://") + "/probe", "na": dead}
    measured = await measure_rtts(probes, lambda region: 0.01, samples=2, probe_timeout=1.0)
    assert list(measured) == ["eu"] and measured["eu"] >= 10.0
    assert len(seen) == 2


async def test_probes_fail_fast_on_a_region_the_bot_cannot_place() -> None:
    bot = BotHome(0, "eu", 1.0)
    regions = parse_regions("eu")
    with pytest.raises(GeoError, match="us-east"):
        await measure_rtts(
            {"us-east": "http://127.0.0.1:9/probe"},
            lambda region: bot.rtt_to(region_location(region, regions)),
        )
    with pytest.raises(ValueError, match="samples"):
        await measure_rtts({}, lambda region: 0.0, samples=0)


# -- seats -------------------------------------------------------------------------------


def node(node_id: str, region: str, capacity: int) -> Heartbeat:
    return Heartbeat(
        node_id=node_id,
        region=region,
        endpoint=f"ws://127.0.0.1:9/{node_id}/ws",
        probe=f"http://127.0.0.1:9/{node_id}/probe",
        role="primary",
        epoch=1,
        matches=1,
        players=0,
        capacity=capacity,
    )


@pytest.fixture
async def directory() -> AsyncIterator[tuple[str, Any]]:
    """An in-process directory with eu (1 seat) and na (10 seats); overflow slack 40 ms."""
    app = create_app(DirectoryConfig(secret=SECRET, heartbeat_timeout=30.0))
    sequence = HeartbeatSequence(time.time())
    async with serve(app) as url:
        for beat in (node("eu-1", "eu", 1), node("na-1", "na", 10)):
            body, headers = signed_heartbeat(
                SECRET, beat, now=time.time(), sequence=sequence.next()
            )
            status, _ = app[DIRECTORY].heartbeat(body, headers)
            assert status == 200
        yield url, app


async def test_a_seat_comes_from_the_measured_rtts(directory: tuple[str, Any]) -> None:
    url, _ = directory
    assert await fetch_probes(url) == {
        "eu": "http://127.0.0.1:9/eu-1/probe",
        "na": "http://127.0.0.1:9/na-1/probe",
    }
    seat = await request_seat(url, "alice", {"eu": 31.0, "na": 95.0})
    assert isinstance(seat, Seat)
    assert (seat.player, seat.region, seat.node_id, seat.overflow) == ("alice", "eu", "eu-1", False)
    assert seat.endpoint == "ws://127.0.0.1:9/eu-1/ws" and seat.rtt_ms == 31.0
    assert seat.reservation.count(".") == 1 and not math.isnan(seat.expires_at)


async def test_no_capacity_and_no_region_are_typed(directory: tuple[str, Any]) -> None:
    url, _ = directory
    await request_seat(url, "alice", {"eu": 30.0, "na": 200.0})  # eu's only seat
    with pytest.raises(NoCapacity) as full:
        await request_seat(url, "bob", {"eu": 30.0, "na": 200.0})  # na is beyond the slack
    assert full.value.code == "no_capacity"
    assert (full.value.best_region, full.value.best_rtt_ms) == ("eu", 30.0)
    assert full.value.retry_after == 1.0
    overflow = await request_seat(url, "carol", {"eu": 30.0, "na": 60.0})
    assert (overflow.region, overflow.overflow, overflow.best_region) == ("na", True, "eu")
    with pytest.raises(NoCapacity) as nowhere:
        await request_seat(url, "dave", {"asia": 40.0})
    assert nowhere.value.code == "no_region"


async def test_other_refusals_and_an_absent_directory_are_directory_errors(
    directory: tuple[str, Any],
) -> None:
    url, _ = directory
    with pytest.raises(DirectoryError) as bad:
        await request_seat(url, "alice", {})
    assert bad.value.code == "invalid_field" and not isinstance(bad.value, NoCapacity)
    absent = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(DirectoryError) as down:
        await request_seat(absent, "alice", {"eu": 30.0}, request_timeout=1.0)
    assert down.value.code == "unreachable"
    with pytest.raises(DirectoryError, match="cannot reach the directory"):
        await fetch_probes(absent, request_timeout=1.0)


async def test_a_malformed_answer_is_a_one_line_bad_answer() -> None:
    """A directory (or a proxy in front of it) answering out of schema: the bot says what."""

    async def seat(request: web.Request) -> web.Response:
        return web.json_response({"player": "alice", "region": "eu"})  # most fields missing

    async def regions(request: web.Request) -> web.Response:
        return web.json_response({"regions": [{"region": "eu"}], "generated_at": 0})

    async def refused(request: web.Request) -> web.Response:
        return web.Response(status=502, text="<html>bad gateway</html>")

    app = web.Application()
    app.router.add_post("/seat", seat)
    app.router.add_get("/regions", regions)
    app.router.add_post("/gateway/seat", refused)
    async with serve(app) as url:
        with pytest.raises(DirectoryError) as bad_seat:
            await request_seat(url, "alice", {"eu": 30.0})
        with pytest.raises(DirectoryError) as bad_listing:
            await fetch_probes(url)
        with pytest.raises(DirectoryError) as gateway:
            await request_seat(f"{url}/gateway", "alice", {"eu": 30.0})
    assert bad_seat.value.code == "bad_answer"
    assert "missing field(s): node_id, endpoint" in str(bad_seat.value)
    assert bad_listing.value.code == "bad_answer"
    assert "missing field(s): heartbeat_timeout_s" in str(bad_listing.value)
    assert (gateway.value.code, str(gateway.value)) == (
        "bad_answer",
        f"POST {url}/gateway/seat answered 502",
    )
    for error in (bad_seat.value, bad_listing.value):
        assert "\n" not in str(error)


async def test_a_request_the_directory_would_refuse_is_refused_without_asking() -> None:
    absent = f"http://127.0.0.1:{free_port()}"  # nothing listens: nothing was sent
    with pytest.raises(DirectoryError) as bad:
        await request_seat(absent, "alice", {"eu": -1.0})
    assert (bad.value.code, str(bad.value)) == (
        "invalid_field",
        "rtt_ms.eu: must be between 0 and 10000 ms",
    )
