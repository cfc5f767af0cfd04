"""A swarm reads all its bots' clocks in one pass a tick: each bot's local, server and
render time exactly as the bot itself gives them, before its first pong and after."""

from __future__ import annotations

import asyncio

import numpy as np

from client_sim.bot import Bot
from client_sim.latency import draw_bot, parse_distribution
from client_sim.swarm import Swarm, SwarmConfig
from shared import protocol
from tests.client_sim.test_bot_tokens import connection, deliver, welcome


async def test_one_pass_reads_every_bot_s_clock_as_the_bot_does() -> None:
    rtt = parse_distribution("40ms")
    params = tuple(draw_bot(i, seed=7, rtt=rtt) for i in range(5))
    swarm = Swarm(SwarmConfig(url="ws://a/ws", bots=params, duration=1.0, seed=7))
    swarm.welcomed = asyncio.Event()
    swarm.bots = [Bot(i, p, swarm, "ws://a/ws") for i, p in enumerate(params)]
    loop = asyncio.get_running_loop()
    for bot in swarm.bots:
        bot._connections = {0: connection(0, None)}
        bot._active = 0
        deliver(bot, 0, lambda bot=bot: swarm._on_welcome(bot, welcome(f"t{bot.index}")))
    for k, bot in enumerate(swarm.bots[1:], start=1):  # bot 0 has had no pong yet
        for n in range(k + 2):  # bots 3 and 4 past the snapping pongs: slewing
            sent = bot.local_time() - 0.03 * (n + 1)
            bot.note_pong(protocol.PongMessage(n, sent, 100.0 + 0.7 * k + 0.01 * n))
    ready = np.arange(len(swarm.bots))
    for later in (0.0, 0.05, 3.0):
        now = loop.time() + later
        local, server_now, render = swarm._clocks(ready, now)
        for bot in swarm.bots:
            i = bot.index
            assert local[i] == now + bot.params.clock_offset
            assert server_now[i] == bot.server_time(local[i])
            assert render[i] == Swarm._render_time(bot, server_now[i])
    assert not swarm._synced[0] and swarm._synced[1:].all()
