"""Arena's UDP transport, sans-I/O: connect tokens, the handshake, sealed packets and the
three-lane channel (see each module). Only :mod:`.mmsg` touches a socket, and it is not
imported here: ``from shared.datagram.mmsg import send_batch, receive_batch``.

* :mod:`.constants` sizes, versions and the refusal causes;
* :mod:`.sealing` the AEADs (a packet's sequence is its nonce);
* :mod:`.packets` the packet kinds and their byte layouts;
* :mod:`.tokens` connect tokens (issued over HTTPS, opened by any node of the region);
* :mod:`.handshake` request, challenge, response: no amplification, no state per spoofed
  address;
* :mod:`.channel` UNRELIABLE, REDUNDANT and RELIABLE payloads with acks and a replay window.
"""

from __future__ import annotations

from shared.datagram.channel import Channel, Lane
from shared.datagram.constants import CAUSES, MAX_PAYLOAD, Refused
from shared.datagram.handshake import ClientHandshake, Established, HandshakeStep, ServerHandshake
from shared.datagram.tokens import (
    ConnectToken,
    PrivateToken,
    issue_connect_token,
    open_private_token,
)

__all__ = [
    "CAUSES",
    "MAX_PAYLOAD",
    "Channel",
    "ClientHandshake",
    "ConnectToken",
    "Established",
    "HandshakeStep",
    "Lane",
    "PrivateToken",
    "Refused",
    "ServerHandshake",
    "issue_connect_token",
    "open_private_token",
]
