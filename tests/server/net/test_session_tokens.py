"""Session tokens on a real node: bound to one seating of a slot, renewed while the player
plays, refused once expired; and a bot whose token is refused plays on in a new seat."""

from __future__ import annotations

import asyncio
import contextlib
import time

import aiohttp
import pytest
from aiohttp import WSCloseCode, WSMsgType

from client_sim.latency import draw_bot, parse_distribution
from client_sim.swarm import Swarm, SwarmConfig
from server.net.cli import build_parser, config_from_args
from server.net.config import NodeConfig
from server.tokens import verify_token
from shared import protocol
from tests.server.replication.test_replication_link import (
    REGION,
    SECRET,
    WAIT_S,
    Player,
    bind,
    cluster,
    health,
    until,
)


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["--token-ttl-s", "59"], "--token-ttl-s must be at least 60"),
        (["--token-ttl-s", "nan"], "--token-ttl-s must be a finite number"),
        (["--seat-grace-s", "300"], r"token TTL \(600 s\) must be over twice the seat grace"),
        (["--token-ttl-s", "86401"], "at most 86400 s"),
    ],
)
def test_a_token_ttl_that_cannot_outlive_the_seat_grace_is_refused(
    argv: list[str], error: str
) -> None:
    with pytest.raises(ValueError, match=error):
        config_from_args(build_parser().parse_args(argv))


def test_the_token_ttl_is_passed_on_and_only_the_command_line_asks_for_a_minute() -> None:
    argv = ["--token-ttl-s", "60", "--seat-grace-s", "10"]
    assert config_from_args(build_parser().parse_args(argv)).token_ttl == 60
    assert NodeConfig(seat_grace=0.5, token_ttl=1.5).token_ttl == 1.5  # (tests run such)
    with pytest.raises(ValueError, match="twice the seat grace"):
        NodeConfig(seat_grace=0.5, token_ttl=1.0)
    with pytest.raises(ValueError, match="twice the seat grace"):
        NodeConfig(seat_grace=0, token_ttl=0)


def claim_of(token: str) -> tuple[int, float]:
    claim = verify_token(SECRET, token, REGION, time.time())
    return claim.seat_id, claim.expires_at


async def players(session: aiohttp.ClientSession, url: str, count: int) -> bool:
    return (await health(session, url))["players"] == count


async def test_a_token_of_a_freed_seat_never_resumes_the_next_player_in_it() -> None:
    async with cluster() as (nodes, session):
        primary = await nodes.start(bind(), node_id="alpha", role="primary", seat_grace=0.3)
        first, second, back, intruder = (Player(session) for _ in range(4))
        try:
            gone = await first.join(primary.url, "ada")
            assert isinstance(gone, protocol.WelcomeMessage)
            await first.close()
            await until(lambda: players(session, primary.admin_url, 0), "the seat is freed")
            # Somebody else, under the same name, gets the same slot; then drops too (the
            # seat waits for *its* token now).
            later = await second.join(primary.url, "ada")
            assert isinstance(later, protocol.WelcomeMessage)
            assert (later.match, later.player_id) == (gone.match, gone.player_id)
            await second.close()
            sessions = primary.node.sessions

            async def dropped() -> bool:
                return not sessions.connections

            await until(dropped, "the node notices the drop")

            refusal = await intruder.join(primary.url, "ada", gone.token)
            again = await back.join(primary.url, "ada", later.token)

            assert isinstance(refusal, protocol.ErrorMessage), refusal
            assert (refusal.code, refusal.fatal) == ("invalid_token", True)
            assert isinstance(again, protocol.WelcomeMessage), again
            assert again.player_id == later.player_id
            assert claim_of(again.token)[0] == claim_of(later.token)[0] != claim_of(gone.token)[0]
        finally:
            for one in (first, second, back, intruder):
                await one.close()


async def test_a_playing_player_s_token_is_renewed_and_the_old_one_runs_out() -> None:
    ttl = 2.0
    async with cluster() as (nodes, session):
        primary = await nodes.start(
            bind(), node_id="alpha", role="primary", seat_grace=0.9, token_ttl=ttl
        )
        player, stale, back = Player(session), Player(session), Player(session)
        try:
            welcome = await player.join(primary.url, "ada")
            assert isinstance(welcome, protocol.WelcomeMessage)
            seat, expires_at = claim_of(welcome.token)
            assert expires_at - time.time() <= ttl
            renewals: list[str] = []
            assert player.ws is not None
            async with asyncio.timeout(WAIT_S):
                async for message in player.ws:  # play on until the welcome's token is dead
                    assert message.type is WSMsgType.BINARY
                    decoded = protocol.decode_server(message.data)
                    if isinstance(decoded, protocol.TokenMessage):
                        renewals.append(decoded.token)
                    if time.time() > expires_at + 0.1:
                        break
            await player.close()

            assert renewals, "no token renewed while the player played"
            assert all(claim_of(token)[0] == seat for token in renewals)
            assert claim_of(renewals[-1])[1] > expires_at
            refusal = await stale.join(primary.url, "ada", welcome.token)
            assert isinstance(refusal, protocol.ErrorMessage), refusal
            assert refusal.code == "invalid_token"  # expired
            again = await back.join(primary.url, "ada", renewals[-1])
            assert isinstance(again, protocol.WelcomeMessage), again
            assert again.player_id == welcome.player_id
        finally:
            for one in (player, stale, back):
                await one.close()


async def test_a_bot_whose_token_is_refused_plays_on_in_a_new_seat() -> None:
    async with cluster() as (nodes, _session):
        primary = await nodes.start(bind(), node_id="alpha", role="primary", seat_grace=0)
        node = primary.node
        bot_params = (draw_bot(0, seed=1, rtt=parse_distribution("20ms")),)
        url = primary.url.replace("http://", "ws://") + "/ws"
        swarm = Swarm(SwarmConfig(url=url, bots=bot_params, duration=3.0, seed=1))
        running = asyncio.ensure_future(swarm.run())
        try:

            async def seated() -> bool:
                bots = swarm.bots
                return bool(bots) and bots[0].welcome is not None and bots[0].snapshot_count > 5

            await until(seated, "the bot plays")
            bot = swarm.bots[0]
            assert bot.welcome is not None
            old = bot.welcome.player_id
            key = (bot.welcome.match, old)
            # The node lets the bot go and frees its seat (no grace), and somebody else
            # takes the slot at once: the bot's token names a seat that is no more.
            await node.sessions.connections[key].close(WSCloseCode.GOING_AWAY, b"test")

            async def freed() -> bool:
                match = node.matches[key[0]]
                return key not in node.sessions.connections and old not in match.seats

            await until(freed, "the seat is freed")
            node.matches.join("squatter", 0.1)

            async def reseated() -> bool:
                welcome = bot.welcome
                return welcome is not None and welcome.player_id != old and bot.playing

            await until(reseated, "the bot has a new seat")
            new = bot.welcome
            assert new is not None
            seat = node.matches[new.match].seats[new.player_id]

            async def playing() -> bool:
                return seat.inputs.acked >= 0

            await until(playing, "the new seat's inputs apply")
            assert node.matches.player_count == 2  # the squatter and the bot: no third seat
            result = await running
        finally:
            running.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await running

        assert result.seats_lost == 1
        assert result.errors == {"server:invalid_token": 1}  # refused once, never again
        assert len(result.failovers) == 1
        event = result.failovers[0]
        assert event.seat_lost and not event.resumed and event.ack_after == -1
