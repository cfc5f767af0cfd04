"""Peers prove they know the cluster secret before they may replicate (sans-I/O).

A standby opens the replication link with a ``hello`` whose MAC covers its node id, epoch
and a timestamp; the primary refuses a missing or wrong MAC, or one older than
``MAX_SKEW_S`` (a replayed hello). The secret never travels.
"""

from __future__ import annotations

import os
import secrets

from server import signing
from server.replication.messages import ConfigFingerprint, Hello
from server.signing import SECRET_ENV

__all__ = ["MAX_SKEW_S", "SECRET_ENV", "load_secret", "sign_hello", "verify_hello"]

MAX_SKEW_S = 30.0


def _hello_mac(secret: bytes, node: str, epoch: int, timestamp: float) -> str:
    message = f"{node}|{epoch}|{timestamp:.6f}".encode()
    return signing.mac(secret, signing.Purpose.REPLICATION_HELLO, message).hex()


def sign_hello(
    secret: bytes,
    *,
    node: str,
    epoch: int,
    tick: int,
    fingerprint: ConfigFingerprint,
    url: str,
    now: float,
    promise: float = 0.0,
) -> Hello:
    """A standby's hello, signed now."""
    mac = _hello_mac(secret, node, epoch, now)
    return Hello(node, epoch, tick, fingerprint, url, now, mac, float(promise))


def verify_hello(secret: bytes, hello: Hello, now: float) -> bool:
    """The hello was signed with ``secret`` within ``MAX_SKEW_S`` of ``now``."""
    if abs(now - hello.ts) > MAX_SKEW_S:
        return False
    return signing.matches(_hello_mac(secret, hello.node, hello.epoch, hello.ts), hello.mac)


def load_secret(value: str | None) -> bytes:
    """The cluster secret from the command line or ``$ARENA_CLUSTER_SECRET``.

    A lone node may run without one: it gets a random secret, so nothing it signs can be
    used anywhere else. Nodes of one region must share theirs.
    """
    chosen = value if value is not None else os.environ.get(SECRET_ENV)
    if chosen is None:
        return secrets.token_bytes(32)
    if len(chosen) < 16:
        raise ValueError(f"the cluster secret must be at least 16 characters (${SECRET_ENV})")
    return chosen.encode()
