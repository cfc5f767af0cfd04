"""Session tokens: only the region's secret makes one, and it names exactly one seat."""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from server.tokens import SessionToken, TokenError, issue_token, verify_token

SECRET = bytes(range(32))
OTHER_SECRET = bytes(range(1, 33))
REGION = "eu-west"


def _split(token: str) -> tuple[dict[str, object], str]:
    body, mac = token.split(".", 1)
    payload = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
    return json.loads(payload), mac


def _join(fields: dict[str, object], mac: str) -> str:
    payload = json.dumps(fields, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(payload).decode().rstrip("=") + "." + mac


@settings(max_examples=200, deadline=None)
@given(
    slot=st.integers(min_value=0, max_value=65535),
    name=st.text(max_size=32),
    region=st.text(min_size=1, max_size=64),
)
def test_a_token_verifies_to_the_seat_it_was_issued_for(slot: int, name: str, region: str) -> None:
    token = issue_token(SECRET, region, slot, name)

    assert verify_token(SECRET, token, region) == SessionToken(region, slot, name)


def test_a_token_fits_the_join_message_limit() -> None:
    # The longest name the protocol allows, in characters that JSON escapes (6 bytes each).
    token = issue_token(SECRET, REGION, 65535, "\u00e9" * 32)

    assert len(token) <= 512
    assert token.isascii()


def test_a_token_signed_with_another_secret_is_refused() -> None:
    token = issue_token(OTHER_SECRET, REGION, 3, "ada")

    with pytest.raises(TokenError):
        verify_token(SECRET, token, REGION)


def test_a_token_of_another_region_is_refused() -> None:
    token = issue_token(SECRET, "us-east", 3, "ada")

    with pytest.raises(TokenError, match="another region"):
        verify_token(SECRET, token, REGION)


@pytest.mark.parametrize(
    "change",
    [
        {"s": 4},  # another seat
        {"n": "mallory"},  # another player's name
        {"r": "us-east"},  # another region
        {"x": "0000000000000000"},  # another nonce
    ],
    ids=["slot", "name", "region", "nonce"],
)
def test_a_token_whose_payload_was_changed_is_refused(change: dict[str, object]) -> None:
    fields, mac = _split(issue_token(SECRET, REGION, 3, "ada"))
    forged = _join({**fields, **change}, mac)

    with pytest.raises(TokenError, match="signature"):
        verify_token(SECRET, forged, REGION)


def test_a_token_whose_mac_was_changed_is_refused() -> None:
    token = issue_token(SECRET, REGION, 3, "ada")
    body, mac = token.split(".", 1)
    for i in range(len(mac)):
        flipped = "A" if mac[i] != "A" else "B"
        with pytest.raises(TokenError):
            verify_token(SECRET, f"{body}.{mac[:i]}{flipped}{mac[i + 1 :]}", REGION)
    with pytest.raises(TokenError):
        verify_token(SECRET, f"{body}.", REGION)
    with pytest.raises(TokenError):
        verify_token(SECRET, f"{body}.{mac}A", REGION)


def test_a_token_whose_body_was_changed_is_refused() -> None:
    token = issue_token(SECRET, REGION, 3, "ada")
    body, mac = token.split(".", 1)
    middle = len(body) // 2
    flipped = "A" if body[middle] != "A" else "B"

    with pytest.raises(TokenError):
        verify_token(SECRET, f"{body[:middle]}{flipped}{body[middle + 1 :]}.{mac}", REGION)


@pytest.mark.parametrize(
    "garbage",
    ["", ".", "..", "no-dot-at-all", "a.b", "!!!.???", "e30.", "e30.e30", "\x00.\x00", "é.abc"],
)
def test_garbage_is_refused_as_a_token_error(garbage: str) -> None:
    with pytest.raises(TokenError):
        verify_token(SECRET, garbage, REGION)


def test_a_non_ascii_mac_is_refused_as_a_token_error() -> None:
    body, _mac = issue_token(SECRET, REGION, 3, "ada").split(".", 1)

    with pytest.raises(TokenError):
        verify_token(SECRET, f"{body}.\u00e9", REGION)


@settings(max_examples=300, deadline=None)
@given(garbage=st.text(alphabet=st.characters(codec="ascii"), max_size=80))
def test_any_ascii_string_that_was_not_issued_is_refused(garbage: str) -> None:
    with pytest.raises(TokenError):
        verify_token(SECRET, garbage, REGION)


def test_a_correctly_signed_payload_that_is_not_a_claim_is_refused() -> None:
    # Only a holder of the secret could make these; the verifier still must not crash.
    from server.tokens import _mac

    for payload in (b"[1,2]", b'{"r":"eu-west"}', b'{"r":"eu-west","s":"x","n":"a"}', b"\xff"):
        body = base64.urlsafe_b64encode(payload).decode().rstrip("=")
        with pytest.raises(TokenError, match="malformed"):
            verify_token(SECRET, f"{body}.{_mac(SECRET, payload)}", REGION)


def test_every_issue_is_a_new_token_and_each_verifies() -> None:
    tokens = [issue_token(SECRET, REGION, 7, "ada") for _ in range(200)]

    assert len(set(tokens)) == len(tokens)
    nonces = {_split(token)[0]["x"] for token in tokens}
    assert len(nonces) == len(tokens)
    assert all(verify_token(SECRET, t, REGION) == SessionToken(REGION, 7, "ada") for t in tokens)
