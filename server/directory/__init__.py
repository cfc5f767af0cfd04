"""The regional directory: where nodes register and players are told where to play.

Sans-I/O core (import freely, no aiohttp, no clock of its own): :mod:`.policy` (the routing
decision), :mod:`.registry` (nodes, liveness, epochs, outstanding seats), :mod:`.listing`
(``GET /regions``), :mod:`.reservations` (signed seat tokens; the node's check on join),
:mod:`.auth` (heartbeat signatures, and the guard that refuses copies), :mod:`.service` (the
request logic, ``Directory``) and :mod:`.metrics`; :mod:`.etcd_state` keeps the registry and
reservations in etcd instead, for several directories at once. The HTTP edge is
:mod:`.net.app` (``create_app``; etcd's client: :mod:`.net.etcd`) and the command line
:mod:`.net.cli` (``arena-directory``). The wire messages are :mod:`shared.directory`'s, the
same classes the bots use; ``docs/routing.md`` describes the API.

A node heartbeats with::

    beat = Heartbeat(node_id="eu-1", region="eu", endpoint="ws://10.0.0.5:7777/ws",
                     probe="http://10.0.0.5:7777/health", role="primary", epoch=1,
                     matches=1, players=12, capacity=300)
    sequence = HeartbeatSequence(time.time())        # once per process
    body, headers = signed_heartbeat(secret, beat, now=time.time(), sequence=sequence.next())

and checks a joining player's reservation with
``check_reservation(secret, token, node_id, time.time(), player=name, claims=ledger)``.
"""

from __future__ import annotations

from server.directory.auth import (
    DEV_SECRET,
    SIGNATURE_HEADER,
    HeartbeatSequence,
    sign,
    signed_heartbeat,
)
from server.directory.reservations import (
    ClaimLedger,
    Reservation,
    ReservationError,
    check_reservation,
    issue,
    verify,
)
from shared.directory import Heartbeat, HeartbeatAck, MessageError

__all__ = [
    "DEV_SECRET",
    "SIGNATURE_HEADER",
    "ClaimLedger",
    "Heartbeat",
    "HeartbeatAck",
    "HeartbeatSequence",
    "MessageError",
    "Reservation",
    "ReservationError",
    "check_reservation",
    "issue",
    "sign",
    "signed_heartbeat",
    "verify",
]
