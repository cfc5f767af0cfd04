"""The channel: each lane's promise holds over a lossy, duplicating, reordering link, and a
datagram that is not exactly what the peer sealed delivers nothing."""

from __future__ import annotations

import os
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.datagram import MAX_PAYLOAD, Channel, Lane
from shared.datagram.channel import DISCONNECT_COPIES, MAX_REDUNDANT_PAYLOAD
from shared.datagram.packets import FRAGMENT_SIZE

from .links import LossyLink


def pair(now: float = 0.0, **options) -> tuple[Channel, Channel]:
    up, down = os.urandom(32), os.urandom(32)
    return Channel(up, down, now, **options), Channel(down, up, now, **options)


def carry(source: Channel, target: Channel, now: float) -> list[tuple[Lane, bytes]]:
    delivered = []
    for datagram in source.datagrams(now):
        delivered += target.receive(datagram, now)
    return delivered


@pytest.mark.parametrize("size", [0, 1, 600, 1150, 1151, FRAGMENT_SIZE * 3, 100_000])
def test_unreliable_round_trip(size: int) -> None:
    client, server = pair()
    payload = os.urandom(size)
    client.send(payload, Lane.UNRELIABLE)
    datagrams = client.datagrams(0.0)
    assert all(len(d) <= MAX_PAYLOAD for d in datagrams)
    delivered = [item for d in datagrams for item in server.receive(d, 0.0)]
    assert delivered == [(Lane.UNRELIABLE, payload)]


@pytest.mark.parametrize("size", [0, 900, 5000])
def test_reliable_round_trip(size: int) -> None:
    client, server = pair()
    payload = os.urandom(size)
    client.send(payload, Lane.RELIABLE)
    assert carry(client, server, 0.0) == [(Lane.RELIABLE, payload)]


def test_redundant_payloads_ride_every_datagram_until_acknowledged() -> None:
    client, server = pair(redundancy=4)
    for number in range(3):
        client.send(b"input %d" % number, Lane.REDUNDANT)
    first = client.datagrams(0.0)
    client.send(b"input 3", Lane.REDUNDANT)
    second = client.datagrams(0.01)
    # The second datagram repeats the first three: the first one alone may be lost.
    assert server.receive(second[0], 0.02) == [(Lane.REDUNDANT, b"input %d" % n) for n in range(4)]
    assert server.stats["recovered_by_redundancy"] == 3
    assert server.receive(first[0], 0.03) == []  # older: already delivered, never twice
    carry(server, client, 0.04)  # the acknowledgement
    client.send(b"input 4", Lane.REDUNDANT)
    (third,) = client.datagrams(0.05)
    assert server.receive(third, 0.06) == [(Lane.REDUNDANT, b"input 4")]
    assert len(third) < len(second[0])  # acknowledged ones are no longer repeated


def test_only_the_newest_redundant_payloads_are_kept() -> None:
    client, server = pair(redundancy=4)
    for number in range(10):
        client.send(b"%d" % number, Lane.REDUNDANT)
    assert carry(client, server, 0.0) == [(Lane.REDUNDANT, b"%d" % n) for n in range(6, 10)]
    assert client.stats["redundant_given_up"] == 6


def test_sizes_each_lane_refuses() -> None:
    client, _ = pair()
    with pytest.raises(ValueError, match="redundant"):
        client.send(bytes(MAX_REDUNDANT_PAYLOAD + 1), Lane.REDUNDANT)
    with pytest.raises(ValueError, match="unreliable"):
        client.send(bytes(FRAGMENT_SIZE * 255 + 1), Lane.UNRELIABLE)


def test_keep_alive_and_time_out() -> None:
    client, server = pair(timeout_s=1.0)
    assert len(client.datagrams(0.0)) == 1  # nothing sent yet: a keep-alive
    assert client.datagrams(0.05) == []
    (keep_alive,) = client.datagrams(0.1)
    assert server.receive(keep_alive, 0.1) == []
    assert not server.timed_out(1.1)
    assert server.timed_out(1.11)


def test_rtt_is_measured_from_acknowledgements() -> None:
    client, server = pair()
    (up,) = client.datagrams(0.0)
    server.receive(up, 0.04)
    for datagram in server.datagrams(0.04):
        client.receive(datagram, 0.08)
    assert client.rtt_s == pytest.approx(0.08)


def test_a_lost_datagram_is_taken_as_lost_three_after_and_counted_once_out_of_the_bits() -> None:
    server, client = pair()
    server.send(b"lost on the way", Lane.UNRELIABLE)
    server.datagrams(0.0)  # never delivered
    taken_at = None
    for step in range(1, 40):
        now = step * 0.01
        server.send(b"s%d" % step, Lane.UNRELIABLE)
        carry(server, client, now)
        client.send(b"i", Lane.REDUNDANT)
        carry(client, server, now)
        if taken_at is None and server.last_loss_at == now:
            taken_at = step
        if server.stats["lost"]:
            break
    assert taken_at == 4  # acknowledged: 1, 2, 3, 4 (sequence 0 is LOSS_REORDER_THRESHOLD behind)
    assert server.stats["lost"] == 1 and step == 33  # out of the 32 bits: counted, once
    assert client.last_loss_at == float("-inf")  # its datagrams all arrived


def test_disconnect_closes_the_peer() -> None:
    client, server = pair()
    goodbyes = client.disconnect()
    assert len(goodbyes) == DISCONNECT_COPIES
    assert client.datagrams(1.0) == []
    server.receive(goodbyes[1], 0.0)
    assert server.closed
    assert server.datagrams(0.5) == []


def refused_and_silent(channel: Channel, datagram: bytes, cause: str) -> None:
    before = channel.stats
    assert channel.receive(datagram, 0.5) == []
    after = channel.stats
    assert after["received"] == before["received"]
    assert after["refused"].get(cause, 0) == before["refused"].get(cause, 0) + 1


def test_what_is_not_exactly_as_sealed_is_refused() -> None:
    client, server = pair()
    client.send(b"fire", Lane.RELIABLE)
    (datagram,) = client.datagrams(0.0)
    assert server.receive(datagram, 0.0) == [(Lane.RELIABLE, b"fire")]
    refused_and_silent(server, datagram, "replayed")
    assert server.stats["duplicates"] == 1
    client.send(b"reload", Lane.RELIABLE)
    (fresh,) = client.datagrams(0.2)  # resends "fire" (unacknowledged) with "reload"
    refused_and_silent(server, fresh[:8], "bad_size")
    refused_and_silent(server, fresh[:-1], "bad_packet")  # truncated
    for index in (0, 1, 9, len(fresh) // 2, len(fresh) - 1):  # kind, sequence, body, tag
        flipped = bytearray(fresh)
        flipped[index] ^= 0x10
        refused_and_silent(server, bytes(flipped), "bad_packet")
    # None of the forgeries moved the replay window or delivered a thing: the real one still
    # arrives, and delivers only what was not delivered before.
    assert server.receive(fresh, 0.3) == [(Lane.RELIABLE, b"reload")]
    stranger, _ = pair()
    for step in range(4):  # past the sequences the server saw
        stranger.send(b"fire", Lane.UNRELIABLE)
        (foreign,) = stranger.datagrams(step * 0.1)
    refused_and_silent(server, foreign, "bad_packet")  # another key
    refused_and_silent(server, bytes(MAX_PAYLOAD + 1), "bad_size")


def test_sequences_older_than_the_window_are_refused() -> None:
    client, server = pair()
    first = client.datagrams(0.0)[0]
    for step in range(1, 300):
        client.send(b"x", Lane.UNRELIABLE)
        for datagram in client.datagrams(step * 0.001):
            server.receive(datagram, step * 0.001)
    refused_and_silent(server, first, "out_of_window")


def test_a_lost_fragment_loses_only_its_payload() -> None:
    client, server = pair()
    payloads = [os.urandom(3000) for _ in range(3)]
    for payload in payloads:
        client.send(payload, Lane.UNRELIABLE)
    datagrams = client.datagrams(0.0)
    assert len(datagrams) == 9
    delivered = []
    for index, datagram in enumerate(datagrams):
        if index != 4:  # the middle fragment of the second payload
            delivered += server.receive(datagram, 0.0)
    assert delivered == [(Lane.UNRELIABLE, payloads[0]), (Lane.UNRELIABLE, payloads[2])]


def test_the_lanes_over_a_lossy_link() -> None:
    """Seeded loss (10 %), duplication (5 %) and reordering (jitter of 3 send intervals) both
    ways: inputs on REDUNDANT arrive exactly once and oldest first (none lost: each rides 16
    datagrams), RELIABLE messages exactly once in order, fragmented snapshots whole or not at
    all, never twice."""
    rng = random.Random(20261206)
    client, server = pair(timeout_s=60.0)
    options = {"loss": 0.10, "duplicate": 0.05, "delay": 0.05, "jitter": 0.05}
    up, down = LossyLink(rng, **options), LossyLink(rng, **options)
    inputs = [b"input %d" % n for n in range(600)]
    client_events = [b"client event %d" % n for n in range(40)]
    server_events = [os.urandom(rng.randrange(1, 3000)) for _ in range(40)]
    snapshots = {
        n: n.to_bytes(4, "little") + os.urandom(rng.randrange(100, 4000)) for n in range(300)
    }
    got = {Lane.REDUNDANT: [], Lane.RELIABLE: [], Lane.UNRELIABLE: []}
    sent_back: dict[Lane, list[bytes]] = {Lane.RELIABLE: [], Lane.UNRELIABLE: []}
    now = 0.0
    for tick in range(900):  # 15 s at 60 Hz, then 5 s to let the reliable lane settle
        now = tick / 60
        if tick < len(inputs):
            client.send(inputs[tick], Lane.REDUNDANT)
            if tick % 15 == 0:
                client.send(client_events[tick // 15], Lane.RELIABLE)
            if tick % 2 == 0:
                server.send(snapshots[tick // 2], Lane.UNRELIABLE)
            if tick % 15 == 7:
                server.send(server_events[tick // 15], Lane.RELIABLE)
        up.send(client.datagrams(now), now)
        down.send(server.datagrams(now), now)
        for datagram in up.arrivals(now):
            for lane, payload in server.receive(datagram, now):
                got[lane].append(payload)
        for datagram in down.arrivals(now):
            for lane, payload in client.receive(datagram, now):
                sent_back[lane].append(payload)
    assert up.dropped > 50 and down.dropped > 50
    assert got[Lane.REDUNDANT] == inputs
    assert server.stats["recovered_by_redundancy"] > 30
    assert got[Lane.RELIABLE] == client_events
    assert sent_back[Lane.RELIABLE] == server_events
    assert client.stats["resent"] > 0 and server.stats["resent"] > 0
    shown = sent_back[Lane.UNRELIABLE]
    numbers = [int.from_bytes(s[:4], "little") for s in shown]
    assert len(set(numbers)) == len(numbers)  # never twice
    assert all(snapshots[n] == s for n, s in zip(numbers, shown, strict=True))  # whole
    assert 0.5 * len(snapshots) < len(shown) < len(snapshots)  # the lost ones only
    assert numbers != sorted(numbers)  # the link did reorder
    assert server.stats["duplicates"] > 0 and client.stats["lost"] > 0
    # Two delays of 50 to 100 ms, plus up to a tick before the acknowledgement leaves.
    assert 0.1 < client.rtt_s < 0.2 + 2 / 60


sends = st.lists(
    st.tuples(
        st.sampled_from(list(Lane)),
        st.integers(0, 6000),
        st.booleans(),  # whether datagrams() is called after this send
    ),
    max_size=25,
)


@settings(max_examples=60, deadline=None)
@given(sends)
def test_any_mix_of_lanes_fits_datagrams_and_arrives_over_a_perfect_link(plan) -> None:
    client, server = pair(redundancy=32)
    expected: dict[Lane, list[bytes]] = {lane: [] for lane in Lane}
    got: dict[Lane, list[bytes]] = {lane: [] for lane in Lane}
    now = 0.0
    for number, (lane, size, flush) in enumerate(plan):
        size = min(size, 400) if lane is Lane.REDUNDANT else size
        payload = number.to_bytes(2, "little") + bytes(size)
        client.send(payload, lane)
        expected[lane].append(payload)
        if flush or number == len(plan) - 1:
            now += 0.01
            for datagram in client.datagrams(now):
                assert len(datagram) <= MAX_PAYLOAD
                for delivered_lane, delivered in server.receive(datagram, now):
                    got[delivered_lane].append(delivered)
    for _ in range(3):  # whatever waited for room leaves with the next calls
        now += 0.01
        for datagram in client.datagrams(now):
            for delivered_lane, delivered in server.receive(datagram, now):
                got[delivered_lane].append(delivered)
    assert got == expected
