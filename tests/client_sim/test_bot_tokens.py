"""A bot's session token: renewed while it plays, dropped for a new seat once refused."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any, TypeVar

from client_sim.bot import Bot, FailoverEvent, _Connection
from client_sim.latency import draw_bot, parse_distribution
from client_sim.marksman import ShotRecord
from client_sim.swarm import Swarm, SwarmConfig
from shared import protocol
from shared.arena_map import default_map as _default_map
from shared.protocol import EntityCodec as _EntityCodec

CODEC = _EntityCodec.for_bounds(_default_map().bounds_min, _default_map().bounds_max)

T = TypeVar("T")


def welcome(token: str, player_id: int = 0, epoch: int = 3) -> protocol.WelcomeMessage:
    return protocol.WelcomeMessage(1, player_id, 60, 10, 0.2, token, "arena", "eu", epoch)


def connection(id_: int, token: str | None) -> _Connection:
    ws = SimpleNamespace(closed=True)  # (retired without a closing handshake)
    return _Connection(id_, f"ws://node-{id_}/ws", ws, token=token)  # type: ignore[arg-type]


PARAMS = draw_bot(0, seed=1, rtt=parse_distribution("40ms"))


def playing_bot(swarm: Swarm | None = None) -> Bot:
    """A bot seated with token ``t1`` on connection 0, with a spare (1) parked with it."""
    host: Any = swarm or SimpleNamespace(
        config=SimpleNamespace(transport="ws"),
        pump=None,
        codec=CODEC,
        clock_changed=lambda *_: None,
    )
    bot = Bot(0, PARAMS, host, "ws://a/ws")
    bot._connections = {0: connection(0, None), 1: connection(1, "t1")}
    bot._active, bot._spare = 0, 1
    if swarm is None:
        assert not deliver(bot, 0, lambda: bot.welcomed(welcome("t1")))
    else:
        deliver(bot, 0, lambda: swarm._on_welcome(bot, welcome("t1")))
    return bot


def deliver(bot: Bot, connection_id: int, act: Callable[[], T]) -> T:
    """``act`` as the swarm does it for a frame that came by ``connection_id``."""
    bot._delivering = connection_id
    try:
        return act()
    finally:
        bot._delivering = None


async def test_a_renewed_token_is_the_one_joins_carry_and_the_spare_is_parked_again() -> None:
    bot = playing_bot()

    deliver(bot, 0, lambda: bot.token_renewed(protocol.TokenMessage("t2")))

    assert bot._token == "t2"
    assert bot._spare is None and 1 not in bot._connections  # re-parked with t2 next
    deliver(bot, 1, lambda: bot.token_renewed(protocol.TokenMessage("t3")))  # not the active
    assert bot._token == "t2"


async def test_a_refused_token_is_dropped_once_and_the_seat_counted_lost() -> None:
    bot = playing_bot()
    bot._connections[2] = connection(2, "t1")  # a join during a failover

    deliver(bot, 2, bot.token_refused)

    assert bot._token is None and bot.seats_lost == 1
    deliver(bot, 1, bot.token_refused)  # the spare's refusal of the same token: no news
    assert bot.seats_lost == 1
    assert bot._standby_url() is None  # no spare without a token: a standby would refuse it


async def test_a_refusal_of_a_token_the_bot_no_longer_uses_changes_nothing() -> None:
    bot = playing_bot()
    deliver(bot, 0, lambda: bot.token_renewed(protocol.TokenMessage("t2")))
    bot._connections[1] = connection(1, "t1")  # a spare parked before the renewal

    deliver(bot, 1, bot.token_refused)

    assert bot._token == "t2" and bot.seats_lost == 0


async def test_a_welcome_to_a_new_seat_ends_the_failover_as_a_seat_lost() -> None:
    bot = playing_bot()
    bot._sent_frames.extend([(5, b"five"), (6, b"six")])
    bot.failovers.append(FailoverEvent(tick_before=120, ack_before=6, lost_at=0.0))
    bot._connections[2] = connection(2, "t1")
    deliver(bot, 2, bot.token_refused)
    bot._connections[3] = connection(3, None)  # the next join asks for a new seat

    reseated = deliver(bot, 3, lambda: bot.welcomed(welcome("n1", player_id=7)))

    assert reseated is True
    assert bot.welcome is not None and bot.welcome.player_id == 7
    assert bot._token == "n1" and bot._active == 3
    assert not bot._sent_frames  # the old seat's inputs are not resent to the new one
    assert bot._spare is None and 1 not in bot._connections  # parked with the old token
    event = bot.failovers[-1]
    assert event.seat_lost and event.ack_after == -1 and event.epoch_after == 3
    event.stall_s = 0.2
    assert not event.resumed


async def test_a_resumed_seat_is_no_new_seat() -> None:
    bot = playing_bot()
    bot.failovers.append(FailoverEvent(tick_before=120, ack_before=6, lost_at=0.0))
    bot._connections[2] = connection(2, "t1")

    reseated = deliver(bot, 2, lambda: bot.welcomed(welcome("t9", epoch=4)))

    assert reseated is False
    assert not bot.failovers[-1].seat_lost and bot._token == "t9"


async def test_the_swarm_forgets_what_it_knew_of_a_bot_s_lost_seat() -> None:
    swarm = Swarm(SwarmConfig(url="ws://a/ws", bots=(PARAMS,), duration=1.0))
    swarm.welcomed = asyncio.Event()
    bot = playing_bot(swarm)
    assert swarm.predictor is not None
    swarm.placed[0], swarm.predictor.unscored[0], swarm.shooting.alive[0] = True, True, False
    swarm.shooting.awaiting[0][(5, 0)] = ShotRecord(5, 0, 40.0, -1, 0, 1.0)
    bot._connections[2] = connection(2, "t1")
    deliver(bot, 2, bot.token_refused)
    bot._connections[3] = connection(3, None)

    deliver(bot, 3, lambda: swarm._on_welcome(bot, welcome("n1", player_id=7)))

    assert not swarm.placed[0]  # placed anew from the new seat's first snapshot
    assert not swarm.predictor.unscored[0] and swarm.shooting.alive[0]  # spawned alive
    assert not swarm.shooting.awaiting[0]
    assert [s.server_result for s in swarm.shooting.finished] == [None]  # never judged


async def test_a_new_primary_s_snapshot_before_its_welcome_hides_no_failover() -> None:
    # Over UDP the promoted standby's first snapshot may overtake its welcome to the spare.
    bot = playing_bot()  # seated at epoch 3 on connection 0, the spare (1) parked
    bot._loop = SimpleNamespace(time=lambda: 10.0)  # type: ignore[assignment]
    bot._sent_frames.extend([(5, b"five"), (6, b"six")])
    resent: list[list[bytes]] = []
    bot._send_packet = resent.append  # type: ignore[method-assign]

    assert deliver(bot, 0, lambda: bot.accept_snapshot(3, 540, 4))
    assert deliver(bot, 1, lambda: bot.accept_snapshot(4, 600, 5))  # before the welcome
    (event,) = bot.failovers
    assert (event.tick_before, event.ack_before, event.epoch_before) == (540, 4, 3)
    deliver(bot, 1, lambda: bot.welcomed(dataclasses.replace(welcome("t1", epoch=4), ack=5)))

    assert bot.failovers == [event] and event.epoch_after == 4
    assert resent == [[b"six"]]  # what the new primary has not applied (ack 5 in its welcome)
    assert deliver(bot, 1, lambda: bot.accept_snapshot(4, 606, 6))
    assert event.stall_s == 0.0 and event.resumed


async def test_a_first_snapshot_before_the_first_welcome_is_not_shown() -> None:
    bot = Bot(0, PARAMS, playing_bot().swarm, "ws://a/ws")
    bot._connections = {0: connection(0, None)}
    bot._active = 0  # joined, not yet welcomed

    assert not deliver(bot, 0, lambda: bot.accept_snapshot(3, 60, -1))
    assert bot.snapshot_count == 0
    deliver(bot, 0, lambda: bot.welcomed(welcome("t1")))
    assert not bot.failovers  # a first welcome is no failover


async def test_not_ready_on_the_spare_holds_off_its_node_and_held_off_the_whole_region() -> None:
    swarm = Swarm(SwarmConfig(url="ws://a/ws", bots=(PARAMS,), duration=1.0))
    swarm.welcomed = asyncio.Event()
    bot = playing_bot(swarm)  # the spare (1) parked on ws://node-1/ws
    warming = protocol.ErrorMessage("not_ready", "warming up", fatal=True, retry_after=1.0)
    deliver(bot, 1, lambda: swarm._deliver(bot, protocol.encode(warming), False))
    assert bot._wait_for("ws://node-1/ws") >= 1.0
    assert bot._wait_for("ws://a/ws") == 0.0 and bot._wait_for("ws://node-0/ws") == 0.0
    offences = protocol.ErrorMessage("held_off", "offences", fatal=True, retry_after=2.0)
    deliver(bot, 1, lambda: swarm._deliver(bot, protocol.encode(offences), False))
    assert bot._wait_for("ws://a/ws") >= 2.0


async def test_a_failover_a_snapshot_started_is_not_counted_again_when_the_primary_goes() -> None:
    bot = playing_bot()  # seated at epoch 3 on connection 0, the spare (1) parked
    bot._retire = lambda connection_id: None  # type: ignore[method-assign]
    assert deliver(bot, 0, lambda: bot.accept_snapshot(3, 540, 4))
    assert deliver(bot, 1, lambda: bot.accept_snapshot(4, 600, 5))  # before the welcome
    stopped = asyncio.Event()
    stopped.set()  # (only what the failover records: no waiting, no new connection)
    await bot._fail_over(stopped)  # the old primary's silence noticed, the welcome not yet in
    (event,) = bot.failovers
    assert (event.tick_before, event.epoch_before, event.epoch_after) == (540, 3, -1)
    deliver(bot, 1, lambda: bot.welcomed(welcome("t1", epoch=4)))
    assert event.epoch_after == 4
    await bot._fail_over(stopped)  # a later failover is a new one
    assert len(bot.failovers) == 2 and bot.failovers[-1].epoch_before == 4
