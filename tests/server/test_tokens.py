"""Session tokens: only the region's secret makes one, it names exactly one seat (slot and
incarnation), and it runs out."""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from server.tokens import SessionToken, TokenError, TokenExpired, issue_token, verify_token

SECRET = bytes(range(32))
OTHER_SECRET = bytes(range(1, 33))
REGION = "eu-west"
NOW = 1_700_000_000.0  # unix seconds
EXPIRES = NOW + 600.0
SEAT = 41


def issue(
    slot: int = 3,
    name: str = "ada",
    region: str = REGION,
    secret: bytes = SECRET,
    seat_id: int = SEAT,
    expires_at: float = EXPIRES,
) -> str:
    return issue_token(secret, region, slot, name, seat_id=seat_id, expires_at=expires_at)


def verify(token: str, region: str = REGION, now: float = NOW) -> SessionToken:
    return verify_token(SECRET, token, region, now)


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
    token = issue(slot, name, region)

    assert verify(token, region) == SessionToken(
        region, slot, name, seat_id=SEAT, expires_at=EXPIRES
    )


def test_a_token_names_its_match_and_the_seat_s_incarnation() -> None:
    token = issue_token(SECRET, REGION, 3, "ada", 2, seat_id=2**40 + 7, expires_at=EXPIRES)

    claim = verify(token)

    assert (claim.match, claim.slot, claim.seat_id) == (2, 3, 2**40 + 7)


def test_a_token_is_good_until_its_expiry_and_refused_from_then_on() -> None:
    token = issue()

    assert verify(token, now=EXPIRES - 0.001).expires_at == EXPIRES
    for now in (EXPIRES, EXPIRES + 0.001, EXPIRES + 86400):
        with pytest.raises(TokenExpired, match="expired"):
            verify(token, now=now)


def test_an_expired_token_is_a_token_error_and_checked_after_the_signature() -> None:
    assert issubclass(TokenExpired, TokenError)
    with pytest.raises(TokenError, match="signature"):  # not "expired": a forgery says nothing
        verify(issue(secret=OTHER_SECRET, expires_at=NOW - 1))


def test_a_token_fits_the_join_message_limit() -> None:
    # The longest name the protocol allows, in characters of 4 UTF-8 bytes (12 bytes each
    # escaped for JSON), the longest region, the largest slot and seat id, and an expiry
    # with every digit a float prints.
    token = issue(
        65535, "\U0001f600" * 32, "r" * 64, seat_id=2**63 - 1, expires_at=1_234_567_890_123.4567
    )

    assert len(token) <= 512
    assert token.isascii()
    assert verify(token, "r" * 64).name == "\U0001f600" * 32


def test_a_token_signed_with_another_secret_is_refused() -> None:
    token = issue(secret=OTHER_SECRET)

    with pytest.raises(TokenError):
        verify(token)


def test_a_token_of_another_region_is_refused() -> None:
    token = issue(region="us-east")

    with pytest.raises(TokenError, match="another region"):
        verify(token)


@pytest.mark.parametrize(
    "change",
    [
        {"s": 4},  # another seat
        {"n": "mallory"},  # another player's name
        {"r": "us-east"},  # another region
        {"x": "0000000000000000"},  # another nonce
        {"i": SEAT + 1},  # a later player in the same slot
        {"e": EXPIRES + 3600},  # a longer life
    ],
    ids=["slot", "name", "region", "nonce", "seat", "expiry"],
)
def test_a_token_whose_payload_was_changed_is_refused(change: dict[str, object]) -> None:
    fields, mac = _split(issue())
    forged = _join({**fields, **change}, mac)

    with pytest.raises(TokenError, match="signature"):
        verify(forged)


def test_a_token_whose_mac_was_changed_is_refused() -> None:
    token = issue()
    body, mac = token.split(".", 1)
    for i in range(len(mac)):
        flipped = "A" if mac[i] != "A" else "B"
        with pytest.raises(TokenError):
            verify(f"{body}.{mac[:i]}{flipped}{mac[i + 1 :]}")
    with pytest.raises(TokenError):
        verify(f"{body}.")
    with pytest.raises(TokenError):
        verify(f"{body}.{mac}A")


def test_a_token_whose_body_was_changed_is_refused() -> None:
    token = issue()
    body, mac = token.split(".", 1)
    middle = len(body) // 2
    flipped = "A" if body[middle] != "A" else "B"

    with pytest.raises(TokenError):
        verify(f"{body[:middle]}{flipped}{body[middle + 1 :]}.{mac}")


@pytest.mark.parametrize(
    "garbage",
    ["", ".", "..", "no-dot-at-all", "a.b", "!!!.???", "e30.", "e30.e30", "\x00.\x00", "é.abc"],
)
def test_garbage_is_refused_as_a_token_error(garbage: str) -> None:
    with pytest.raises(TokenError):
        verify(garbage)


def test_a_non_ascii_mac_is_refused_as_a_token_error() -> None:
    body, _mac = issue().split(".", 1)

    with pytest.raises(TokenError):
        verify(f"{body}.\u00e9")


@settings(max_examples=300, deadline=None)
@given(garbage=st.text(alphabet=st.characters(codec="ascii"), max_size=80))
def test_any_ascii_string_that_was_not_issued_is_refused(garbage: str) -> None:
    with pytest.raises(TokenError):
        verify(garbage)


def test_a_correctly_signed_payload_that_is_not_a_claim_is_refused() -> None:
    # Only a holder of the secret could make these; the verifier still must not crash.
    from server.tokens import _mac

    for payload in (
        b"[1,2]",
        b'{"r":"eu-west"}',
        b'{"r":"eu-west","s":"x","n":"a"}',
        b'{"r":"eu-west","m":0,"s":3,"n":"ada","x":"00"}',  # an old one: no seat id, no expiry
        b"\xff",
    ):
        body = base64.urlsafe_b64encode(payload).decode().rstrip("=")
        with pytest.raises(TokenError, match="malformed"):
            verify(f"{body}.{_mac(SECRET, payload)}")


def test_every_issue_is_a_new_token_and_each_verifies() -> None:
    tokens = [issue(7) for _ in range(200)]

    assert len(set(tokens)) == len(tokens)
    nonces = {_split(token)[0]["x"] for token in tokens}
    assert len(nonces) == len(tokens)
    expected = SessionToken(REGION, 7, "ada", seat_id=SEAT, expires_at=EXPIRES)
    assert all(verify(t) == expected for t in tokens)
