"""The wire format as data: every message's fields, every event's, the entity record layout
and the limits, assembled from the definitions the encoders and decoders use.

The types and ranges come from the field validators themselves
(:func:`~shared.protocol.fields.wire_type`), the message and event classes give the
fields, their order and their defaults, and :mod:`shared.protocol.layout` gives the
records; only the meaning of each field is written here, beside them. ``docs/protocol.md``'s
tables and ``docs/protocol.json`` are rendered from :func:`wire_spec`
(:mod:`shared.protocol.doc`), and a test fails when either differs from it.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from shared.protocol import layout
from shared.protocol.datagram_spec import datagram_spec
from shared.protocol.events import JoinEvent, LeaveEvent, RespawnEvent, ShotEvent
from shared.protocol.fields import (
    MAX_ARRAY_LEN,
    MAX_CLIENT_FRAME_BYTES,
    MAX_MAP_LEN,
    MAX_SERVER_FRAME_BYTES,
    PROTOCOL_VERSION,
)
from shared.protocol.messages import _CLIENT_TYPES, _SERVER_TYPES, Message
from shared.schema import WireType, wire_type

__all__ = ["EVENT_MEANINGS", "MESSAGE_MEANINGS", "entity_spec", "field_spec", "wire_spec"]

#: What each message field means (the types, ranges and defaults come from the code).
MESSAGE_MEANINGS: dict[str, dict[str, str]] = {
    "join": {
        "v": "protocol version the client speaks; must equal 2 (version 1 sent every player in full, every snapshot)",
        "name": "display name",
        "token": "the session token of a seat this player already holds, the newest it was given (after a failover, or for a spare connection parked at a standby, which holds the join until it is promoted), or a seat reservation from the directory (`docs/routing.md`) on a node started with `--directory`; nil for a new seat",
        "interp_delay": "seconds: how far behind its estimate of server time the client renders remote players. The server grants at most `--max-interp-ms` (default 0.1 s) and judges the client's shot view times by what it granted (the welcome's `interp_delay`); render with that",
    },
    "input": {
        "seq": 'input sequence number, +1 per input, never wraps (see "Sequence numbers"). Echoed back as `ack` once applied',
        "tick": "the client's tick: its estimate of the server tick when it sent this input (checked and carried, not acted on by the node)",
        "ack_tick": 'the tick of the newest snapshot the client **decoded** (whose players it holds; −1 before the first): never one it received and could not decode (see "Baselines"). The node codes the next snapshots against it; no shot of this input is judged in a world newer than that tick (`docs/lag-compensation.md`)',
        "move": 'wished direction in **world** x/y axes, length ≤ 1 (longer vectors are scaled back to 1 and counted as clamped); the node keeps each component to a whole step of 2⁻¹⁰, rounded towards zero (see "Inputs: the steps kept")',
        "yaw": "view heading, radians, 0 = +x, counter-clockwise; −π to π (a finite value outside: the input is refused as `bad_angle`); kept to the nearest whole step of 2⁻¹⁴ rad",
        "pitch": "view elevation, radians, positive = up; −π/2 to π/2 (outside: refused as `bad_angle`); kept to the nearest whole step of 2⁻¹⁴ rad",
        "buttons": "bit 0 = jump, bit 1 = fire the rifle (hitscan), bit 2 = fire the launcher (projectile); the other bits are carried and ignored",
        "view_time": "seconds: the server time of the world the client was showing when it produced this input: its render time (estimated server time − interp_delay), or the time of the newest snapshot it held when its buffer ran dry. Lag compensation judges this input's shots in that world",
    },
    "ping": {
        "id": "echoed back",
        "t": "the client's own clock when it sent the ping (seconds), echoed back",
    },
    "probe_echo": {"id": "the `id` of a `probe` just received"},
    "sighting": {
        "seq": "the `seq` of the input that fired",
        "target": "the player the client aimed at",
        "seen": "that player's feet position as the client drew it (m)",
    },
    "welcome": {
        "v": "protocol version (2)",
        "player_id": "this client's player id: its entity `id` in snapshots",
        "tick_rate": "ticks per second (a node: 20–128, 60 by default)",
        "snapshot_rate": "snapshots per second this node sends, a divisor of `tick_rate` (`--snapshot-rate`; 30 by default at 60 Hz): render at least two snapshot intervals behind (`interp_delay`; the node refuses a rate whose two intervals do not fit in its `--max-interp-ms`)",
        "tick": "the newest tick the node has computed",
        "server_time": "continuous server time when the welcome was sent, seconds",
        "token": "session token for this seat: it proves the seat for `--token-ttl-s` (600 s), and the node renews it (`token`) while the client plays",
        "map": 'the map\'s `name` (`courtyard` is the embedded default, `shared/data/default_map.json`; see "Map geometry")',
        "region": "the node's region",
        "epoch": "leadership epoch of the node; higher wins",
        "standbys": "WebSocket URLs of the region's other nodes: where to keep a spare connection, and where to go if this node disappears (empty without failover)",
        "ack": "the highest input of this seat already applied (−1 for a new seat); after a failover, resend every input above it",
        "match": "which of the node's matches the seat is in (0 on a node with one match); player ids are per match",
        "interp_delay": "the interpolation delay the server granted (the one asked for, at most `--max-interp-ms`), seconds: render this far behind server time, since shots are judged by it",
        "bounds_min": "the map's lowest floor corner `[x, y]` (m): the origin of the records' `x` and `y` (see \"Entity records\"); nil from a node that does not say (use your copy of the map)",
        "bounds_max": "the map's highest floor corner `[x, y]` (m): with `bounds_min`, the span that sets the widths of `x` and `y`",
        "entity_bits": "each entity record field's width in bits, in record order (`x`, `y`, `z`, `vx`, `vy`, `vz`, `yaw`, `pitch`, `health`, `flags`): what the width rule gives for these bounds; decode with these",
    },
    "probe": {"id": "answer with `probe_echo {id}` at once"},
    "snapshot": {
        "tick": "the tick this snapshot is the world after",
        "server_time": "`tick / tick_rate`",
        "epoch": "leadership epoch; a client ignores snapshots of an epoch lower than the highest it was told of (by a snapshot, a welcome or a `standbys` message)",
        "ack": "the highest input `seq` of **this** client applied to the world (−1 before any)",
        "you": 'this client\'s own x, y, z, vx, vy, vz after input `ack`, at full precision (float64), for reconciliation (see "How the server applies inputs")',
        "entities": 'the players this client is shown, coded against its snapshot `base` (see "Entity records")',
        "events": 'what happened since the last snapshot that this client is told: every join, leave and respawn, and the shots whose shooter or victim is among the players it is sent (itself included); see "Events"',
        "state": "the first 8 bytes of the world's state hash after the tick: the digest the node's journal keeps for the tick, so an audit can check what a client was shown (`docs/failover.md`)",
        "base": "the tick of the client's snapshot `entities` is coded against (the newest it acknowledged); −1: none, every record is full and the client holds only this snapshot's players after it",
    },
    "standbys": {
        "urls": "the region's other nodes' WebSocket URLs, now",
        "epoch": "the sender's epoch; a client told of it refuses snapshots of lower epochs from then on",
    },
    "token": {"token": "a new session token for this seat: resume with it from now on"},
    "connect_token": {
        "token": "a new connect token, the JSON object `POST /connect` answers with (compact): use it for the next handshake, at this node or another of its `addresses`",
    },
    "pong": {
        "id": "the ping's id",
        "t": "the ping's `t`, unchanged",
        "server_time": "continuous server time when the server answered, seconds",
    },
    "error": {
        "code": 'machine-readable reason (see the codes below and "Refusals and offences")',
        "message": "one human-readable line",
        "fatal": "true: the server closes the socket right after",
        "retry_after": "seconds to wait before trying again (0: no wait is asked for): a "
        'seat closed for offences, or `held_off` (see "Offences follow the seat")',
    },
}

_PLAYER = "a player id"
#: What each event means, and each of its fields.
EVENT_MEANINGS: dict[str, dict[str, str]] = {
    "join": {"": "a player took a seat", "player": _PLAYER},
    "leave": {"": "a player left (its seat was freed): forget it", "player": _PLAYER},
    "respawn": {
        "": "a dead player is back at a spawn point with full health",
        "player": _PLAYER,
    },
    "shot": {
        "": "a shot was judged (hitscan: in the tick its input was applied; projectile: in the tick it hit, landed or expired)",
        "shooter": "who fired",
        "seq": "the shooter's input that fired",
        "weapon": "0 rifle, 1 launcher",
        "result": "`hit` a player, `world` a wall, cover or the floor, `miss` nothing within range or lifetime, `rejected` the shooter was dead at its view time",
        "view_time": "the server time the shot was judged at",
        "victim": "the player hit, −1 none",
        "hitbox": "1 head, 2 torso, 3 legs, 0 none",
        "damage": "what was applied (0 when the victim had already died earlier in the tick's time order)",
        "kill": "this shot killed",
        "judged": "how `view_time` was chosen: `claimed` the input's own, `clamped` the nearest the shooter could have seen, `capped` the oldest the rewind cap allows",
        "origin": "the eye the shot left from (m)",
        "shooter_rtt": "the server's RTT estimate of the shooter, seconds (−1 before its first probe was answered)",
        "tick": "the tick that judged it (−1: not said)",
        "traded": "the shooter had been killed before the input that fired was applied and the shot counts anyway (its view time came before the death)",
    },
}


def _number(value: float | None) -> float | int | None:
    if value is None or not math.isfinite(value):
        return None
    return int(value) if float(value).is_integer() and abs(value) < 2**63 else float(value)


def _wire_default(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.hex()  # (JSON has no bytes: a bin field's default, as hex)
    return list(value) if isinstance(value, tuple) else value


def field_spec(name: str, wire: WireType, default: Any, meaning: str) -> dict[str, Any]:
    """One field as ``docs/protocol.json`` states it (keys that do not apply left out)."""
    spec: dict[str, Any] = {"name": name, "type": wire.kind}
    if wire.low is not None:
        spec["min"] = _number(wire.low)
    if wire.high is not None:
        spec["max"] = _number(wire.high)
    if wire.length is not None:
        spec["length"] = wire.length
    if wire.max_chars is not None:
        spec["max_chars"] = wire.max_chars
    if wire.choices:
        spec["choices"] = list(wire.choices)
    if wire.nullable:
        spec["nullable"] = True
    if default is dataclasses.MISSING:
        spec["required"] = True
    else:
        spec["required"] = False
        spec["default"] = _wire_default(default)
    spec["meaning"] = meaning
    return spec


def _defaults(cls: type) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            out[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            out[f.name] = f.default_factory()
        else:
            out[f.name] = dataclasses.MISSING
    return out


def _message_spec(cls: type[Message]) -> dict[str, Any]:
    meanings = MESSAGE_MEANINGS[cls.TYPE]
    defaults = _defaults(cls)
    if meanings.keys() != cls.FIELDS.keys():
        raise AssertionError(f"{cls.TYPE}: the meanings name other fields than the message")
    return {
        "type": cls.TYPE,
        "fields": [
            field_spec(name, wire_type(check), defaults[name], meanings[name])
            for name, check in cls.FIELDS.items()
        ],
    }


def _event_spec(cls: type) -> dict[str, Any]:
    kind: str = cls.KIND  # type: ignore[attr-defined]
    checks: dict[str, Any] = cls.FIELDS  # type: ignore[attr-defined]
    meanings = EVENT_MEANINGS[kind]
    if meanings.keys() - {""} != checks.keys():
        raise AssertionError(f"event {kind}: the meanings name other fields than the event")
    defaults = _defaults(cls)
    return {
        "kind": kind,
        "when": meanings[""],
        "fields": [
            field_spec(name, wire_type(check), defaults[name], meanings[name])
            for name, check in checks.items()
        ],
    }


def entity_spec() -> dict[str, Any]:
    """The entity record layout (:mod:`shared.protocol.layout`) as data, with the widths
    of the embedded default map as a worked example."""
    from shared.arena_map import default_map

    arena = default_map()
    lo = [float(v) for v in arena.bounds_min]
    hi = [float(v) for v in arena.bounds_max]
    bits = layout.field_bits(lo, hi)
    fields = []
    for f in layout.RECORD_FIELDS:
        spec: dict[str, Any] = {
            "name": f.name, "group": f.group, "unit": f.unit, "step": f.step,
            "axis": f.axis, "origin": None if f.axis is not None else f.origin,
            "span": f.span, "bits": f.bits, "centred": f.centred, "wraps": f.wraps,
            "meaning": f.meaning,
        }  # fmt: skip
        fields.append(spec)
    return {
        "bit_order": "least significant bit first, within and across bytes",
        "record_alignment_bits": 8,
        "id_bits": layout.ID_BITS,
        "kind_bits": layout.KIND_BITS,
        "kinds": dict(layout.KINDS),
        "mask_bits": layout.MASK_BITS,
        "groups": [{"bit": g, "name": name, "fields": list(names)}
                   for g, (name, names) in enumerate(layout.GROUPS)],
        "class_bits": layout.CLASS_BITS,
        "classes": [
            {"code": c.code, "name": c.name, "payload_bits": c.payload, "meaning": c.meaning}
            for c in layout.DELTA_CLASSES
        ],
        "fields": fields,
        "axis_rule": "a field with an axis: origin = welcome.bounds_min[axis], "
        "span = welcome.bounds_max[axis] - welcome.bounds_min[axis]",
        "width_rule": "a field with no fixed bits: bits = max(1, ceil(log2(span / step + 1)))",
        "zero_rule": "zero = 2**(bits - 1) for a centred field, else 0",
        "encode_rule": "value = clip(round((real - origin) / step) + zero, 0, 2**bits - 1); "
        "a wrapping field: round(((real - origin) mod (2**bits * step)) / step) mod 2**bits",
        "decode_rule": "real = origin + (value - zero) * step",
        "difference_rule": "value = (held + difference) mod 2**bits, the difference read as "
        "two's complement of its payload width",
        "default_map": {
            "name": arena.name,
            "bounds_min": lo,
            "bounds_max": hi,
            "bits": list(bits),
            "full_record_bytes": layout.full_record_bytes(bits),
            "max_record_bytes": layout.max_record_bytes(bits),
        },
    }  # fmt: skip


def record_examples() -> list[dict[str, Any]]:
    """Records of the default map as the node's coder writes them, with the values they
    hold: test vectors for a client's decoder (a full record, then deltas against it)."""
    import numpy as np

    from shared.arena_map import default_map
    from shared.protocol.deltas import EntityCodec, encode_records

    arena = default_map()
    codec = EntityCodec.for_bounds(arena.bounds_min, arena.bounds_max)

    def values(x: float, vx: float, yaw: float, health: int) -> np.ndarray:
        return codec.quantise(
            np.array([[x, -2.25, 0.0]]), np.array([[vx, -3.0, 0.0]]), np.array([yaw]),
            np.array([-0.1]), np.array([health]), np.array([True]),
        )[0]  # fmt: skip

    first = values(1.5, 6.0, 3.1, 100)
    moved = values(1.51, 6.0, 3.1, 100)  # x by 41 steps: a small difference
    turned = values(1.61, 6.0, -3.1, 100)  # x by 410: medium; yaw across ±π: it wraps
    hurt = values(1.61, 0.0, -3.1, 75)  # velocity x, health: full and small
    cases = (
        ("a full record of player 5", "full", first, first),
        ("a delta: x moved by 0.01 m", "delta", moved, first),
        ("a delta: x moved by 0.1 m, yaw turned across ±π", "delta", turned, moved),
        ("a delta: stopped, hurt", "delta", hurt, turned),
        ("player 5 is gone", "gone", hurt, hurt),
    )
    out = []
    for what, kind, new, old in cases:
        room = np.zeros(codec.max_record_bytes(), dtype=np.uint8)
        size = encode_records(
            np.array([5]), np.array([layout.KINDS[kind]]), new[None], old[None], codec.bits, room
        )
        example = {"what": what, "id": 5, "kind": kind, "hex": room[:size].tobytes().hex()}
        if kind != "gone":
            example["values"] = new.tolist()
        if kind == "delta":
            example["held"] = old.tolist()
        out.append(example)
    return out


def wire_spec() -> dict[str, Any]:
    """The whole wire format as one JSON-ready value (``docs/protocol.json``)."""
    return {
        "protocol_version": PROTOCOL_VERSION,
        "framing": {
            "transport": "WebSocket, binary frames, one msgpack map per frame",
            "type_key": "type",
            "max_client_frame_bytes": MAX_CLIENT_FRAME_BYTES,
            "max_server_frame_bytes": MAX_SERVER_FRAME_BYTES,
            "max_map_keys": MAX_MAP_LEN,
            "max_array_len": MAX_ARRAY_LEN,
            "unknown_keys": "a server message's keys a client does not know are ignored; "
            "a client message with a key not in its table is refused (invalid_field)",
        },
        "client_messages": [_message_spec(cls) for cls in _CLIENT_TYPES.values()],
        "server_messages": [_message_spec(cls) for cls in _SERVER_TYPES.values()],
        "events": [_event_spec(cls) for cls in (JoinEvent, LeaveEvent, RespawnEvent, ShotEvent)],
        "entities": entity_spec(),
        "record_examples": record_examples(),
        "datagram": datagram_spec(list(_CLIENT_TYPES), list(_SERVER_TYPES)),
    }
