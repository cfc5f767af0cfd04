"""The byte layouts: records read back as written, a cut or unknown record is refused, and
the sizes that keep the handshake free of amplification hold."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.datagram.constants import MAX_PAYLOAD, REQUEST_SIZE
from shared.datagram.packets import (
    CHALLENGE_SIZE,
    DATA_ROOM,
    FRAGMENT_HEADER,
    FRAGMENT_SIZE,
    REQUEST_HEADER,
    RESPONSE_SIZE,
    Record,
    encode_record,
    read_records,
)
from shared.datagram.sealing import PacketKey, derive_key
from shared.datagram.tokens import PRIVATE_TOKEN_SIZE

FIELDS = {
    Record.REDUNDANT: st.tuples(st.integers(0, 2**32 - 1), st.integers(0, 255)),
    Record.RELIABLE: st.tuples(st.integers(0, 2**32 - 1), st.integers(0, 1)),
    Record.UNRELIABLE: st.tuples(st.integers(0, 2**32 - 1)),
    Record.FRAGMENT: st.tuples(st.integers(0, 2**32 - 1), st.integers(0, 255), st.integers(0, 255)),
}
records = st.sampled_from(list(Record)).flatmap(
    lambda kind: st.tuples(st.just(kind), FIELDS[kind], st.binary(max_size=300))
)


@given(st.lists(records, max_size=8))
def test_records_read_back_as_written(written) -> None:
    body = b"".join(encode_record(kind, fields, data) for kind, fields, data in written)
    assert read_records(b"head" + body, 4) == written


@given(st.lists(records, min_size=1, max_size=4), st.data())
def test_a_body_cut_inside_a_record_is_refused(written, data) -> None:
    encoded = [encode_record(kind, fields, payload) for kind, fields, payload in written]
    body = b"".join(encoded)
    cut = data.draw(st.integers(len(body) - len(encoded[-1]) + 1, len(body) - 1))
    with pytest.raises(ValueError):
        read_records(body[:cut], 0)


def test_an_unknown_record_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown record tag 9"):
        read_records(bytes([9, 0, 0]), 0)


def test_sizes() -> None:
    assert REQUEST_SIZE >= 1000 and REQUEST_HEADER.size + PRIVATE_TOKEN_SIZE <= REQUEST_SIZE
    assert CHALLENGE_SIZE < REQUEST_SIZE and RESPONSE_SIZE < REQUEST_SIZE
    assert FRAGMENT_HEADER + FRAGMENT_SIZE < DATA_ROOM < MAX_PAYLOAD


def test_derived_keys_differ_by_salt_and_context() -> None:
    key = bytes(range(32))
    keys = {derive_key(key, context, salt) for context in (b"a", b"b") for salt in (b"1", b"2")}
    assert len(keys) == 4


def test_a_packet_key_binds_sequence_and_header() -> None:
    key = PacketKey(bytes(32))
    sealed = key.seal(5, b"head", b"body")
    assert key.open(5, b"head", sealed[4:]) == b"body"
    assert key.open(6, b"head", sealed[4:]) is None
    assert key.open(5, b"heaD", sealed[4:]) is None
    with pytest.raises(ValueError, match="32 bytes"):
        PacketKey(bytes(16))


def test_redundant_repeats_already_delivered_are_left_out() -> None:
    body = b"".join(
        encode_record(Record.REDUNDANT, (ident, 0), b"input %d" % ident) for ident in range(5)
    ) + encode_record(Record.RELIABLE, (0, 1), b"event")
    kept = read_records(body, 0, redundant_after=2)
    assert kept == [
        (Record.REDUNDANT, (3, 0), b"input 3"),
        (Record.REDUNDANT, (4, 0), b"input 4"),
        (Record.RELIABLE, (0, 1), b"event"),
    ]
