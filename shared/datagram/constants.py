"""The numbers every UDP peer must agree on, and the refusal vocabulary.

Sizes follow netcode.io's rules (its STANDARD.md): a connection request is padded to a
fixed size of at least 1,000 bytes, so that no reply to an address that has not answered
its challenge can be larger than what that address sent; no datagram's UDP payload is
larger than 1,200 bytes, which crosses every path's MTU, tunnels included.
"""

from __future__ import annotations

__all__ = [
    "CAUSES",
    "CAUSE_MEANINGS",
    "KEY_BYTES",
    "LINK_CAUSE_MEANINGS",
    "MAX_PAYLOAD",
    "PROTOCOL_ID",
    "PROTOCOL_VERSION",
    "REDUNDANCY",
    "REPLAY_WINDOW",
    "REQUEST_SIZE",
    "RESEND_INTERVAL_S",
    "TIMEOUT_S",
    "TOKEN_EXPIRES_IN_S",
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

#: How long a connect token may start a handshake (netcode.io's tokens live seconds): a
#: failover within it reconnects with the same token, and a node sends a seated client a
#: new one at half of it; a client that holds no live token asks for another.
TOKEN_EXPIRES_IN_S = 30.0

#: Seconds without an authentic datagram after which either side gives a connection up
#: (a token's ``timeout_s``, unless its issuer says otherwise).
TIMEOUT_S = 5.0

#: The most unacknowledged REDUNDANT payloads a datagram repeats (a client's inputs).
REDUNDANCY = 16

#: Why a datagram was dropped, and what each cause means; each is counted, none is ever
#: answered.
CAUSE_MEANINGS = {
    "bad_size": "a datagram of a size its kind never has (a request not exactly "
    "REQUEST_SIZE bytes, a response not RESPONSE_SIZE, a channel packet shorter than its "
    "header and tag or over MAX_PAYLOAD), or a private token of the wrong size",
    "bad_version": "a request whose version or protocol id is not this protocol's",
    "expired": "a connect token past its expiry, or a response after its challenge's "
    "deadline (the token's timeout_s after the request)",
    "bad_token": "a private token that does not open under the region's key (forged, "
    "altered, or another region's)",
    "not_listed": "a token that does not list this node's address",
    "replayed": "a token id this node already accepted, or a channel sequence already received",
    "bad_challenge": "a response whose challenge token this node did not seal for this "
    "address and request",
    "out_of_window": "a channel sequence REPLAY_WINDOW or more below the newest received",
    "pending_full": "a request while the table of challenged addresses is full",
    "unknown_address": "a response, payload or disconnect from an address with no "
    "challenge or connection",
    "bad_packet": "an unknown kind, a request whose padding is not zeros, a packet that "
    "does not authenticate under its key, or a body that does not parse",
}
CAUSES = tuple(CAUSE_MEANINGS)

#: Causes a node adds above the protocol's checks, for a connected address.
LINK_CAUSE_MEANINGS = {
    "flooding": "a connected address whose inputs flood (more than ten seconds of its "
    "budget dropped in a second): its datagrams are dropped unopened for 0.25 s",
}


class Refused(Exception):
    """A peer's datagram or token failed a check. ``cause`` is one of :data:`CAUSES`; it is
    for counting and logs, never sent back (a refusal is never answered)."""

    def __init__(self, cause: str) -> None:
        if cause not in CAUSES:
            raise ValueError(f"unknown refusal cause {cause!r}")
        super().__init__(cause)
        self.cause = cause
