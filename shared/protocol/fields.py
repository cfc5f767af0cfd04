"""The protocol's limits. Its fields are checked with the validators every message family
shares (:mod:`shared.schema`); the protocol's decoders raise their failures as
:class:`~shared.protocol.errors.InvalidField`."""

from __future__ import annotations

from shared.schema import MAX_EPOCH

__all__ = [
    "MAX_ARRAY_LEN",
    "MAX_CLIENT_FRAME_BYTES",
    "MAX_EPOCH",
    "MAX_MAP_LEN",
    "MAX_SEQ",
    "MAX_SERVER_FRAME_BYTES",
    "MAX_TICK",
    "PROTOCOL_VERSION",
    "U32_MAX",
]

PROTOCOL_VERSION = 2
MAX_CLIENT_FRAME_BYTES = 1024  # an input is ~120 bytes; anything near this is abuse
MAX_SERVER_FRAME_BYTES = 1 << 20  # 1 MiB: ~40,000 entities; a node caps players far below
#: The most keys a decoded map and the most elements a decoded array may hold (either way).
MAX_MAP_LEN = 64
MAX_ARRAY_LEN = 4096

U32_MAX = 2**32 - 1
#: An input's highest ``seq``; numbers never wrap (a client there rejoins, for a new seat:
#: 414 days of inputs at 60 Hz). Kept within int32, so every language's client counts it.
MAX_SEQ = 2**31 - 1
MAX_TICK = 2**53  # exact in a float64, so tick / rate stays exact enough for centuries
