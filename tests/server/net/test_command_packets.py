"""Command packets: a bot sends its inputs at its input rate, each packet with every input
since the last (Source's cl_cmdrate), and the node applies every one of them."""

from __future__ import annotations

import asyncio
import contextlib

import msgpack
import pytest

from client_sim.latency import draw_bot, parse_distribution
from client_sim.swarm import Swarm, SwarmConfig, SwarmResult, inputs_per_packet
from client_sim.websocket import WebSocketClient
from tests.server.net.test_admission import counted
from tests.server.replication.test_replication_link import bind, cluster, until


@pytest.mark.parametrize(
    ("tick_rate", "input_rate", "ticks"),
    [(60, 30.0, 2), (60, 60.0, 1), (60, 120.0, 1), (60, 20.0, 3), (60, 25.0, 2), (30, 30.0, 1)],
)
def test_a_packet_leaves_every_whole_number_of_ticks(
    tick_rate: int, input_rate: float, ticks: int
) -> None:
    assert inputs_per_packet(tick_rate, input_rate) == ticks


@pytest.mark.parametrize(("input_rate", "per_packet"), [(30.0, 2), (60.0, 1)])
async def test_a_bot_sends_its_inputs_in_packets_and_the_node_applies_them_all(
    monkeypatch: pytest.MonkeyPatch, input_rate: float, per_packet: int
) -> None:
    packets: list[int] = []  # the inputs in each write of the bot's that carried one
    send_many = WebSocketClient.send_many

    def counting(self: WebSocketClient, payloads: list[bytes]) -> bool:
        inputs = sum(msgpack.unpackb(p)["type"] == "input" for p in payloads)
        if inputs:
            packets.append(inputs)
        return send_many(self, payloads)

    monkeypatch.setattr(WebSocketClient, "send_many", counting)
    async with cluster() as (nodes, _session):
        primary = await nodes.start(bind(), node_id="alpha")
        params = (draw_bot(0, seed=1, rtt=parse_distribution("20ms")),)
        url = primary.url.replace("http://", "ws://") + "/ws"
        config = SwarmConfig(url=url, bots=params, duration=5.0, seed=1, input_rate=input_rate)
        swarm = Swarm(config)
        running: asyncio.Future[SwarmResult] = asyncio.ensure_future(swarm.run())
        try:

            async def played(inputs: int) -> bool:
                return bool(swarm.bots) and swarm.bots[0].inputs_sent >= inputs

            # The second second: the clock is synced by then (pings every half second).
            await until(lambda: played(60), "the bot plays a second")
            sent_before, writes_before = swarm.bots[0].inputs_sent, len(packets)
            await until(lambda: played(120), "the bot plays another second")
            sent = swarm.bots[0].inputs_sent - sent_before
            writes = len(packets) - writes_before
        finally:
            running.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await running
        assert swarm.inputs_per_packet == per_packet
        # Each packet holds the inputs of its ticks; a ping (two a second once synced) or a
        # sighting makes one leave early; the window ends between a hold and its write.
        assert sent / per_packet - 3 <= writes <= sent / per_packet + 6
        assert max(packets) >= per_packet
        applied = counted(primary, "arena_inputs_applied_total")
        total = swarm.bots[0].inputs_sent
        assert applied >= total - 2 * per_packet  # (the last packet may still be on its way)
