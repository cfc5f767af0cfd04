"""The protocol's messages: frozen dataclasses validated on construction, their strict
decoders and the fast paths of the two frames sent 60 times a second (input, snapshot).

Every frame is one msgpack map with a ``"type"`` key. Decoding is strict: a frame that is
too large, is not msgpack, is not a map, has an unknown type, misses a field, has an extra
field, or has a field of the wrong type or out of range raises a subclass of
:class:`ProtocolError` whose ``code`` is sent back to the peer in an ``error`` message.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import msgpack

from shared import schema
from shared.protocol.errors import (
    FrameTooLarge,
    InvalidField,
    MalformedFrame,
    UnknownMessageType,
    as_protocol_error,
)
from shared.protocol.events import SnapshotEvent, decode_event, encode_event
from shared.protocol.fields import (
    MAX_ARRAY_LEN,
    MAX_CLIENT_FRAME_BYTES,
    MAX_EPOCH,
    MAX_MAP_LEN,
    MAX_SERVER_FRAME_BYTES,
    MAX_TICK,
    U32_MAX,
)
from shared.protocol.inputs import INPUT_FIELDS
from shared.protocol.layout import MAP_BOUND_M, MAX_FIELD_BITS, RECORD_FIELDS
from shared.schema import (
    WireType,
    binary,
    described,
    flag,
    integer,
    integers,
    number,
    numbers,
    optional,
    text,
    texts,
)

__all__ = [
    "MAX_CONNECT_TOKEN_CHARS",
    "ClientMessage",
    "ConnectTokenMessage",
    "ErrorMessage",
    "InputMessage",
    "JoinMessage",
    "Message",
    "PingMessage",
    "PongMessage",
    "ServerMessage",
    "SightingMessage",
    "SnapshotMessage",
    "StandbysMessage",
    "TokenMessage",
    "WelcomeMessage",
    "decode_client",
    "decode_server",
    "encode",
    "encode_input",
]


def _snapshot_events(name: str, value: object) -> tuple[SnapshotEvent, ...]:
    """A snapshot's events: typed (decoded from their maps when they come as maps)."""
    if not isinstance(value, list | tuple):
        raise InvalidField(f"{name}: expected a list of events")
    return tuple(
        event if not isinstance(event, dict) and hasattr(event, "KIND") else decode_event(event)
        for event in value
    )


described(_snapshot_events, WireType("event[]"))


@dataclass(frozen=True, slots=True)
class Message:
    TYPE: ClassVar[str] = ""
    FIELDS: ClassVar[dict[str, Callable[[str, object], Any]]] = {}

    def __post_init__(self) -> None:
        for name, check in self.FIELDS.items():
            value = getattr(self, name)
            try:
                normalised = check(name, value)
            except schema.InvalidField as error:
                raise as_protocol_error(error, f"{self.TYPE}.") from None
            if normalised is not value:
                object.__setattr__(self, name, normalised)

    def to_wire(self) -> dict[str, Any]:
        body: dict[str, Any] = {"type": self.TYPE}
        for name in self.FIELDS:
            value = getattr(self, name)
            body[name] = list(value) if isinstance(value, tuple) else value
        return body


@dataclass(frozen=True, slots=True)
class JoinMessage(Message):
    """Client -> server, first frame: asks for a seat (or a resumed one, with ``token``)."""

    TYPE = "join"
    v: int
    name: str = ""
    token: str | None = None
    interp_delay: float = 0.1
    FIELDS = {
        "v": integer(0, 65535),
        "name": text(32),
        "token": optional(text(512)),
        "interp_delay": number(0.0, 1.0),
    }


@dataclass(frozen=True, slots=True)
class InputMessage(Message):
    """Client -> server, once per client tick: what the player pressed, never where it is."""

    TYPE = "input"
    seq: int
    tick: int
    move: tuple[float, float]
    yaw: float
    pitch: float
    buttons: int
    view_time: float
    ack_tick: int
    FIELDS = {
        field.name: (
            integer(int(field.low), int(field.high))
            if field.kind == "int"
            else numbers(2, field.high)
            if field.kind == "float_pair"
            else number(field.low, field.high)
        )
        for field in INPUT_FIELDS
    }


@dataclass(frozen=True, slots=True)
class PingMessage(Message):
    """Client -> server: a clock-sync probe; ``t`` is the client's own clock, echoed back."""

    TYPE = "ping"
    id: int
    t: float
    FIELDS = {"id": integer(0, U32_MAX), "t": number()}


@dataclass(frozen=True, slots=True)
class ProbeEchoMessage(Message):
    """Client -> server, at once on every ``probe``: its ``id`` back (the server's own
    round-trip measurement, which lag compensation bounds rewinds by)."""

    TYPE = "probe_echo"
    id: int
    FIELDS = {"id": integer(0, MAX_TICK)}


@dataclass(frozen=True, slots=True)
class SightingMessage(Message):
    """Client -> server, optional, after an input that fired: the player ``target`` drew
    at feet position ``seen`` when it fired the shot of input ``seq``. Never used to judge
    (the server rewinds its own history); only shown beside the server's rewound hitboxes
    in the node's live view (``/view``), the "client box against server box" of a shot."""

    TYPE = "sighting"
    seq: int
    target: int
    seen: tuple[float, float, float]
    FIELDS = {
        "seq": integer(0, U32_MAX),
        "target": integer(0, 65535),
        "seen": numbers(3, 1e6),
    }


@dataclass(frozen=True, slots=True)
class WelcomeMessage(Message):
    """Server -> client, answer to ``join``."""

    TYPE = "welcome"
    v: int
    player_id: int
    tick_rate: int
    tick: int
    server_time: float
    token: str
    map: str
    region: str
    epoch: int
    standbys: tuple[str, ...] = field(default=())
    ack: int = -1
    match: int = 0
    interp_delay: float = 0.1
    #: Snapshots a second this node sends (a divisor of the tick rate): a client sizes its
    #: interpolation buffer by it.
    snapshot_rate: int = 60
    #: The map's floor rectangle (x, y) and each entity field's width in bits: what a
    #: client needs to decode positions (:mod:`shared.protocol.layout`). None from a node
    #: that does not say (the client then derives them from its own copy of the map).
    bounds_min: tuple[float, float] | None = None
    bounds_max: tuple[float, float] | None = None
    entity_bits: tuple[int, ...] | None = None
    FIELDS = {
        "v": integer(0, 65535),
        "player_id": integer(0, 65535),
        "tick_rate": integer(1, 1000),
        "snapshot_rate": integer(1, 1000),
        "tick": integer(0, MAX_TICK),
        "server_time": number(0.0),
        "token": text(512),
        "map": text(64),
        "region": text(64),
        "epoch": integer(0, MAX_EPOCH),
        "standbys": texts,
        "ack": integer(-1, U32_MAX),
        "match": integer(0, 65535),
        "interp_delay": number(0.0, 1.0),
        "bounds_min": optional(numbers(2, MAP_BOUND_M)),
        "bounds_max": optional(numbers(2, MAP_BOUND_M)),
        "entity_bits": optional(integers(len(RECORD_FIELDS), 1, MAX_FIELD_BITS)),
    }


@dataclass(frozen=True, slots=True)
class SnapshotMessage(Message):
    """Server -> client, at the snapshot rate: the authoritative world and this client's ack.

    ``entities`` are the players this client is shown, coded against its snapshot of tick
    ``base`` (-1: none; see :mod:`shared.protocol.deltas`): a client decodes them with the
    players it held at ``base`` (:class:`shared.protocol.baselines.EntityBaselines`)."""

    TYPE = "snapshot"
    tick: int
    server_time: float
    epoch: int
    ack: int
    you: tuple[float, ...]
    entities: bytes
    events: tuple[SnapshotEvent, ...] = ()
    state: bytes = b""  # the world's digest: what an audit checks against the journals
    base: int = -1
    FIELDS = {
        "tick": integer(0, MAX_TICK),
        "server_time": number(0.0),
        "epoch": integer(0, MAX_EPOCH),
        "ack": integer(-1, U32_MAX),
        "you": numbers(6, 1e9),
        "entities": binary,
        "events": _snapshot_events,
        "state": binary,
        "base": integer(-1, MAX_TICK),
    }

    def to_wire(self) -> dict[str, Any]:
        body = Message.to_wire(self)
        body["events"] = [encode_event(event) for event in self.events]
        return body


@dataclass(frozen=True, slots=True)
class StandbysMessage(Message):
    """Server -> client, whenever the region's standby endpoints change (a new standby
    joined): where to keep a spare connection, and where to go if this node disappears."""

    TYPE = "standbys"
    urls: tuple[str, ...]
    epoch: int
    FIELDS = {"urls": texts, "epoch": integer(0, MAX_EPOCH)}


@dataclass(frozen=True, slots=True)
class TokenMessage(Message):
    """Server -> client, while seated, before the current session token expires: the
    token to resume this seat with from now on (the old one runs out on its own)."""

    TYPE = "token"
    token: str
    FIELDS = {"token": text(512)}


#: The longest connect token's JSON, and room to spare: 8 addresses of 63-byte hosts, the
#: base64 of its 931-byte private part and of its keys come to about 2,050 characters.
MAX_CONNECT_TOKEN_CHARS = 2560


@dataclass(frozen=True, slots=True)
class ConnectTokenMessage(Message):
    """Server -> UDP client, while seated, before its connect token expires: a fresh one
    (its JSON, as ``POST /connect`` answers it), so a failover long after the client
    connected still finds a live token for the promoted standby."""

    TYPE = "connect_token"
    token: str
    FIELDS = {"token": text(MAX_CONNECT_TOKEN_CHARS)}


@dataclass(frozen=True, slots=True)
class PongMessage(Message):
    """Server -> client, answer to ``ping``: echoes ``t`` and adds the server time."""

    TYPE = "pong"
    id: int
    t: float
    server_time: float
    FIELDS = {"id": integer(0, U32_MAX), "t": number(), "server_time": number(0.0)}


@dataclass(frozen=True, slots=True)
class ProbeMessage(Message):
    """Server -> client, a few times a second: echo ``id`` at once (``probe_echo``)."""

    TYPE = "probe"
    id: int
    FIELDS = {"id": integer(0, MAX_TICK)}


@dataclass(frozen=True, slots=True)
class ErrorMessage(Message):
    """Server -> client: what was wrong; ``fatal`` means the server closes the socket next;
    ``retry_after``: seconds to wait before trying again (0: no wait is asked for)."""

    TYPE = "error"
    code: str
    message: str
    fatal: bool = False
    retry_after: float = 0.0
    FIELDS = {
        "code": text(64),
        "message": text(256),
        "fatal": flag,
        "retry_after": number(0.0, 86400.0),
    }


ClientMessage = JoinMessage | InputMessage | PingMessage | ProbeEchoMessage | SightingMessage
ServerMessage = (
    WelcomeMessage
    | SnapshotMessage
    | PongMessage
    | ProbeMessage
    | ErrorMessage
    | StandbysMessage
    | TokenMessage
    | ConnectTokenMessage
)

_CLIENT_TYPES: dict[str, type[Message]] = {
    m.TYPE: m for m in (JoinMessage, InputMessage, PingMessage, ProbeEchoMessage, SightingMessage)
}
_SERVER_TYPES: dict[str, type[Message]] = {
    m.TYPE: m
    for m in (
        WelcomeMessage, SnapshotMessage, PongMessage, ProbeMessage, ErrorMessage, StandbysMessage,
        TokenMessage, ConnectTokenMessage,
    )
}  # fmt: skip


def encode(message: Message) -> bytes:
    return msgpack.packb(message.to_wire(), use_bin_type=True)


def encode_input(
    *,
    seq: int,
    tick: int,
    move: tuple[float, float],
    yaw: float,
    pitch: float,
    buttons: int,
    view_time: float,
    ack_tick: int,
) -> bytes:
    """The bots' hot path: an ``input`` frame without building an :class:`InputMessage`.

    Produces exactly ``encode(InputMessage(...))`` (the tests check it) at a fraction of
    the cost; the values are the bot's own, and the server validates them anyway. Float
    fields are coerced with ``float()`` as :class:`InputMessage` normalises them, so an int
    (``yaw=0``) or a NumPy scalar packs as the same float64 there and here.
    """
    return _INPUT_PACKER.pack(
        {  # the keys in the table's order (INPUT_FIELDS), as encode() writes them
            "type": "input",
            "seq": seq,
            "tick": tick,
            "ack_tick": ack_tick,
            "move": (float(move[0]), float(move[1])),
            "yaw": float(yaw),
            "pitch": float(pitch),
            "buttons": buttons,
            "view_time": float(view_time),
        }
    )


def _decode(data: bytes, types: dict[str, type[Message]], max_bytes: int) -> Message:
    if len(data) > max_bytes:
        raise FrameTooLarge(f"frame of {len(data)} bytes exceeds the {max_bytes}-byte limit")
    try:
        raw = msgpack.unpackb(
            data,
            raw=False,
            strict_map_key=True,
            max_str_len=max_bytes,
            max_bin_len=max_bytes,
            max_array_len=MAX_ARRAY_LEN,
            max_map_len=MAX_MAP_LEN,
        )
    except Exception:  # msgpack raises several unrelated types for garbage input
        raise MalformedFrame("frame is not a single valid msgpack value") from None
    if not isinstance(raw, dict):
        raise MalformedFrame("frame is not a msgpack map")
    kind = raw.pop("type", None)
    if kind == "input" and types is _CLIENT_TYPES and (fast := _fast_input(raw)) is not None:
        return fast
    if kind == "snapshot" and types is _SERVER_TYPES and (snap := _fast_snapshot(raw)) is not None:
        return snap
    cls = types.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise UnknownMessageType(f"unknown message type {str(kind)[:32]!r}")
    fields = cls.FIELDS
    extra = raw.keys() - fields.keys()
    if extra and types is _SERVER_TYPES:
        # A client ignores the keys of a server message it does not know: a node may add
        # optional fields within a protocol version (a client's frames stay strict).
        raw = {name: value for name, value in raw.items() if name in fields}
    elif extra:
        raise InvalidField(f"{kind}: unexpected field {sorted(map(str, extra))[0][:32]!r}")
    try:
        return cls(**raw)
    except TypeError:
        missing = sorted(fields.keys() - raw.keys())
        raise InvalidField(f"{kind}: missing field {missing[0] if missing else '?'!r}") from None


_INPUT_KEYS = frozenset(InputMessage.FIELDS)
#: One packer for every input a process sends (one ``pack`` is one C call under the GIL,
#: and making a packer per call was half of :func:`encode_input`'s cost).
_INPUT_PACKER = msgpack.Packer(use_bin_type=True)


def _fast_input(raw: dict[Any, Any]) -> InputMessage | None:
    """The valid ``input`` frame, 60 times a second per player, checked inline.

    It accepts exactly what the general path accepts when every value already has its
    wire type (ints as ints, floats as floats); anything else returns None and takes the
    general path, which builds the precise error. ``v - v == 0`` is false for NaN and inf.
    The bounds are :data:`~shared.protocol.inputs.INPUT_FIELDS`'.
    """
    if raw.keys() != _INPUT_KEYS:
        return None
    seq, tick, ack, move = raw["seq"], raw["tick"], raw["ack_tick"], raw["move"]
    yaw, pitch, buttons, view = raw["yaw"], raw["pitch"], raw["buttons"], raw["view_time"]
    if not (
        type(seq) is int
        and _SEQ_LOW <= seq <= _SEQ_HIGH
        and type(tick) is int
        and _TICK_LOW <= tick <= _TICK_HIGH
        and type(ack) is int
        and _ACK_LOW <= ack <= _ACK_HIGH
        and type(buttons) is int
        and _BUTTONS_LOW <= buttons <= _BUTTONS_HIGH
        and type(move) is list
        and len(move) == 2
        and type(mx := move[0]) is float
        and type(my := move[1]) is float
        and _MOVE_LOW <= mx <= _MOVE_HIGH
        and _MOVE_LOW <= my <= _MOVE_HIGH
        and type(yaw) is float
        and yaw - yaw == 0.0
        and type(pitch) is float
        and pitch - pitch == 0.0
        and type(view) is float
        and _VIEW_LOW <= view <= _VIEW_HIGH
    ):
        return None
    message = object.__new__(InputMessage)
    put = object.__setattr__  # (a frozen dataclass)
    put(message, "seq", seq)
    put(message, "tick", tick)
    put(message, "move", (mx, my))
    put(message, "yaw", yaw)
    put(message, "pitch", pitch)
    put(message, "buttons", buttons)
    put(message, "view_time", view)
    put(message, "ack_tick", ack)
    return message


_BOUNDS = {field.name: (field.low, field.high) for field in INPUT_FIELDS}
(_SEQ_LOW, _SEQ_HIGH), (_TICK_LOW, _TICK_HIGH) = _BOUNDS["seq"], _BOUNDS["tick"]
(_ACK_LOW, _ACK_HIGH), (_BUTTONS_LOW, _BUTTONS_HIGH) = _BOUNDS["ack_tick"], _BOUNDS["buttons"]
(_MOVE_LOW, _MOVE_HIGH), (_VIEW_LOW, _VIEW_HIGH) = _BOUNDS["move"], _BOUNDS["view_time"]
if _BOUNDS["yaw"] != (-math.inf, math.inf) or _BOUNDS["pitch"] != (-math.inf, math.inf):
    raise AssertionError("the fast path checks yaw and pitch for finiteness only")


_SNAPSHOT_KEYS = frozenset(SnapshotMessage.FIELDS)


def _fast_snapshot(raw: dict[Any, Any]) -> SnapshotMessage | None:
    """The valid ``snapshot`` frame (every bot decodes 60 a second), checked inline; like
    :func:`_fast_input`, anything unusual takes the general path and its precise error."""
    if raw.keys() != _SNAPSHOT_KEYS:
        return None
    tick, server_time, epoch, ack = raw["tick"], raw["server_time"], raw["epoch"], raw["ack"]
    you, entities, events, state = raw["you"], raw["entities"], raw["events"], raw["state"]
    base = raw["base"]
    if not (
        type(tick) is int
        and 0 <= tick <= MAX_TICK
        and type(server_time) is float
        and 0.0 <= server_time < math.inf
        and type(epoch) is int
        and 0 <= epoch <= MAX_EPOCH
        and type(ack) is int
        and -1 <= ack <= U32_MAX
        and type(base) is int
        and -1 <= base <= MAX_TICK
        and type(entities) is bytes
        and type(state) is bytes
        and type(events) is list
        and type(you) is list
        and len(you) == 6
        and all(type(v) is float and -1e9 <= v <= 1e9 for v in you)
    ):
        return None
    message = object.__new__(SnapshotMessage)
    for name, value in (
        ("tick", tick),
        ("server_time", server_time),
        ("epoch", epoch),
        ("ack", ack),
        ("you", tuple(you)),
        ("entities", entities),
        ("events", _snapshot_events("snapshot.events", events)),
        ("state", state),
        ("base", base),
    ):
        object.__setattr__(message, name, value)
    return message


def decode_client(data: bytes) -> ClientMessage:
    """Decode a frame a client sent; raises :class:`ProtocolError` subclasses."""
    return _decode(data, _CLIENT_TYPES, MAX_CLIENT_FRAME_BYTES)  # type: ignore[return-value]


def decode_server(data: bytes) -> ServerMessage:
    """Decode a frame a server sent (used by bots and by the tests)."""
    return _decode(data, _SERVER_TYPES, MAX_SERVER_FRAME_BYTES)  # type: ignore[return-value]
