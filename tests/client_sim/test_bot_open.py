"""A bot's connection attempt: one its node closed before the attempt returned is none."""

from __future__ import annotations

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
