"""Connect tokens: what a node opens is what was issued; anything else is refused by cause."""

from __future__ import annotations

import json
import struct

import pytest

from shared.datagram import ConnectToken, Refused, issue_connect_token, open_private_token
from shared.datagram.tokens import MAX_USER_DATA, PRIVATE_TOKEN_SIZE

from .links import NODE, STANDBY, region_key, token_for


def test_a_node_of_the_region_opens_what_was_issued() -> None:
    key = region_key()
    token = issue_connect_token(
        key,
        user_data=b"seat 7",
        addresses=[NODE, STANDBY],
        now=100.0,
        expires_in_s=30.0,
        timeout_s=4.5,
    )
    private = open_private_token(key, token.private, now=101.0)
    assert private.user_data == b"seat 7"
    assert private.addresses == (NODE, STANDBY) == token.addresses
    assert private.expires_at == token.expires_at == 130.0
    assert private.timeout_s == token.timeout_s == 4.5
    assert private.client_to_server_key == token.client_to_server_key
    assert private.server_to_client_key == token.server_to_client_key
    assert len(token.private) == PRIVATE_TOKEN_SIZE


def test_every_token_has_its_own_keys_and_id() -> None:
    key = region_key()
    first, second = (open_private_token(key, token_for(key).private, 1.0) for _ in range(2))
    assert first.token_id != second.token_id
    assert first.client_to_server_key != second.client_to_server_key
    assert first.client_to_server_key != first.server_to_client_key


def test_json_round_trip() -> None:
    token = token_for(region_key())
    again = ConnectToken.from_json(json.loads(json.dumps(token.to_json())))
    assert again == token


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.pop("private"), "missing field 'private'"),
        (lambda d: d.update(private="!!"), "private is not valid base64"),
        (lambda d: d.update(client_to_server_key="AAAA"), "client_to_server_key must be 32"),
        (lambda d: d.update(addresses=[]), "addresses must list"),
        (lambda d: d.update(addresses=[["h", 0]]), "out of range"),
        (lambda d: d.update(addresses=[["h"]]), "[host, port] pair"),
        (lambda d: d.update(expires_at="soon"), "expires_at is not a number"),
        (lambda d: d.update(timeout_s=0), "timeout_s must be positive"),
    ],
)
def test_from_json_names_what_is_wrong(change, message: str) -> None:
    data = token_for(region_key()).to_json()
    change(data)
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        ConnectToken.from_json(data)


def test_from_json_refuses_what_is_not_an_object() -> None:
    with pytest.raises(ValueError, match="JSON object"):
        ConnectToken.from_json(["private"])


def test_issue_refuses_too_much_user_data() -> None:
    with pytest.raises(ValueError, match="user data"):
        issue_connect_token(
            region_key(), user_data=bytes(MAX_USER_DATA + 1), addresses=[NODE], now=0
        )


def refusal(key: bytes, private: bytes, now: float) -> str:
    with pytest.raises(Refused) as refused:
        open_private_token(key, private, now)
    return refused.value.cause


def test_an_expired_token_is_refused() -> None:
    key = region_key()
    token = token_for(key, now=0.0, expires_in_s=10.0)
    assert refusal(key, token.private, now=10.0) == "expired"
    assert refusal(key, token.private, now=11.0) == "expired"


def test_another_regions_token_is_refused() -> None:
    token = token_for(region_key())
    assert refusal(region_key(), token.private, now=1.0) == "bad_token"


def test_every_flipped_bit_is_refused() -> None:
    key = region_key()
    private = bytearray(token_for(key).private)
    for index in range(0, len(private), 7):  # every region: expiry, nonce, body, tag
        for bit in (0, 7):
            changed = bytearray(private)
            changed[index] ^= 1 << bit
            assert refusal(key, bytes(changed), now=1.0) in ("bad_token", "expired")


def test_a_later_expiry_in_clear_is_refused() -> None:
    """The clear expiry is bound into the seal: pushing it later does not make an old token new."""
    key = region_key()
    private = bytearray(token_for(key, now=0.0, expires_in_s=5.0).private)

    struct.pack_into("<d", private, 0, 1e9)
    assert refusal(key, bytes(private), now=10.0) == "bad_token"


def test_a_truncated_token_is_refused() -> None:
    key = region_key()
    assert refusal(key, token_for(key).private[:-1], now=1.0) == "bad_size"
