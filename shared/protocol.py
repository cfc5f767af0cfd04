"""Arena wire protocol, version 1: msgpack maps in binary WebSocket frames.

This module is sans-I/O: it turns bytes into validated message objects and back, and
nothing else. ``docs/protocol.md`` documents every field with its unit; the tables below
(``_FIELDS``) are the single source of truth that both the decoder and that document follow.

Every frame is one msgpack map with a ``"type"`` key. Decoding is strict: a frame that is
too large, is not msgpack, is not a map, has an unknown type, misses a field, has an extra
field, or has a field of the wrong type or out of range raises a subclass of
:class:`ProtocolError` whose ``code`` is sent back to the peer in an ``error`` message.

Snapshots are the hot path: the part every client shares (tick, time, entities, events) is
encoded once per tick by :func:`encode_snapshot_body`, and each client's frame is that body
plus a small per-client header (:func:`encode_snapshot`), spliced at the msgpack level.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import msgpack
import numpy as np

__all__ = [
    "ENTITY_DTYPE",
    "MAX_CLIENT_FRAME_BYTES",
    "MAX_SERVER_FRAME_BYTES",
    "PROTOCOL_VERSION",
    "SNAPSHOT_HEAD_BYTES",
    "ClientMessage",
    "ErrorMessage",
    "FrameTooLarge",
    "InputMessage",
    "InvalidField",
    "JoinMessage",
    "MalformedFrame",
    "Message",
    "PingMessage",
    "PongMessage",
    "ProtocolError",
    "ServerFrameDecoder",
    "ServerMessage",
    "SnapshotMessage",
    "StandbysMessage",
    "UnknownMessageType",
    "VersionMismatch",
    "WelcomeMessage",
    "decode_client",
    "decode_server",
    "encode",
    "encode_input",
    "encode_snapshot",
    "encode_snapshot_body",
    "entity_pitch",
    "entity_yaw",
    "pack_entities",
    "snapshot_heads",
    "unpack_entities",
]

PROTOCOL_VERSION = 1
MAX_CLIENT_FRAME_BYTES = 1024  # an input is ~120 bytes; anything near this is abuse
MAX_SERVER_FRAME_BYTES = 1 << 20  # 1 MiB: ~40,000 entities; a node caps players far below

U32_MAX = 2**32 - 1
MAX_TICK = 2**53  # exact in a float64, so tick / rate stays exact enough for centuries

# One entity record in a snapshot, little-endian, packed (26 bytes). Quantisation:
# velocity as float16 (about 3 significant digits), yaw in [-pi, pi) as uint16 steps of
# 2*pi/65536, pitch in [-pi/2, pi/2] as int16 steps of (pi/2)/32767.
ENTITY_DTYPE = np.dtype(
    [
        ("id", "<u2"),
        ("x", "<f4"),
        ("y", "<f4"),
        ("z", "<f4"),
        ("vx", "<f2"),
        ("vy", "<f2"),
        ("vz", "<f2"),
        ("yaw", "<u2"),
        ("pitch", "<i2"),
        ("health", "u1"),
        ("flags", "u1"),
    ]
)
ENTITY_FLAG_ALIVE = 1
_YAW_STEP = 2.0 * math.pi / 65536.0
_PITCH_STEP = (math.pi / 2.0) / 32767.0


class ProtocolError(Exception):
    """The peer sent something this protocol does not allow (remote misbehaviour)."""

    code: ClassVar[str] = "protocol_error"


class FrameTooLarge(ProtocolError):
    code = "frame_too_large"


class MalformedFrame(ProtocolError):
    code = "malformed_frame"


class UnknownMessageType(ProtocolError):
    code = "unknown_type"


class InvalidField(ProtocolError):
    code = "invalid_field"


class VersionMismatch(ProtocolError):
    code = "version_mismatch"


# ---------------------------------------------------------------------------------------
# Field validators: each takes the raw decoded value and returns it (normalised) or raises.


def _int(lo: int, hi: int) -> Callable[[str, object], int]:
    def check(name: str, value: object) -> int:
        if type(value) is int and lo <= value <= hi:  # the common case, checked first
            return value
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidField(f"{name}: expected an integer")
        if not lo <= value <= hi:
            raise InvalidField(f"{name}: {value} is outside [{lo}, {hi}]")
        return value

    return check


def _float(lo: float = -math.inf, hi: float = math.inf) -> Callable[[str, object], float]:
    def check(name: str, value: object) -> float:
        # Fast path: ``v - v == 0`` is false exactly for NaN and infinities.
        if type(value) is float and lo <= value <= hi and value - value == 0.0:
            return value
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InvalidField(f"{name}: expected a number")
        result = float(value)
        if not math.isfinite(result):
            raise InvalidField(f"{name}: must be finite")
        if not lo <= result <= hi:
            raise InvalidField(f"{name}: {result} is outside [{lo}, {hi}]")
        return result

    return check


def _str(max_len: int) -> Callable[[str, object], str]:
    def check(name: str, value: object) -> str:
        if not isinstance(value, str):
            raise InvalidField(f"{name}: expected a string")
        if len(value) > max_len:
            raise InvalidField(f"{name}: longer than {max_len} characters")
        return value

    return check


def _bool(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise InvalidField(f"{name}: expected true or false")
    return value


def _optional(inner: Callable[[str, object], Any]) -> Callable[[str, object], Any]:
    def check(name: str, value: object) -> Any:
        return None if value is None else inner(name, value)

    return check


def _floats(count: int, bound: float) -> Callable[[str, object], tuple[float, ...]]:
    element = _float(-bound, bound)

    def check(name: str, value: object) -> tuple[float, ...]:
        if (
            type(value) is list
            and len(value) == count
            and all(type(v) is float and -bound <= v <= bound and v - v == 0.0 for v in value)
        ):
            return tuple(value)
        if not isinstance(value, list | tuple) or len(value) != count:
            raise InvalidField(f"{name}: expected a list of {count} numbers")
        return tuple(element(f"{name}[{i}]", v) for i, v in enumerate(value))

    return check


def _bytes(name: str, value: object) -> bytes:
    if not isinstance(value, bytes):
        raise InvalidField(f"{name}: expected binary data")
    return value


def _events(name: str, value: object) -> tuple[dict[str, Any], ...]:
    if not isinstance(value, list | tuple) or not all(isinstance(e, dict) for e in value):
        raise InvalidField(f"{name}: expected a list of maps")
    return tuple(value)


def _str_list(name: str, value: object) -> tuple[str, ...]:
    if not isinstance(value, list | tuple) or not all(isinstance(e, str) for e in value):
        raise InvalidField(f"{name}: expected a list of strings")
    return tuple(value)


# ---------------------------------------------------------------------------------------
# Messages. Each is a frozen slotted dataclass; construction validates, so an invalid
# message cannot exist on either side.


@dataclass(frozen=True, slots=True)
class Message:
    TYPE: ClassVar[str] = ""
    FIELDS: ClassVar[dict[str, Callable[[str, object], Any]]] = {}

    def __post_init__(self) -> None:
        for name, check in self.FIELDS.items():
            value = getattr(self, name)
            try:
                normalised = check(name, value)
            except InvalidField as error:
                raise InvalidField(f"{self.TYPE}.{error}") from None
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
        "v": _int(0, 65535),
        "name": _str(32),
        "token": _optional(_str(512)),
        "interp_delay": _float(0.0, 1.0),
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
        "seq": _int(0, U32_MAX),
        "tick": _int(0, MAX_TICK),
        "ack_tick": _int(-1, MAX_TICK),
        "move": _floats(2, 1e6),
        "yaw": _float(),
        "pitch": _float(),
        "buttons": _int(0, 255),
        "view_time": _float(0.0, 1e9),
    }


@dataclass(frozen=True, slots=True)
class PingMessage(Message):
    """Client -> server: a clock-sync probe; ``t`` is the client's own clock, echoed back."""

    TYPE = "ping"
    id: int
    t: float
    FIELDS = {"id": _int(0, U32_MAX), "t": _float()}


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
    FIELDS = {
        "v": _int(0, 65535),
        "player_id": _int(0, 65535),
        "tick_rate": _int(1, 1000),
        "tick": _int(0, MAX_TICK),
        "server_time": _float(0.0),
        "token": _str(512),
        "map": _str(64),
        "region": _str(64),
        "epoch": _int(0, 2**63 - 1),
        "standbys": _str_list,
        "ack": _int(-1, U32_MAX),
        "match": _int(0, 65535),
    }


@dataclass(frozen=True, slots=True)
class SnapshotMessage(Message):
    """Server -> client, once per tick: the authoritative world and this client's ack."""

    TYPE = "snapshot"
    tick: int
    server_time: float
    epoch: int
    ack: int
    you: tuple[float, ...]
    entities: bytes
    events: tuple[dict[str, Any], ...] = ()
    FIELDS = {
        "tick": _int(0, MAX_TICK),
        "server_time": _float(0.0),
        "epoch": _int(0, 2**63 - 1),
        "ack": _int(-1, U32_MAX),
        "you": _floats(6, 1e9),
        "entities": _bytes,
        "events": _events,
    }


@dataclass(frozen=True, slots=True)
class StandbysMessage(Message):
    """Server -> client, whenever the region's standby endpoints change (a new standby
    joined): where to keep a spare connection, and where to go if this node disappears."""

    TYPE = "standbys"
    urls: tuple[str, ...]
    epoch: int
    FIELDS = {"urls": _str_list, "epoch": _int(0, 2**63 - 1)}


@dataclass(frozen=True, slots=True)
class PongMessage(Message):
    """Server -> client, answer to ``ping``: echoes ``t`` and adds the server time."""

    TYPE = "pong"
    id: int
    t: float
    server_time: float
    FIELDS = {"id": _int(0, U32_MAX), "t": _float(), "server_time": _float(0.0)}


@dataclass(frozen=True, slots=True)
class ErrorMessage(Message):
    """Server -> client: what was wrong; ``fatal`` means the server closes the socket next."""

    TYPE = "error"
    code: str
    message: str
    fatal: bool = False
    FIELDS = {"code": _str(64), "message": _str(256), "fatal": _bool}


ClientMessage = JoinMessage | InputMessage | PingMessage
ServerMessage = WelcomeMessage | SnapshotMessage | PongMessage | ErrorMessage | StandbysMessage

_CLIENT_TYPES: dict[str, type[Message]] = {
    m.TYPE: m for m in (JoinMessage, InputMessage, PingMessage)
}
_SERVER_TYPES: dict[str, type[Message]] = {
    m.TYPE: m for m in (WelcomeMessage, SnapshotMessage, PongMessage, ErrorMessage, StandbysMessage)
}


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
    return msgpack.packb(
        {
            "type": "input",
            "seq": seq,
            "tick": tick,
            "ack_tick": ack_tick,
            "move": (float(move[0]), float(move[1])),
            "yaw": float(yaw),
            "pitch": float(pitch),
            "buttons": buttons,
            "view_time": float(view_time),
        },
        use_bin_type=True,
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
            max_array_len=4096,
            max_map_len=64,
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
    if extra:
        raise InvalidField(f"{kind}: unexpected field {sorted(map(str, extra))[0][:32]!r}")
    try:
        return cls(**raw)
    except TypeError:
        missing = sorted(fields.keys() - raw.keys())
        raise InvalidField(f"{kind}: missing field {missing[0] if missing else '?'!r}") from None


_INPUT_KEYS = frozenset(InputMessage.FIELDS)


def _fast_input(raw: dict[Any, Any]) -> InputMessage | None:
    """The valid ``input`` frame, 60 times a second per player, checked inline.

    It accepts exactly what the general path accepts when every value already has its
    wire type (ints as ints, floats as floats); anything else returns None and takes the
    general path, which builds the precise error. ``v - v == 0`` is false for NaN and inf.
    """
    if raw.keys() != _INPUT_KEYS:
        return None
    seq, tick, ack, move = raw["seq"], raw["tick"], raw["ack_tick"], raw["move"]
    yaw, pitch, buttons, view = raw["yaw"], raw["pitch"], raw["buttons"], raw["view_time"]
    if not (
        type(seq) is int
        and 0 <= seq <= U32_MAX
        and type(tick) is int
        and 0 <= tick <= MAX_TICK
        and type(ack) is int
        and -1 <= ack <= MAX_TICK
        and type(buttons) is int
        and 0 <= buttons <= 255
        and type(move) is list
        and len(move) == 2
        and type(mx := move[0]) is float
        and type(my := move[1]) is float
        and -1e6 <= mx <= 1e6
        and -1e6 <= my <= 1e6
        and type(yaw) is float
        and yaw - yaw == 0.0
        and type(pitch) is float
        and pitch - pitch == 0.0
        and type(view) is float
        and 0.0 <= view <= 1e9
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


_SNAPSHOT_KEYS = frozenset(SnapshotMessage.FIELDS)


def _fast_snapshot(raw: dict[Any, Any]) -> SnapshotMessage | None:
    """The valid ``snapshot`` frame (every bot decodes 60 a second), checked inline; like
    :func:`_fast_input`, anything unusual takes the general path and its precise error."""
    if raw.keys() != _SNAPSHOT_KEYS:
        return None
    tick, server_time, epoch, ack = raw["tick"], raw["server_time"], raw["epoch"], raw["ack"]
    you, entities, events = raw["you"], raw["entities"], raw["events"]
    if not (
        type(tick) is int
        and 0 <= tick <= MAX_TICK
        and type(server_time) is float
        and 0.0 <= server_time < math.inf
        and type(epoch) is int
        and 0 <= epoch <= 2**63 - 1
        and type(ack) is int
        and -1 <= ack <= U32_MAX
        and type(entities) is bytes
        and type(events) is list
        and type(you) is list
        and len(you) == 6
        and all(type(v) is float and -1e9 <= v <= 1e9 for v in you)
        and all(type(event) is dict for event in events)
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
        ("events", tuple(events)),
    ):
        object.__setattr__(message, name, value)
    return message


def decode_client(data: bytes) -> ClientMessage:
    """Decode a frame a client sent; raises :class:`ProtocolError` subclasses."""
    return _decode(data, _CLIENT_TYPES, MAX_CLIENT_FRAME_BYTES)  # type: ignore[return-value]


def decode_server(data: bytes) -> ServerMessage:
    """Decode a frame a server sent (used by bots and by the tests)."""
    return _decode(data, _SERVER_TYPES, MAX_SERVER_FRAME_BYTES)  # type: ignore[return-value]


# ---------------------------------------------------------------------------------------
# Snapshot hot path.


def pack_entities(
    ids: np.ndarray,
    pos: np.ndarray,
    vel: np.ndarray,
    yaw: np.ndarray,
    pitch: np.ndarray,
    health: np.ndarray,
    alive: np.ndarray,
) -> bytes:
    """Quantise N players' public state into ``N * ENTITY_DTYPE.itemsize`` bytes."""
    records = np.empty(len(ids), dtype=ENTITY_DTYPE)
    records["id"] = ids
    records["x"], records["y"], records["z"] = pos[:, 0], pos[:, 1], pos[:, 2]
    records["vx"], records["vy"], records["vz"] = vel[:, 0], vel[:, 1], vel[:, 2]
    wrapped = np.mod(yaw + math.pi, 2.0 * math.pi)
    records["yaw"] = np.round(wrapped / _YAW_STEP).astype(np.int64) % 65536
    records["pitch"] = np.round(np.clip(pitch, -math.pi / 2, math.pi / 2) / _PITCH_STEP)
    records["health"] = np.clip(health, 0, 255)
    records["flags"] = np.where(alive, ENTITY_FLAG_ALIVE, 0)
    return records.tobytes()


def unpack_entities(blob: bytes) -> np.ndarray:
    """The inverse view: a structured array over the blob (zero-copy, read-only)."""
    if len(blob) % ENTITY_DTYPE.itemsize:
        raise InvalidField(
            f"snapshot.entities: {len(blob)} bytes is not a multiple of {ENTITY_DTYPE.itemsize}"
        )
    return np.frombuffer(blob, dtype=ENTITY_DTYPE)


def entity_yaw(records: np.ndarray) -> np.ndarray:
    return records["yaw"].astype(np.float64) * _YAW_STEP - math.pi


def entity_pitch(records: np.ndarray) -> np.ndarray:
    return records["pitch"].astype(np.float64) * _PITCH_STEP


def encode_snapshot_body(
    tick: int, server_time: float, epoch: int, entities: bytes, events: list[dict[str, Any]]
) -> bytes:
    """Encode the part of a snapshot that every recipient shares, once per tick.

    The result is a run of msgpack key/value pairs, not a whole value: msgpack is
    concatenative, so a map header followed by these pairs and the per-client pairs is
    one valid map (see :func:`encode_snapshot`).
    """
    packer = msgpack.Packer(use_bin_type=True, autoreset=False)
    for key, value in (
        ("type", SnapshotMessage.TYPE),
        ("tick", tick),
        ("server_time", server_time),
        ("epoch", epoch),
        ("entities", entities),
        ("events", events),
    ):
        packer.pack(key)
        packer.pack(value)
    return packer.bytes()


_BODY_PAIRS = 6  # type, tick, server_time, epoch, entities, events
_HEADER_PAIRS = 2  # ack, you
_MAP_HEADER = bytes([0x80 | (_BODY_PAIRS + _HEADER_PAIRS)])  # msgpack fixmap of 8 pairs
_ACK_KEY = msgpack.packb("ack")
_YOU_KEY_AND_ARRAY = msgpack.packb("you") + bytes([0x96])  # then a fixarray of 6 floats
_YOU_FLOATS = struct.Struct(">B d B d B d B d B d B d")  # each float64 tagged 0xcb


def encode_snapshot(body: bytes, ack: int, you: Sequence[float]) -> bytes:
    """One client's snapshot frame: map header + its ack and own state + the shared body.

    ``you`` is this client's own position and velocity at full float64 precision, so its
    reconciliation replays from exactly the server's state.
    """
    return snapshot_heads(np.array([ack]), np.array([you], dtype=np.float64)) + body


#: Every head has the same size: the ack always as a 32-bit msgpack int (``0xce`` uint32,
#: or ``0xd2`` int32 for -1, both valid msgpack), so a tick's heads are built at once.
_HEAD_DTYPE = np.dtype(
    [
        ("prefix", f"V{len(_MAP_HEADER + _ACK_KEY)}"),
        ("ack_tag", "u1"),
        ("ack", ">u4"),
        ("you_key", f"V{len(_YOU_KEY_AND_ARRAY)}"),
        ("you", [("tag", "u1"), ("value", ">f8")], (6,)),  # six tagged float64s
    ]
)
SNAPSHOT_HEAD_BYTES = _HEAD_DTYPE.itemsize


def snapshot_heads(acks: np.ndarray, states: np.ndarray) -> bytes:
    """The heads of many clients' snapshots, :data:`SNAPSHOT_HEAD_BYTES` each, back to
    back: ``acks`` ``(N,)`` and ``states`` ``(N, 6)`` (position and velocity, float64)."""
    heads = np.empty(len(acks), dtype=_HEAD_DTYPE)
    heads["prefix"] = np.void(_MAP_HEADER + _ACK_KEY)
    heads["ack_tag"] = np.where(np.asarray(acks) < 0, 0xD2, 0xCE)
    heads["ack"] = np.asarray(acks, dtype=np.int64) & 0xFFFFFFFF
    heads["you_key"] = np.void(_YOU_KEY_AND_ARRAY)
    heads["you"]["tag"] = 0xCB
    heads["you"]["value"] = states
    return heads.tobytes()


_SNAPSHOT_PREFIX = _MAP_HEADER + _ACK_KEY
_UINT_TAGS = {0xCC: 1, 0xCD: 2, 0xCE: 4}  # msgpack uint 8/16/32: the ack's encodings
_BODY_KEY_BYTES = 48  # enough of a body to hold its tick, server time and epoch
_FLOAT64_TAGS = (0xCB,) * 6


def _snapshot_head(data: bytes) -> tuple[int, tuple[float, ...], int] | None:
    """(ack, you, where the shared body starts) of a frame laid out as
    :func:`encode_snapshot` writes it, with valid values; None for anything else."""
    if not data.startswith(_SNAPSHOT_PREFIX):
        return None
    pos = len(_SNAPSHOT_PREFIX)
    try:
        tag = data[pos]
        if tag < 0x80:
            ack, pos = tag, pos + 1
        elif tag == 0xFF:
            ack, pos = -1, pos + 1
        elif tag == 0xD2:  # int32: how the node writes -1 (see snapshot_heads)
            ack, pos = int.from_bytes(data[pos + 1 : pos + 5], "big", signed=True), pos + 5
            if ack < -1:
                return None
        elif (size := _UINT_TAGS.get(tag)) is not None:
            ack, pos = int.from_bytes(data[pos + 1 : pos + 1 + size], "big"), pos + 1 + size
        else:
            return None
        if not data.startswith(_YOU_KEY_AND_ARRAY, pos):
            return None
        pos += len(_YOU_KEY_AND_ARRAY)
        fields = _YOU_FLOATS.unpack_from(data, pos)
    except (IndexError, struct.error):
        return None
    you = fields[1::2]
    # (min and max can miss a NaN; the sum cannot.)
    if fields[0::2] != _FLOAT64_TAGS or not (
        -1e9 <= min(you) and max(you) <= 1e9 and math.isfinite(sum(you))
    ):
        return None
    return ack, you, pos + _YOU_FLOATS.size


class ServerFrameDecoder:
    """:func:`decode_server` for a process with many connections to one server (a bot swarm).

    Every recipient of a tick's snapshot gets the same shared body behind its own ack and
    state (:func:`encode_snapshot`). This decoder reads that head directly and decodes each
    distinct body once, so all recipients of a tick share one ``entities`` and one
    ``events`` object; a frame it cannot split, or a new body, takes the general path.
    """

    def __init__(self, capacity: int = 64) -> None:
        self._capacity = capacity
        self._bodies: dict[tuple[bytes, int], tuple[bytes, SnapshotMessage]] = {}
        #: Snapshots whose body was decoded already.
        self.shared = 0

    def decode(self, data: bytes) -> ServerMessage:
        head = _snapshot_head(data) if len(data) <= MAX_SERVER_FRAME_BYTES else None
        if head is None:
            return decode_server(data)
        ack, you, start = head
        body = data[start:]
        key = (body[:_BODY_KEY_BYTES], len(body))
        cached = self._bodies.get(key)
        if cached is None or cached[0] != body:
            message = decode_server(data)
            if (
                type(message) is SnapshotMessage
                and message.ack == ack
                and message.you == you
                and _ACK_KEY not in body  # a body that repeats a head key overrides it:
                and _YOU_KEY_AND_ARRAY[:-1] not in body  # never shared (rather than wrong)
            ):
                if cached is None and len(self._bodies) >= self._capacity:
                    del self._bodies[next(iter(self._bodies))]  # the oldest
                self._bodies[key] = (body, message)
            return message
        self.shared += 1
        template = cached[1]
        message = object.__new__(SnapshotMessage)
        put = object.__setattr__  # (a frozen dataclass)
        put(message, "tick", template.tick)
        put(message, "server_time", template.server_time)
        put(message, "epoch", template.epoch)
        put(message, "ack", ack)
        put(message, "you", you)
        put(message, "entities", template.entities)
        put(message, "events", template.events)
        return message
