"""The regional directory's wire messages, each defined once for every side that speaks them.

JSON over HTTP; ``docs/routing.md`` is the spec. Nodes send a :class:`Heartbeat` and read a
:class:`HeartbeatAck` (:mod:`.nodes`); players read a :class:`RegionListing`, send a
:class:`SeatRequest` and read a :class:`Seat` (:mod:`.players`); every refusal is an
:class:`ErrorAnswer` (:mod:`.common`). The directory (``server/directory``) builds and
parses the same classes, so the two sides cannot drift apart.

Each message is a frozen, slotted dataclass validated on construction (h11's events): a
value that does not fit raises :class:`MessageError` (a ``ValueError``) with a ``code`` and
one line naming the field. ``parse(document)`` builds a message from decoded JSON and
``to_json()`` gives back the document with the wire's field names and order. Requests
(:class:`Heartbeat`, :class:`SeatRequest`) are decoded strictly: unknown fields are refused,
so a typo cannot pass silently. Answers ignore fields they do not know, so a newer directory
may add one without breaking older nodes and bots.

Signatures are not made here: they need the cluster secret, which bots never hold
(``server.directory.auth`` signs heartbeats).
"""

from __future__ import annotations

from shared.directory.common import (
    MAX_CLAIMED,
    ROLES,
    STATUSES,
    ErrorAnswer,
    MessageError,
    NodeStatus,
    Role,
    directory_urls,
)
from shared.directory.nodes import Heartbeat, HeartbeatAck
from shared.directory.players import (
    NodeSummary,
    RegionListing,
    RegionSummary,
    Seat,
    SeatRequest,
)

__all__ = [
    "MAX_CLAIMED",
    "ROLES",
    "STATUSES",
    "ErrorAnswer",
    "Heartbeat",
    "HeartbeatAck",
    "MessageError",
    "NodeStatus",
    "NodeSummary",
    "RegionListing",
    "RegionSummary",
    "Role",
    "Seat",
    "SeatRequest",
    "directory_urls",
]
