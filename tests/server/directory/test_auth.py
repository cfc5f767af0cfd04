"""Request signatures: the hex HMAC of the raw body, checked in constant time."""

from __future__ import annotations

import hashlib
import hmac
import json

from server.directory.auth import SIGNATURE_HEADER, check_signature, sign, signed_heartbeat
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
    wire, headers = signed_heartbeat("secret-of-the-cluster", beat)
    assert wire == beat.encode()
    assert Heartbeat.parse(json.loads(wire)) == beat
    assert headers["Content-Type"] == "application/json"
    assert check_signature("secret-of-the-cluster", wire, headers[SIGNATURE_HEADER])
