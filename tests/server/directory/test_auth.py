"""Request signatures: the hex HMAC of the raw body, checked in constant time; heartbeats
signed with their node, time and sequence, and copies of them refused."""

from __future__ import annotations

import hashlib
import hmac
import json

import pytest

from server.directory.auth import (
    SIGNATURE_HEADER,
    HeartbeatSequence,
    ReplayGuard,
    Stamp,
    check_heartbeat_signature,
    check_signature,
    sign,
    sign_heartbeat,
    signed_heartbeat,
    stamp_from_headers,
)
from shared.directory import Heartbeat

SECRET = b"cluster-secret-for-tests-0123456789"


def test_request_signatures() -> None:
    body = b'{"node_id":"eu-1"}'
    signature = sign(SECRET, body)
    assert signature == hmac.new(SECRET, body, hashlib.sha256).hexdigest()
    assert sign(SECRET.decode(), body) == signature  # str secrets are their UTF-8 bytes
    assert check_signature(SECRET, body, signature)
    assert check_signature(SECRET, body, signature.upper())
    assert not check_signature(SECRET, body + b" ", signature)
    assert not check_signature(b"another-secret-0123456789", body, signature)
    assert not check_signature(SECRET, body, None)
    assert not check_signature(SECRET, body, "")
    assert not check_signature(SECRET, body, "é" * 64)


def test_a_known_signature_is_pinned() -> None:
    """What ``openssl dgst -sha256 -hmac`` gives for the body (``docs/routing.md``)."""
    assert sign(SECRET, b'{"node_id":"eu-1"}') == (
        "d4510a5be950ed00cd807c9dbdf10533fe506d77d3c1833e63cab8393aa7676f"
    )


def test_a_signed_heartbeat_is_its_exact_compact_body_and_its_signature() -> None:
    beat = Heartbeat(
        node_id="eu-1",
        region="eu",
        endpoint="ws://eu-1.test:7777/ws",
        probe="http://eu-1.test:7777/health",
        role="primary",
        epoch=1,
        matches=1,
        players=0,
        capacity=10,
        group="pair-a",
        claimed=("0123456789abcdef",),
    )
    wire, headers = signed_heartbeat("secret-of-the-cluster", beat, now=1700000000.25, sequence=7)
    assert wire == beat.encode()
    assert Heartbeat.parse(json.loads(wire)) == beat
    assert headers["Content-Type"] == "application/json"
    stamp = stamp_from_headers(headers)
    assert stamp == Stamp("eu-1", 1700000000250, 7)
    signature = headers[SIGNATURE_HEADER]
    assert check_heartbeat_signature("secret-of-the-cluster", wire, stamp, signature)
    # The MAC covers the stamp: a copy with another time or sequence does not verify.
    for changed in (Stamp("eu-1", 1700000099250, 7), Stamp("eu-1", 1700000000250, 8),
                    Stamp("eu-2", 1700000000250, 7)):  # fmt: skip
        assert not check_heartbeat_signature("secret-of-the-cluster", wire, changed, signature)
    # and is no plain body MAC (domain separation)
    assert not check_signature("secret-of-the-cluster", wire, signature)


def test_a_known_heartbeat_signature_is_pinned() -> None:
    """What ``docs/routing.md``'s openssl line gives for this body and stamp."""
    stamp = Stamp("eu-1", 1700000000250, 7)
    message = b"arena-heartbeat-v2\x00eu-1\n1700000000250\n7\n" + b'{"node_id":"eu-1"}'
    expected = hmac.new(SECRET, message, hashlib.sha256).hexdigest()
    assert sign_heartbeat(SECRET, b'{"node_id":"eu-1"}', stamp) == expected


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        ({}, "missing X-Arena-Node header"),
        ({"X-Arena-Node": "eu-1"}, "missing X-Arena-Time header"),
        ({"X-Arena-Node": "eu-1", "X-Arena-Time": "1"}, "missing X-Arena-Sequence header"),
        ({"X-Arena-Node": "eu-1", "X-Arena-Time": "-1", "X-Arena-Sequence": "1"}, "whole number"),
        ({"X-Arena-Node": "eu-1", "X-Arena-Time": "1", "X-Arena-Sequence": "1e3"}, "whole"),
        ({"X-Arena-Node": "a", "X-Arena-Time": "1", "X-Arena-Sequence": str(2**63)}, "2\\*\\*63"),
    ],
)
def test_a_bad_stamp_is_one_line(headers: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message) as info:
        stamp_from_headers(headers)
    assert "\n" not in str(info.value)


def test_the_replay_guard_refuses_copies_and_stale_beats_and_forgets_old_nodes() -> None:
    guard = ReplayGuard(window=10.0)
    now = 1_700_000_000.0
    beat = Stamp("eu-1", int(now * 1000), 100)
    assert guard.check(beat, now) is None
    assert guard.check(beat, now + 0.5) == "replayed"  # a captured beat, sent again
    assert guard.check(Stamp("eu-1", int(now * 1000), 99), now + 0.5) == "replayed"  # older
    assert guard.check(Stamp("eu-2", int(now * 1000), 100), now) is None  # per node
    assert guard.check(Stamp("eu-1", int(now * 1000) + 500, 101), now + 0.5) is None
    assert guard.check(Stamp("eu-1", int((now - 11) * 1000), 500), now) == "stale"
    assert guard.check(Stamp("eu-1", int((now + 11) * 1000), 500), now) == "stale"
    assert guard.refused == {"replayed": 2, "stale": 2}
    # Two windows after their last beat the nodes are forgotten; a copy is stale by then.
    later = now + 21
    assert guard.check(beat, later) == "stale"
    assert len(guard) == 0


def test_a_sequence_starts_from_the_clock_so_a_restart_is_above_the_last_run() -> None:
    first = HeartbeatSequence(1_700_000_000.0)
    numbers = [first.next() for _ in range(1000)]
    assert numbers == sorted(set(numbers))
    assert HeartbeatSequence(1_700_000_000.01).next() > numbers[-1]


def test_the_replay_guard_needs_a_positive_window() -> None:
    for window in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="positive"):
            ReplayGuard(window)
