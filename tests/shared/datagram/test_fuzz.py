"""20,000 random, mutated, replayed and truncated datagrams against a node's handshake and a
connected channel: not one is accepted, delivered or answered, each is counted by cause, and
the honest connection still works afterwards. Seeded, and bounded to a few seconds."""

from __future__ import annotations

import random
import time

from shared.datagram import CAUSES, ClientHandshake, Lane
from shared.datagram.constants import REQUEST_SIZE

from .links import CLIENT, NODE, connect, region_key, token_for

DATAGRAMS = 20_000
SECONDS = 20.0  # a bound on a busy machine; it takes about one


def mutate(rng: random.Random, datagram: bytes) -> bytes:
    """A changed copy: bit flips, a truncation, an insertion or a new kind byte (never the
    same bytes: an exact copy is a replay, tried on its own)."""
    data = bytearray(datagram)
    how = rng.randrange(4)
    if how == 0 or len(data) < 2:
        for _ in range(rng.randrange(1, 4)):
            index = rng.randrange(len(data))
            data[index] ^= 1 << rng.randrange(8)
    elif how == 1:
        del data[rng.randrange(len(data)) :]
    elif how == 2:
        data.insert(rng.randrange(len(data)), rng.randrange(256))
    else:
        data[0] = (data[0] + rng.randrange(1, 256)) % 256
    return bytes(data)


def test_fuzzed_datagrams_are_all_refused() -> None:
    rng = random.Random(49)
    key = region_key()
    pair = connect(key)
    server, channel = pair.server, pair.server_channel
    # A second client waits with its challenge answered but its response not yet delivered:
    # mutations of that response are tried against a live pending entry.
    waiting = ClientHandshake(token_for(key), NODE, 0.0)
    waiting_address = ("127.0.0.1", 50002)
    (request,) = waiting.datagrams(0.0)
    waiting.on_datagram(server.on_datagram(request, waiting_address, 0.0).reply, 0.0)
    (response,) = waiting.datagrams(0.0)
    # Genuine traffic of every kind to mutate, replay and cut.
    pair.client_channel.send(b"input", Lane.REDUNDANT)
    pair.client_channel.send(b"x" * 3000, Lane.UNRELIABLE)
    pair.client_channel.send(b"event", Lane.RELIABLE)
    payloads = pair.client_channel.datagrams(0.2)
    for datagram in payloads:
        channel.receive(datagram, 0.2)
    expired = token_for(key, now=-60.0, expires_in_s=1.0)
    expired_request = ClientHandshake(expired, NODE, -60.0).datagrams(-60.0)[0]
    foreign = ClientHandshake(token_for(region_key()), NODE, 0.0).datagrams(0.0)[0]
    genuine = [d for _, d in pair.wire] + payloads + [request, response]
    replays = [d for _, d in pair.wire] + payloads + [expired_request, foreign]
    addresses = [CLIENT, waiting_address, ("127.0.0.1", 50003), ("10.1.2.3", 9)]

    received_before = channel.stats["received"]
    refused_by_server = refused_by_channel = 0
    started = time.monotonic()
    for number in range(DATAGRAMS):
        choice = rng.random()
        if choice < 0.3:
            datagram = rng.randbytes(
                rng.choice([0, 1, 9, 40, 105, 121, REQUEST_SIZE, rng.randrange(1300)])
            )
        elif choice < 0.9:
            datagram = mutate(rng, rng.choice(genuine))
        else:
            datagram = rng.choice(replays)
        if datagram == response:  # the one datagram that is genuine and not yet used
            continue
        now = 0.3 + number * 1e-5
        step = server.on_datagram(datagram, rng.choice(addresses), now)
        assert step.established is None
        assert step.reply is None, f"answered a fuzzed datagram: {datagram[:16].hex()}"
        assert step.refused in CAUSES
        refused_by_server += 1
        assert channel.receive(datagram, now) == []
        refused_by_channel += 1
        assert time.monotonic() - started < SECONDS
    assert refused_by_server + refused_by_channel > 2 * 0.99 * DATAGRAMS
    assert channel.stats["received"] == received_before
    assert sum(channel.refused.values()) == refused_by_channel
    assert len(server.refused) >= 6  # many causes met, each counted
    # The honest peers are untouched: the waiting client still connects, the channel works.
    assert server.on_datagram(response, waiting_address, 0.5).established is not None
    pair.client_channel.send(b"still here", Lane.RELIABLE)
    delivered = [p for d in pair.client_channel.datagrams(0.5) for p in channel.receive(d, 0.5)]
    assert (Lane.RELIABLE, b"still here") in delivered
