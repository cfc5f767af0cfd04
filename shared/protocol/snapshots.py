"""The snapshot hot path: entity records, the shared body encoded once per tick, the
per-client head built for every client at once, and the decoder that reads each distinct
body once per process (a bot swarm).

Snapshots are what the node sends most: the part every client shares (tick, time,
entities, events) is encoded once per tick by :func:`encode_snapshot_body`, and each
client's frame is that body plus a small per-client header (:func:`encode_snapshot`),
spliced at the msgpack level.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence

import msgpack
import numpy as np

from shared.protocol.errors import InvalidField
from shared.protocol.events import SnapshotEvent, encode_event
from shared.protocol.fields import MAX_SERVER_FRAME_BYTES
from shared.protocol.messages import ServerMessage, SnapshotMessage, decode_server

__all__ = [
    "ENTITY_DTYPE",
    "ENTITY_FLAG_ALIVE",
    "SNAPSHOT_HEAD_BYTES",
    "STATE_DIGEST_BYTES",
    "ServerFrameDecoder",
    "encode_snapshot",
    "encode_snapshot_body",
    "entity_pitch",
    "entity_yaw",
    "pack_entities",
    "snapshot_heads",
    "state_digest",
    "unpack_entities",
]

#: How much of the world's state hash a snapshot carries (the audit's key, not a MAC).
STATE_DIGEST_BYTES = 8


def state_digest(state_hash: str) -> bytes:
    """The snapshot's ``state`` from a world's hex state hash (its first bytes)."""
    return bytes.fromhex(state_hash[: 2 * STATE_DIGEST_BYTES])


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
    tick: int,
    server_time: float,
    epoch: int,
    entities: bytes,
    events: Sequence[SnapshotEvent],
    state: bytes = b"",
) -> bytes:
    """Encode the part of a snapshot that every recipient shares, once per tick.

    ``state``: the world's digest (:data:`STATE_DIGEST_BYTES` of it), so that what a client
    was shown can be checked against what the region's journals say it published.

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
        ("events", [encode_event(event) for event in events]),
        ("state", state),
    ):
        packer.pack(key)
        packer.pack(value)
    return packer.bytes()


_BODY_PAIRS = 7  # type, tick, server_time, epoch, entities, events, state
_HEADER_PAIRS = 2  # ack, you
_MAP_HEADER = bytes([0x80 | (_BODY_PAIRS + _HEADER_PAIRS)])  # msgpack fixmap of 9 pairs
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
        put(message, "state", template.state)
        return message
