"""The UDP transport as data: the datagram layouts of :mod:`shared.datagram.layout`, the
constants the peers agree on, the refusal causes, which lane carries which message, and
test vectors made by the code with fixed keys.

:func:`datagram_spec` is ``docs/protocol.json``'s ``datagram`` and the source of the UDP
chapter's tables in ``docs/protocol.md`` (:mod:`shared.protocol.doc`). The vectors are a
short conversation between a node's :class:`~shared.datagram.Channel` and a client's, so a
client writer can check derivation, sealing and parsing byte for byte.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from shared.datagram import channel, constants, handshake, layout, packets, sealing, tokens
from shared.datagram.layout import Field, Kind

__all__ = [
    "LANE_MEANINGS",
    "LANE_OF_MESSAGE",
    "datagram_examples",
    "datagram_spec",
    "lane_of_frame",
]

#: The lane of each seat-protocol message that does not travel RELIABLE. The round-trip
#: measurements ride UNRELIABLE: a resent ping would measure the resend, and on the ordered
#: RELIABLE lane every ping behind a lost message would wait for its resend too; a lost
#: one is a sample missed, and the next is due a moment later.
LANE_OF_MESSAGE = {
    "snapshot": channel.Lane.UNRELIABLE,
    "input": channel.Lane.REDUNDANT,
    "ping": channel.Lane.UNRELIABLE,
    "pong": channel.Lane.UNRELIABLE,
    "probe": channel.Lane.UNRELIABLE,
    "probe_echo": channel.Lane.UNRELIABLE,
}
#: A message's map starts with its ``type`` (shared.protocol.messages encodes it first):
#: a fixmap, the fixstr "type", then the type's fixstr.
_TYPE_KEY = b"\xa4type"


def lane_of_frame(frame: bytes) -> channel.Lane:
    """The lane a seat-protocol message travels on over UDP, told from its first bytes."""
    if len(frame) > 7 and frame[0] & 0xF0 == 0x80 and frame[1:6] == _TYPE_KEY:
        length = frame[6] - 0xA0
        if 0 <= length < 32:
            name = frame[7 : 7 + length].decode("ascii", "replace")
            return LANE_OF_MESSAGE.get(name, channel.Lane.RELIABLE)
    return channel.Lane.RELIABLE


#: What each lane promises, and the records it travels in.
LANE_MEANINGS = {
    channel.Lane.UNRELIABLE: (
        "UNRELIABLE, FRAGMENT",
        "sent once; a payload larger than a datagram is cut into FRAGMENTs of FRAGMENT_SIZE "
        "(a lost fragment loses that payload only); never delivered twice; a late one is "
        "still delivered (a snapshot's tick orders it)",
    ),
    channel.Lane.REDUNDANT: (
        "REDUNDANT",
        "every datagram repeats, oldest first, the newest payloads not yet acknowledged (at "
        "most REDUNDANCY, as many as fit); the receiver delivers a payload only if its id is "
        "above the newest it delivered: once each, in send order",
    ),
    channel.Lane.RELIABLE: (
        "RELIABLE",
        "cut into chunks of RELIABLE_CHUNK bytes, each resent until a datagram that carried "
        "it is acknowledged; the receiver joins the chunks in id order and delivers each "
        "message once, in order, at its final chunk",
    ),
}


def _field(field: Field) -> dict[str, Any]:
    return {"name": field.name, "type": field.type, "bytes": field.size, "meaning": field.meaning}


def _fields(fields: tuple[Field, ...]) -> list[dict[str, Any]]:
    return [_field(f) for f in fields]


def _part(name: str, size: int | None, meaning: str, sealed: bool = False) -> dict[str, Any]:
    """A run of bytes of a packet that is not one of the layout's fields."""
    return {
        "name": name,
        "type": "bytes" if size is None else f"bytes[{size}]",
        "bytes": size,
        "meaning": meaning,
        "sealed": sealed,
    }


def _clear(fields: tuple[Field, ...]) -> list[dict[str, Any]]:
    return [{**_field(f), "sealed": False} for f in fields]


def _sealed(fields: tuple[Field, ...]) -> list[dict[str, Any]]:
    return [{**_field(f), "sealed": True} for f in fields]


def _packets() -> dict[str, list[dict[str, Any]]]:
    """Each kind's bytes in order: clear fields, the nonce, sealed fields, the tag."""
    nonce = _part("nonce", sealing.XNONCE_BYTES, "random XChaCha20 nonce")
    tag = _part("tag", sealing.TAG_BYTES, "Poly1305 tag")
    kind = layout.Field("kind", "B", "")
    request_fill = constants.REQUEST_SIZE - packets.REQUEST_HEADER.size - tokens.PRIVATE_TOKEN_SIZE
    return {
        "REQUEST": _clear(layout.REQUEST_FIELDS)
        + [
            _part("private", tokens.PRIVATE_TOKEN_SIZE, "the connect token's `private`, as is"),
            _part("zeros", request_fill, "zero bytes: the request is exactly REQUEST_SIZE"),
        ],
        "CHALLENGE": [{**_field(kind), "meaning": "2 (CHALLENGE)", "sealed": False}, nonce]
        + _sealed(layout.CHALLENGE_FIELDS)
        + [tag],
        "RESPONSE": [{**_field(kind), "meaning": "3 (RESPONSE)", "sealed": False}, nonce]
        + _sealed(layout.RESPONSE_FIELDS)
        + [tag],
        "PAYLOAD": _clear(layout.CHANNEL_FIELDS)
        + [_part("body", None, "acknowledgements, then records", sealed=True), tag],
        "DISCONNECT": _clear(layout.CHANNEL_FIELDS) + [tag],
    }


_SIZES = {
    Kind.REQUEST: constants.REQUEST_SIZE,
    Kind.CHALLENGE: packets.CHALLENGE_SIZE,
    Kind.RESPONSE: packets.RESPONSE_SIZE,
    Kind.PAYLOAD: None,
    Kind.DISCONNECT: packets.CHANNEL_HEADER.size + sealing.TAG_BYTES,
}


def _constant(name: str, value: Any, meaning: str) -> dict[str, Any]:
    return {"name": name, "value": value, "meaning": meaning}


def _constants() -> list[dict[str, Any]]:
    c = constants
    return [
        _constant("PROTOCOL_ID", c.PROTOCOL_ID, "u64 in every REQUEST and token: \"ARENAUDP\""),
        _constant("PROTOCOL_VERSION", c.PROTOCOL_VERSION, "of these layouts"),
        _constant("MAX_PAYLOAD", c.MAX_PAYLOAD, "the largest datagram (UDP payload), in bytes"),
        _constant("REQUEST_SIZE", c.REQUEST_SIZE, "a REQUEST's exact size: larger than any reply before the RESPONSE"),
        _constant("CHALLENGE_SIZE", packets.CHALLENGE_SIZE, "a CHALLENGE's exact size"),
        _constant("RESPONSE_SIZE", packets.RESPONSE_SIZE, "a RESPONSE's exact size"),
        _constant("PRIVATE_TOKEN_SIZE", tokens.PRIVATE_TOKEN_SIZE, "a private token's exact size"),
        _constant("KEY_BYTES", c.KEY_BYTES, "every key"),
        _constant("TAG_BYTES", sealing.TAG_BYTES, "Poly1305's tag, after every ciphertext"),
        _constant("XNONCE_BYTES", sealing.XNONCE_BYTES, "XChaCha20's nonce, before every handshake ciphertext"),
        _constant("NO_SEQUENCE", packets.NO_SEQUENCE, "`ack` before anything was received"),
        _constant("ACK_BITS", channel.ACK_BITS, "sequences before `ack` that `ack_bits` covers"),
        _constant("REPLAY_WINDOW", c.REPLAY_WINDOW, "a sequence this far or more below the newest received is dropped, as is one already received"),
        _constant("DATA_ROOM", packets.DATA_ROOM, "bytes of records a PAYLOAD holds: MAX_PAYLOAD − header − tag − acknowledgements"),
        _constant("FRAGMENT_SIZE", packets.FRAGMENT_SIZE, "a FRAGMENT's bytes (the last may be shorter)"),
        _constant("MAX_FRAGMENTS", packets.MAX_FRAGMENTS, "fragments of one payload, most"),
        _constant("RELIABLE_CHUNK", channel.RELIABLE_CHUNK, "a RELIABLE chunk's bytes, most"),
        _constant("MAX_MESSAGE", channel.MAX_MESSAGE, "the largest UNRELIABLE or RELIABLE payload"),
        _constant("MAX_REDUNDANT_PAYLOAD", channel.MAX_REDUNDANT_PAYLOAD, "the largest REDUNDANT payload"),
        _constant("REDUNDANCY", c.REDUNDANCY, "unacknowledged REDUNDANT payloads a datagram repeats, most (older ones are given up)"),
        _constant("RESEND_INTERVAL_S", c.RESEND_INTERVAL_S, "seconds: the REQUEST and RESPONSE are resent this often while unanswered; a keep-alive goes after this long without sending; a RELIABLE chunk is resent after max(this, 1.5 × RTT) unacknowledged"),
        _constant("TIMEOUT_S", c.TIMEOUT_S, "seconds of silence (no authentic datagram) after which a side gives the connection up: a token's `timeout_s`"),
        _constant("TOKEN_EXPIRES_IN_S", c.TOKEN_EXPIRES_IN_S, "seconds a connect token may start a handshake (`expires_at` − issue time)"),
        _constant("DISCONNECT_COPIES", channel.DISCONNECT_COPIES, "DISCONNECT packets sent on a clean close"),
        _constant("MAX_ADDRESSES", tokens.MAX_ADDRESSES, "addresses in a token, most"),
        _constant("MAX_HOST_BYTES", tokens.MAX_HOST_BYTES, "an address's host, most UTF-8 bytes"),
        _constant("MAX_USER_DATA", tokens.MAX_USER_DATA, "a token's user data, most bytes"),
    ]  # fmt: skip


def _lanes(client_types: list[str], server_types: list[str]) -> list[dict[str, Any]]:
    out = []
    for lane, (records, meaning) in LANE_MEANINGS.items():
        out.append(
            {
                "lane": lane.value.upper(),
                "records": records,
                "client_messages": [t for t in client_types if _lane(t) is lane],
                "server_messages": [t for t in server_types if _lane(t) is lane],
                "meaning": meaning,
            }
        )
    return out


def _lane(message_type: str) -> channel.Lane:
    return LANE_OF_MESSAGE.get(message_type, channel.Lane.RELIABLE)


def _private_token() -> dict[str, Any]:
    return {
        "size": tokens.PRIVATE_TOKEN_SIZE,
        "layout": _clear(layout.TOKEN_CLEAR_FIELDS)
        + [
            _part("nonce", sealing.XNONCE_BYTES, "random XChaCha20 nonce"),
            _part("plaintext", tokens.PRIVATE_PLAIN_SIZE, "sealed under the region's key", sealed=True),
            _part("tag", sealing.TAG_BYTES, "Poly1305 tag"),
        ],
        "associated_data": _fields(layout.TOKEN_ASSOCIATED_FIELDS),
        "plaintext": _fields(layout.TOKEN_PLAIN_FIELDS),
        "address": _fields(layout.TOKEN_ADDRESS_FIELDS[:1])
        + [{"name": "host", "type": "bytes", "bytes": None, "meaning": "UTF-8, host_length bytes"}]
        + _fields(layout.TOKEN_ADDRESS_FIELDS[1:]),
        "user_data": _fields(layout.TOKEN_USER_DATA_FIELDS),
        "plaintext_size": tokens.PRIVATE_PLAIN_SIZE,
        "rule": "plaintext = the fixed fields, then address_count addresses, then the user "
        "data's length and bytes, then zeros up to plaintext_size; sealed with "
        "XChaCha20-Poly1305 under the region's key, associated data as above",
    }  # fmt: skip


def datagram_spec(client_types: list[str], server_types: list[str]) -> dict[str, Any]:
    """The UDP transport as one JSON-ready value (``docs/protocol.json``'s ``datagram``);
    ``client_types`` and ``server_types``: the seat protocol's message types, for the
    lanes."""
    connection = handshake.CONNECTION_KEY_CONTEXT.decode()
    return {
        "byte_order": layout.BYTE_ORDER,
        "constants": _constants(),
        "kinds": [
            {"code": int(kind), "name": kind.name, "bytes": _SIZES[kind], "meaning": layout.KIND_MEANINGS[kind]}
            for kind in Kind
        ],
        "packets": _packets(),
        "challenge_token": {
            "layout": _fields(layout.CHALLENGE_TOKEN_FIELDS),
            "plaintext": _fields(layout.CHALLENGE_TOKEN_PLAIN_FIELDS),
        },
        "sealing": {
            "handshake": "XChaCha20-Poly1305 (IETF): the datagram is the kind byte, a random "
            "24-byte nonce, the ciphertext and the 16-byte tag; associated data: the kind byte. "
            "CHALLENGE under the token's server_to_client_key, RESPONSE under its "
            "client_to_server_key (the session keys, not derived)",
            "channel": "ChaCha20-Poly1305 (IETF, RFC 8439) under the direction's connection "
            "key: nonce = 4 zero bytes then the sequence as u64 little-endian; associated data "
            "= the 9 clear bytes (kind, sequence); the datagram is those 9 bytes, the "
            "ciphertext and the tag",
            "nonce_zero_prefix": 4,
            "connection_keys": "key = BLAKE2b(message = connection_id, key = the session key, "
            f"digest_size = 32, person = \"{connection}\"), for each direction's session key",
            "connection_key_person": connection,
        },
        "ack": _fields(layout.ACK_FIELDS),
        "records": [
            {"tag": int(record), "name": record.name, "meaning": layout.RECORD_MEANINGS[record],
             "fields": _fields(fields)}
            for record, fields in layout.RECORD_FIELDS.items()
        ],
        "record_rule": "records follow the acknowledgements to the end of the body: each is its "
        "tag u8, its header, then `length` bytes; an unknown tag or a length past the end "
        "makes the whole datagram bad_packet",
        "lanes": _lanes(client_types, server_types),
        "token_json": [{"name": n, "type": t, "meaning": m} for n, t, m in layout.TOKEN_JSON_FIELDS],
        "private_token": _private_token(),
        "refusals": [{"cause": c, "meaning": m, "by": "protocol"} for c, m in constants.CAUSE_MEANINGS.items()]
        + [{"cause": c, "meaning": m, "by": "node"} for c, m in constants.LINK_CAUSE_MEANINGS.items()],
        "examples": datagram_examples(),
    }  # fmt: skip


# -- test vectors ---------------------------------------------------------------------------

_CLIENT_TO_SERVER = bytes(range(0x00, 0x20))
_SERVER_TO_CLIENT = bytes(range(0x20, 0x40))
_CONNECTION_ID = bytes(range(0xA0, 0xB0))
_CHALLENGE_TOKEN = bytes(range(0x40, 0x40 + packets.CHALLENGE_TOKEN_BYTES))
_NONCES = (bytes(range(0xC0, 0xD8)), bytes(range(0xD0, 0xE8)))


def _records(body: bytes) -> list[dict[str, Any]]:
    out = []
    for record, values, data in packets.read_records(body, packets.ACK_HEADER.size):
        names = [f.name for f in layout.RECORD_FIELDS[record][:-1]]
        out.append(
            {"record": record.name, **dict(zip(names, values, strict=True)), "data": data.hex()}
        )
    return out


def _example(what: str, sender: str, key: bytes, datagram: bytes) -> dict[str, Any]:
    """One channel datagram as sent, and what it holds (read back with the code)."""
    kind, sequence = packets.CHANNEL_HEADER.unpack_from(datagram, 0)
    header = datagram[: packets.CHANNEL_HEADER.size]
    body = sealing.PacketKey(key).open(sequence, header, datagram[len(header) :])
    assert body is not None
    example: dict[str, Any] = {
        "what": what, "from": sender, "kind": Kind(kind).name, "sequence": sequence,
        "bytes": len(datagram), "hex": datagram.hex(), "body": body.hex(),
    }  # fmt: skip
    if kind == Kind.PAYLOAD:
        ack, bits = packets.ACK_HEADER.unpack_from(body, 0)
        example.update(ack=ack, ack_bits=bits, records=_records(body))
    return example


def _snapshot() -> bytes:
    """A snapshot of 60 players in full records (too large for one datagram)."""
    from shared.arena_map import default_map
    from shared.protocol import layout as records
    from shared.protocol.deltas import EntityCodec, encode_records
    from shared.protocol.snapshots import encode_snapshot, encode_snapshot_body

    arena = default_map()
    codec = EntityCodec.for_bounds(arena.bounds_min, arena.bounds_max)
    count = 60
    x = np.linspace(-20.0, 20.0, count)
    values = codec.quantise(
        np.stack([x, -x / 2, np.zeros(count)], axis=1), np.zeros((count, 3)),
        np.linspace(-3.0, 3.0, count), np.zeros(count), np.full(count, 100), np.ones(count, bool),
    )  # fmt: skip
    room = np.zeros(count * codec.max_record_bytes(), dtype=np.uint8)
    ids = np.arange(count)
    kinds = np.full(count, records.KINDS["full"])
    size = encode_records(ids, kinds, values, values, codec.bits, room)
    body = encode_snapshot_body(120, 2.0, 1, bytes(8))
    you = (float(x[0]), float(-x[0] / 2), 0.0, 0.0, 0.0, 0.0)
    return encode_snapshot(body, 2, you, -1, room[:size].tobytes())


def datagram_examples() -> dict[str, Any]:
    """Fixed session keys and connection id; the CHALLENGE and RESPONSE they make (fixed
    nonces); then a node's and a client's channels talking: a keep-alive, a join, two
    inputs (the first datagram lost, its input recovered from the second), a snapshot in
    two fragments, a disconnect."""
    from shared.protocol import InputMessage, JoinMessage, WelcomeMessage, encode

    c2s, s2c = (
        sealing.derive_key(_CLIENT_TO_SERVER, handshake.CONNECTION_KEY_CONTEXT, _CONNECTION_ID),
        sealing.derive_key(_SERVER_TO_CLIENT, handshake.CONNECTION_KEY_CONTEXT, _CONNECTION_ID),
    )
    challenge = handshake.seal_challenge(
        _SERVER_TO_CLIENT, _CONNECTION_ID, _CHALLENGE_TOKEN, nonce=_NONCES[0]
    )
    response = handshake.seal_response(_CLIENT_TO_SERVER, _CHALLENGE_TOKEN, nonce=_NONCES[1])
    node = channel.Channel(s2c, c2s, 0.0)
    client = channel.Channel(c2s, s2c, 0.0)
    log: list[dict[str, Any]] = []

    def sends(sender: str, what: str, now: float) -> list[bytes]:
        side, key = (node, s2c) if sender == "node" else (client, c2s)
        out = side.datagrams(now)
        for number, datagram in enumerate(out, 1):
            told = what if len(out) == 1 else f"{what} ({number} of {len(out)})"
            log.append(_example(told, sender, key, datagram))
        return out

    def inputs(seq: int) -> bytes:
        return encode(InputMessage(seq=seq, tick=100 + seq, move=(1.0, 0.0), yaw=0.5, pitch=0.0,
                                   buttons=0, view_time=1.5, ack_tick=-1))  # fmt: skip

    (keep_alive,) = sends("node", "the node's first datagram: a keep-alive (connected)", 0.0)
    client.receive(keep_alive, 0.01)
    client.send(encode(JoinMessage(v=2, name="ada")), channel.Lane.RELIABLE)
    (join,) = sends("client", "join, RELIABLE; acknowledges the keep-alive", 0.01)
    node.receive(join, 0.02)
    welcome = WelcomeMessage(v=2, player_id=1, tick_rate=60, tick=119, server_time=1.99,
                             token="t", map="courtyard", region="eu", epoch=1, snapshot_rate=30)  # fmt: skip
    node.send(encode(welcome), channel.Lane.RELIABLE)
    (sent,) = sends("node", "welcome, RELIABLE; acknowledges the join", 0.02)
    client.receive(sent, 0.03)
    client.send(inputs(1), channel.Lane.REDUNDANT)
    sends("client", "input 1, REDUNDANT (this datagram is lost)", 0.03)
    log[-1]["lost"] = True
    client.send(inputs(2), channel.Lane.REDUNDANT)
    (second,) = sends("client", "input 2, with input 1 again: not acknowledged yet", 0.04)
    assert [lane for lane, _ in node.receive(second, 0.05)] == [channel.Lane.REDUNDANT] * 2
    node.send(_snapshot(), channel.Lane.UNRELIABLE)
    sends("node", "a snapshot in two FRAGMENTs", 0.05)
    disconnect = node.disconnect()
    log.extend(
        _example("a clean close (the first of its copies)", "node", s2c, d) for d in disconnect[:1]
    )
    return {
        "client_to_server_session_key": _CLIENT_TO_SERVER.hex(),
        "server_to_client_session_key": _SERVER_TO_CLIENT.hex(),
        "connection_id": _CONNECTION_ID.hex(),
        "client_to_server_key": c2s.hex(),
        "server_to_client_key": s2c.hex(),
        "challenge_token": _CHALLENGE_TOKEN.hex(),
        "challenge": challenge.hex(),
        "response": response.hex(),
        "datagrams": log,
    }  # fmt: skip
