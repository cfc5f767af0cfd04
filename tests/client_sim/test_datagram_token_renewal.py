"""A UDP bot's connect token renewed by its node (``connect_token``): the swarm hands it to
the bot's TokenBook, a malformed one is counted and ignored, and a failover long after the
first token expired connects to the standby with the renewed one, asking no ``/connect``."""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from typing import Any

import pytest

from client_sim import datagram
from client_sim.bot import Bot
from client_sim.pump import DeliveryPump
from client_sim.swarm import Swarm, SwarmConfig
from shared import protocol
from shared.datagram import issue_connect_token
from shared.datagram.tokens import ConnectToken
from tests.client_sim.test_bot_tokens import PARAMS, connection, deliver, playing_bot

REGION_KEY = secrets.token_bytes(32)
NODE = ("127.0.0.1", 4000)
STANDBY = ("127.0.0.1", 4001)


def token_issued(seconds_ago: float) -> ConnectToken:
    return issue_connect_token(
        REGION_KEY, user_data=b"bot-0", addresses=[NODE, STANDBY], now=time.time() - seconds_ago
    )


def compact(token: ConnectToken) -> str:
    return json.dumps(token.to_json(), separators=(",", ":"))


def renewal(token: ConnectToken) -> bytes:
    return protocol.encode(protocol.ConnectTokenMessage(compact(token)))


def udp_bot() -> tuple[Swarm, Bot]:
    swarm = Swarm(SwarmConfig(url="ws://127.0.0.1:4000/ws", bots=(PARAMS,), duration=1.0,
                              transport="udp"))  # fmt: skip
    swarm.welcomed = asyncio.Event()  # (made by the swarm's run, as its pump)
    swarm.pump = DeliveryPump(asyncio.get_running_loop())
    return swarm, playing_bot(swarm)


async def test_the_swarm_hands_a_connect_token_to_the_bot_s_token_book() -> None:
    swarm, bot = udp_bot()
    first, renewed = token_issued(40.0), token_issued(10.0)
    bot._tokens.renewed(first)
    bot._tokens.used.add(NODE)

    deliver(bot, 1, lambda: swarm.deliver(bot, renewal(renewed)))  # the spare: not our node
    assert bot._tokens.token == first

    deliver(bot, 0, lambda: swarm.deliver(bot, renewal(renewed)))

    assert bot._tokens.token == renewed and not bot._tokens.used
    assert not swarm.errors


@pytest.mark.parametrize(
    "text", ["not json", "[" * 2000, '{"private": "AAAA"}', "[]", compact(token_issued(0))[:-1]]
)
async def test_a_malformed_connect_token_is_counted_and_the_bot_keeps_its_own(text: str) -> None:
    swarm, bot = udp_bot()
    held = token_issued(0.0)
    bot._tokens.renewed(held)

    frame = protocol.encode(protocol.ConnectTokenMessage(text))
    deliver(bot, 0, lambda: swarm.deliver(bot, frame))

    assert bot._tokens.token == held
    assert swarm.errors == {"bad_connect_token": 1}


class FakeTransport:
    """``datagram.request_token`` and ``datagram.connect`` as the bot calls them: records
    which token connected where, and every ``/connect`` asked."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.asked: list[str] = []
        self.connected: list[tuple[ConnectToken, tuple[str, int]]] = []
        monkeypatch.setattr(datagram, "request_token", self.request_token)
        monkeypatch.setattr(datagram, "connect", self.connect)

    async def request_token(self, url: str, *_: Any) -> ConnectToken:
        self.asked.append(url)
        return token_issued(0.0)

    async def connect(self, token: ConnectToken, address: tuple[str, int], *_: Any, **__: Any):
        self.connected.append((token, address))
        return connection(9, None).ws


async def test_a_failover_connects_to_the_standby_with_the_renewed_token_and_no_connect(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    swarm, bot = udp_bot()
    transport = FakeTransport(monkeypatch)
    bot._tokens.renewed(token_issued(40.0))  # from the node's /connect, long expired
    bot._tokens.used.add(NODE)
    renewed = token_issued(10.0)
    deliver(bot, 0, lambda: swarm.deliver(bot, renewal(renewed)))
    assert bot._datagrams is not None

    await bot._connect_datagram("ws://127.0.0.1:4001/ws", 5, bot._datagrams)

    assert transport.connected == [(renewed, STANDBY)]
    assert transport.asked == []
    assert bot._tokens.used == {STANDBY}


async def test_without_a_renewal_a_late_failover_asks_the_standby_for_a_token(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, bot = udp_bot()
    transport = FakeTransport(monkeypatch)
    bot._tokens.renewed(token_issued(40.0))
    assert bot._datagrams is not None

    await bot._connect_datagram("ws://127.0.0.1:4001/ws", 5, bot._datagrams)

    assert transport.asked == ["ws://127.0.0.1:4001/ws"]
