"""Packet kinds and their byte layouts (all integers little-endian).

Every datagram starts with its kind byte. The clear parts are exactly what a node must read
before it can authenticate anything; everything else is sealed (:mod:`.sealing`).

=============  =========================================================================
kind           layout
=============  =========================================================================
REQUEST (1)    kind u8 | version u8 | protocol id u64 | private token (fixed size,
               :mod:`.tokens`) | zeros up to ``REQUEST_SIZE`` (the whole datagram)
CHALLENGE (2)  kind u8 | xseal(server-to-client key, connection id [16] |
               challenge token [64], associated data: kind)
RESPONSE (3)   kind u8 | xseal(client-to-server key, challenge token [64], ad: kind)
PAYLOAD (4)    kind u8 | sequence u64 | seal(sequence, header, body) — the channel's
DISCONNECT (5) kind u8 | sequence u64 | seal(sequence, header, empty body)
=============  =========================================================================

A challenge token is opaque to the client: challenge sequence u64 | ChaCha20-Poly1305
under a key only the node holds (nonce: that sequence; associated data: the client's
address) of token id [16] | connection id [16] | deadline f64.

A PAYLOAD body: newest sequence received u64 (``NO_SEQUENCE`` before any) | ack bits u32
(bit i: sequence newest - 1 - i arrived) | records, each a tag u8 then:

==================  =================================================================
record              fields after the tag
==================  =================================================================
REDUNDANT (1)       id u32 | times sent before u8 | length u16 | payload
RELIABLE (2)        id u32 | final u8 (1: the last chunk of a message) | length u16 | bytes
UNRELIABLE (3)      id u32 | length u16 | payload (a payload that fits one datagram)
FRAGMENT (4)        id u32 | index u8 | count u8 | length u16 | bytes
==================  =================================================================
"""

from __future__ import annotations

import struct
from enum import IntEnum

from shared.datagram.constants import MAX_PAYLOAD
from shared.datagram.sealing import TAG_BYTES, XNONCE_BYTES

__all__ = [
    "ACK_HEADER",
    "CHALLENGE_SIZE",
    "CHALLENGE_TOKEN_BYTES",
    "CHANNEL_HEADER",
    "CONNECTION_ID_BYTES",
    "DATA_ROOM",
    "FRAGMENT_HEADER",
    "FRAGMENT_SIZE",
    "MAX_FRAGMENTS",
    "NO_SEQUENCE",
    "RECORD_HEADERS",
    "REQUEST_HEADER",
    "RESPONSE_SIZE",
    "Kind",
    "Record",
    "encode_address",
    "encode_record",
    "read_records",
]


class Kind(IntEnum):
    """The first byte of every datagram."""

    REQUEST = 1
    CHALLENGE = 2
    RESPONSE = 3
    PAYLOAD = 4
    DISCONNECT = 5


class Record(IntEnum):
    """The tag of a record inside a PAYLOAD body."""

    REDUNDANT = 1
    RELIABLE = 2
    UNRELIABLE = 3
    FRAGMENT = 4


#: kind, version, protocol id: the request's clear prefix.
REQUEST_HEADER = struct.Struct("<BBQ")
#: kind, sequence: a channel packet's clear header (its associated data).
CHANNEL_HEADER = struct.Struct("<BQ")
#: newest sequence received, ack bits: the start of every PAYLOAD body.
ACK_HEADER = struct.Struct("<QI")
NO_SEQUENCE = (1 << 64) - 1

CONNECTION_ID_BYTES = 16
CHALLENGE_TOKEN_BYTES = 8 + 16 + 16 + 8 + TAG_BYTES
CHALLENGE_SIZE = 1 + XNONCE_BYTES + CONNECTION_ID_BYTES + CHALLENGE_TOKEN_BYTES + TAG_BYTES
RESPONSE_SIZE = 1 + XNONCE_BYTES + CHALLENGE_TOKEN_BYTES + TAG_BYTES

#: Per-record headers after the tag byte.
RECORD_HEADERS = {
    Record.REDUNDANT: struct.Struct("<IBH"),
    Record.RELIABLE: struct.Struct("<IBH"),
    Record.UNRELIABLE: struct.Struct("<IH"),
    Record.FRAGMENT: struct.Struct("<IBBH"),
}
FRAGMENT_HEADER = 1 + RECORD_HEADERS[Record.FRAGMENT].size

#: Bytes of records a PAYLOAD datagram can carry without passing ``MAX_PAYLOAD``.
DATA_ROOM = MAX_PAYLOAD - CHANNEL_HEADER.size - TAG_BYTES - ACK_HEADER.size
#: A fragment's share of a payload: leaves room beside it for a few redundant records.
FRAGMENT_SIZE = 1024
MAX_FRAGMENTS = 255

_TAG = struct.Struct("<B")
# A tag byte to its record and header (looked up per record: no Enum call on the hot path).
_READERS = {int(record): (record, header) for record, header in RECORD_HEADERS.items()}


def encode_address(address: tuple[str, int]) -> bytes:
    """An address as bound into a challenge token (host text and port)."""
    host, port = address[0], address[1]
    return str(host).encode() + b"|" + int(port).to_bytes(2, "little")


def read_records(
    body: bytes, offset: int, redundant_after: int = -1
) -> list[tuple[Record, tuple[int, ...], bytes]]:
    """Every record of a body from ``offset``: (tag, header fields, bytes), leaving out the
    REDUNDANT records whose id is not above ``redundant_after`` (repeats a receiver already
    delivered: most of an input datagram). Raises ``ValueError`` on an unknown tag or a
    length past the end (a peer's bug: the body was authenticated)."""
    records: list[tuple[Record, tuple[int, ...], bytes]] = []
    end = len(body)
    while offset < end:
        tag = body[offset]
        known = _READERS.get(tag)
        if known is None:
            raise ValueError(f"unknown record tag {tag}")
        record, header = known
        offset += 1
        if offset + header.size > end:
            raise ValueError("record header past the end")
        fields = header.unpack_from(body, offset)
        offset += header.size
        length = fields[-1]
        if offset + length > end:
            raise ValueError("record past the end")
        if record is not Record.REDUNDANT or fields[0] > redundant_after:
            records.append((record, fields[:-1], body[offset : offset + length]))
        offset += length
    return records


def encode_record(record: Record, fields: tuple[int, ...], data: bytes) -> bytes:
    """One record: tag, header fields, then ``data``."""
    return _TAG.pack(record) + RECORD_HEADERS[record].pack(*fields, len(data)) + data
