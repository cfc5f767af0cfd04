"""docs/protocol.md's tables and docs/protocol.json are the protocol's definition: they are
generated from it, and these tests fail when either differs from it (run
``python -m shared.protocol.doc --write`` after changing the definition)."""

from __future__ import annotations

import json
from pathlib import Path

import msgpack
import numpy as np
import pytest

from shared import protocol
from shared.arena_map import default_map
from shared.datagram import ClientHandshake, ConnectToken
from shared.datagram.constants import REQUEST_SIZE
from shared.datagram.handshake import connection_keys
from shared.datagram.packets import Kind
from shared.datagram.sealing import xopen
from shared.datagram.tokens import PRIVATE_TOKEN_SIZE
from shared.protocol import layout
from shared.protocol.deltas import KIND_FULL, EntityCodec, encode_records
from shared.protocol.doc import DOC_PATH, JSON_PATH, main, render_doc, render_json, tables
from shared.protocol.errors import InvalidField
from shared.protocol.spec import wire_spec


def test_the_document_s_tables_are_the_definition_s() -> None:
    text = DOC_PATH.read_text(encoding="utf-8")
    assert render_doc(text, tables(wire_spec())) == text, (
        "docs/protocol.md is stale: run python -m shared.protocol.doc --write"
    )


def test_the_json_copy_is_the_definition() -> None:
    assert JSON_PATH.read_text(encoding="utf-8") == render_json(wire_spec()), (
        "docs/protocol.json is stale: run python -m shared.protocol.doc --write"
    )


def test_check_fails_on_a_stale_table_and_write_mends_it(tmp_path: Path) -> None:
    doc, spec = tmp_path / "protocol.md", tmp_path / "protocol.json"
    text = DOC_PATH.read_text(encoding="utf-8")
    doc.write_text(
        text.replace("| `id` | 16 | the player's id |", "| `id` | 15 | the player's id |")
    )
    spec.write_text(JSON_PATH.read_text(encoding="utf-8"))
    assert doc.read_text() != text  # (the row the edit names is there to be changed)
    paths = ["--doc", str(doc), "--json", str(spec)]
    assert main(["--check", *paths]) == 1
    assert main(["--write", *paths]) == 0
    assert main(["--check", *paths]) == 0
    assert doc.read_text() == text


def test_a_marker_of_no_table_is_an_error() -> None:
    text = "<!-- generated: nonsense -->\n<!-- end generated: nonsense -->\n"
    with pytest.raises(ValueError, match="nonsense"):
        render_doc(text, {})
    with pytest.raises(ValueError, match="no markers"):
        render_doc("", {"limits": "x\n"})


def test_every_message_and_event_is_documented_with_its_decoder_s_fields() -> None:
    spec = wire_spec()
    documented = {m["type"]: [f["name"] for f in m["fields"]] for m in spec["client_messages"]}
    assert documented == {
        cls.TYPE: list(cls.FIELDS)
        for cls in (
            protocol.JoinMessage, protocol.InputMessage, protocol.PingMessage,
            protocol.ProbeEchoMessage, protocol.SightingMessage,
        )
    }  # fmt: skip
    server = {m["type"] for m in spec["server_messages"]}
    assert server == {
        "welcome", "snapshot", "pong", "probe", "error", "standbys", "token", "connect_token",
    }  # fmt: skip
    assert [e["kind"] for e in spec["events"]] == ["join", "leave", "respawn", "shot"]


def test_the_documented_widths_are_the_ones_the_coder_writes() -> None:
    """The measured layout of the default map: z 19 bits, velocities 16 bits at value +
    2**15, a full record 22 bytes; the coder writes exactly that."""
    arena = default_map()
    codec = EntityCodec.for_bounds(arena.bounds_min, arena.bounds_max)
    entities = wire_spec()["entities"]
    example = entities["default_map"]
    assert example["bits"] == codec.bits.tolist() == [18, 18, 19, 16, 16, 16, 16, 16, 8, 8]
    assert codec.velocity_half == 2**15
    values = np.zeros((1, len(codec.bits)), dtype=np.int32)
    out = np.zeros(codec.max_record_bytes(), dtype=np.uint8)
    size = encode_records(
        np.zeros(1, np.int64), np.full(1, KIND_FULL), values, values, codec.bits, out
    )
    assert size == example["full_record_bytes"] == 22
    assert example["max_record_bytes"] == codec.max_record_bytes()


@pytest.mark.parametrize(
    ("low", "high"), [((-30.0, -30.0), (30.0, 30.0)), ((0.0, 0.0), (1.0, 500.0))]
)
def test_the_width_rule_is_the_codec_s(low: tuple[float, float], high: tuple[float, float]) -> None:
    codec = EntityCodec.for_bounds(np.array(low), np.array(high))
    assert tuple(codec.bits.tolist()) == layout.field_bits(low, high)
    again = EntityCodec.for_wire(low, layout.field_bits(low, high))
    assert np.array_equal(again.origin, codec.origin) and np.array_equal(again.bits, codec.bits)


def test_a_welcome_carries_the_codec_and_unknown_server_keys_are_ignored() -> None:
    arena = default_map()
    codec = EntityCodec.for_bounds(arena.bounds_min, arena.bounds_max)
    welcome = protocol.WelcomeMessage(
        v=2, player_id=3, tick_rate=60, tick=0, server_time=0.0, token="t", map="m",
        region="r", epoch=1, bounds_min=(-30.0, -30.0), bounds_max=(30.0, 30.0),
        entity_bits=tuple(codec.bits.tolist()),
    )  # fmt: skip
    wire = welcome.to_wire()
    assert protocol.decode_server(protocol.encode(welcome)) == welcome
    later = msgpack.packb({**wire, "a_later_field": [1, 2]}, use_bin_type=True)
    assert protocol.decode_server(later) == welcome
    older = {k: v for k, v in wire.items() if k not in ("bounds_min", "bounds_max", "entity_bits")}
    decoded = protocol.decode_server(msgpack.packb(older))
    assert isinstance(decoded, protocol.WelcomeMessage) and decoded.entity_bits is None
    with pytest.raises(InvalidField, match="entity_bits"):
        protocol.decode_server(msgpack.packb({**wire, "entity_bits": [18] * 9}))
    join = msgpack.unpackb(protocol.encode(protocol.JoinMessage(2, "x")))
    strict = msgpack.packb({**join, "a_later_field": 1})
    with pytest.raises(InvalidField, match="a_later_field"):
        protocol.decode_client(strict)


def test_the_json_states_the_record_header_and_classes() -> None:
    entities = json.loads(JSON_PATH.read_text(encoding="utf-8"))["entities"]
    assert (entities["id_bits"], entities["kind_bits"], entities["mask_bits"]) == (16, 2, 4)
    assert [c["payload_bits"] for c in entities["classes"]] == [0, 7, 13, None]
    assert [f["name"] for f in entities["fields"]] == list(protocol.deltas.FIELDS)


def test_the_udp_test_vectors_are_what_the_client_code_accepts() -> None:
    """The documented CHALLENGE, opened by the reference client, gives the documented
    connection keys and a RESPONSE that returns the challenge token; the documented first
    keep-alive connects it."""
    examples = wire_spec()["datagram"]["examples"]
    c2s, s2c = (
        bytes.fromhex(examples[f"{d}_session_key"])
        for d in ("client_to_server", "server_to_client")
    )
    address = ("127.0.0.1", 40000)
    token = ConnectToken(bytes(PRIVATE_TOKEN_SIZE), c2s, s2c, (address,), 100.0, 5.0)
    client = ClientHandshake(token, address, 0.0)
    assert len(client.datagrams(0.0)[0]) == REQUEST_SIZE
    assert client.on_datagram(bytes.fromhex(examples["challenge"]), 0.01) == []
    (response,) = client.datagrams(0.02)
    challenge_token = xopen(c2s, response[1:], bytes([Kind.RESPONSE]))
    assert challenge_token == bytes.fromhex(examples["challenge_token"])
    keys = connection_keys(token, bytes.fromhex(examples["connection_id"]))
    assert [k.hex() for k in keys] == [
        examples["client_to_server_key"],
        examples["server_to_client_key"],
    ]
    client.on_datagram(bytes.fromhex(examples["datagrams"][0]["hex"]), 0.03)
    assert client.state == "connected"


def test_every_message_has_one_udp_lane() -> None:
    spec = wire_spec()
    lanes = spec["datagram"]["lanes"]
    for side, messages in (
        ("client_messages", "client_messages"),
        ("server_messages", "server_messages"),
    ):
        named = [m for lane in lanes for m in lane[side]]
        assert sorted(named) == sorted(m["type"] for m in spec[messages])
    by_lane = {lane["lane"]: lane["client_messages"] + lane["server_messages"] for lane in lanes}
    assert by_lane["REDUNDANT"] == ["input"]
    assert sorted(by_lane["UNRELIABLE"]) == ["ping", "pong", "probe", "probe_echo", "snapshot"]
