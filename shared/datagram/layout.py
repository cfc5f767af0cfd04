"""Every fixed byte layout of the datagram protocol, as data: the packet kinds, the clear
headers, the records inside a PAYLOAD body, the challenge token and the connect token's
private part.

One table per layout, each field with its name, its width (a :mod:`struct` code; every
integer little-endian) and what it means. :mod:`.packets`, :mod:`.tokens` and
:mod:`.handshake` build their ``struct.Struct`` from these tables, and
:func:`shared.protocol.spec.datagram_spec` renders the same tables into
``docs/protocol.md`` and ``docs/protocol.json``, so what a client writer reads is what the
code packs.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

from shared.datagram.sealing import TAG_BYTES

__all__ = [
    "ACK_FIELDS",
    "BYTE_ORDER",
    "CHALLENGE_FIELDS",
    "CHALLENGE_TOKEN_FIELDS",
    "CHALLENGE_TOKEN_PLAIN_FIELDS",
    "CHANNEL_FIELDS",
    "KIND_MEANINGS",
    "RECORD_FIELDS",
    "RECORD_MEANINGS",
    "REQUEST_FIELDS",
    "RESPONSE_FIELDS",
    "TOKEN_ADDRESS_FIELDS",
    "TOKEN_ASSOCIATED_FIELDS",
    "TOKEN_CLEAR_FIELDS",
    "TOKEN_JSON_FIELDS",
    "TOKEN_PLAIN_FIELDS",
    "TOKEN_USER_DATA_FIELDS",
    "Field",
    "Kind",
    "Record",
    "packed",
]

#: Every integer of every layout.
BYTE_ORDER = "little"

_INTEGER_TYPES = {"B": "u8", "H": "u16", "I": "u32", "Q": "u64", "d": "f64"}


@dataclass(frozen=True, slots=True)
class Field:
    """One field of a layout: ``code`` is its :mod:`struct` code (``B`` u8, ``H`` u16,
    ``I`` u32, ``Q`` u64, ``d`` float64, ``16s`` 16 bytes)."""

    name: str
    code: str
    meaning: str

    @property
    def size(self) -> int:
        return struct.calcsize("<" + self.code)

    @property
    def type(self) -> str:
        """``u8`` … ``u64``, ``f64`` or ``bytes[N]``, as the document writes it."""
        return _INTEGER_TYPES.get(self.code) or f"bytes[{self.size}]"


def packed(fields: tuple[Field, ...]) -> struct.Struct:
    """The little-endian struct of ``fields``, in order, with no padding."""
    return struct.Struct("<" + "".join(field.code for field in fields))


class Kind(IntEnum):
    """The first byte of every datagram."""

    REQUEST = 1
    CHALLENGE = 2
    RESPONSE = 3
    PAYLOAD = 4
    DISCONNECT = 5


#: Who sends each kind, and when.
KIND_MEANINGS = {
    Kind.REQUEST: "client: asks to connect, presenting its connect token's private part",
    Kind.CHALLENGE: "node: answers a request; the client proves its address by returning "
    "the challenge token",
    Kind.RESPONSE: "client: returns the challenge token",
    Kind.PAYLOAD: "both, once connected: acknowledgements and records (an empty one is a "
    "keep-alive)",
    Kind.DISCONNECT: "both: a clean close (sent several times; any one is enough)",
}


class Record(IntEnum):
    """The tag of a record inside a PAYLOAD body."""

    REDUNDANT = 1
    RELIABLE = 2
    UNRELIABLE = 3
    FRAGMENT = 4


#: What each record carries.
RECORD_MEANINGS = {
    Record.REDUNDANT: "a payload repeated in every datagram until acknowledged (inputs)",
    Record.RELIABLE: "a chunk of a message resent until acknowledged (every message but "
    "inputs and snapshots)",
    Record.UNRELIABLE: "a payload sent once, whole (a snapshot that fits a datagram)",
    Record.FRAGMENT: "one piece of an UNRELIABLE payload too large for a datagram",
}

#: The challenge token's plaintext, sealed under a key only the node that made it holds.
CHALLENGE_TOKEN_PLAIN_FIELDS = (
    Field("token_id", "16s", "the connect token's id"),
    Field("connection_id", "16s", "as in the CHALLENGE"),
    Field("deadline", "d", "unix seconds: the response must arrive before it"),
)
#: The challenge token: opaque to the client, which returns it unchanged.
CHALLENGE_TOKEN_FIELDS = (
    Field("sequence", "Q", "the node's challenge counter: the nonce of what follows"),
    Field(
        "sealed",
        f"{packed(CHALLENGE_TOKEN_PLAIN_FIELDS).size + TAG_BYTES}s",
        "ChaCha20-Poly1305 under the node's own key of the plaintext above, associated "
        "data the client's address",
    ),
)
_CHALLENGE_TOKEN = f"{packed(CHALLENGE_TOKEN_FIELDS).size}s"

#: A REQUEST's clear prefix; the private token and zeros up to ``REQUEST_SIZE`` follow.
REQUEST_FIELDS = (
    Field("kind", "B", "1 (REQUEST)"),
    Field("version", "B", "PROTOCOL_VERSION"),
    Field("protocol_id", "Q", "PROTOCOL_ID"),
)

#: A CHALLENGE's sealed plaintext (after the kind byte and the random nonce).
CHALLENGE_FIELDS = (
    Field("connection_id", "16s", "names this connection: its keys are derived from it"),
    Field("challenge_token", _CHALLENGE_TOKEN, "opaque: returned as is in the RESPONSE"),
)

#: A RESPONSE's sealed plaintext.
RESPONSE_FIELDS = (Field("challenge_token", _CHALLENGE_TOKEN, "the CHALLENGE's, unchanged"),)

#: PAYLOAD and DISCONNECT: the clear header, which is the AEAD's associated data.
CHANNEL_FIELDS = (
    Field("kind", "B", "4 (PAYLOAD) or 5 (DISCONNECT)"),
    Field(
        "sequence",
        "Q",
        "this datagram's number: 0, 1, 2 … per connection and direction; the AEAD nonce",
    ),
)

#: The start of every PAYLOAD body (DISCONNECT's body is empty).
ACK_FIELDS = (
    Field("ack", "Q", "the newest sequence received from the peer (2⁶⁴−1 before any)"),
    Field("ack_bits", "I", "bit i set: sequence ack − 1 − i was received too"),
)

#: Each record's header after its tag byte; its last field is the length of the bytes
#: that follow the header.
RECORD_FIELDS = {
    Record.REDUNDANT: (
        Field("id", "I", "the payload's number on this lane: 0, 1, 2 …"),
        Field("sends_before", "B", "how many earlier datagrams carried it (at most 255)"),
        Field("length", "H", "payload bytes that follow"),
    ),
    Record.RELIABLE: (
        Field("id", "I", "the chunk's number on this lane: 0, 1, 2 …"),
        Field("final", "B", "1: the last chunk of its message"),
        Field("length", "H", "chunk bytes that follow"),
    ),
    Record.UNRELIABLE: (
        Field("id", "I", "the payload's number on the UNRELIABLE lane: 0, 1, 2 …"),
        Field("length", "H", "payload bytes that follow"),
    ),
    Record.FRAGMENT: (
        Field("id", "I", "the payload's number on the UNRELIABLE lane (shared with whole ones)"),
        Field("index", "B", "this piece's place, from 0"),
        Field("count", "B", "the payload's pieces, 2 to 255"),
        Field("length", "H", "piece bytes that follow"),
    ),
}

#: A connect token as ``POST /connect`` answers it (JSON): name, JSON type, meaning.
TOKEN_JSON_FIELDS = (
    (
        "private",
        "str",
        "standard base64 of the private part: opaque to the client, sent as is in the REQUEST",
    ),
    (
        "client_to_server_key",
        "str",
        "standard base64 of 32 bytes: the session key the client seals with (before derivation)",
    ),
    (
        "server_to_client_key",
        "str",
        "standard base64 of 32 bytes: the session key the node seals with (before derivation)",
    ),
    (
        "addresses",
        "[[str, int]]",
        "[host, port] of each node that accepts the token: the "
        "node that issued it first, then the region's standbys",
    ),
    ("expires_at", "float", "unix seconds: a REQUEST after it is refused (expired)"),
    ("timeout_s", "float", "seconds of silence after which either side gives the connection up"),
)

#: The private part on the wire: this clear expiry, then the sealed plaintext.
TOKEN_CLEAR_FIELDS = (
    Field("expires_at", "d", "unix seconds, in clear: checked before any decryption"),
)
#: The private part's associated data (not sent: both sides build it).
TOKEN_ASSOCIATED_FIELDS = (
    Field("version", "B", "PROTOCOL_VERSION"),
    Field("protocol_id", "Q", "PROTOCOL_ID"),
    Field("expires_at", "d", "the clear expiry"),
)
#: The private part's sealed plaintext, fixed part; then ``address_count`` addresses, then
#: the user data, then zeros up to ``PRIVATE_PLAIN_SIZE``.
TOKEN_PLAIN_FIELDS = (
    Field("token_id", "16s", "random: a node accepts each id once"),
    Field("expires_at", "d", "equal to the clear expiry"),
    Field("timeout_s", "d", "as in the JSON"),
    Field("client_to_server_key", "32s", "as in the JSON"),
    Field("server_to_client_key", "32s", "as in the JSON"),
    Field("address_count", "B", "1 to MAX_ADDRESSES"),
)
#: One address of the private part: the host's UTF-8 bytes between these two fields.
TOKEN_ADDRESS_FIELDS = (
    Field("host_length", "B", "1 to MAX_HOST_BYTES; that many bytes of host follow"),
    Field("port", "H", "the UDP port"),
)
#: The user data after the addresses (the player's name, as the node issued it).
TOKEN_USER_DATA_FIELDS = (
    Field("user_data_length", "H", "0 to MAX_USER_DATA; that many bytes follow"),
)
