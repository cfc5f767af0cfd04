"""A scripted UDP player for the node's tests, built from :mod:`shared.datagram` alone: a
connect token over HTTP, the handshake, then the seat protocol's messages on the lanes.

Blocking and bounded: every wait has a deadline, every loop a count."""

from __future__ import annotations

import json
import socket
import time
import urllib.request
from collections.abc import Callable
from typing import Any

from shared import protocol
from shared.datagram import ClientHandshake, ConnectToken, Lane

Address = tuple[str, int]


def connect_token(base_url: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """POST ``body`` to ``/connect``: (HTTP status, JSON answer)."""
    request = urllib.request.Request(
        base_url + "/connect",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


class UdpPlayer:
    """One client socket, its handshake and channel, and every server message it got."""

    def __init__(self, token: ConnectToken, address: Address | None = None) -> None:
        self.token = token
        self.address = address or token.addresses[0]
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.01)
        self.handshake = ClientHandshake(token, self.address, time.time())
        self.messages: list[Any] = []
        self.lanes: list[Lane] = []

    def close(self) -> None:
        """Disconnect cleanly (when connected), then close the socket."""
        if self.handshake.channel is not None:
            self._send_all(self.handshake.channel.disconnect())
        self.sock.close()

    def _send_all(self, datagrams: list[bytes]) -> None:
        for datagram in datagrams:
            self.sock.sendto(datagram, self.address)

    def pump(self, seconds: float = 0.0) -> None:
        """Send what is due, read what arrived, for about ``seconds``."""
        end = time.monotonic() + seconds
        for _ in range(10_000):
            now = time.time()
            channel = self.handshake.channel
            if channel is None:
                self._send_all(self.handshake.datagrams(now))
            else:
                self._send_all(channel.datagrams(now))
            try:
                data, _ = self.sock.recvfrom(2048)
            except TimeoutError:
                data = None
            if data is not None:
                for lane, payload in self.handshake.on_datagram(data, time.time()):
                    self.lanes.append(lane)
                    self.messages.append(protocol.decode_server(payload))
            if time.monotonic() >= end:
                return

    def until(self, what: str, done: Callable[[], bool], within: float = 5.0) -> None:
        end = time.monotonic() + within
        while not done():
            if time.monotonic() > end:
                raise AssertionError(f"timed out waiting until {what}")
            self.pump(0.02)

    def connect(self) -> None:
        self.until("connected", lambda: self.handshake.state != "connecting")
        assert self.handshake.state == "connected", self.handshake.refusal

    def send(self, message: protocol.Message, lane: Lane = Lane.RELIABLE) -> None:
        channel = self.handshake.channel
        assert channel is not None
        channel.send(protocol.encode(message), lane)
        self._send_all(channel.datagrams(time.time()))

    def of(self, kind: type) -> list[Any]:
        return [message for message in self.messages if isinstance(message, kind)]

    def join(self, name: str, token: str | None = None) -> protocol.WelcomeMessage:
        self.send(protocol.JoinMessage(v=protocol.PROTOCOL_VERSION, name=name, token=token))
        self.until("welcomed", lambda: bool(self.of(protocol.WelcomeMessage) or self.errors()))
        assert not self.errors(), self.errors()
        welcome: protocol.WelcomeMessage = self.of(protocol.WelcomeMessage)[0]
        return welcome

    def errors(self) -> list[protocol.ErrorMessage]:
        return self.of(protocol.ErrorMessage)
