"""Arena wire protocol, version 2: msgpack maps in binary WebSocket frames.

Sans-I/O: bytes in, validated message objects out, and back. The tables in these modules
are the single source of truth that the encoders, the decoders and ``docs/protocol.md``
follow (its tables and ``docs/protocol.json`` are generated from them):

* :mod:`.fields` the limits and the field validators (each states what it accepts),
  :mod:`.errors` the error codes;
* :mod:`.messages` the messages and their strict decoders (with the input and snapshot
  fast paths);
* :mod:`.inputs` the ``input`` message's fields, once, for every encoder and decoder;
* :mod:`.events` what a snapshot tells of a tick (joins, leaves, respawns, shots);
* :mod:`.layout` the entity record layout: every width, kind, class and field;
* :mod:`.snapshots` entity records and the snapshot's shared body and per-client head;
* :mod:`.deltas` the players quantised and coded against a client's baseline, and
  :mod:`.baselines` what a client holds to decode them;
* :mod:`.reader` a snapshot frame read whole in one kernel call (a bot swarm's);
* :mod:`.spec` all of it as data, and :mod:`.doc` the command that renders the document's
  tables and its JSON copy from it (``python -m shared.protocol.doc --write``).

This package is what clients import: ``from shared import protocol``.
"""

from __future__ import annotations

from shared.protocol.baselines import BASELINES_KEPT, EntityBaselines, MissingBaseline
from shared.protocol.deltas import EntityCodec, PlayerValues
from shared.protocol.errors import (
    FrameTooLarge,
    InvalidField,
    MalformedFrame,
    ProtocolError,
    UnknownMessageType,
    VersionMismatch,
)
from shared.protocol.events import (
    JUDGEMENTS,
    SHOT_RESULTS,
    JoinEvent,
    LeaveEvent,
    RespawnEvent,
    ShotEvent,
    SnapshotEvent,
    decode_event,
    encode_event,
)
from shared.protocol.fields import (
    MAX_CLIENT_FRAME_BYTES,
    MAX_EPOCH,
    MAX_SEQ,
    MAX_SERVER_FRAME_BYTES,
    MAX_TICK,
    PROTOCOL_VERSION,
    U32_MAX,
)
from shared.protocol.messages import (
    MAX_CONNECT_TOKEN_CHARS,
    ClientMessage,
    ConnectTokenMessage,
    ErrorMessage,
    InputMessage,
    JoinMessage,
    Message,
    PingMessage,
    PongMessage,
    ProbeEchoMessage,
    ProbeMessage,
    ServerMessage,
    SightingMessage,
    SnapshotMessage,
    StandbysMessage,
    TokenMessage,
    WelcomeMessage,
    decode_client,
    decode_server,
    encode,
    encode_input,
)
from shared.protocol.reader import ReadSnapshot, SnapshotReader
from shared.protocol.snapshots import (
    ENTITIES_PART_BYTES,
    ENTITY_DTYPE,
    ENTITY_FLAG_ALIVE,
    SNAPSHOT_HEAD_BYTES,
    STATE_DIGEST_BYTES,
    ServerFrameDecoder,
    encode_snapshot,
    encode_snapshot_body,
    entities_part,
    entity_pitch,
    entity_yaw,
    events_part,
    pack_event,
    snapshot_ack,
    snapshot_heads,
    state_digest,
)

__all__ = [
    "BASELINES_KEPT",
    "ENTITIES_PART_BYTES",
    "ENTITY_DTYPE",
    "ENTITY_FLAG_ALIVE",
    "JUDGEMENTS",
    "MAX_CLIENT_FRAME_BYTES",
    "MAX_CONNECT_TOKEN_CHARS",
    "MAX_EPOCH",
    "MAX_SEQ",
    "MAX_SERVER_FRAME_BYTES",
    "MAX_TICK",
    "PROTOCOL_VERSION",
    "SHOT_RESULTS",
    "SNAPSHOT_HEAD_BYTES",
    "STATE_DIGEST_BYTES",
    "U32_MAX",
    "ClientMessage",
    "ConnectTokenMessage",
    "EntityBaselines",
    "EntityCodec",
    "ErrorMessage",
    "FrameTooLarge",
    "InputMessage",
    "InvalidField",
    "JoinEvent",
    "JoinMessage",
    "LeaveEvent",
    "MalformedFrame",
    "Message",
    "MissingBaseline",
    "PingMessage",
    "PlayerValues",
    "PongMessage",
    "ProbeEchoMessage",
    "ProbeMessage",
    "ProtocolError",
    "ReadSnapshot",
    "RespawnEvent",
    "ServerFrameDecoder",
    "ServerMessage",
    "ShotEvent",
    "SightingMessage",
    "SnapshotEvent",
    "SnapshotMessage",
    "SnapshotReader",
    "StandbysMessage",
    "TokenMessage",
    "UnknownMessageType",
    "VersionMismatch",
    "WelcomeMessage",
    "decode_client",
    "decode_event",
    "decode_server",
    "encode",
    "encode_event",
    "encode_input",
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
