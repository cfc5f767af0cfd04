"""A client's datagram layer written from ``docs/protocol.json`` alone opens and parses the
documented test vectors.

:class:`DocsDatagrams` imports nothing of ``shared``: it reads the layouts, the sealing
rules and the lanes from the JSON's ``datagram`` part and uses only ``cryptography``,
``pynacl``, ``hashlib`` and ``msgpack``, as a stranger's client would. It derives the
connection keys, opens the CHALLENGE and the RESPONSE, opens every channel datagram of the
vectors, reads its acknowledgements and records, and delivers what the lanes promise: the
messages the conversation sent, each once, with the lost datagram's input recovered.
"""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path
from typing import Any

import msgpack
import pytest
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from nacl import bindings

SPEC = json.loads(
    (Path(__file__).resolve().parents[2] / "docs" / "protocol.json").read_text(encoding="utf-8")
)
UDP = SPEC["datagram"]
EXAMPLES = UDP["examples"]
_CODES = {"u8": "B", "u16": "H", "u32": "I", "u64": "Q", "f64": "d"}


def constant(name: str) -> Any:
    return next(c["value"] for c in UDP["constants"] if c["name"] == name)


def code(field: dict[str, Any]) -> str:
    kind = field["type"]
    return _CODES.get(kind) or f"{field['bytes']}s"


def layout(fields: list[dict[str, Any]]) -> struct.Struct:
    order = {"little": "<", "big": ">"}[UDP["byte_order"]]
    return struct.Struct(order + "".join(code(f) for f in fields))


def read(fields: list[dict[str, Any]], data: bytes, offset: int = 0) -> dict[str, Any]:
    values = layout(fields).unpack_from(data, offset)
    return dict(zip((f["name"] for f in fields), values, strict=True))


class DocsDatagrams:
    """One side's datagram layer, from the documented tables and rules only."""

    def __init__(self, receive_key: bytes) -> None:
        self.aead = ChaCha20Poly1305(receive_key)
        rows = UDP["packets"]["PAYLOAD"]
        self.header = rows[: next(i for i, row in enumerate(rows) if row["sealed"])]
        self.records = {r["tag"]: r for r in UDP["records"]}
        self.lanes = {
            name: lane["lane"] for lane in UDP["lanes"] for name in lane["records"].split(", ")
        }
        self.kinds = {k["name"]: k["code"] for k in UDP["kinds"]}
        self.seen: set[int] = set()
        self.redundant_delivered = -1
        self.reliable_expected = 0
        self.reliable_parts: list[bytes] = []
        self.fragments: dict[int, dict[int, bytes]] = {}

    def open(self, datagram: bytes) -> tuple[dict[str, Any], bytes]:
        """The clear header and the opened body; AssertionError where the rules refuse."""
        assert len(datagram) <= constant("MAX_PAYLOAD")
        size = layout(self.header).size
        header = read(self.header, datagram)
        assert header["kind"] in (self.kinds["PAYLOAD"], self.kinds["DISCONNECT"])
        sequence = header["sequence"]
        assert sequence not in self.seen, "replayed"
        nonce = bytes(UDP["sealing"]["nonce_zero_prefix"]) + sequence.to_bytes(8, "little")
        body = self.aead.decrypt(nonce, datagram[size:], datagram[:size])
        self.seen.add(sequence)
        return header, body

    def parse(self, body: bytes) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The acknowledgements and the records of a PAYLOAD body."""
        ack = read(UDP["ack"], body)
        offset = layout(UDP["ack"]).size
        records = []
        while offset < len(body):
            spec = self.records[body[offset]]
            fields = read(spec["fields"], body, offset + 1)
            offset += 1 + layout(spec["fields"]).size
            data = body[offset : offset + fields["length"]]
            assert len(data) == fields["length"], "a record past the end"
            offset += fields["length"]
            del fields["length"]
            records.append({"record": spec["name"], **fields, "data": data.hex()})
        return ack, records

    def deliver(self, records: list[dict[str, Any]]) -> list[tuple[str, bytes]]:
        """What the lanes deliver from these records: (lane, payload), each once."""
        out = []
        for record in records:
            data = bytes.fromhex(record["data"])
            lane = self.lanes[record["record"]]
            if record["record"] == "REDUNDANT":
                if record["id"] > self.redundant_delivered:
                    self.redundant_delivered = record["id"]
                    out.append((lane, data))
            elif record["record"] == "RELIABLE":
                assert record["id"] == self.reliable_expected  # (in order here: none lost)
                self.reliable_expected += 1
                self.reliable_parts.append(data)
                if record["final"]:
                    out.append((lane, b"".join(self.reliable_parts)))
                    self.reliable_parts = []
            elif record["record"] == "UNRELIABLE":
                out.append((lane, data))
            else:
                assert 2 <= record["count"] and record["index"] < record["count"]
                assert len(data) <= constant("FRAGMENT_SIZE")
                pieces = self.fragments.setdefault(record["id"], {})
                pieces[record["index"]] = data
                if len(pieces) == record["count"]:
                    out.append((lane, b"".join(pieces[i] for i in range(record["count"]))))
                    del self.fragments[record["id"]]
        return out


def derive(session_key: bytes, connection_id: bytes) -> bytes:
    person = UDP["sealing"]["connection_key_person"].encode()
    return hashlib.blake2b(connection_id, digest_size=32, key=session_key, person=person).digest()


def key(name: str) -> bytes:
    return bytes.fromhex(EXAMPLES[name])


def xopen(key: bytes, packet: bytes, rows: list[dict[str, Any]]) -> dict[str, bytes]:
    """A handshake packet's sealed fields, opened as its table says."""
    offsets, at = {}, 0
    for row in rows:
        offsets[row["name"]] = (at, at + row["bytes"])
        at += row["bytes"]
    assert at == len(packet)
    nonce = packet[slice(*offsets["nonce"])]
    sealed_rows = [r for r in rows if r["sealed"]]
    start = offsets[sealed_rows[0]["name"]][0]
    plain = bindings.crypto_aead_xchacha20poly1305_ietf_decrypt(
        packet[start:], packet[:1], nonce, key
    )
    out, at = {}, 0
    for row in sealed_rows:
        out[row["name"]] = plain[at : at + row["bytes"]]
        at += row["bytes"]
    return out


def test_the_connection_keys_derive_as_documented() -> None:
    connection_id = key("connection_id")
    assert derive(key("client_to_server_session_key"), connection_id) == key("client_to_server_key")
    assert derive(key("server_to_client_session_key"), connection_id) == key("server_to_client_key")


def test_the_challenge_and_the_response_open_as_documented() -> None:
    challenge, response = key("challenge"), key("response")
    kinds = {k["name"]: k for k in UDP["kinds"]}
    assert challenge[0] == kinds["CHALLENGE"]["code"] and response[0] == kinds["RESPONSE"]["code"]
    assert len(challenge) == kinds["CHALLENGE"]["bytes"] == constant("CHALLENGE_SIZE")
    assert len(response) == kinds["RESPONSE"]["bytes"] == constant("RESPONSE_SIZE")
    assert constant("CHALLENGE_SIZE") < constant("REQUEST_SIZE")  # no amplification
    opened = xopen(key("server_to_client_session_key"), challenge, UDP["packets"]["CHALLENGE"])
    assert opened == {
        "connection_id": key("connection_id"),
        "challenge_token": key("challenge_token"),
    }
    returned = xopen(key("client_to_server_session_key"), response, UDP["packets"]["RESPONSE"])
    assert returned == {"challenge_token": key("challenge_token")}


def test_a_request_is_its_documented_size() -> None:
    rows = UDP["packets"]["REQUEST"]
    assert sum(r["bytes"] for r in rows) == constant("REQUEST_SIZE")
    assert next(r for r in rows if r["name"] == "private")["bytes"] == constant(
        "PRIVATE_TOKEN_SIZE"
    )
    private = UDP["private_token"]
    assert sum(r["bytes"] for r in private["layout"]) == private["size"]


def test_the_conversation_opens_parses_and_delivers_as_documented() -> None:
    client_key, node_key = key("client_to_server_key"), key("server_to_client_key")
    at_node, at_client = DocsDatagrams(client_key), DocsDatagrams(node_key)
    delivered: dict[str, list[tuple[str, dict[str, Any]]]] = {"client": [], "node": []}
    arrived: dict[str, set[int]] = {"client": set(), "node": set()}
    for example in EXAMPLES["datagrams"]:
        receiver = at_node if example["from"] == "client" else at_client
        datagram = bytes.fromhex(example["hex"])
        assert len(datagram) == example["bytes"]
        header, body = receiver.open(datagram)
        assert body.hex() == example["body"] and header["sequence"] == example["sequence"]
        if example["kind"] == "DISCONNECT":
            assert body == b""
            continue
        ack, records = receiver.parse(body)
        assert (ack["ack"], ack["ack_bits"]) == (example["ack"], example["ack_bits"])
        assert records == example["records"]
        # What the peer's ack says it received (the documented rule) is what it did receive.
        peer = "node" if example["from"] == "client" else "client"
        if ack["ack"] != constant("NO_SEQUENCE"):
            acked = {ack["ack"]} | {
                ack["ack"] - 1 - i for i in range(constant("ACK_BITS")) if ack["ack_bits"] >> i & 1
            }
            assert acked == {s for s in arrived[peer] if s <= ack["ack"]}
        if example.get("lost"):
            receiver.seen.discard(header["sequence"])  # (it never arrived: forget it)
            continue
        arrived[example["from"]].add(header["sequence"])
        for lane, payload in receiver.deliver(records):
            message = msgpack.unpackb(payload, raw=False)
            delivered[example["from"]].append((lane, message))
    lanes = {lane["lane"]: lane for lane in UDP["lanes"]}
    for sender, side in (("client", "client_messages"), ("node", "server_messages")):
        for lane, message in delivered[sender]:
            assert message["type"] in lanes[lane][side], (sender, lane, message["type"])
    client = [(lane, m["type"], m.get("seq")) for lane, m in delivered["client"]]
    assert client == [
        ("RELIABLE", "join", None),
        ("REDUNDANT", "input", 1),
        ("REDUNDANT", "input", 2),
    ]
    node = [(lane, m["type"]) for lane, m in delivered["node"]]
    assert node == [("RELIABLE", "welcome"), ("UNRELIABLE", "snapshot")]
    snapshot = delivered["node"][1][1]
    full = SPEC["entities"]["default_map"]["full_record_bytes"]
    assert len(snapshot["entities"]) == 60 * full and snapshot["base"] == -1


def test_a_forged_or_replayed_datagram_does_not_open() -> None:
    example = next(e for e in EXAMPLES["datagrams"] if e["from"] == "node")
    datagram = bytearray(bytes.fromhex(example["hex"]))
    receiver = DocsDatagrams(key("server_to_client_key"))
    receiver.open(bytes(datagram))
    with pytest.raises(AssertionError, match="replayed"):
        receiver.open(bytes(datagram))
    datagram[1] ^= 1  # another sequence: the header is the associated data and the nonce
    with pytest.raises(InvalidTag):
        DocsDatagrams(key("server_to_client_key")).open(bytes(datagram))
