"""No profit from a reconnect, on a real node: offences follow the seat, a seat closed for
them is held off before it may be resumed (longer with each close), and with
``--offender-holdoff-s`` an address whose connections end in offences gets HTTP 429."""

from __future__ import annotations

import asyncio
import contextlib

import aiohttp
import pytest
from aiohttp import WSCloseCode

from client_sim.latency import draw_bot, parse_distribution
from client_sim.swarm import Swarm, SwarmConfig, SwarmResult
from launch import adversary
from server.net.cli import build_parser, config_from_args
from server.net.sessions import SEAT_HOLD_OFF
from server.replication.roles import Role
from shared import protocol
from shared.movement import MovementParams
from tests.server.net.test_admission import closing_code, counted, refused
from tests.server.replication.test_replication_link import (
    Player,
    RunningNode,
    background,
    bind,
    cluster,
    primary_and_standby,
    until,
    until_live,
)


async def offend_until_closed(player: Player) -> protocol.ErrorMessage:
    """Send bad frames until the node closes the connection; its fatal error."""
    assert player.ws is not None
    for _ in range(10):
        await player.ws.send_bytes(b"\xc1")  # not msgpack: malformed_frame, an offence
    return await last_error(player)


async def last_error(player: Player) -> protocol.ErrorMessage:
    """Read until the node closes the connection (for offences); its last error."""
    async with asyncio.timeout(5.0):
        await player.read()
    assert player.ws is not None and player.ws.close_code == WSCloseCode.POLICY_VIOLATION
    assert player.errors, "the node said nothing"
    return player.errors[-1]


async def resume(running: RunningNode, session: aiohttp.ClientSession, token: str) -> object:
    return await Player(session).join(running.url, "cheat", token)


def test_the_offender_hold_off_is_off_by_default_and_reaches_the_config() -> None:
    assert config_from_args(build_parser().parse_args([])).offender_holdoff == 0.0
    argv = ["--offender-holdoff-s", "2.5"]
    assert config_from_args(build_parser().parse_args(argv)).offender_holdoff == 2.5
    for bad in ("-1", "nan", "4000"):
        with pytest.raises(ValueError, match="offender hold-off must be from 0"):
            config_from_args(build_parser().parse_args(["--offender-holdoff-s", bad]))


async def test_a_seat_closed_for_offences_is_held_off_longer_with_each_close() -> None:
    async with cluster() as (nodes, session):
        primary = await nodes.start(bind(), node_id="alpha", seat_grace=30.0)
        player = Player(session)
        welcome = await player.join(primary.url, "cheat")
        assert isinstance(welcome, protocol.WelcomeMessage)
        token = welcome.token
        # Three offences: closed, told how long the seat is held off.
        fatal = await offend_until_closed(player)
        assert (fatal.code, fatal.fatal) == ("malformed_frame", True)
        assert fatal.retry_after == SEAT_HOLD_OFF.wait(1)
        # Back at once with its token: refused, not seated, with what is left to wait.
        again = Player(session)
        answer = await again.join(primary.url, "cheat", token)
        assert refused(answer, "held_off"), answer
        assert isinstance(answer, protocol.ErrorMessage)
        assert 0 < answer.retry_after <= SEAT_HOLD_OFF.wait(1)
        assert await closing_code(again) == WSCloseCode.TRY_AGAIN_LATER
        assert counted(primary, "arena_joins_refused_total", {"reason": "held_off"}) == 1
        assert primary.node.matches.player_count == 1  # the seat waits for its player
        # After the wait: the same seat, and its offences with it: the next one closes it
        # again, held off twice as long.
        await asyncio.sleep(answer.retry_after + 0.1)
        back = Player(session)
        resumed = await back.join(primary.url, "cheat", token)
        assert isinstance(resumed, protocol.WelcomeMessage)
        assert resumed.player_id == welcome.player_id
        assert back.ws is not None
        await back.ws.send_bytes(b"\xc1")
        fatal = await last_error(back)
        assert (fatal.code, fatal.fatal) == ("malformed_frame", True)
        assert fatal.retry_after == SEAT_HOLD_OFF.wait(2) == 2 * SEAT_HOLD_OFF.wait(1)
        # An honest player beside it was never held off.
        honest = Player(session)
        assert isinstance(await honest.join(primary.url, "honest"), protocol.WelcomeMessage)
        await honest.close()


async def test_an_address_whose_connections_end_in_offences_waits_for_its_next_upgrade() -> None:
    async with cluster() as (nodes, session):
        primary = await nodes.start(bind(), node_id="alpha", offender_holdoff=1.0)
        player = Player(session)
        assert isinstance(await player.join(primary.url, "cheat"), protocol.WelcomeMessage)
        await offend_until_closed(player)
        # Refused before any WebSocket: 429 and when to come back.
        async with session.get(primary.url + "/ws") as answer:
            assert answer.status == 429
            assert answer.headers["Retry-After"] == "1"
        with pytest.raises(aiohttp.WSServerHandshakeError) as refusal:
            await Player(session).join(primary.url, "newcomer")
        assert refusal.value.status == 429
        assert counted(primary, "arena_joins_refused_total", {"reason": "offender_holdoff"}) == 2
        # A bad first frame is an offence too: after the wait, one more doubles it.
        await asyncio.sleep(1.1)
        rude = Player(session)
        rude.ws = await session.ws_connect(primary.url + "/ws")
        await rude.ws.send_bytes(b"\xc1")
        assert await closing_code(rude) == WSCloseCode.POLICY_VIOLATION
        async with session.get(primary.url + "/ws") as answer:
            assert answer.status == 429 and answer.headers["Retry-After"] == "2"
        # /health and /live are not held off.
        async with session.get(primary.url + "/health") as health:
            assert health.status == 200


async def test_without_the_flag_an_offending_address_is_served_at_once() -> None:
    async with cluster() as (nodes, session):
        primary = await nodes.start(bind(), node_id="alpha")
        player = Player(session)
        assert isinstance(await player.join(primary.url, "cheat"), protocol.WelcomeMessage)
        await offend_until_closed(player)
        newcomer = Player(session)
        assert isinstance(await newcomer.join(primary.url, "newcomer"), protocol.WelcomeMessage)
        await newcomer.close()
        assert counted(primary, "arena_joins_refused_total", {"reason": "offender_holdoff"}) == 0


# -- the bots wait as they are asked -------------------------------------------------------


def one_bot(running: RunningNode, duration: float, connect_timeout: float = 15.0) -> Swarm:
    params = (draw_bot(0, seed=1, rtt=parse_distribution("20ms")),)
    url = running.url.replace("http://", "ws://") + "/ws"
    config = SwarmConfig(
        url=url, bots=params, duration=duration, seed=1, connect_timeout=connect_timeout
    )
    return Swarm(config)


async def test_a_bot_closed_for_offences_resumes_its_seat_only_after_the_hold_off() -> None:
    async with cluster() as (nodes, _session):
        primary = await nodes.start(bind(), node_id="alpha", seat_grace=30.0)
        swarm = one_bot(primary, duration=6.0)
        running: asyncio.Future[SwarmResult] = asyncio.ensure_future(swarm.run())
        try:

            async def playing() -> bool:
                return bool(swarm.bots) and swarm.bots[0].snapshot_count > 5

            await until(playing, "the bot plays")
            bot = swarm.bots[0]
            for _ in range(3):
                bot.send(b"\xc1")  # three bad frames: closed for offences

            async def back() -> bool:
                return len(bot.failovers) == 1 and bot.failovers[0].resumed

            await until(back, "the bot resumes its seat")
            result = await running
        finally:
            running.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await running
    assert result.errors.get("server:malformed_frame") == 3, result.errors
    assert "server:held_off" not in result.errors, result.errors  # it waited its hold-off
    assert counted(primary, "arena_joins_refused_total", {"reason": "held_off"}) == 0
    assert primary.node.matches.matches[0].joins == 1  # its own seat, resumed


async def test_a_bot_answered_429_waits_for_its_retry_after_before_it_knocks_again() -> None:
    async with cluster() as (nodes, session):
        primary = await nodes.start(bind(), node_id="alpha", offender_holdoff=1.0)
        rude = Player(session)
        rude.ws = await session.ws_connect(primary.url + "/ws")
        await rude.ws.send_bytes(b"\xc1")  # a bad first frame: this address waits 1 s
        assert await closing_code(rude) == WSCloseCode.POLICY_VIOLATION
        result = await one_bot(primary, duration=1.0).run()
    assert result.connected == 1
    # Refused once, then it waited what it was told (a bot that knocked every 50 ms
    # would have been refused some twenty times).
    assert counted(primary, "arena_joins_refused_total", {"reason": "offender_holdoff"}) == 1


# -- the attack the hold-off answers -------------------------------------------------------


async def test_a_speed_hack_that_resumes_its_seat_gains_no_speed_and_waits_its_hold_off() -> None:
    """Three inputs a tick, closed for it, back with its token 0.2 s later: refused until
    its hold-off ends, and no faster than walking over any second, the one after its
    resume included (its seat's banked time away once bought 7.2 m/s there)."""
    async with cluster() as (nodes, _session):
        primary = await nodes.start(bind(), node_id="alpha", seat_grace=30.0)
        url = primary.url.replace("http://", "ws://") + "/ws"
        outcome = await adversary.speed_hack(url, 7.0, per_tick=3)
    max_speed = MovementParams().max_speed
    assert outcome["resumes"] >= 1 and outcome["seats"] == 1, outcome
    assert outcome["resumes_refused_held_off"] >= 1, outcome
    assert outcome["speed_mps"] <= max_speed * 1.02, outcome
    # Measured: it ran, and it ran after a resume.
    assert outcome["speed_after_resume_mps"] >= 0.5 * max_speed, outcome


# -- which gaps are caught up --------------------------------------------------------------


async def test_a_seat_back_from_its_own_dropped_connection_has_nothing_banked() -> None:
    async with cluster() as (nodes, session):
        primary = await nodes.start(bind(), node_id="alpha", seat_grace=30.0)
        player, back = Player(session), Player(session)
        welcome = await player.join(primary.url, "ada")
        assert isinstance(welcome, protocol.WelcomeMessage)
        await player.send_inputs(range(5))
        match = primary.node.matches[0]
        await until(lambda: ready(match.seats[welcome.player_id].inputs.acked == 4), "applied")
        await player.close()  # its own doing: a lag switch, or a lost link
        await until(lambda: ready(match.inputs.credit(welcome.player_id) >= 6), "time passes")
        resumed = await back.join(primary.url, "ada", welcome.token)
        assert isinstance(resumed, protocol.WelcomeMessage)
        async with background(back.read()):
            await back.until_snapshot(lambda s: s.tick > resumed.tick + 6)
            # Nothing banked from its last input to its first one back.
            assert match.inputs.credit(welcome.player_id) == 0
        await back.close()


async def test_a_seat_a_takeover_found_keeps_the_catch_up_it_banked_meanwhile() -> None:
    async with cluster() as (nodes, session):
        primary, standby = await primary_and_standby(nodes)
        player, back = Player(session), Player(session)
        await until_live(session, primary.admin_url, "beta")
        welcome = await player.join(primary.url, "ada")
        assert isinstance(welcome, protocol.WelcomeMessage)
        async with background(player.read()):
            await player.send_inputs(range(5))
            await player.until_snapshot(lambda s: s.ack == 4)
            await until_live(session, primary.admin_url, "beta")
            await primary.crash()  # the node's doing, not the player's

            async def promoted() -> bool:
                return bool(standby.node.role is Role.PRIMARY and standby.node.matches.tick_number)

            await until(promoted, "the standby takes over")
        match = standby.node.matches[0]
        await until(lambda: ready(match.inputs.credit(welcome.player_id) >= 6), "time passes")
        resumed = await back.join(standby.url, "ada", welcome.token)
        assert isinstance(resumed, protocol.WelcomeMessage)
        # What it waited for the takeover is caught up as a stall's would be.
        assert match.inputs.credit(welcome.player_id) >= 6
        await back.close()


async def ready(value: bool) -> bool:
    return value
