"""The numbers every UDP peer must agree on, and the refusal vocabulary.

Sizes follow netcode.io's rules (its STANDARD.md): a connection request is padded to a
fixed size of at least 1,000 bytes, so that no reply to an address that has not answered
its challenge can be larger than what that address sent; no datagram's UDP payload is
larger than 1,200 bytes, which crosses every path's MTU, tunnels included.
"""

from __future__ import annotations

__all__ = [
    "CAUSES",
    "KEY_BYTES",
    "MAX_PAYLOAD",
    "PROTOCOL_ID",
    "PROTOCOL_VERSION",
    "REPLAY_WINDOW",
    "REQUEST_SIZE",
    "RESEND_INTERVAL_S",
    "Refused",
]

#: The largest UDP payload any datagram of this protocol carries.
MAX_PAYLOAD = 1200

#: Identifies Arena's datagrams (bound into every token's associated data), and the version
#: of the layouts in :mod:`shared.datagram.packets`.
PROTOCOL_ID = 0x4152454E41554450  # "ARENAUDP"
PROTOCOL_VERSION = 1

#: A connection request's exact size: larger than every reply before the challenge is answered.
REQUEST_SIZE = 1000

#: Every key (region key, session keys, per-connection keys) is 256 bits.
KEY_BYTES = 32

#: Sequences a receiver remembers: a duplicate inside it or an older sequence is dropped.
REPLAY_WINDOW = 256

#: How often handshake packets are resent, and the channel's keep-alive interval.
RESEND_INTERVAL_S = 0.1

#: Why a datagram was dropped; each is counted, none is ever answered.
CAUSES = (
    "bad_size",
    "bad_version",
    "expired",
    "bad_token",
    "not_listed",
    "replayed",
    "bad_challenge",
    "out_of_window",
    "pending_full",
    "unknown_address",
    "bad_packet",
)


class Refused(Exception):
    """A peer's datagram or token failed a check. ``cause`` is one of :data:`CAUSES`; it is
    for counting and logs, never sent back (a refusal is never answered)."""

    def __init__(self, cause: str) -> None:
        if cause not in CAUSES:
            raise ValueError(f"unknown refusal cause {cause!r}")
        super().__init__(cause)
        self.cause = cause
