"""A UDP client's link, in process over a pair of real channels: the same budgets and intake
as a WebSocket player's, snapshots on the unreliable lane, an error before a close."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from server.net.links import POLICY_VIOLATION
from server.net.metrics import NodeMetrics
from server.net.udp.link import UdpLink, as_client_frame
from server.sim.input_budget import PING_ALLOWANCE, FrameKind, input_allowance
from server.sim.input_frames import decode_input_frames
from shared import protocol
from shared.datagram import Channel, Lane

TICK_RATE = 60


class Endpoint:
    """What a link needs of its endpoint: wake-ups, a clock, its end told."""

    def __init__(self) -> None:
        self.time = 1000.0
        self.woken = 0
        self.disconnected: list[UdpLink] = []
        self.forgotten: list[UdpLink] = []

    def wake(self, link: UdpLink) -> None:
        self.woken += 1

    def clock(self) -> float:
        return self.time

    def disconnect(self, link: UdpLink) -> None:
        self.disconnected.append(link)

    def forget(self, link: UdpLink) -> None:
        self.forgotten.append(link)


class Intake:
    """Holds what it is given (the real intake decodes it at the tick)."""

    def __init__(self) -> None:
        self.allowance = input_allowance(TICK_RATE)
        self.generation = 0
        self.held: list[bytes] = []

    def hold(self, owner: Any, read: bytes, arrival: float) -> int:
        self.held.append(read)
        return self.generation

    def drain(self) -> None:
        self.generation += 1


class Events:
    def __init__(self, drop_on_offence: bool = True) -> None:
        self.frames: list[bytes] = []
        self.over: list[tuple[FrameKind, int, bool]] = []
        self.drop_on_offence = drop_on_offence

    def frame(self, data: bytes) -> bool:
        self.frames.append(data)
        return False

    def refused(self, error: protocol.ProtocolError) -> bool:
        return False

    def over_budget(self, kind: FrameKind, dropped: int, offence: bool) -> bool:
        self.over.append((kind, dropped, offence))
        return offence and self.drop_on_offence


def pair(endpoint: Endpoint) -> tuple[Channel, UdpLink]:
    """A client's channel and the node's link of the same connection."""
    up, down = os.urandom(32), os.urandom(32)
    client = Channel(up, down, endpoint.time)
    server = Channel(down, up, endpoint.time)
    return client, UdpLink(("127.0.0.1", 5000), server, endpoint, NodeMetrics())


def deliver(client: Channel, link: UdpLink, endpoint: Endpoint) -> None:
    for datagram in client.datagrams(endpoint.time):
        link.datagram(datagram, endpoint.time)


def seated(link: UdpLink, intake: Intake, events: Events, now: list[float]) -> None:
    assert link.seat(object(), events, intake, lambda: now[0]) is link.gone  # type: ignore[arg-type]


def an_input(seq: int) -> bytes:
    return protocol.encode(protocol.InputMessage(seq, seq, (0.5, 0.0), 10.0, 0.0, 1, 1.0, -1))


async def test_a_redundant_payload_is_held_in_the_intake_as_a_frame_its_batch_decodes() -> None:
    endpoint, intake, events = Endpoint(), Intake(), Events()
    client, link = pair(endpoint)
    seated(link, intake, events, [0.0])
    for seq in range(3):
        client.send(an_input(seq), Lane.REDUNDANT)
        deliver(client, link, endpoint)  # (each datagram repeats the earlier ones)
    assert len(intake.held) == 3 and not events.frames
    columns = decode_input_frames(intake.held)
    assert columns.read_ok.all()
    assert columns.ints[:, 0].tolist() == [0, 1, 2]  # each once, in order
    link.read_now(intake.held[0])  # (what the intake gives back when its batch cannot)
    assert events.frames == [an_input(0)]
    assert as_client_frame(b"x")[:2] == b"\x82\x81"


async def test_inputs_and_other_frames_are_charged_to_a_websocket_players_budgets() -> None:
    endpoint, intake, events = Endpoint(), Intake(), Events()
    client, link = pair(endpoint)
    seated(link, intake, events, [5.0])
    for seq in range(TICK_RATE + 4):  # at one instant: the burst, and four more
        client.send(an_input(seq), Lane.REDUNDANT)
        deliver(client, link, endpoint)
    assert len(intake.held) == TICK_RATE
    assert events.over == [(FrameKind.INPUT, 1, False)] * 4
    ping = protocol.encode(protocol.PingMessage(1, 0.0))
    for _ in range(PING_ALLOWANCE.burst + 2):
        client.send(ping, Lane.RELIABLE)
    deliver(client, link, endpoint)
    assert events.frames == [ping] * PING_ALLOWANCE.burst
    assert events.over[-2:] == [(FrameKind.PING, 1, False)] * 2


async def test_a_flood_is_dropped_unopened_for_a_while_and_an_offence_too_many_closes() -> None:
    endpoint, intake, events = Endpoint(), Intake(), Events(drop_on_offence=False)
    client, link = pair(endpoint)
    now = [5.0]
    seated(link, intake, events, now)
    for seq in range(TICK_RATE * 12):  # more than ten seconds' worth dropped in one second
        client.send(an_input(seq), Lane.REDUNDANT)
        deliver(client, link, endpoint)
    metrics = link._metrics
    client.send(an_input(10_000), Lane.REDUNDANT)
    deliver(client, link, endpoint)
    flooding = metrics.registry.get_sample_value("arena_udp_refused_total", {"cause": "flooding"})
    assert flooding is not None and flooding >= 1  # (dropped unopened while paused)
    # Kept up into the next second: an offence, and the sessions drop it.
    endpoint.time += 1.0
    now[0] += 1.0
    events.drop_on_offence = True
    for seq in range(TICK_RATE * 3):
        client.send(an_input(20_000 + seq), Lane.REDUNDANT)
        deliver(client, link, endpoint)
    assert events.over[-1] == (FrameKind.INPUT, 1, True)
    assert link.closing and not link.reading()


async def test_snapshots_and_probes_go_unreliable_and_an_error_goes_before_the_close() -> None:
    endpoint, intake, events = Endpoint(), Intake(), Events()
    client, link = pair(endpoint)
    seated(link, intake, events, [0.0])
    assert link.send_snapshot(b"head-", b"body", b"probe")
    assert link.send(b"message")
    link.close(POLICY_VIOLATION, b"offences")
    assert not link.send(b"late") and not link.send_snapshot(b"h", b"b")
    got = [
        (lane, payload)
        for datagram in link.channel.datagrams(endpoint.time)
        for lane, payload in client.receive(datagram, endpoint.time)
    ]
    assert got == [  # (a round-trip probe is never resent: it rides beside the snapshot)
        (Lane.RELIABLE, b"message"),
        (Lane.UNRELIABLE, b"head-body"),
        (Lane.UNRELIABLE, b"probe"),
    ]
    await asyncio.wait_for(link.wait_closed(), 2.0)
    assert endpoint.disconnected == [link]
