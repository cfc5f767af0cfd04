"""Helpers for the datagram tests: a connected pair of channels, and a seeded lossy link
(loopback never loses a datagram, so loss, duplication and reordering are modelled here)."""

from __future__ import annotations

import heapq
import os
import random
from dataclasses import dataclass, field

from shared.datagram import (
    Channel,
    ClientHandshake,
    ConnectToken,
    Established,
    ServerHandshake,
    issue_connect_token,
)

NODE = ("127.0.0.1", 4000)
STANDBY = ("127.0.0.1", 4001)
CLIENT = ("127.0.0.1", 50000)


def region_key() -> bytes:
    return os.urandom(32)


def token_for(key: bytes, now: float = 0.0, **options: object) -> ConnectToken:
    options.setdefault("addresses", [NODE, STANDBY])
    options.setdefault("user_data", b"seat")
    return issue_connect_token(key, now=now, **options)  # type: ignore[arg-type]


@dataclass
class Connected:
    """Both sides of a finished handshake, and every datagram that crossed it."""

    server: ServerHandshake
    client: ClientHandshake
    established: Established
    wire: list[tuple[str, bytes]] = field(default_factory=list)  # (direction, datagram)

    @property
    def client_channel(self) -> Channel:
        assert self.client.channel is not None
        return self.client.channel

    @property
    def server_channel(self) -> Channel:
        return self.established.channel


def connect(
    key: bytes,
    now: float = 0.0,
    node: tuple[str, int] = NODE,
    server: ServerHandshake | None = None,
    token: ConnectToken | None = None,
    address: tuple[str, int] = CLIENT,
) -> Connected:
    """Run the handshake over a perfect link until the client is connected."""
    server = server or ServerHandshake(key, [node])
    token = token or token_for(key, now)
    client = ClientHandshake(token, node, now)
    wire: list[tuple[str, bytes]] = []
    for _ in range(10):
        for datagram in client.datagrams(now):
            wire.append(("up", datagram))
            step = server.on_datagram(datagram, address, now)
            assert step.refused is None, step.refused
            if step.reply is not None:
                wire.append(("down", step.reply))
                client.on_datagram(step.reply, now)
            if step.established is not None:
                assert client.state == "connected"
                return Connected(server, client, step.established, wire)
        now += 0.1
    raise AssertionError(f"no connection: {client.state}")


class LossyLink:
    """One direction of a seeded network: each datagram is lost with ``loss``, doubled with
    ``duplicate``, and delayed by ``delay`` plus up to ``jitter`` (which reorders)."""

    def __init__(
        self,
        rng: random.Random,
        *,
        loss: float = 0.0,
        duplicate: float = 0.0,
        delay: float = 0.05,
        jitter: float = 0.0,
    ) -> None:
        self.rng = rng
        self.loss, self.duplicate, self.delay, self.jitter = loss, duplicate, delay, jitter
        self._queue: list[tuple[float, int, bytes]] = []
        self._order = 0
        self.dropped = 0

    def send(self, datagrams: list[bytes], now: float) -> None:
        for datagram in datagrams:
            copies = 2 if self.rng.random() < self.duplicate else 1
            for _ in range(copies):
                if self.rng.random() < self.loss:
                    self.dropped += 1
                    continue
                arrival = now + self.delay + self.rng.uniform(0.0, self.jitter)
                heapq.heappush(self._queue, (arrival, self._order, datagram))
                self._order += 1

    def arrivals(self, now: float) -> list[bytes]:
        out = []
        while self._queue and self._queue[0][0] <= now:
            out.append(heapq.heappop(self._queue)[2])
        return out
