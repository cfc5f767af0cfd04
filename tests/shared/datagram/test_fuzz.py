"""100,000 datagrams of every kind :mod:`launch.datagram_fuzz` makes (random, mutated,
replayed, truncated, forged) against a node's handshake and a connected channel: not one is
accepted, delivered or answered, each is counted by cause, and the honest connection still
works afterwards. Seeded, and bounded to a few seconds."""

from __future__ import annotations

import random
import time

from launch.datagram_fuzz import (
    CHALLENGED,
    CONNECTED,
    FUZZ_KINDS,
    SOURCE_OF,
    Material,
    fuzz_datagram,
)
from shared.datagram import CAUSES, ClientHandshake, Lane

from .links import CLIENT, NODE, connect, region_key, token_for

DATAGRAMS = 100_000
SECONDS = 30.0  # a bound on a busy machine; it takes about one


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
    challenge = server.on_datagram(request, waiting_address, 0.0).reply
    assert challenge is not None
    waiting.on_datagram(challenge, 0.0)
    (response,) = waiting.datagrams(0.0)
    # Genuine traffic of every kind to mutate, replay and cut.
    pair.client_channel.send(b"input", Lane.REDUNDANT)
    pair.client_channel.send(b"x" * 3000, Lane.UNRELIABLE)
    pair.client_channel.send(b"event", Lane.RELIABLE)
    payloads = pair.client_channel.datagrams(0.2)
    for datagram in payloads:
        channel.receive(datagram, 0.2)
    material = Material(
        genuine=(*[d for _, d in pair.wire], *payloads, request, response),
        replays=(*[d for _, d in pair.wire], *payloads),
        request=request,
        challenged=waiting.token,
        node=NODE,
        region_key=key,
    )
    sources = {CONNECTED: [CLIENT], CHALLENGED: [waiting_address]}
    others = [("127.0.0.1", 50003), ("10.1.2.3", 9)]

    received_before = channel.stats["received"]
    refused_by_server = refused_by_channel = 0
    sent = dict.fromkeys(FUZZ_KINDS, 0)
    started = time.monotonic()
    for number in range(DATAGRAMS):
        kind = FUZZ_KINDS[number % len(FUZZ_KINDS)]
        now = 0.3 + number * 1e-5
        datagram = fuzz_datagram(kind, rng, material, now)
        sent[kind] += 1
        if datagram == response:  # the one datagram that is genuine and not yet used
            continue
        address = rng.choice(sources.get(SOURCE_OF[kind], []) + others)
        step = server.on_datagram(datagram, address, now)
        assert step.established is None
        assert step.reply is None, f"answered a fuzzed datagram: {datagram[:16].hex()}"
        assert step.refused in CAUSES
        refused_by_server += 1
        assert channel.receive(datagram, now) == []
        refused_by_channel += 1
        assert time.monotonic() - started < SECONDS
    assert refused_by_server + refused_by_channel > 2 * 0.99 * DATAGRAMS
    assert min(sent.values()) > 0.99 * DATAGRAMS / len(FUZZ_KINDS)
    assert channel.stats["received"] == received_before
    assert sum(channel.refused.values()) == refused_by_channel
    # Many causes met, each counted: the forged tokens, padding and challenges included.
    assert len(server.refused) >= 6
    for cause in ("expired", "bad_token", "bad_packet", "bad_challenge", "replayed", "bad_size"):
        assert server.refused.get(cause, 0) > 0, cause
    # The honest peers are untouched: the waiting client still connects, the channel works.
    assert server.on_datagram(response, waiting_address, 0.5).established is not None
    pair.client_channel.send(b"still here", Lane.RELIABLE)
    delivered = [p for d in pair.client_channel.datagrams(0.5) for p in channel.receive(d, 0.5)]
    assert (Lane.RELIABLE, b"still here") in delivered
