"""Seat reservations: what the directory issues, the node verifies and claims; nothing else
passes."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from server.directory.reservations import (
    ClaimLedger,
    Reservation,
    ReservationError,
    check_reservation,
    issue,
    reservation_id,
    verify,
)
from shared.directory import MAX_CLAIMED
from shared.protocol import PROTOCOL_VERSION, JoinMessage

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
    assert JoinMessage(v=PROTOCOL_VERSION, token=token).token == token  # fits the join's field
    reservation = verify(SECRET, token, node_id, NOW)
    assert (reservation.player, reservation.node_id, reservation.region) == (
        player,
        node_id,
        region,
    )
    assert reservation.expires_at == round(NOW + ttl, 3)


def test_the_longest_inputs_still_fit_the_join_token_field() -> None:
    token = issue(SECRET, "\U0001f600" * 32, "n" * 64, "r" * 32, NOW, 3600.0)
    assert JoinMessage(v=PROTOCOL_VERSION, token=token).token == token


def test_issue_refuses_misuse() -> None:
    with pytest.raises(ValueError):
        issue(SECRET, "alice", "eu-1", "eu", NOW, 0.0)
    with pytest.raises(ValueError):
        issue(b"", "alice", "eu-1", "eu", NOW, 10.0)


def test_a_known_token_is_pinned_byte_for_byte() -> None:
    """Tokens in flight survive an upgrade of the directory or the node: same bytes."""
    token = issue(SECRET, "alice", "eu-1", "eu", NOW, 10.0)
    assert token == (
        "eyJleHAiOjE4MDAwMDAwMTAuMCwibiI6ImV1LTEiLCJwIjoiYWxpY2UiLCJyIjoiZXUiLCJ2IjoxfQ."
        "cV8fXagE0x9NTSr0dz-6AtewCRiMtzDBjFlRAXuJADw"
    )
    assert verify(SECRET, token, "eu-1", NOW).id == "715f1f5da804d31f"


# -- the node's side: admitting a player, claiming the seat ----------------------------------


def test_check_reservation_admits_a_good_one_and_records_its_claim() -> None:
    now = time.time()
    token = issue(SECRET, "alice", "eu-1", "eu", now, 10.0)
    claims = ClaimLedger()
    assert check_reservation(SECRET, token, "eu-1", now, player="alice", claims=claims) is None
    assert claims.pending() == (reservation_id(token),)
    assert check_reservation(SECRET, token, "eu-1", now + 9.9) is None


@pytest.mark.parametrize(
    ("token_secret", "node", "at", "player", "code"),
    [
        (b"another-secret-entirely-0123", "eu-1", 0.0, None, "bad_signature"),
        (SECRET, "eu-2", 0.0, None, "wrong_node"),
        (SECRET, "eu-1", 10.01, None, "expired"),
        (SECRET, "eu-1", 0.0, "mallory", "wrong_player"),
    ],
)
def test_check_reservation_names_the_code_of_a_bad_one(
    token_secret: bytes, node: str, at: float, player: str | None, code: str
) -> None:
    now = time.time()
    token = issue(token_secret, "alice", "eu-1", "eu", now, 10.0)
    claims = ClaimLedger()
    assert check_reservation(SECRET, token, node, now + at, player=player, claims=claims) == code
    assert len(claims) == 0  # a refused reservation claims nothing


@pytest.mark.parametrize("token", ["", "garbage", "a.b.c", "x" * 600])
def test_check_reservation_calls_garbage_malformed(token: str) -> None:
    assert check_reservation(SECRET, token, "eu-1", time.time()) == "malformed"


def test_the_ledger_sends_the_oldest_ids_first_and_forgets_only_what_was_settled() -> None:
    claims = ClaimLedger()
    ids = [f"{i:016x}" for i in range(MAX_CLAIMED + 3)]
    for rid in ids:
        claims.add(rid)
    sent = claims.pending()
    assert sent == tuple(ids[:MAX_CLAIMED])
    claims.settle(sent[:10])
    assert len(claims) == MAX_CLAIMED + 3 - 10
    assert claims.pending()[0] == ids[10]
