"""Peers prove they know the cluster secret before they may replicate (sans-I/O).

Challenge and response: the primary opens every ``/replicate`` link with a fresh random
nonce (:func:`new_nonce`, sent as a ``challenge``); the standby answers with a ``hello``
whose MAC covers every field of the hello (node id, epoch, tick, configuration
fingerprint, the URL players are told, its promise) and that nonce, under the purpose of
replication hellos (``server/signing.py``, which also versions it). The primary checks the
MAC against the nonce it issued on that link, so a hello recorded on one link is refused
on every other, and a hello changed in any field (its URL, say) is refused everywhere. No
clock is involved. The secret never travels.
"""

from __future__ import annotations

import dataclasses
import os
import secrets

import msgpack

from server import signing
from server.replication.messages import NONCE_CHARS, ConfigFingerprint, Hello
from server.signing import SECRET_ENV

__all__ = ["SECRET_ENV", "load_secret", "new_nonce", "sign_hello", "verify_hello"]


def new_nonce() -> str:
    """A challenge's nonce: never issued before, unguessable."""
    return secrets.token_hex(NONCE_CHARS // 2)


def _hello_mac(secret: bytes, hello: Hello, nonce: str) -> str:
    # Every field but the MAC itself, in field order, then the nonce: msgpack's
    # length-prefixed encoding keeps the fields apart (no separator to smuggle in).
    values = [getattr(hello, f.name) for f in dataclasses.fields(hello) if f.name != "mac"]
    signed = [dataclasses.astuple(v) if isinstance(v, ConfigFingerprint) else v for v in values]
    message = msgpack.packb([*signed, nonce], use_bin_type=True)
    return signing.mac(secret, signing.Purpose.REPLICATION_HELLO, message).hex()


def sign_hello(
    secret: bytes,
    nonce: str,
    *,
    node: str,
    epoch: int,
    tick: int,
    fingerprint: ConfigFingerprint,
    url: str,
    promise: float = 0.0,
) -> Hello:
    """A standby's hello, the answer to the challenge that carried ``nonce``."""
    unsigned = Hello(node, epoch, tick, fingerprint, url, "-", float(promise))
    return dataclasses.replace(unsigned, mac=_hello_mac(secret, unsigned, nonce))


def verify_hello(secret: bytes, hello: Hello, nonce: str) -> bool:
    """The hello was signed with ``secret``, as it is, for the challenge of ``nonce``."""
    return signing.matches(_hello_mac(secret, hello, nonce), hello.mac)


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
