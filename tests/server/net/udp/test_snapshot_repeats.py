"""A UDP player whose path lost a datagram lately gets each snapshot twice, the copy half a
snapshot interval later, in process over loopback sockets (the endpoint of
:mod:`tests.server.net.udp.test_token_renewal`): independent loss then takes both copies
at the square of its rate, and two snapshots lost in a row no longer leave the player three
intervals without one. A path that lost nothing gets each once."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from server.net.udp.link import LOSSY_FOR_S, UdpLink
from server.net.udp.tokens import region_connect_token
from server.sim.input_budget import input_allowance
from shared.datagram import Channel, Lane
from tests.server.net.udp.test_token_renewal import T0, Region


def seated(region: Region) -> tuple[Channel, UdpLink]:
    channel, link = region.connected(region_connect_token(region.node, b"ada", T0))
    link.seat(object(), object(), SimpleNamespace(allowance=input_allowance(60)), lambda: 0)  # type: ignore[arg-type]
    region.endpoint._loop = asyncio.get_running_loop()  # (its timers; the test reads for it)
    return channel, link


def snapshots_received(region: Region, channel: Channel) -> list[bytes]:
    return [
        payload
        for datagram in region.down()
        for lane, payload in channel.receive(datagram, region.time)
        if lane is Lane.UNRELIABLE
    ]


async def test_a_lossy_path_gets_each_snapshot_again_half_an_interval_later() -> None:
    region = Region()
    try:
        channel, link = seated(region)
        endpoint = region.endpoint
        link.send_snapshot(b"head", b"tick 10")
        endpoint.flush()
        assert snapshots_received(region, channel) == [b"headtick 10"]
        assert endpoint._repeat_timer is None  # nothing lost: sent once

        link.channel.last_loss_at = region.time - 1.0  # a datagram lost a second ago
        link.send_snapshot(b"head", b"tick 12", probe=b"probe")
        endpoint.flush()
        assert snapshots_received(region, channel) == [b"headtick 12", b"probe"]
        endpoint._send_repeats()  # (early: the copy is not due yet)
        assert region.down() == []
        await asyncio.sleep(endpoint.repeat_after_s + 0.05)  # (the endpoint's timer)
        assert snapshots_received(region, channel) == [b"headtick 12"]  # the probe once
        assert endpoint._metrics.udp_snapshot_repeats._value.get() == 1
        assert endpoint._repeat_timer is None

        region.time += LOSSY_FOR_S + 0.1  # nothing lost since
        link.send_snapshot(b"head", b"tick 14")
        assert endpoint._repeat_timer is None
    finally:
        await region.endpoint.close()
        region.client.close()


async def test_a_copy_for_a_link_that_left_meanwhile_is_not_sent() -> None:
    region = Region()
    try:
        channel, link = seated(region)
        link.channel.last_loss_at = region.time
        link.send_snapshot(b"head", b"tick 10")
        region.endpoint.flush()
        snapshots_received(region, channel)
        region.endpoint.forget(link)
        await asyncio.sleep(region.endpoint.repeat_after_s + 0.05)
        assert region.down() == []
        assert region.endpoint._metrics.udp_snapshot_repeats._value.get() == 0
    finally:
        await region.endpoint.close()
        region.client.close()
