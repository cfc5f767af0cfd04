"""Admission on a real node: idle seats reclaimed, seats per address, the HTTP head's
timeout, and reservations required behind a directory."""

from __future__ import annotations

import asyncio
import contextlib
import time

import pytest
from aiohttp import WSCloseCode, WSMsgType

from client_sim.latency import draw_bot, parse_distribution
from client_sim.swarm import Swarm, SwarmConfig, SwarmResult
from server.directory.reservations import issue
from server.net.cli import build_parser, config_from_args
from server.net.config import NodeConfig
from shared import protocol
from tests.server.replication.test_replication_link import (
    REGION,
    SECRET,
    WAIT_S,
    Player,
    RunningNode,
    background,
    bind,
    cluster,
    until,
)

#: Nothing listens on the discard port: the node's heartbeats fail, its joins are checked.
NO_DIRECTORY = "http://127.0.0.1:9"


async def closing_code(player: Player) -> int | None:
    """Read until the server closes the player's socket; the close code it sent."""
    assert player.ws is not None
    async with asyncio.timeout(WAIT_S):
        while (await player.ws.receive()).type not in (WSMsgType.CLOSE, WSMsgType.CLOSED):
            pass
    return player.ws.close_code


def refused(answer: object, code: str) -> bool:
    return isinstance(answer, protocol.ErrorMessage) and (answer.code, answer.fatal) == (
        code,
        True,
    )


def counted(running: RunningNode, name: str, labels: dict[str, str] | None = None) -> float:
    value = running.node.metrics.registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


# -- configuration -------------------------------------------------------------------------


def test_the_admission_flags_reach_the_config_with_their_defaults() -> None:
    defaults = config_from_args(build_parser().parse_args([]))
    assert (defaults.idle_kick, defaults.max_seats_per_address) == (120.0, 0)
    assert (defaults.handshake_timeout, defaults.open_join) == (5.0, False)
    argv = ["--idle-kick-s", "0", "--max-seats-per-address", "4", "--handshake-timeout-s", "2"]
    config = config_from_args(build_parser().parse_args([*argv, "--open-join"]))
    assert (config.idle_kick, config.max_seats_per_address) == (0.0, 4)
    assert (config.handshake_timeout, config.open_join) == (2.0, True)
    with pytest.raises(ValueError, match="max seats per address must be"):
        NodeConfig(max_seats_per_address=1.5)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["--idle-kick-s", "-1"], "idle kick must be from 0"),
        (["--idle-kick-s", "nan"], "idle kick must be from 0"),
        (["--max-seats-per-address", "-1"], "max seats per address must be"),
        (["--handshake-timeout-s", "0"], "handshake timeout must be over 0"),
        (["--handshake-timeout-s", "inf"], "handshake timeout must be over 0"),
    ],
)
def test_an_admission_flag_out_of_range_is_one_line(argv: list[str], error: str) -> None:
    with pytest.raises(ValueError, match=error):
        config_from_args(build_parser().parse_args(argv))


# -- idle seats ----------------------------------------------------------------------------


async def keep_sending(player: Player) -> None:
    """An honest player's inputs, a few a second, until cancelled."""
    seq = 0
    while True:
        await player.send_inputs(range(seq, seq + 1))
        seq += 1
        await asyncio.sleep(0.05)


async def test_an_idle_player_is_kicked_and_its_seat_freed_at_once_a_playing_one_stays() -> None:
    async with cluster() as (nodes, session):
        # A long seat grace: a seat kept for a dropped player would still be counted.
        primary = await nodes.start(bind(), node_id="alpha", idle_kick=1.0, seat_grace=30.0)
        idle, active, back = Player(session), Player(session), Player(session)
        try:
            gone = await idle.join(primary.url, "idler")
            assert isinstance(gone, protocol.WelcomeMessage)
            assert isinstance(await active.join(primary.url, "player"), protocol.WelcomeMessage)
            async with background(keep_sending(active)), background(active.read()):
                # The idle one only pings: a ping is not an input.
                assert idle.ws is not None
                await idle.ws.send_bytes(protocol.encode(protocol.PingMessage(1, 0.0)))
                await idle.read()  # until the node closes it
                assert idle.ws.close_code == WSCloseCode.POLICY_VIOLATION
                assert refused(idle.errors[-1], "idle_kick"), idle.errors
                # Freed at once, not kept for the seat grace.
                assert primary.node.matches.player_count == 1
                assert counted(primary, "arena_idle_kicks_total") == 1
                # The one that plays has been seated as long, and longer now: still there.
                await asyncio.sleep(1.5)
                assert not active.closed.is_set() and not active.errors
                assert primary.node.matches.player_count == 1
            # Its token names a seat that is no more.
            assert refused(await back.join(primary.url, "idler", gone.token), "invalid_token")
        finally:
            for one in (idle, active, back):
                await one.close()


async def test_a_bot_kicked_for_idleness_counts_it_and_never_comes_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with cluster() as (nodes, _session):
        primary = await nodes.start(bind(), node_id="alpha", idle_kick=1.0)
        node = primary.node
        params = (draw_bot(0, seed=1, rtt=parse_distribution("20ms")),)
        url = primary.url.replace("http://", "ws://") + "/ws"
        swarm = Swarm(SwarmConfig(url=url, bots=params, duration=6.0, seed=1))
        running: asyncio.Future[SwarmResult] = asyncio.ensure_future(swarm.run())
        try:

            async def playing() -> bool:
                return bool(swarm.bots) and swarm.bots[0].snapshot_count > 5

            await until(playing, "the bot plays")
            bot = swarm.bots[0]
            monkeypatch.setattr(bot, "hold_input", lambda seq, frame: None)  # it goes quiet

            async def kicked() -> bool:
                return counted(primary, "arena_idle_kicks_total") == 1 and not bot.playing

            await until(kicked, "the node kicks the quiet bot")
            result = await running
        finally:
            running.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await running
        assert result.errors == {"server:idle_kick": 1}
        assert result.failovers == []  # not taken for a lost node
        # It came back neither with its token nor for a new seat.
        assert counted(primary, "arena_joins_refused_total", {"reason": "token"}) == 0
        assert node.matches.matches[0].joins == 1
        assert node.matches.player_count == 0


# -- seats per address ---------------------------------------------------------------------


async def test_an_address_holds_at_most_its_seats_counting_those_kept_for_a_dropped_player() -> (
    None
):
    async with cluster() as (nodes, session):
        primary = await nodes.start(
            bind(), node_id="alpha", max_seats_per_address=2, seat_grace=3.0
        )
        sessions = primary.node.sessions
        players = [Player(session) for _ in range(6)]
        first, second, third, fourth, back, fifth = players
        try:
            welcome = await first.join(primary.url, "a")
            assert isinstance(welcome, protocol.WelcomeMessage)
            assert isinstance(await second.join(primary.url, "b"), protocol.WelcomeMessage)
            assert refused(await third.join(primary.url, "c"), "address_limit")
            assert await closing_code(third) == WSCloseCode.POLICY_VIOLATION

            await first.close()  # its seat waits out the grace: still this address's

            async def dropped() -> bool:
                return (welcome.match, welcome.player_id) not in sessions.connections

            await until(dropped, "the node notices the drop")
            assert refused(await fourth.join(primary.url, "d"), "address_limit")
            # Coming back to a seat it holds is no new seat.
            again = await back.join(primary.url, "a", welcome.token)
            assert isinstance(again, protocol.WelcomeMessage), again
            await back.close()

            async def freed() -> bool:
                return primary.node.matches.player_count == 1

            await until(freed, "the dropped player's seat is freed after the grace")
            assert isinstance(await fifth.join(primary.url, "e"), protocol.WelcomeMessage)
            refusals = {"reason": "address_limit"}
            assert counted(primary, "arena_joins_refused_total", refusals) == 2
        finally:
            for one in players:
                await one.close()


# -- the HTTP request head -----------------------------------------------------------------


async def trickle(host: str, port: int, give_up_s: float) -> float:
    """Open a connection, send a request line, then a header byte a second until the
    server ends it (or ``give_up_s`` passed); how long the server let it stay."""
    reader, writer = await asyncio.open_connection(host, port)
    opened = time.monotonic()
    try:
        writer.write(b"GET /ws HTTP/1.1\r\n")
        with contextlib.suppress(ConnectionError, TimeoutError):
            async with asyncio.timeout(give_up_s):
                while True:
                    try:
                        async with asyncio.timeout(1.0):
                            if await reader.read(1024) == b"":
                                break
                    except TimeoutError:
                        writer.write(b"X")
                        await writer.drain()
        return time.monotonic() - opened
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


async def test_connections_that_trickle_their_request_head_are_closed_a_websocket_stays() -> None:
    timeout = 1.0
    async with cluster() as (nodes, session):
        primary = await nodes.start(bind(), node_id="alpha", handshake_timeout=timeout)
        host, port = "127.0.0.1", int(primary.url.rsplit(":", 1)[1])
        player = Player(session)
        try:
            assert isinstance(await player.join(primary.url, "ada"), protocol.WelcomeMessage)
            async with background(player.read()):
                lasted = await asyncio.gather(*(trickle(host, port, 10.0) for _ in range(50)))
                # Every one was closed by the server, within a few timeouts (left alone,
                # aiohttp keeps such a connection for an hour).
                assert max(lasted) < 3 * timeout + 2, sorted(lasted)[-5:]
                # The upgraded WebSocket outlived them all, and the node still answers.
                assert not player.closed.is_set() and player.snapshots
                async with session.get(primary.url + "/live") as response:
                    assert response.status == 200
        finally:
            await player.close()


# -- reservations behind a directory ---------------------------------------------------------


async def test_behind_a_directory_a_new_seat_needs_a_reservation_unless_joins_are_open() -> None:
    async with cluster() as (nodes, session):
        guarded = await nodes.start(bind(), node_id="alpha", directory_url=NO_DIRECTORY)
        opened = await nodes.start(
            bind(), node_id="beta", directory_url=NO_DIRECTORY, open_join=True
        )
        bare, reserved, back, walk_in = (Player(session) for _ in range(4))
        try:
            assert refused(await bare.join(guarded.url, "ada"), "reservation_required")
            assert await closing_code(bare) == WSCloseCode.POLICY_VIOLATION
            refusals = {"reason": "reservation_required"}
            assert counted(guarded, "arena_joins_refused_total", refusals) == 1

            reservation = issue(SECRET, "ada", "alpha", REGION, time.time(), ttl=30.0)
            welcome = await reserved.join(guarded.url, "ada", reservation)
            assert isinstance(welcome, protocol.WelcomeMessage), welcome
            await reserved.close()

            async def dropped() -> bool:
                return not guarded.node.sessions.connections

            await until(dropped, "the node notices the drop")
            # A session token resumes its seat: it needs no reservation.
            again = await back.join(guarded.url, "ada", welcome.token)
            assert isinstance(again, protocol.WelcomeMessage), again
            assert again.player_id == welcome.player_id

            assert isinstance(await walk_in.join(opened.url, "bob"), protocol.WelcomeMessage)
        finally:
            for one in (bare, reserved, back, walk_in):
                await one.close()


async def test_a_bot_refused_for_want_of_a_reservation_stops_after_one_try() -> None:
    async with cluster() as (nodes, _session):
        primary = await nodes.start(bind(), node_id="alpha", directory_url=NO_DIRECTORY)
        params = tuple(draw_bot(i, seed=1, rtt=parse_distribution("20ms")) for i in range(3))
        url = primary.url.replace("http://", "ws://") + "/ws"
        config = SwarmConfig(url=url, bots=params, duration=1.0, seed=1, connect_timeout=3.0)
        result = await Swarm(config).run()
    assert result.connected == 0
    # One refusal each: a bot does not knock again where trying again cannot help.
    assert result.errors == {"server:reservation_required": 3}
    assert counted(primary, "arena_joins_refused_total", {"reason": "reservation_required"}) == 3
