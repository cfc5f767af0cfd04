"""The region's connect tokens: which UDP addresses a token lists, and the token itself.

``POST /connect`` issues one (:mod:`server.net.udp.connect`), and the endpoint sends each
seated player a fresh one at half the life of the last (:mod:`server.net.udp.endpoint`):
one function for both, reading only what it needs of the node.
"""

from __future__ import annotations

from typing import Protocol
from urllib.parse import urlsplit

from shared.datagram import ConnectToken, issue_connect_token
from shared.datagram.constants import TIMEOUT_S, TOKEN_EXPIRES_IN_S
from shared.datagram.tokens import MAX_ADDRESSES

__all__ = [
    "CONNECT_TIMEOUT_S",
    "CONNECT_TOKEN_TTL_S",
    "RegionNode",
    "region_addresses",
    "region_connect_token",
]

#: How long a connect token may start a handshake (netcode.io's tokens live seconds): a
#: seated client is sent a new one at half of it (``connect_token``), so a failover finds
#: a live token; one that holds none (not seated that long) asks again.
CONNECT_TOKEN_TTL_S = TOKEN_EXPIRES_IN_S
#: A connected client silent this long is gone (the channel's time-out).
CONNECT_TIMEOUT_S = TIMEOUT_S
Address = tuple[str, int]


class RegionNode(Protocol):
    """What a token is made of: the region's key, this node's UDP address, its peers."""

    udp_key: bytes
    udp_address: Address

    def peer_urls(self) -> list[str]: ...


def region_addresses(own: Address, peer_urls: list[str]) -> list[Address]:
    """The UDP addresses a token lists: ``own`` first, then each peer's host at its URL's
    port (a node's UDP port is its TCP port's number unless ``--udp-port`` says
    otherwise)."""
    addresses = [own]
    for url in peer_urls:
        parts = urlsplit(url)
        if not parts.hostname:
            continue
        port = parts.port or (443 if parts.scheme in ("https", "wss") else 80)
        if (parts.hostname, port) not in addresses:
            addresses.append((parts.hostname, port))
    return addresses[:MAX_ADDRESSES]


def region_connect_token(node: RegionNode, user_data: bytes, now: float) -> ConnectToken:
    """A connect token for the region (``POST /connect``'s, and each renewal the endpoint
    sends a seated player): sealed under the region key, listing this node's UDP address,
    then its peers'."""
    return issue_connect_token(
        node.udp_key,
        user_data=user_data,
        addresses=region_addresses(node.udp_address, node.peer_urls()),
        now=now,
        expires_in_s=CONNECT_TOKEN_TTL_S,
        timeout_s=CONNECT_TIMEOUT_S,
    )
