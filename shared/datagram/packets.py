"""Packet kinds and their byte layouts: the structs of :mod:`.layout`'s tables (every
integer little-endian), and the records of a PAYLOAD body read and written.

Every datagram starts with its kind byte (:class:`Kind`). The clear parts are exactly what
a node must read before it can authenticate anything; everything else is sealed
(:mod:`.sealing`):

* REQUEST: kind, version, protocol id, the private token (:mod:`.tokens`), zeros up to
  ``REQUEST_SIZE`` (the whole datagram);
* CHALLENGE, RESPONSE: kind, then an XChaCha20-Poly1305 seal (random nonce first) under a
  session key, associated data the kind byte (:mod:`.handshake`);
* PAYLOAD, DISCONNECT: kind and sequence in clear, then the body sealed under the
  direction's connection key, the sequence its nonce and the clear header its associated
  data. A PAYLOAD body is the acknowledgements (newest sequence received, ``NO_SEQUENCE``
  before any; a bit per sequence before it), then records, each a tag, its header and its
  bytes (:mod:`.channel`); a DISCONNECT's is empty.

``docs/protocol.md`` ("UDP transport") renders the same tables.
"""

from __future__ import annotations

import struct

from shared.datagram.constants import MAX_PAYLOAD
from shared.datagram.layout import (
    ACK_FIELDS,
    CHALLENGE_FIELDS,
    CHALLENGE_TOKEN_FIELDS,
    CHANNEL_FIELDS,
    RECORD_FIELDS,
    REQUEST_FIELDS,
    RESPONSE_FIELDS,
    Kind,
    Record,
    packed,
)
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

#: kind, version, protocol id: the request's clear prefix.
REQUEST_HEADER = packed(REQUEST_FIELDS)
#: kind, sequence: a channel packet's clear header (its associated data).
CHANNEL_HEADER = packed(CHANNEL_FIELDS)
#: newest sequence received, ack bits: the start of every PAYLOAD body.
ACK_HEADER = packed(ACK_FIELDS)
NO_SEQUENCE = (1 << 64) - 1

CONNECTION_ID_BYTES = CHALLENGE_FIELDS[0].size
CHALLENGE_TOKEN_BYTES = packed(CHALLENGE_TOKEN_FIELDS).size
#: kind, then an XChaCha20-Poly1305 seal (nonce, ciphertext, tag) of the plaintext.
CHALLENGE_SIZE = 1 + XNONCE_BYTES + packed(CHALLENGE_FIELDS).size + TAG_BYTES
RESPONSE_SIZE = 1 + XNONCE_BYTES + packed(RESPONSE_FIELDS).size + TAG_BYTES

#: Per-record headers after the tag byte.
RECORD_HEADERS = {record: packed(fields) for record, fields in RECORD_FIELDS.items()}
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
