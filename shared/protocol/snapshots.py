"""The snapshot hot path: entity records, the shared body encoded once per tick, the
per-client head built for every client at once, and the decoder that reads each distinct
body once per process (a bot swarm).

Snapshots are what the node sends most: the part every client shares (tick, time,
events, state digest) is encoded once per tick by :func:`encode_snapshot_body`, and each
client's frame is a small per-client head (ack, own state), its players coded against its
acknowledged snapshot (:mod:`shared.protocol.deltas`), then that body
(:func:`encode_snapshot`), spliced at the msgpack level.
"""

from __future__ import annotations

import math
import operator
import struct
from collections.abc import Sequence

import msgpack
import numba
import numpy as np

from shared.protocol.events import SnapshotEvent, encode_event
from shared.protocol.fields import MAX_ARRAY_LEN, MAX_MAP_LEN, MAX_SERVER_FRAME_BYTES, MAX_TICK
from shared.protocol.layout import field
from shared.protocol.messages import ServerMessage, SnapshotMessage, decode_server

__all__ = [
    "ENTITIES_PART_BYTES",
    "ENTITY_DTYPE",
    "ENTITY_FLAG_ALIVE",
    "SNAPSHOT_HEAD_BYTES",
    "STATE_DIGEST_BYTES",
    "ServerFrameDecoder",
    "encode_snapshot",
    "encode_snapshot_body",
    "entities_part",
    "entity_pitch",
    "entity_yaw",
    "events_part",
    "pack_event",
    "snapshot_ack",
    "snapshot_heads",
    "state_digest",
]

#: How much of the world's state hash a snapshot carries (the audit's key, not a MAC).
STATE_DIGEST_BYTES = 8


def state_digest(state_hash: str) -> bytes:
    """The snapshot's ``state`` from a world's hex state hash (its first bytes)."""
    return bytes.fromhex(state_hash[: 2 * STATE_DIGEST_BYTES])


# One player as a client draws it (what a snapshot's decoded ``entities`` are, see
# :mod:`shared.protocol.deltas`): positions and velocities as float32, yaw in [-pi, pi) as
# uint16 steps of 2*pi/65536, pitch in [-pi/2, pi/2] as int16 steps of (pi/2)/32767.
ENTITY_DTYPE = np.dtype(
    [
        ("id", "<u2"),
        ("x", "<f4"),
        ("y", "<f4"),
        ("z", "<f4"),
        ("vx", "<f4"),
        ("vy", "<f4"),
        ("vz", "<f4"),
        ("yaw", "<u2"),
        ("pitch", "<i2"),
        ("health", "u1"),
        ("flags", "u1"),
    ]
)
ENTITY_FLAG_ALIVE = 1
_YAW, _PITCH = field("yaw"), field("pitch")


def entity_yaw(records: np.ndarray) -> np.ndarray:
    return records["yaw"].astype(np.float64) * _YAW.step + _YAW.origin


def entity_pitch(records: np.ndarray) -> np.ndarray:
    return records["pitch"].astype(np.float64) * _PITCH.step


def encode_snapshot_body(tick: int, server_time: float, epoch: int, state: bytes = b"") -> bytes:
    """Encode the part of a snapshot that every recipient shares, once per tick.

    ``state``: the world's digest (:data:`STATE_DIGEST_BYTES` of it), so that what a client
    was shown can be checked against what the region's journals say it published.

    The result is a run of msgpack key/value pairs, not a whole value: msgpack is
    concatenative, so a map header followed by the per-client pairs and these is one
    valid map (see :func:`encode_snapshot`).
    """
    packer = msgpack.Packer(use_bin_type=True, autoreset=False)
    for key, value in (
        ("type", SnapshotMessage.TYPE),
        ("tick", tick),
        ("server_time", server_time),
        ("epoch", epoch),
        ("state", state),
    ):
        packer.pack(key)
        packer.pack(value)
    return packer.bytes()


_BODY_PAIRS = 5  # type, tick, server_time, epoch, state
_HEADER_PAIRS = 5  # ack, you, base, entities, events
_MAP_HEADER = bytes([0x80 | (_BODY_PAIRS + _HEADER_PAIRS)])  # msgpack fixmap of 10 pairs
_ACK_KEY = msgpack.packb("ack")
_YOU_KEY_AND_ARRAY = msgpack.packb("you") + bytes([0x96])  # then a fixarray of 6 floats


def encode_snapshot(
    body: bytes,
    ack: int,
    you: Sequence[float],
    base: int = -1,
    entities: bytes = b"",
    events: Sequence[SnapshotEvent] = (),
) -> bytes:
    """One client's snapshot frame: map header, its ack and own state, its players (coded
    against its snapshot ``base``) and the events it is told, then the shared body.

    ``you`` is this client's own position and velocity at full float64 precision, so its
    reconciliation replays from exactly the server's state.
    """
    head = snapshot_heads(np.array([ack]), np.array([you], dtype=np.float64))
    return (
        head + entities_part(base, entities) + events_part([pack_event(e) for e in events]) + body
    )


_BASE_KEY = msgpack.packb("base")
_ENTITIES_KEY = msgpack.packb("entities")
_ENTITIES_PART = struct.Struct(f">{len(_BASE_KEY)}sBq{len(_ENTITIES_KEY)}sBI")
#: The fixed bytes in front of a client's coded players: base (int64) and a bin32 header.
ENTITIES_PART_BYTES = _ENTITIES_PART.size


_EVENTS_KEY = msgpack.packb("events")
_EVENTS_HEAD = struct.Struct(f">{len(_EVENTS_KEY)}sBI")  # the key and an array32 header


def pack_event(event: SnapshotEvent) -> bytes:
    """One event as msgpack (encoded once per tick, spliced into each client's events)."""
    return msgpack.packb(encode_event(event), use_bin_type=True)


def events_part(packed: Sequence[bytes]) -> bytes:
    """A client's ``events`` pair from events packed by :func:`pack_event` (an array32)."""
    return _EVENTS_HEAD.pack(_EVENTS_KEY, 0xDD, len(packed)) + b"".join(packed)


def entities_part(base: int, entities: bytes) -> bytes:
    """A client's ``base`` and ``entities`` pairs (always int64 and bin32: a fixed layout)."""
    return _ENTITIES_PART.pack(_BASE_KEY, 0xD3, base, _ENTITIES_KEY, 0xC6, len(entities)) + entities


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


_HEAD_PREFIX = np.frombuffer(_MAP_HEADER + _ACK_KEY, dtype=np.uint8)
_HEAD_YOU = np.frombuffer(_YOU_KEY_AND_ARRAY, dtype=np.uint8)


def snapshot_heads(acks: np.ndarray, states: np.ndarray) -> bytes:
    """The heads of many clients' snapshots, :data:`SNAPSHOT_HEAD_BYTES` each, back to
    back: ``acks`` ``(N,)`` and ``states`` ``(N, 6)`` (position and velocity, float64).
    One kernel pass, exactly :func:`snapshot_heads_reference` (every snapshot tick makes
    every seat's head)."""
    out = np.empty(len(acks) * SNAPSHOT_HEAD_BYTES, dtype=np.uint8)
    _write_heads(
        np.ascontiguousarray(acks, dtype=np.int64),
        np.ascontiguousarray(states, dtype=np.float64).reshape(-1, 6),
        out,
    )
    return out.tobytes()


@numba.njit(cache=True, nogil=True)
def _write_heads(acks: np.ndarray, states: np.ndarray, out: np.ndarray) -> None:
    """:data:`_HEAD_DTYPE`'s bytes, head by head: the ack as a big-endian 32-bit msgpack
    int (``0xd2`` for a negative one), each float64 tagged ``0xcb``, big-endian."""
    word = np.empty(1, dtype=np.float64)
    bits = word.view(np.uint64)
    at = 0
    for i in range(len(acks)):
        for k in range(len(_HEAD_PREFIX)):
            out[at + k] = _HEAD_PREFIX[k]
        at += len(_HEAD_PREFIX)
        ack = acks[i]
        out[at] = 0xD2 if ack < 0 else 0xCE
        value = ack & 0xFFFFFFFF
        for b in range(4):
            out[at + 1 + b] = (value >> (8 * (3 - b))) & 0xFF
        at += 5
        for k in range(len(_HEAD_YOU)):
            out[at + k] = _HEAD_YOU[k]
        at += len(_HEAD_YOU)
        for f in range(6):
            word[0] = states[i, f]
            raw = bits[0]
            out[at] = 0xCB
            for b in range(8):
                out[at + 1 + b] = (raw >> np.uint64(8 * (7 - b))) & np.uint64(0xFF)
            at += 9


def snapshot_heads_reference(acks: np.ndarray, states: np.ndarray) -> bytes:
    """:func:`snapshot_heads` through :data:`_HEAD_DTYPE`, the readable statement of the
    layout."""
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
#: A head's fixed part after its ack, read with one unpack: ``you`` (six float64s, each
#: tagged 0xcb), then ``base`` (an int64) and the ``entities`` bin32 header. Its keys and
#: tags (:data:`_layout`) must be :data:`_LAYOUT`.
_YOU_AND_ENTITIES = struct.Struct(
    f">{len(_YOU_KEY_AND_ARRAY)}s{'Bd' * 6}{_ENTITIES_PART.format.removeprefix('>')}"
)
_layout = operator.itemgetter(0, 1, 3, 5, 7, 9, 11, 13, 14, 16, 17)
_LAYOUT = (_YOU_KEY_AND_ARRAY, *(0xCB,) * 6, _BASE_KEY, 0xD3, _ENTITIES_KEY, 0xC6)


_MAX_EVENTS = MAX_ARRAY_LEN  # as decode_server's longest array
_RECENT_BODIES = 4  # bodies a frame is matched against by its end (ServerFrameDecoder)
#: A client's keys as text: found anywhere in a body (in any msgpack string form), the body
#: is never shared (a repeated key overrides the client's own; a false alarm only costs a
#: decode).
_CLIENT_KEYS = (b"ack", b"you", b"base", b"entities", b"events")


def snapshot_ack(data: bytes) -> int | None:
    """The ``ack`` of a frame laid out as :func:`encode_snapshot` writes it, read from its
    first bytes (the inputs the node applied): what a client that never decodes the
    players needs (a light player); None for a frame laid out otherwise."""
    if not data.startswith(_SNAPSHOT_PREFIX):
        return None
    pos = len(_SNAPSHOT_PREFIX)
    if len(data) <= pos + 4:
        return None
    tag = data[pos]
    if tag == 0xCE:  # how the node writes it (snapshot_heads)
        return int.from_bytes(data[pos + 1 : pos + 5], "big")
    if tag < 0x80:
        return tag
    if tag == 0xFF:
        return -1
    if tag == 0xD2:
        ack = int.from_bytes(data[pos + 1 : pos + 5], "big", signed=True)
        return ack if ack >= -1 else None
    size = _UINT_TAGS.get(tag)
    return None if size is None else int.from_bytes(data[pos + 1 : pos + 1 + size], "big")


def _snapshot_head(
    data: bytes,
) -> tuple[int, tuple[float, ...], int, bytes, list[bytes], int] | None:
    """(ack, you, base, entities, each packed event, where the shared body starts) of a
    frame laid out as :func:`encode_snapshot` writes it, with valid values; None for
    anything else."""
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
        fields = _YOU_AND_ENTITIES.unpack_from(data, pos)
        you = fields[2:13:2]
        # (min and max can miss a NaN; the sum cannot.)
        if _layout(fields) != _LAYOUT or not (
            -1e9 <= min(you) and max(you) <= 1e9 and math.isfinite(sum(you))
        ):
            return None
        base, size = fields[15], fields[18]
        start = pos + _YOU_AND_ENTITIES.size
        end = start + size
        events_key, array_tag, count = _EVENTS_HEAD.unpack_from(data, end)
    except (IndexError, struct.error):
        return None
    if not -1 <= base <= MAX_TICK or events_key != _EVENTS_KEY or array_tag != 0xDD:
        return None
    at = end + _EVENTS_HEAD.size
    if count > _MAX_EVENTS:
        return None
    if count == 0:  # (most frames: no event for this client)
        return ack, you, base, data[start:end], [], at
    unpacker = msgpack.Unpacker(
        raw=False, max_buffer_size=MAX_SERVER_FRAME_BYTES, max_bin_len=MAX_SERVER_FRAME_BYTES,
        max_str_len=MAX_SERVER_FRAME_BYTES, max_array_len=MAX_ARRAY_LEN, max_map_len=MAX_MAP_LEN,
    )  # fmt: skip
    unpacker.feed(data[at:])
    events = []
    try:
        for _ in range(count):
            first = unpacker.tell()
            unpacker.skip()
            events.append(data[at + first : at + unpacker.tell()])
    except Exception:  # msgpack raises several unrelated types for a cut or bad value
        return None
    return ack, you, base, data[start:end], events, at + unpacker.tell()


class ServerFrameDecoder:
    """:func:`decode_server` for a process with many connections to one server (a bot swarm).

    Every recipient of a tick's snapshot gets the same shared body behind its own ack,
    state, players and events (:func:`encode_snapshot`); the node packs each event once
    and splices it into every frame that tells it. This decoder reads the per-client part
    directly and decodes each distinct body and each distinct event once, so recipients
    share those objects; a frame it cannot split, or anything new, takes the general path.
    """

    def __init__(self, capacity: int = 64, events_capacity: int = 4096) -> None:
        if capacity < 1 or events_capacity < 1:
            raise ValueError("the decoder's capacities must be at least 1")
        self._capacity = capacity
        self._events_capacity = events_capacity
        self._bodies: dict[tuple[bytes, int], tuple[bytes, SnapshotMessage]] = {}
        self._events: dict[bytes, SnapshotEvent] = {}
        #: The newest bodies decoded, newest first (:meth:`shared_body`).
        self._recent: list[tuple[bytes, SnapshotMessage]] = []
        #: Snapshots whose body was decoded already.
        self.shared = 0

    def shared_body(self, data: bytes) -> tuple[SnapshotMessage, int] | None:
        """The message of one of the newest bodies this decoder decoded, if ``data`` ends
        with it, and where it starts there: a tick's frames all end with its body. Whether
        the rest of the frame is laid out as a snapshot is for the caller to check
        (:class:`~shared.protocol.reader.SnapshotReader`)."""
        if len(data) > MAX_SERVER_FRAME_BYTES:
            return None
        for body, message in self._recent:
            if data.endswith(body):
                return message, len(data) - len(body)
        return None

    def known_events(self, data: bytes, bounds: np.ndarray) -> tuple[SnapshotEvent, ...] | None:
        """The events this decoder decoded already that ``data`` holds at ``bounds`` (per
        event, its first byte and the one after its last); None when one is new."""
        known = self._events
        events = []
        for first, after in bounds.tolist():
            event = known.get(data[first:after])
            if event is None:
                return None
            events.append(event)
        return tuple(events)

    def decode(self, data: bytes) -> ServerMessage:
        head = _snapshot_head(data) if len(data) <= MAX_SERVER_FRAME_BYTES else None
        if head is None:
            return decode_server(data)
        ack, you, base, entities, packed, start = head
        body = data[start:]
        key = (body[:_BODY_KEY_BYTES], len(body))
        cached = self._bodies.get(key)
        known = self._events
        events = [known.get(event) for event in packed]
        # (all(): events are never false, and ``None in`` would call each one's __eq__.)
        if cached is None or cached[0] != body or not all(events):
            message = decode_server(data)
            if (
                type(message) is SnapshotMessage
                and message.ack == ack
                and message.you == you
                and message.base == base
                and message.entities == entities
                and len(message.events) == len(packed)
                # A body that repeats a client's key overrides it: never shared (not wrong).
                and not any(key in body for key in _CLIENT_KEYS)
            ):
                if cached is None and len(self._bodies) >= self._capacity:
                    del self._bodies[next(iter(self._bodies))]  # the oldest
                self._bodies[key] = (body, message)
                others = [recent for recent in self._recent if recent[0] != body]
                self._recent = [(body, message), *others[: _RECENT_BODIES - 1]]
                shared = []
                for raw, event in zip(packed, message.events, strict=True):
                    held = known.get(raw)
                    if held is None:
                        if len(known) >= self._events_capacity:
                            del known[next(iter(known))]
                        known[raw] = held = event
                    shared.append(held)
                object.__setattr__(message, "events", tuple(shared))  # (a frozen dataclass)
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
        put(message, "entities", entities)
        put(message, "events", tuple(events))
        put(message, "state", template.state)
        put(message, "base", base)
        return message
