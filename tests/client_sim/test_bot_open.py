"""A bot's connection attempt: one its node closed before the attempt returned is none."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from client_sim.bot import Bot
from client_sim.latency import draw_bot, parse_distribution
from shared import protocol

PARAMS = draw_bot(0, seed=1, rtt=parse_distribution("40ms"))


def udp_bot(errors: list[str]) -> Bot:
    host: Any = SimpleNamespace(
        config=SimpleNamespace(
            transport="udp", connect_timeout=1.0, name_prefix="bot", interp_delay=0.1
        ),
        pump=None,
        note_error=errors.append,
        clock_changed=lambda *_: None,
    )
    return Bot(0, PARAMS, host, "ws://a/ws")


async def test_a_connection_refused_as_it_opened_is_not_kept() -> None:
    """A node warming up answers the UDP handshake, then ``not_ready`` and a close: over
    UDP the close reaches the bot before the handshake's waiter resumes. Kept, such a
    connection would pass for open forever (a spare never welcomed, waited for at every
    failover)."""
    bot = udp_bot([])

    async def refused_at_once(url: str, connection_id: int, link: object) -> Any:
        bot._ended(connection_id)  # the close, delivered while the handshake returns
        return SimpleNamespace(closed=True)

    bot._connect_datagram = refused_at_once  # type: ignore[method-assign]

    assert await bot._open("ws://b/ws") is None
    assert bot._connections == {}


async def test_a_connection_that_opened_is_kept_and_joins() -> None:
    errors: list[str] = []
    bot = udp_bot(errors)
    sent: list[list[bytes]] = []

    def send_many(frames: list[bytes]) -> bool:
        sent.append(frames)
        return True

    opened = SimpleNamespace(closed=False, send_many=send_many)

    async def opens(url: str, connection_id: int, link: object) -> Any:
        return opened

    bot._connect_datagram = opens  # type: ignore[method-assign]

    connection_id = await bot._open("ws://b/ws")

    assert connection_id is not None and bot._connections[connection_id].ws is opened
    assert [type(protocol.decode_client(frame)) for frames in sent for frame in frames] == [
        protocol.JoinMessage
    ]
    assert errors == []


async def test_a_node_warming_up_holds_off_only_itself() -> None:
    bot = udp_bot([])
    bot.hold_off(2.0, "ws://b/ws")  # not_ready from the standby that holds our spare
    assert 2.0 <= bot._wait_for("ws://b/ws") <= 2.5
    assert bot._wait_for("ws://a/ws") == 0.0
    bot.hold_off(1.0)  # held off by the region (a seat closed for offences): everywhere
    assert 1.0 <= bot._wait_for("ws://a/ws") <= 1.25
    assert bot._wait_for("ws://b/ws") >= 2.0


async def test_a_failover_tries_another_node_while_a_warming_one_holds_off() -> None:
    """The bot's spare was refused ``not_ready`` by a standby restarting when its primary
    died: the failover tries the region's other nodes at once instead of waiting out that
    standby's hold-off (it used to wait, seconds of stall for nothing)."""
    bot = udp_bot([])
    bot.welcome = SimpleNamespace(standbys=("ws://b/ws",))  # type: ignore[assignment]
    bot.hold_off(5.0, "ws://b/ws")
    tried: list[str] = []

    async def refused(url: str) -> None:
        tried.append(url)
        if url == "ws://a/ws":
            stop.set()  # (enough: the other node was tried)

    bot._open = refused  # type: ignore[method-assign,assignment]
    stop = asyncio.Event()
    began = asyncio.get_running_loop().time()
    await asyncio.wait_for(bot._fail_over(stop), 2.0)
    assert tried == ["ws://a/ws"]
    assert asyncio.get_running_loop().time() - began < 1.0
