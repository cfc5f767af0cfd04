"""A seated UDP player's connect token is renewed at half its life, in process over loopback
sockets with an injected clock: the endpoint's service pass sends ``connect_token`` on the
reliable lane, and the token it carries opens at the region's standby after the first one
expired."""

from __future__ import annotations

import functools
import json
import socket
from types import SimpleNamespace
from typing import Any, cast

import pytest

from server.net.metrics import NodeMetrics
from server.net.udp.endpoint import UdpEndpoint
from server.net.udp.link import RENEW_WITHIN_S, UdpLink
from server.net.udp.tokens import CONNECT_TOKEN_TTL_S, region_connect_token
from server.region_key import region_key
from server.sim.input_budget import input_allowance
from shared import protocol
from shared.datagram import Channel, ClientHandshake, ConnectToken, ServerHandshake
from shared.datagram.tokens import Refused, open_private_token
from tests.shared.datagram.links import connect

KEY = region_key(b"a cluster secret of the region", "eu")
STANDBY = ("127.0.0.1", 4001)
T0 = 1_700_000_000.0


async def _serve(link: UdpLink) -> None:
    await link.gone


class Region:
    """A node's loopback socket, its endpoint on an injected clock, and one client socket."""

    def __init__(self) -> None:
        self.time = T0
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.setblocking(False)
        self.client = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.client.bind(("127.0.0.1", 0))
        self.client.setblocking(False)
        self.node: Any = cast(
            Any,
            SimpleNamespace(
                udp_key=KEY,
                udp_address=self.sock.getsockname(),
                peer_urls=lambda: [f"http://{STANDBY[0]}:{STANDBY[1]}"],
            ),
        )  # (what region_connect_token reads of a node)
        self.endpoint = UdpEndpoint(
            self.sock,
            ServerHandshake(KEY, [self.node.udp_address]),
            NodeMetrics(),
            _serve,
            clock=lambda: self.time,
            issue=functools.partial(region_connect_token, self.node),
        )

    def up(self, datagrams: list[bytes]) -> None:
        """The client's datagrams reach the node's socket, and the node reads them."""
        for datagram in datagrams:
            self.client.sendto(datagram, self.node.udp_address)
        self.endpoint._readable()

    def down(self) -> list[bytes]:
        """What the node sent the client (loopback delivers a datagram before ``sendto``
        returns)."""
        received = []
        for _ in range(64):
            try:
                received.append(self.client.recv(2048))
            except BlockingIOError:
                break
        return received

    def connected(self, token: ConnectToken) -> tuple[Channel, UdpLink]:
        handshake = ClientHandshake(token, self.node.udp_address, self.time)
        for _ in range(10):
            self.up(handshake.datagrams(self.time))
            self.endpoint.flush()
            for datagram in self.down():
                handshake.on_datagram(datagram, self.time)
            if handshake.channel is not None:
                break
            self.time += 0.1
        assert handshake.channel is not None, handshake.state
        (link,) = self.endpoint.links.values()
        return handshake.channel, link

    def service_pass_at(self, now: float, channel: Channel) -> list[Any]:
        """At ``now``: the client's keep-alive, the node's service pass; the messages the
        client received."""
        self.time = now
        self.up(channel.datagrams(now))
        self.endpoint._service_pass()
        payloads = [p for datagram in self.down() for _, p in channel.receive(datagram, now)]
        return [protocol.decode_server(payload) for payload in payloads]


def renewals(messages: list[Any]) -> list[protocol.ConnectTokenMessage]:
    return [m for m in messages if isinstance(m, protocol.ConnectTokenMessage)]


async def test_a_seated_player_gets_a_connect_token_at_half_its_life_that_opens_at_a_standby():
    region = Region()
    try:
        first = region_connect_token(region.node, b"ada", T0)
        channel, link = region.connected(first)
        half_life = first.expires_at - RENEW_WITHIN_S
        assert half_life == pytest.approx(T0 + CONNECT_TOKEN_TTL_S / 2)
        assert not renewals(region.service_pass_at(half_life - 0.5, channel))  # not seated
        link.seat(object(), object(), SimpleNamespace(allowance=input_allowance(60)), lambda: 0)  # type: ignore[arg-type]
        assert not renewals(region.service_pass_at(half_life - 0.1, channel))  # not yet
        (message,) = renewals(region.service_pass_at(half_life, channel))
        assert len(message.token) <= protocol.MAX_CONNECT_TOKEN_CHARS
        renewed = ConnectToken.from_json(json.loads(message.token))
        assert renewed.expires_at == half_life + CONNECT_TOKEN_TTL_S
        assert renewed.addresses == (region.node.udp_address, STANDBY)
        assert renewed.client_to_server_key != first.client_to_server_key
        assert not renewals(region.service_pass_at(half_life + 1.0, channel))  # once
        # After the first token ran out, the renewed one opens at the standby (same region
        # key), carrying the same user data; the first is refused there.
        later = first.expires_at + 1.0
        with pytest.raises(Refused, match="expired"):
            open_private_token(KEY, first.private, later)
        failover = connect(KEY, later, node=STANDBY, token=renewed)
        assert failover.established.token.user_data == b"ada"
        # Its own renewal comes at half of the renewed token's life.
        assert renewals(region.service_pass_at(renewed.expires_at - RENEW_WITHIN_S, channel))
    finally:
        await region.endpoint.close()
        region.client.close()
