"""The cluster's request signatures: how a node proves a heartbeat is its own, and new.

A heartbeat carries three headers besides its body: ``X-Arena-Node`` (the node id),
``X-Arena-Time`` (when it was signed, unix milliseconds) and ``X-Arena-Sequence`` (a number
that rises with every beat of the node). ``X-Arena-Signature`` is the lowercase hex
HMAC-SHA256, with the cluster secret, of ``"arena-heartbeat-v2\\0" NODE "\\n" TIME "\\n"
SEQUENCE "\\n"`` followed by the raw body bytes (``docs/routing.md``). Signing the time and
the sequence is what lets the directory refuse a captured heartbeat sent again
(:class:`ReplayGuard`): a copy carries the same sequence, or a time long past, and neither
can be changed without the secret.

:func:`sign` is the plain MAC of a body (``Purpose.REQUEST_BODY``: no prefix, so
``openssl dgst -hmac`` gives the same value), for requests that need no freshness.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

from server import signing
from shared.directory import Heartbeat

__all__ = [
    "DEV_SECRET",
    "NODE_HEADER",
    "SEQUENCE_HEADER",
    "SIGNATURE_HEADER",
    "TIME_HEADER",
    "HeartbeatSequence",
    "ReplayGuard",
    "Stamp",
    "check_heartbeat_signature",
    "check_signature",
    "sign",
    "sign_heartbeat",
    "signed_heartbeat",
    "stamp_from_headers",
]

SIGNATURE_HEADER = "X-Arena-Signature"
NODE_HEADER = "X-Arena-Node"
TIME_HEADER = "X-Arena-Time"
SEQUENCE_HEADER = "X-Arena-Sequence"
# The fixed, published secret ``arena-directory --insecure-dev-secret`` uses: for a laptop
# and tests only. Anyone can forge heartbeats and reservations with it.
DEV_SECRET = "arena-insecure-development-secret-do-not-deploy"

_MAX_INT64 = 2**63 - 1
_DIGITS = re.compile(r"[0-9]{1,19}")


@dataclass(frozen=True, slots=True)
class Stamp:
    """What makes a heartbeat unique: its node, when it was signed (unix ms) and its place
    in the node's sequence."""

    node_id: str
    time_ms: int
    sequence: int

    def message(self, body: bytes) -> bytes:
        """The bytes the heartbeat's MAC covers."""
        return f"{self.node_id}\n{self.time_ms}\n{self.sequence}\n".encode() + body


def sign(secret: bytes | str, body: bytes) -> str:
    """Hex HMAC-SHA256 of a request body alone."""
    return signing.mac(secret, signing.Purpose.REQUEST_BODY, body).hex()


def check_signature(secret: bytes | str, body: bytes, signature: str | None) -> bool:
    """True when ``signature`` is :func:`sign` of ``body`` (either case); constant-time."""
    if not signature:
        return False
    return signing.matches(sign(secret, body), signature.strip().lower())


def sign_heartbeat(secret: bytes | str, body: bytes, stamp: Stamp) -> str:
    """Hex HMAC-SHA256 of a heartbeat: its stamp and its body."""
    return signing.mac(secret, signing.Purpose.HEARTBEAT, stamp.message(body)).hex()


def check_heartbeat_signature(
    secret: bytes | str, body: bytes, stamp: Stamp, signature: str | None
) -> bool:
    """True when ``signature`` is :func:`sign_heartbeat` of ``body`` and ``stamp``."""
    if not signature:
        return False
    return signing.matches(sign_heartbeat(secret, body, stamp), signature.strip().lower())


def _header_int(headers: Mapping[str, str], name: str) -> int:
    raw = headers.get(name)
    if raw is None:
        raise ValueError(f"missing {name} header")
    if not _DIGITS.fullmatch(raw.strip()) or int(raw) > _MAX_INT64:
        raise ValueError(f"{name} must be a whole number from 0 to 2**63-1")
    return int(raw)


def stamp_from_headers(headers: Mapping[str, str]) -> Stamp:
    """A heartbeat's stamp from its request headers; ValueError (one line) when one is
    missing or not a number."""
    node_id = headers.get(NODE_HEADER)
    if not node_id:
        raise ValueError(f"missing {NODE_HEADER} header")
    return Stamp(node_id, _header_int(headers, TIME_HEADER), _header_int(headers, SEQUENCE_HEADER))


def signed_heartbeat(
    secret: bytes | str, beat: Heartbeat, *, now: float, sequence: int
) -> tuple[bytes, dict[str, str]]:
    """``(body, headers)`` for ``POST /nodes/heartbeat``, signed with the cluster secret at
    unix time ``now`` as the ``sequence``-th beat (:class:`HeartbeatSequence`)."""
    body = beat.encode()
    stamp = Stamp(beat.node_id, int(now * 1000), sequence)
    headers = {
        "Content-Type": "application/json",
        NODE_HEADER: stamp.node_id,
        TIME_HEADER: str(stamp.time_ms),
        SEQUENCE_HEADER: str(stamp.sequence),
        SIGNATURE_HEADER: sign_heartbeat(secret, body, stamp),
    }
    return body, headers


class HeartbeatSequence:
    """A node's heartbeat sequence numbers: seeded from the wall clock (microseconds) when
    the node starts, then one more per beat, so that a restarted node's first beat is above
    every beat of its previous run (it would need a million beats a second to catch up with
    the clock) and the directory accepts it without remembering anything across restarts."""

    def __init__(self, now: float) -> None:
        self._next = int(now * 1_000_000)

    def next(self) -> int:
        value = self._next
        self._next += 1
        return value


class ReplayGuard:
    """Refuses a heartbeat that is not new: signed outside ``window`` seconds of the
    directory's clock (``stale``), or not above the last sequence accepted from its node
    (``replayed``). Sans-I/O: the caller passes the directory's unix time ``now``.

    A node is forgotten ``2 * window`` after its last accepted beat: by then any copy of one
    of its beats is stale anyway, so the memory stays bounded by the nodes heard recently.
    """

    def __init__(self, window: float) -> None:
        if not math.isfinite(window) or window <= 0:
            raise ValueError("the heartbeat window must be a positive number of seconds")
        self.window = window
        self.refused = {"stale": 0, "replayed": 0}
        self._last: dict[str, tuple[int, float]] = {}  # node -> (sequence, when accepted)
        self._pruned_at = -math.inf

    def check(self, stamp: Stamp, now: float) -> str | None:
        """None (and the sequence remembered) when the beat is new, else why it is not."""
        self._prune(now)
        if abs(now - stamp.time_ms / 1000.0) > self.window:
            self.refused["stale"] += 1
            return "stale"
        last = self._last.get(stamp.node_id)
        if last is not None and stamp.sequence <= last[0]:
            self.refused["replayed"] += 1
            return "replayed"
        self._last[stamp.node_id] = (stamp.sequence, now)
        return None

    def __len__(self) -> int:
        return len(self._last)

    def _prune(self, now: float) -> None:
        if now - self._pruned_at < self.window:
            return
        self._pruned_at = now
        horizon = now - 2 * self.window
        for node in [node for node, (_, seen) in self._last.items() if seen < horizon]:
            del self._last[node]
