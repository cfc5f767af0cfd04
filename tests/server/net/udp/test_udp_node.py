"""A real node process serving UDP: a scripted client (shared.datagram only) gets a connect
token over HTTP, handshakes, joins, plays; a WebSocket player shares its match; forged and
garbage datagrams are refused by cause and never answered with more than they carried."""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import secrets
import socket
import sys
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest

from launch.datagram_fuzz import forged_response, request_datagram
from server.region_key import region_key
from shared import protocol
from shared.datagram import ConnectToken, Lane, issue_connect_token
from shared.datagram.constants import PROTOCOL_VERSION, REQUEST_SIZE
from shared.datagram.packets import RESPONSE_SIZE, Kind
from tests.processes import Session, start_session
from tests.server.net.udp.client import UdpPlayer, connect_token

pytestmark = pytest.mark.integration

READY_S = 120.0
SECRET = secrets.token_hex(16)
REGION = "local"


class Node:
    """A node process started for these tests, with its ports read from its own output."""

    def __init__(self, session: Session) -> None:
        session.wait_for("event=listening", READY_S)
        line = next(line for line in session.lines if "event=listening" in line)
        found = re.search(r"url=ws://127\.0\.0\.1:(\d+)/ws udp=(\S+)", line)
        assert found is not None, line
        self.session = session
        self.port = int(found.group(1))
        self.udp = None if found.group(2) == "off" else int(found.group(2))
        self.base_url = f"http://127.0.0.1:{self.port}"
        admin = re.search(r"admin=(\S+)", line)
        assert admin is not None, line
        self.admin_url = admin.group(1)  # the full /health and /metrics

    def health(self) -> dict[str, Any]:
        with urllib.request.urlopen(self.admin_url + "/health", timeout=5) as answer:
            return json.loads(answer.read())

    def metrics(self) -> dict[str, float]:
        with urllib.request.urlopen(self.admin_url + "/metrics", timeout=5) as answer:
            text = answer.read().decode()
        values = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                values[name] = float(value)
        return values


def node_command(*extra: str) -> list[str]:
    return [sys.executable, "-m", "server.net.cli", "--host", "127.0.0.1", "--port", "0",
            "--admin-port", "0", "--log-level", "warning", *extra]  # fmt: skip


@pytest.fixture(scope="module")
def node() -> Iterator[Node]:
    env = {**os.environ, "ARENA_CLUSTER_SECRET": SECRET}
    with start_session(node_command(), env) as session:
        yield Node(session)


def player(node: Node, name: str) -> UdpPlayer:
    status, body = connect_token(node.base_url, {"name": name})
    assert status == 200, body
    token = ConnectToken.from_json(body)
    assert token.addresses[0] == ("127.0.0.1", node.udp)
    return UdpPlayer(token)


def input_message(seq: int, tick: int) -> protocol.InputMessage:
    return protocol.InputMessage(seq, tick, (1.0, 0.0), 0.0, 0.0, 0, 0.0, -1)


def test_the_udp_port_is_the_tcp_ports_number_and_health_says_so(node: Node) -> None:
    assert node.udp == node.port
    assert node.health()["udp"] == node.udp


def test_a_udp_player_connects_joins_gets_snapshots_and_its_inputs_are_applied(
    node: Node,
) -> None:
    before = node.metrics()
    client = player(node, "udp-one")
    try:
        client.connect()
        welcome = client.join("udp-one")
        client.until("snapshots", lambda: len(client.of(protocol.SnapshotMessage)) >= 3)
        assert Lane.UNRELIABLE in client.lanes and Lane.RELIABLE in client.lanes
        tick = client.of(protocol.SnapshotMessage)[-1].tick
        for seq in range(40):  # (a tick's worth apart: none is over budget)
            client.send(input_message(seq, tick + seq), Lane.REDUNDANT)
            client.pump(1 / 60)
        client.until(
            "the last input acknowledged",
            lambda: client.of(protocol.SnapshotMessage)[-1].ack == 39,
        )
        assert not client.errors()
        assert node.health()["udp_clients"] >= 1
    finally:
        client.close()
    after = node.metrics()
    assert after["arena_inputs_applied_total"] - before["arena_inputs_applied_total"] == 40
    rejected = {k: v - before.get(k, 0.0) for k, v in after.items() if "inputs_rejected" in k}
    assert not any(rejected.values()), rejected
    assert welcome.player_id >= 0
    assert after['arena_udp_datagrams_total{direction="in"}'] > 40
    assert after['arena_udp_datagrams_total{direction="out"}'] > 3


def test_a_websocket_player_and_a_udp_player_share_a_match(node: Node) -> None:
    async def both() -> tuple[protocol.WelcomeMessage, protocol.WelcomeMessage, int]:
        async with aiohttp.ClientSession() as http:
            ws = await http.ws_connect(f"ws://127.0.0.1:{node.port}/ws")
            await ws.send_bytes(
                protocol.encode(protocol.JoinMessage(protocol.PROTOCOL_VERSION, "ws"))
            )
            on_ws = protocol.decode_server((await ws.receive()).data)
            assert isinstance(on_ws, protocol.WelcomeMessage), on_ws
            client = player(node, "udp-two")
            try:
                await asyncio.to_thread(client.connect)
                on_udp = await asyncio.to_thread(client.join, "udp-two")
                players = node.health()["matches"][on_udp.match]["players"]
                await asyncio.to_thread(client.pump, 0.3)
                assert client.of(protocol.SnapshotMessage)
            finally:
                client.close()
                await ws.close()
            return on_ws, on_udp, players

    on_ws, on_udp, players = asyncio.run(both())
    assert on_ws.match == on_udp.match
    assert on_ws.player_id != on_udp.player_id
    assert players >= 2


def _exchange(node: Node, datagram: bytes, sock: socket.socket | None = None) -> list[bytes]:
    """Send ``datagram`` from a socket of its own (or ``sock``): what came back in 0.15 s."""
    own = sock is None
    sock = sock or socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        sock.settimeout(0.15)
        sock.sendto(datagram, ("127.0.0.1", node.udp or 0))
        replies = []
        for _ in range(8):
            try:
                replies.append(sock.recvfrom(2048)[0])
            except TimeoutError:
                break
        return replies
    finally:
        if own:
            sock.close()


def test_forged_spoofed_and_garbage_datagrams_are_refused_by_cause_never_amplified(
    node: Node,
) -> None:
    key = region_key(SECRET.encode(), REGION)
    here = [("127.0.0.1", node.udp or 0)]
    now = time.time()

    def sealed(
        under: bytes = key, addresses: list[tuple[str, int]] = here, at: float = now
    ) -> bytes:
        return issue_connect_token(under, user_data=b"x", addresses=addresses, now=at).private

    refused = {
        "bad_size": [b"", bytes([Kind.REQUEST]) * 999, bytes([Kind.RESPONSE]) * 10],
        "bad_packet": [bytes([9]) + os.urandom(60), request_datagram(sealed(), padding=1)],
        "bad_version": [request_datagram(sealed(), version=PROTOCOL_VERSION + 1)],
        "bad_token": [request_datagram(sealed(under=os.urandom(32)))],
        "expired": [request_datagram(sealed(at=now - 100))],
        "not_listed": [request_datagram(sealed(addresses=[("127.0.0.1", 1)]))],
        "unknown_address": [
            bytes([Kind.PAYLOAD]) + os.urandom(40),
            bytes([Kind.RESPONSE]) + os.urandom(RESPONSE_SIZE - 1),
        ],
    }
    before = node.metrics()
    for datagrams in refused.values():
        for datagram in datagrams:
            assert _exchange(node, datagram) == [], datagram[:8]
    # A challenge answered with a forged challenge token; a token used twice.
    _, body = connect_token(node.base_url, {"name": "forger"})
    token = ConnectToken.from_json(body)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        (challenge,) = _exchange(node, request_datagram(token.private), sock)
        assert len(challenge) < REQUEST_SIZE
        forged = forged_response(token.client_to_server_key, random.Random(3))
        assert len(forged) == RESPONSE_SIZE
        assert _exchange(node, forged, sock) == []
    honest = player(node, "honest")
    try:
        honest.connect()
        connected = node.health()["udp_clients"]
        assert _exchange(node, request_datagram(honest.token.private)) == []  # replayed
        # Fuzz: random kinds and sizes; nothing gets a connection, and no reply is larger
        # than the datagram that drew it (every tenth is waited on for a reply).
        rng = random.Random(5)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            for number in range(200):
                size = rng.choice([1, 30, 77, RESPONSE_SIZE, 999, REQUEST_SIZE, 1200])
                datagram = bytes([rng.randint(0, 6)]) + rng.randbytes(size - 1)
                if number % 10 == 0:
                    assert all(len(reply) <= size for reply in _exchange(node, datagram))
                else:
                    sock.sendto(datagram, ("127.0.0.1", node.udp or 0))
        honest.join("honest")
        honest.pump(0.3)
        assert honest.of(protocol.SnapshotMessage)
        assert node.health()["udp_clients"] == connected
    finally:
        honest.close()
    time.sleep(0.2)
    after = node.metrics()
    grown = {
        cause: after[f'arena_udp_refused_total{{cause="{cause}"}}']
        - before[f'arena_udp_refused_total{{cause="{cause}"}}']
        for cause in [*refused, "bad_challenge", "replayed"]
    }
    assert all(count >= 1 for count in grown.values()), grown


def test_udp_port_off_serves_websocket_only() -> None:
    with start_session(node_command("--udp-port", "off")) as session:
        node = Node(session)
        assert node.udp is None
        assert node.health()["udp"] is None
        status, body = connect_token(node.base_url, {"name": "nobody"})
        assert (status, body["error"]) == (404, "no_udp")


def test_a_bad_udp_port_is_one_line() -> None:
    with start_session(node_command("--udp-port", "seven")) as session:
        session.process.wait(30)
        assert session.process.returncode == 2
        (line,) = [line for line in session.lines if line.strip()]
        assert "--udp-port" in line and "'seven' is not a UDP port" in line


def test_after_a_failover_the_same_connect_token_resumes_the_seat_at_the_promoted_standby() -> None:
    env = {**os.environ, "ARENA_CLUSTER_SECRET": secrets.token_hex(16)}
    with start_session(node_command("--node-id", "a"), env) as first:
        primary = Node(first)
        standby_command = node_command("--node-id", "b", "--role", "standby",
                                       "--primary", primary.base_url)  # fmt: skip
        with start_session(standby_command, env) as second:
            standby = Node(second)
            deadline = time.monotonic() + READY_S
            while not any(s["state"] == "in_sync" for s in primary.health()["standbys"]):
                assert time.monotonic() < deadline, "the standby never got in sync"
                time.sleep(0.1)
            _, body = connect_token(primary.base_url, {"name": "survivor"})
            token = ConnectToken.from_json(body)
            assert token.addresses == (("127.0.0.1", primary.udp), ("127.0.0.1", standby.udp))
            client = UdpPlayer(token)
            try:
                client.connect()
                welcome = client.join("survivor")
                tick = welcome.tick
                for seq in range(10):
                    client.send(input_message(seq, tick + seq), Lane.REDUNDANT)
                    client.pump(1 / 60)
                client.until(
                    "acknowledged", lambda: client.of(protocol.SnapshotMessage)[-1].ack == 9
                )
                first.process.kill()  # (the primary goes silent under its client)
            finally:
                client.close()
            while standby.health()["role"] != "primary":
                assert time.monotonic() < deadline + 30, "the standby was never promoted"
                time.sleep(0.1)
            moved = UdpPlayer(token, token.addresses[1])
            try:
                moved.connect()
                back = moved.join("survivor", token=welcome.token)
                assert (back.match, back.player_id) == (welcome.match, welcome.player_id)
                assert back.ack == 9  # every acknowledged input is still there
                moved.until("snapshots", lambda: bool(moved.of(protocol.SnapshotMessage)))
            finally:
                moved.close()
