"""One vocabulary and one error for every message family."""

from __future__ import annotations

import math

import pytest

from server.replication import messages as replication
from shared import directory, protocol, schema


def test_every_family_raises_the_one_message_error() -> None:
    assert replication.MessageError is schema.MessageError
    assert directory.MessageError is schema.MessageError
    assert issubclass(protocol.ProtocolError, schema.MessageError)
    assert issubclass(protocol.InvalidField, schema.InvalidField)
    assert issubclass(schema.MessageError, ValueError)


@pytest.mark.parametrize(
    ("bad", "family"),
    [
        (lambda: replication.Ack(tick=-1), "replication"),
        (lambda: directory.HeartbeatAck("n", "routable", -1, 0, 1.0), "directory"),
        (lambda: protocol.decode_client(b"\x81\xa4type\xa4ping"), "protocol"),
    ],
)
def test_a_bad_message_of_each_family_is_a_message_error_with_a_code(bad, family) -> None:
    with pytest.raises(schema.MessageError) as error:
        bad()
    assert error.value.code == "invalid_field", family
    assert "\n" not in str(error.value)


def test_a_protocol_refusal_keeps_its_wire_code() -> None:
    with pytest.raises(protocol.ProtocolError) as error:
        protocol.decode_client(b"\x81\xa4type\xa5bogus")
    assert error.value.code == "unknown_type"


@pytest.mark.parametrize(
    ("check", "value", "expected"),
    [
        (schema.integer(0, 9), True, "f: expected an integer, got bool"),
        (schema.integer(0, 9), 10, "f: 10 is outside [0, 9]"),
        (schema.number(0.0), math.nan, "f: nan is not a finite number"),
        (schema.number(0.0, 1.0), 2, "f: 2.0 is outside [0.0, 1.0]"),
        (schema.text(3), "abcd", "f: longer than 3 characters"),
        (schema.text(min_len=1), "", "f: expected a non-empty string"),
        (schema.flag, 1, "f: expected true or false, got int"),
        (schema.url(("ws://",), 20), "ws:///x", "f: expected a ws:// URL of at most 20 chars"),
    ],
)
def test_each_check_names_the_field_in_one_line(check, value, expected) -> None:
    with pytest.raises(schema.InvalidField, match="^" + expected.replace("[", r"\[")):
        check("f", value)


def test_a_check_returns_what_it_accepts_normalised() -> None:
    assert schema.integer(0, 9)("f", 3) == 3
    assert schema.number()("f", 2) == 2.0 and type(schema.number()("f", 2)) is float
    assert schema.numbers(2, 1.0)("f", [0.5, -0.5]) == (0.5, -0.5)
    assert schema.optional(schema.text(4))("f", None) is None
