"""The regional directory: where nodes register and players are told where to play.

Sans-I/O core (import freely, no aiohttp): :mod:`.policy` (the routing decision),
:mod:`.registry` (nodes, liveness, epochs, outstanding seats), :mod:`.reservations` (signed
seat tokens and request signatures). The HTTP edge is :mod:`.app` (``create_app``) and the
command line :mod:`.cli` (``arena-directory``). ``docs/routing.md`` describes the API.

A node heartbeats with::

    beat = Heartbeat(node_id="eu-1", region="eu", endpoint="ws://10.0.0.5:7777/ws",
                     probe="http://10.0.0.5:7777/health", role="primary", epoch=1,
                     matches=1, players=12, capacity=300)
    body, headers = beat.signed(secret)        # POST body + X-Arena-Signature

and checks a joining player's reservation with ``verify(secret, token, node_id, time.time())``.
"""

from __future__ import annotations

from server.directory.policy import (
    NoCapacity,
    NodeView,
    RegionView,
    Seat,
    choose,
    routable_nodes,
)
from server.directory.registry import Heartbeat, HeartbeatAck, HeartbeatError, Registry
from server.directory.reservations import (
    DEV_SECRET,
    SIGNATURE_HEADER,
    Reservation,
    ReservationError,
    check_signature,
    issue,
    sign,
    verify,
)

__all__ = [
    "DEV_SECRET",
    "SIGNATURE_HEADER",
    "Heartbeat",
    "HeartbeatAck",
    "HeartbeatError",
    "NoCapacity",
    "NodeView",
    "RegionView",
    "Registry",
    "Reservation",
    "ReservationError",
    "Seat",
    "check_signature",
    "choose",
    "issue",
    "routable_nodes",
    "sign",
    "verify",
]
