"""Seat reservations: what the directory issues, the node verifies; nothing else passes."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from server.directory.reservations import (
    TOKEN_MAX_CHARS,
    Reservation,
    ReservationError,
    check_signature,
    issue,
    reservation_id,
    sign,
    verify,
)

SECRET = b"cluster-secret-for-tests-0123456789"
NOW = 1_800_000_000.0


def code_of(secret: bytes | str, token: str, node_id: str = "eu-1", now: float = NOW) -> str:
    with pytest.raises(ReservationError) as error:
        verify(secret, token, node_id, now)
    assert "\n" not in str(error.value)
    return error.value.code


def test_a_fresh_token_verifies_on_its_node() -> None:
    token = issue(SECRET, "alice", "eu-1", "eu", NOW, 10.0)
    reservation = verify(SECRET, token, "eu-1", NOW + 9.999)
    assert reservation == Reservation(
        id=reservation.id, player="alice", node_id="eu-1", region="eu", expires_at=NOW + 10.0
    )
    assert len(reservation.id) == 16 and int(reservation.id, 16) >= 0
    assert reservation_id(token) == reservation.id


def test_tokens_are_deterministic_and_distinct_per_player_and_time() -> None:
    token = issue(SECRET, "alice", "eu-1", "eu", NOW, 10.0)
    assert token == issue(SECRET, "alice", "eu-1", "eu", NOW, 10.0)
    assert token != issue(SECRET, "bob", "eu-1", "eu", NOW, 10.0)
    assert token != issue(SECRET, "alice", "eu-1", "eu", NOW + 0.001, 10.0)
    assert token != issue(b"another-secret-0123456789", "alice", "eu-1", "eu", NOW, 10.0)


def test_the_token_format_is_a_signed_compact_json_payload() -> None:
    token = issue(SECRET, "alice", "eu-1", "eu", NOW, 10.0)
    payload_b64, signature_b64 = token.split(".")
    payload = base64.urlsafe_b64decode(payload_b64 + "=" * (-len(payload_b64) % 4))
    assert json.loads(payload) == {"exp": NOW + 10.0, "n": "eu-1", "p": "alice", "r": "eu", "v": 1}
    assert b" " not in payload
    expected = hmac.new(
        SECRET, b"arena-reservation-v1." + payload_b64.encode(), hashlib.sha256
    ).digest()
    assert base64.urlsafe_b64decode(signature_b64 + "=") == expected


def test_expiry_is_exact_at_the_boundary() -> None:
    token = issue(SECRET, "alice", "eu-1", "eu", NOW, 10.0)
    verify(SECRET, token, "eu-1", NOW + 10.0 - 1e-3)
    assert code_of(SECRET, token, now=NOW + 10.0) == "expired"
    assert code_of(SECRET, token, now=NOW + 3600) == "expired"


def test_a_token_for_another_node_is_refused() -> None:
    token = issue(SECRET, "alice", "eu-2", "eu", NOW, 10.0)
    assert code_of(SECRET, token, node_id="eu-1") == "wrong_node"
    # the node check comes before expiry: the more useful answer
    assert code_of(SECRET, token, node_id="eu-1", now=NOW + 60) == "wrong_node"


def test_another_secret_or_any_change_breaks_the_signature() -> None:
    token = issue(SECRET, "alice", "eu-1", "eu", NOW, 10.0)
    assert code_of(b"not-the-cluster-secret-xx", token) == "bad_signature"
    payload_b64, signature_b64 = token.split(".")
    forged = json.dumps(
        {"exp": NOW + 1e6, "n": "eu-1", "p": "alice", "r": "eu", "v": 1}, separators=(",", ":")
    ).encode()
    forged_b64 = base64.urlsafe_b64encode(forged).rstrip(b"=").decode()
    assert code_of(SECRET, f"{forged_b64}.{signature_b64}") == "bad_signature"
    flipped = signature_b64[:10] + ("A" if signature_b64[10] != "A" else "B") + signature_b64[11:]
    assert code_of(SECRET, f"{payload_b64}.{flipped}") == "bad_signature"


def test_a_correctly_signed_but_unreadable_payload_is_malformed() -> None:
    def signed(payload: bytes) -> str:
        payload_b64 = base64.urlsafe_b64encode(payload).rstrip(b"=").decode()
        mac = hmac.new(SECRET, b"arena-reservation-v1." + payload_b64.encode(), hashlib.sha256)
        return payload_b64 + "." + base64.urlsafe_b64encode(mac.digest()).rstrip(b"=").decode()

    assert code_of(SECRET, signed(b"not json")) == "malformed"
    assert code_of(SECRET, signed(b'{"v":2,"exp":1e12,"n":"eu-1","p":"a","r":"eu"}')) == "malformed"
    assert code_of(SECRET, signed(b'{"v":1,"exp":"soon","n":"eu-1","p":"a","r":"eu"}')) == (
        "malformed"
    )
    assert code_of(SECRET, signed(b'{"v":1,"exp":1e12,"p":"a","r":"eu"}')) == "malformed"


@pytest.mark.parametrize(
    "token",
    ["", "abc", "a.b.c", ".", "eyJ2IjoxfQ.", "eyJ2IjoxfQ.short", "é.é", "x" * 600, "eyJ.!!!!"],
)
def test_garbage_is_malformed(token: str) -> None:
    assert code_of(SECRET, token) == "malformed"


def test_a_non_canonical_signature_encoding_is_malformed() -> None:
    token = issue(SECRET, "alice", "eu-1", "eu", NOW, 10.0)
    payload_b64, signature_b64 = token.split(".")
    # The last of 43 base64 characters carries 2 unused bits: another letter can decode to
    # the same bytes. Only the canonical spelling is accepted.
    last = signature_b64[-1]
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    twin = alphabet[alphabet.index(last) ^ 1]
    assert code_of(SECRET, f"{payload_b64}.{signature_b64[:-1]}{twin}") == "malformed"


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=700))
def test_arbitrary_text_is_refused_with_a_code_never_another_exception(token: str) -> None:
    assert code_of(SECRET, token) in {"malformed", "bad_signature"}


@settings(max_examples=100, deadline=None)
@given(
    player=st.text(min_size=1, max_size=32).filter(str.isprintable),
    node_id=st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", fullmatch=True),
    region=st.from_regex(r"[a-z][a-z0-9_-]{0,31}", fullmatch=True),
    ttl=st.floats(min_value=0.01, max_value=3600),
)
def test_round_trip_and_size_for_every_valid_input(
    player: str, node_id: str, region: str, ttl: float
) -> None:
    token = issue(SECRET, player, node_id, region, NOW, ttl)
    assert len(token) <= TOKEN_MAX_CHARS  # fits the join message's token field
    reservation = verify(SECRET, token, node_id, NOW)
    assert (reservation.player, reservation.node_id, reservation.region) == (
        player,
        node_id,
        region,
    )
    assert reservation.expires_at == round(NOW + ttl, 3)


def test_the_longest_inputs_still_fit_the_join_token_field() -> None:
    token = issue(SECRET, "\U0001f600" * 32, "n" * 64, "r" * 32, NOW, 3600.0)
    assert len(token) <= TOKEN_MAX_CHARS


def test_issue_refuses_misuse() -> None:
    with pytest.raises(ValueError):
        issue(SECRET, "alice", "eu-1", "eu", NOW, 0.0)
    with pytest.raises(ValueError):
        issue(b"", "alice", "eu-1", "eu", NOW, 10.0)


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
