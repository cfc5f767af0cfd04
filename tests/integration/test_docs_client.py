"""A client written from the generated protocol tables alone plays beside bots on a live node.

Its decoder (:class:`DocsDecoder`) reads only ``docs/protocol.json`` (and msgpack): it does
not import ``shared.protocol``. It joins, acknowledges what it decoded, and for 20 s decodes
every frame the node sends it: messages checked against the tables, events, snapshots and
their delta records. The project's own decoder reads the same bytes as the oracle: both
must decode the same players to the same values, and the client's own record must be where
the node's ``you`` says (the welcome's widths, the documented rules).
"""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path
from typing import Any

import aiohttp
import msgpack
import numpy as np
import pytest

from client_sim.latency import LinkProfile, draw_bot, parse_distribution
from client_sim.swarm import Swarm, SwarmConfig
from launch.nodes import NodeProcess

pytestmark = pytest.mark.integration

SPEC_PATH = Path(__file__).resolve().parents[2] / "docs" / "protocol.json"
PLAY_S = 20.0


class DocError(Exception):
    """Something the node sent that the documented format does not allow."""


class DocsDecoder:
    """The wire format as ``docs/protocol.json`` states it, and nothing else."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.messages = {m["type"]: m for m in spec["server_messages"]}
        self.events = {e["kind"]: e for e in spec["events"]}
        self.entities = spec["entities"]
        self.kinds = self.entities["kinds"]
        self.classes = {c["code"]: c["payload_bits"] for c in self.entities["classes"]}
        self.bits: list[int] = []
        self.origins: list[float] = []
        self.zeros: list[int] = []
        #: What the client holds after each snapshot it decoded: tick -> {id: values}.
        self.held: dict[int, dict[int, list[int]]] = {}
        self.epoch = -1
        #: Records decoded, by kind.
        self.counts = dict.fromkeys(self.kinds, 0)

    # -- messages ------------------------------------------------------------------------

    def check_fields(self, where: str, table: list[dict[str, Any]], body: dict[str, Any]) -> None:
        for field in table:
            name = field["name"]
            if name not in body:
                if field["required"]:
                    raise DocError(f"{where}: required {name} missing")
                continue
            self.check_value(f"{where}.{name}", field, body[name])

    def check_value(self, where: str, field: dict[str, Any], value: Any) -> None:
        if value is None:
            if not field.get("nullable"):
                raise DocError(f"{where}: nil")
            return
        kind: str = field["type"]
        if kind.endswith("[]"):
            if not isinstance(value, list):
                raise DocError(f"{where}: not a list")
            if "length" in field and len(value) != field["length"]:
                raise DocError(f"{where}: {len(value)} elements")
            element = {**field, "type": kind[:-2], "nullable": False}
            for i, item in enumerate(value):
                if kind == "event[]":
                    self.check_event(item)
                elif kind != "map[]":
                    self.check_value(f"{where}[{i}]", element, item)
            return
        expected = {
            "int": (int,), "float": (int, float), "str": (str,), "bool": (bool,), "bin": (bytes,),
        }[kind]  # fmt: skip
        if not isinstance(value, expected) or (kind != "bool" and isinstance(value, bool)):
            raise DocError(f"{where}: {type(value).__name__} where {kind} is documented")
        if kind in ("int", "float"):
            if not math.isfinite(value):
                raise DocError(f"{where}: not finite")
            if field.get("min") is not None and value < field["min"]:
                raise DocError(f"{where}: {value} below {field['min']}")
            if field.get("max") is not None and value > field["max"]:
                raise DocError(f"{where}: {value} above {field['max']}")
        if kind == "str":
            if "max_chars" in field and len(value) > field["max_chars"]:
                raise DocError(f"{where}: too long")
            if "choices" in field and value not in field["choices"]:
                raise DocError(f"{where}: {value!r} is none of {field['choices']}")

    def check_event(self, event: Any) -> None:
        if not isinstance(event, dict) or event.get("kind") not in self.events:
            raise DocError(f"event: {event!r} is of no documented kind")
        spec = self.events[event["kind"]]
        names = {f["name"] for f in spec["fields"]} | {"kind"}
        if event.keys() - names:
            raise DocError(f"event {event['kind']}: undocumented keys {event.keys() - names}")
        self.check_fields(f"event {event['kind']}", spec["fields"], event)

    def message(self, frame: bytes) -> dict[str, Any]:
        body = msgpack.unpackb(frame, raw=False)
        if not isinstance(body, dict) or body.get("type") not in self.messages:
            raise DocError(f"not a documented server message: {str(body)[:80]}")
        self.check_fields(body["type"], self.messages[body["type"]]["fields"], body)
        return body

    # -- the entity records ----------------------------------------------------------------

    def welcome(self, welcome: dict[str, Any]) -> None:
        """The widths and origins of this node's records: the welcome's, checked against
        the documented width rule."""
        low, high = welcome["bounds_min"], welcome["bounds_max"]
        derived, origins, zeros = [], [], []
        bits = welcome["entity_bits"]
        for field, width in zip(self.entities["fields"], bits, strict=True):
            axis = field["axis"]
            if field["bits"] is not None:
                derived.append(field["bits"])
            else:
                span = high[axis] - low[axis] if axis is not None else field["span"]
                derived.append(max(1, math.ceil(math.log2(span / field["step"] + 1))))
            origins.append(low[axis] if axis is not None else field["origin"])
            zeros.append(1 << (width - 1) if field["centred"] else 0)
        if derived != bits:
            raise DocError(f"welcome widths {bits} are not the rule's {derived}")
        self.bits, self.origins, self.zeros = bits, origins, zeros

    def snapshot(self, epoch: int, tick: int, base: int, blob: bytes) -> dict[int, list[int]]:
        """The players snapshot ``tick`` shows ({id: values}); held afterwards. KeyError for
        a base not held (a missing baseline), DocError for records that do not decode."""
        if epoch != self.epoch:
            self.held.clear()
            self.epoch = epoch
        holding = {} if base == -1 else dict(self.held[base])
        e = self.entities
        data, end, at = int.from_bytes(blob, "little"), 8 * len(blob), 0

        def take(width: int) -> int:
            nonlocal at
            if at + width > end:
                raise DocError("a record cut short")
            value = (data >> at) & ((1 << width) - 1)
            at += width
            return value

        shown: dict[int, list[int]] = {}
        previous = -1
        names = [f["name"] for f in e["fields"]]
        while at < end:
            player, kind = take(e["id_bits"]), take(e["kind_bits"])
            if player <= previous:
                raise DocError("ids not ascending")
            previous = player
            for name, code in self.kinds.items():
                self.counts[name] += code == kind
            if kind == self.kinds["gone"]:
                holding.pop(player, None)
            elif kind == self.kinds["full"]:
                holding[player] = shown[player] = [take(width) for width in self.bits]
            elif kind == self.kinds["delta"]:
                if player not in holding:
                    raise DocError(f"a delta of player {player}, not held")
                values = list(holding[player])
                mask = take(e["mask_bits"])
                for group in e["groups"]:
                    if not mask >> group["bit"] & 1:
                        continue
                    for name in group["fields"]:
                        f = names.index(name)
                        payload = self.classes[take(e["class_bits"])]
                        if payload is None:
                            values[f] = take(self.bits[f])
                        elif payload:
                            raw = take(payload)
                            if raw >= 1 << (payload - 1):  # two's complement
                                raw -= 1 << payload
                            values[f] = (values[f] + raw) % (1 << self.bits[f])
                holding[player] = shown[player] = values
            else:
                raise DocError(f"record kind {kind}")
            pad = -at % e["record_alignment_bits"]
            if take(pad) if pad else 0:
                raise DocError("padding bits not 0")
        self.held[tick] = holding
        for old in sorted(self.held)[:-16]:  # the documented 16 newest
            del self.held[old]
        return shown

    def real(self, values: list[int]) -> list[float]:
        """The documented decoding: origin + (value - zero) * step."""
        return [
            origin + (value - zero) * field["step"]
            for value, origin, zero, field in zip(
                values, self.origins, self.zeros, self.entities["fields"], strict=True
            )
        ]


def test_the_docs_decoder_reads_the_json_s_test_vectors() -> None:
    """The documented records of the default map, decoded by the rules alone."""
    spec = json.loads(SPEC_PATH.read_text(encoding="utf-8"))
    example = spec["entities"]["default_map"]
    docs = DocsDecoder(spec)
    docs.welcome(
        {k: example[k] for k in ("bounds_min", "bounds_max")} | {"entity_bits": example["bits"]}
    )
    for tick, vector in enumerate(spec["record_examples"], start=1):
        shown = docs.snapshot(0, tick, tick - 1 if tick > 1 else -1, bytes.fromhex(vector["hex"]))
        if vector["kind"] == "gone":
            assert shown == {} and docs.held[tick] == {}
        else:
            assert shown == {5: vector["values"]}
    assert docs.counts == {"delta": 3, "full": 1, "gone": 1}


def _swarm(url: str, count: int, duration: float) -> Swarm:
    rtt = parse_distribution("30ms")
    profile = LinkProfile(jitter_ms=1.0, loss=0.0)
    bots = tuple(draw_bot(i, seed=11, rtt=rtt, profile=profile) for i in range(count))
    return Swarm(SwarmConfig(url=url, bots=bots, duration=duration, seed=11))


async def _play_from_the_docs(url: str) -> dict[str, Any]:
    """Join, play and decode for :data:`PLAY_S`; what was seen, counted."""
    from shared import protocol  # the oracle only: the client itself reads the JSON

    docs = DocsDecoder(json.loads(SPEC_PATH.read_text(encoding="utf-8")))
    seen: dict[str, Any] = {
        "snapshots": 0, "records": 0, "events": 0, "errors": [],
        "missing_baselines": 0, "own": [], "others_compared": 0, "mismatches": [],
    }  # fmt: skip
    loop = asyncio.get_running_loop()
    async with aiohttp.ClientSession() as session, session.ws_connect(url) as ws:
        join = {"type": "join", "v": docs.spec["protocol_version"], "name": "docs"}
        await ws.send_bytes(msgpack.packb(join))
        welcome = docs.message((await ws.receive(timeout=30)).data)
        assert welcome["type"] == "welcome", welcome
        docs.welcome(welcome)
        me = welcome["player_id"]
        codec = protocol.EntityCodec.for_bounds(
            np.array(welcome["bounds_min"]), np.array(welcome["bounds_max"])
        )
        interval = welcome["tick_rate"] // welcome["snapshot_rate"]
        oracle_values = protocol.PlayerValues(codec, interval)
        oracle = protocol.EntityBaselines()
        seq, acked, started = 0, -1, loop.time()
        while loop.time() - started < PLAY_S:
            message = await ws.receive(timeout=10)
            if message.type is not aiohttp.WSMsgType.BINARY:
                seen["errors"].append(f"connection: {message.type}")
                break
            try:
                body = docs.message(message.data)
            except (DocError, ValueError, msgpack.UnpackException) as error:
                seen["errors"].append(str(error))
                continue
            if body["type"] == "probe":
                await ws.send_bytes(msgpack.packb({"type": "probe_echo", "id": body["id"]}))
            if body["type"] == "error":
                seen["errors"].append(f"server: {body['code']}")
            if body["type"] != "snapshot":
                continue
            tick, base, blob = body["tick"], body["base"], body["entities"]
            try:
                shown = docs.snapshot(body["epoch"], tick, base, blob)
            except KeyError:
                seen["missing_baselines"] += 1
                continue
            except DocError as error:
                seen["errors"].append(f"snapshot {tick}: {error}")
                continue
            seen["snapshots"] += 1
            seen["events"] += len(body.get("events", []))
            truth = oracle.apply(body["epoch"], tick, base, blob, oracle_values)
            if sorted(shown) != truth["id"].tolist():
                seen["mismatches"].append((tick, sorted(shown), truth["id"].tolist()))
            for record in truth:
                values = shown.get(int(record["id"]))
                if values is None:
                    continue
                real = docs.real(values)
                same = (
                    np.float32(real[0:6]).tolist()
                    == [float(record[k]) for k in ("x", "y", "z", "vx", "vy", "vz")]
                    and values[6] == record["yaw"]
                    and values[7] - docs.zeros[7] == record["pitch"]
                    and values[8:] == [record["health"], record["flags"]]
                )
                if not same:
                    seen["mismatches"].append((tick, int(record["id"]), values))
                seen["others_compared"] += int(record["id"]) != me
            seen["records"] += len(shown)
            if me in shown:
                own = docs.real(shown[me])[:3]
                seen["own"].append(
                    max(abs(a - b) for a, b in zip(own, body["you"][:3], strict=True))
                )
            acked = tick  # the newest snapshot decoded, never one that was not
            # Two inputs a snapshot (60 a second at 30 snapshots): walk, turning every 2 s.
            heading = int((loop.time() - started) / 2.0) % 4
            move = [(1.0, 0.0), (0.0, 1.0), (-1.0, 0.0), (0.0, -1.0)][heading]
            for _ in range(2):
                await ws.send_bytes(
                    msgpack.packb(
                        {
                            "type": "input",
                            "seq": seq,
                            "tick": tick,
                            "ack_tick": acked,
                            "move": list(move),
                            "yaw": 0.0,
                            "pitch": 0.0,
                            "buttons": 0,
                            "view_time": max(0.0, body["server_time"] - 0.1),
                        }
                    )
                )
                seq += 1
    seen["kinds"] = docs.counts
    return seen


async def test_a_client_written_from_the_generated_tables_decodes_a_live_node(
    node: NodeProcess,
) -> None:
    swarm = _swarm(node.url, count=10, duration=PLAY_S + 6.0)
    bots = asyncio.create_task(swarm.run())
    try:
        await asyncio.sleep(2.0)  # (the bots seated first: records of many players)
        async with asyncio.timeout(PLAY_S + 40.0):
            seen = await _play_from_the_docs(node.url)
    finally:
        result = await bots
    assert seen["errors"] == []
    assert seen["missing_baselines"] == 0
    assert seen["mismatches"] == []
    assert seen["snapshots"] >= PLAY_S * 30 * 0.5  # most of 20 s at 30 snapshots a second
    assert seen["others_compared"] >= seen["snapshots"]  # other players, in most snapshots
    assert seen["kinds"]["delta"] > seen["kinds"]["full"]  # coded against its acknowledgements
    own = np.array(seen["own"])
    assert len(own) >= 0.9 * seen["snapshots"]
    # Its own record is the node's `you`, quantised (1/4096 m), except while the node
    # guesses a late input (the record moves on, `you` waits): rare, and never far.
    assert np.mean(own <= 0.5 / 4096 + 1e-6) >= 0.9
    assert own.max() < 1.0
    assert result.connected == 10
    assert not result.errors
