"""The handshake: a client connects; a node refuses by cause, answers nothing it refuses,
never sends an unproved address more than it received, and keeps no seat for it."""

from __future__ import annotations

import pytest

from shared.datagram import ClientHandshake, Lane, ServerHandshake
from shared.datagram.constants import PROTOCOL_VERSION, REQUEST_SIZE
from shared.datagram.packets import CHALLENGE_SIZE, RESPONSE_SIZE, Kind

from .links import CLIENT, NODE, STANDBY, connect, region_key, token_for


def request_and_challenge(key: bytes, server: ServerHandshake, now: float = 0.0, **token_options):
    token = token_for(key, now, **token_options)
    client = ClientHandshake(token, NODE, now)
    (request,) = client.datagrams(now)
    step = server.on_datagram(request, CLIENT, now)
    return client, request, step


def test_connect_and_exchange_payloads() -> None:
    key = region_key()
    pair = connect(key)
    assert pair.established.address == CLIENT
    assert pair.established.token.user_data == b"seat"
    assert [len(d) for direction, d in pair.wire] == [
        REQUEST_SIZE,
        CHALLENGE_SIZE,
        RESPONSE_SIZE,
        37,
    ]
    pair.client_channel.send(b"join", Lane.RELIABLE)
    (up,) = pair.client_channel.datagrams(0.2)
    assert pair.server_channel.receive(up, 0.2) == [(Lane.RELIABLE, b"join")]
    pair.server_channel.send(b"welcome", Lane.RELIABLE)
    (down,) = pair.server_channel.datagrams(0.2)
    assert pair.client_channel.receive(down, 0.2) == [(Lane.RELIABLE, b"welcome")]


def test_the_same_token_connects_to_a_standby_with_other_keys() -> None:
    """Failover: a token is good at every listed node, once per node, and the two
    connections never share a key (their nonces start again at 0)."""
    key = region_key()
    token = token_for(key)
    primary = connect(key, token=token)
    standby = connect(key, token=token, node=STANDBY)
    up_primary = primary.client_channel.datagrams(1.0)[0]
    up_standby = standby.client_channel.datagrams(1.0)[0]
    assert up_primary[:9] == up_standby[:9]  # the same kind and sequence ...
    assert up_primary[9:] != up_standby[9:]  # ... under another key
    assert standby.server_channel.receive(up_primary, 1.0) == []
    assert standby.server_channel.refused == {"bad_packet": 1}


def test_a_token_is_accepted_once_per_node() -> None:
    key = region_key()
    token = token_for(key)
    pair = connect(key, token=token)
    again = ClientHandshake(token, NODE, 1.0)
    (request,) = again.datagrams(1.0)
    step = pair.server.on_datagram(request, ("127.0.0.1", 50001), 1.0)
    assert (step.reply, step.established, step.refused) == (None, None, "replayed")


def refusal_of(server: ServerHandshake, datagram: bytes, now: float = 0.0, address=CLIENT) -> str:
    step = server.on_datagram(datagram, address, now)
    assert step.reply is None and step.established is None
    assert step.refused is not None
    return step.refused


def test_refusals_of_a_request() -> None:
    key = region_key()
    server = ServerHandshake(key, [NODE])
    _, request, _ = request_and_challenge(key, ServerHandshake(key, [NODE]))
    assert refusal_of(server, b"") == "bad_size"
    assert refusal_of(server, request[:-1]) == "bad_size"
    assert refusal_of(server, request + b"\0") == "bad_size"
    assert (
        refusal_of(server, request[:1] + bytes([PROTOCOL_VERSION + 1]) + request[2:])
        == "bad_version"
    )
    assert refusal_of(server, request[:2] + bytes(8) + request[10:]) == "bad_version"
    assert refusal_of(server, request[:-1] + b"\1") == "bad_packet"  # the padding
    assert refusal_of(server, request, now=30.0) == "expired"
    assert refusal_of(ServerHandshake(region_key(), [NODE]), request) == "bad_token"
    forged = bytearray(request)
    forged[100] ^= 4
    assert refusal_of(server, bytes(forged)) == "bad_token"
    assert refusal_of(ServerHandshake(key, [("127.0.0.1", 4999)]), request) == "not_listed"
    assert refusal_of(server, bytes([99]) + request[1:]) == "bad_packet"
    assert refusal_of(server, bytes([Kind.CHALLENGE]) + bytes(CHALLENGE_SIZE - 1)) == "bad_packet"
    assert server.refused == {
        "bad_size": 3,
        "bad_version": 2,
        "bad_packet": 3,
        "expired": 1,
        "bad_token": 1,
    }


def test_refusals_of_a_response() -> None:
    key = region_key()
    server = ServerHandshake(key, [NODE])
    client, _, step = request_and_challenge(key, server)
    client.on_datagram(step.reply, 0.0)
    (response,) = client.datagrams(0.0)
    assert len(response) == RESPONSE_SIZE
    assert refusal_of(server, response[:-1]) == "bad_size"
    assert refusal_of(server, response, address=("127.0.0.1", 50001)) == "unknown_address"
    flipped = bytearray(response)
    flipped[-1] ^= 1
    assert refusal_of(server, bytes(flipped)) == "bad_packet"
    assert refusal_of(server, bytes([Kind.PAYLOAD]) + bytes(60)) == "unknown_address"
    # The answer arrives too late: the pending entry has expired.
    assert refusal_of(server, response, now=5.0) == "expired"
    assert server.pending == 0


def test_a_challenge_answered_from_another_address_is_refused() -> None:
    """The challenge token is bound to the address it was sent to: an attacker who saw it
    cannot answer for itself; a client at that address and the attacker's both pending."""
    key = region_key()
    server = ServerHandshake(key, [NODE])
    token = token_for(key)
    victim = ClientHandshake(token, NODE, 0.0)
    (request,) = victim.datagrams(0.0)
    challenge = server.on_datagram(request, CLIENT, 0.0).reply
    server.on_datagram(request, ("127.0.0.1", 50001), 0.0)  # the token, replayed elsewhere
    victim.on_datagram(challenge, 0.0)
    (response,) = victim.datagrams(0.0)
    assert refusal_of(server, response, address=("127.0.0.1", 50001)) == "bad_challenge"


def test_pending_is_bounded() -> None:
    key = region_key()
    server = ServerHandshake(key, [NODE], max_pending=3)
    token = token_for(key)
    (request,) = ClientHandshake(token, NODE, 0.0).datagrams(0.0)
    for port in range(3):
        assert server.on_datagram(request, ("127.0.0.1", 6000 + port), 0.0).reply is not None
    assert refusal_of(server, request, address=("127.0.0.1", 7000)) == "pending_full"
    assert server.pending == 3
    # Once the pending entries time out, room is made again.
    assert server.on_datagram(request, ("127.0.0.1", 7000), 6.0).reply is not None
    assert server.pending == 1


def test_no_amplification_to_an_unproved_address() -> None:
    """Whatever an address sends before it answers a challenge, the node sends it at most as
    many bytes as it received (a spoofed source gets nothing to reflect)."""
    key = region_key()
    server = ServerHandshake(key, [NODE])
    valid = [ClientHandshake(token_for(key), NODE, 0.0).datagrams(0.0)[0] for _ in range(3)]
    junk = [bytes(REQUEST_SIZE), bytes([Kind.RESPONSE]) + bytes(RESPONSE_SIZE - 1), b"\x01" * 1200]
    victim = ("127.0.0.1", 40000)
    received = sent = 0
    for round_number in range(20):
        for datagram in valid + junk:
            received += len(datagram)
            step = server.on_datagram(datagram, victim, round_number * 0.01)
            assert step.established is None
            if step.reply is not None:
                assert len(step.reply) < len(datagram)
                sent += len(step.reply)
            assert sent <= received
    assert sent > 0  # the valid requests were challenged
    assert server.pending == 1  # one entry for the address, whatever it sent


def test_client_states() -> None:
    key = region_key()
    token = token_for(key, now=0.0, expires_in_s=2.0, timeout_s=1.0)
    assert ClientHandshake(token, ("127.0.0.1", 1), 0.0).refusal == "not_listed"
    silent = ClientHandshake(token, NODE, 0.0)
    sent = [len(silent.datagrams(step / 16)) for step in range(16)]  # exact binary times
    assert sent == [1, 0] * 8  # a request every 0.1 s, not more often
    silent.datagrams(1.01)
    assert silent.state == "timed_out"
    late = ClientHandshake(token, NODE, 1.5)
    assert late.datagrams(2.0) == [] and (late.state, late.refusal) == ("refused", "expired")


def test_a_forged_challenge_leaves_the_client_connecting() -> None:
    key = region_key()
    server = ServerHandshake(key, [NODE])
    client, _, step = request_and_challenge(key, server)
    forged = bytearray(step.reply)
    forged[30] ^= 1
    client.on_datagram(bytes(forged), 0.0)
    assert client.refused == {"bad_packet": 1}
    assert client.datagrams(0.2)[0][0] == Kind.REQUEST  # still asking


@pytest.mark.parametrize("lost", ["challenge", "keep-alive"])
def test_a_lost_handshake_packet_is_resent(lost: str) -> None:
    key = region_key()
    server = ServerHandshake(key, [NODE])
    client = ClientHandshake(token_for(key), NODE, 0.0)
    dropped = False
    now = 0.0
    while client.state == "connecting" and now < 2.0:
        for datagram in client.datagrams(now):
            step = server.on_datagram(datagram, CLIENT, now)
            if step.established is not None:
                channel = step.established.channel
            kind = "challenge" if datagram[0] == Kind.REQUEST else "keep-alive"
            if step.reply is not None and (kind != lost or dropped):
                client.on_datagram(step.reply, now)
            dropped = dropped or kind == lost
        if client.state == "connecting" and dropped and lost == "keep-alive":
            for datagram in channel.datagrams(now):
                client.on_datagram(datagram, now)
        now += 0.05
    assert client.state == "connected"
