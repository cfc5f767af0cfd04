"""Escalating hold-offs for what keeps ending in offences: a seat, a source address (sans-I/O).

A connection closed for offences costs its sender a wait before it is served again, and each
further close doubles the wait up to a cap: a client that reconnects as fast as it can to
start afresh gains nothing from it, and one that offends once and behaves waits a second.
:class:`HoldOffs` keeps, per key, the closes counted and when the current wait ends; it
holds at most ``capacity`` keys (the least recently closed are forgotten first), so a flood
of sources costs bounded memory. A key whose wait ended ``forget_after`` seconds ago starts
again at the first wait. Time is a parameter: the caller says what time it is (seconds of
any monotonic clock).
"""

from __future__ import annotations

import collections
import ipaddress
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["HoldOffPolicy", "HoldOffs", "address_key"]

Key = TypeVar("Key", bound=Hashable)


@dataclass(frozen=True, slots=True)
class HoldOffPolicy:
    """The wait after the n-th close: ``first * 2 ** (n - 1)`` seconds, at most ``cap``."""

    first: float
    cap: float
    #: A key with no close for this long after its wait ended starts again at ``first``
    #: (infinite: never; a seat's record lives as long as the seat).
    forget_after: float = float("inf")

    def __post_init__(self) -> None:
        if not 0 < self.first <= self.cap:
            raise ValueError(f"a hold-off needs 0 < first <= cap, not {self.first}, {self.cap}")
        if not self.forget_after >= 0:
            raise ValueError("forget_after must not be negative")

    def wait(self, closes: int) -> float:
        """The hold-off after the ``closes``-th close (1 for the first)."""
        return min(self.first * 2.0 ** min(closes - 1, 64), self.cap)


@dataclass(slots=True)
class _Record:
    closes: int
    until: float  # when the current wait ends


class HoldOffs(Generic[Key]):
    """Per key: closes for offences and the wait they earned, at most ``capacity`` keys."""

    def __init__(self, policy: HoldOffPolicy, capacity: int = 4096) -> None:
        if capacity < 1:
            raise ValueError("a hold-off table holds at least one key")
        self.policy = policy
        self.capacity = capacity
        self._records: collections.OrderedDict[Key, _Record] = collections.OrderedDict()

    def __len__(self) -> int:
        return len(self._records)

    def close(self, key: Key, now: float) -> float:
        """``key``'s connection was closed for offences at ``now``: its wait starts (the
        next one, doubled, unless it was forgotten); returns the wait in seconds."""
        record = self._records.pop(key, None)
        closes = 1
        if record is not None and now - record.until < self.policy.forget_after:
            closes = record.closes + 1
        wait = self.policy.wait(closes)
        self._records[key] = _Record(closes, now + wait)
        if len(self._records) > self.capacity:
            self._records.popitem(last=False)  # the least recently closed
        return wait

    def remaining(self, key: Key, now: float) -> float:
        """Seconds ``key`` still waits at ``now`` (0: it may be served)."""
        record = self._records.get(key)
        return 0.0 if record is None else max(0.0, record.until - now)

    def closes(self, key: Key) -> int:
        """Closes for offences counted for ``key`` (0: none, or forgotten)."""
        record = self._records.get(key)
        return 0 if record is None else record.closes

    def forget(self, key: Key) -> None:
        self._records.pop(key, None)


def address_key(address: str | None) -> str | None:
    """What a source address is held off by: the address itself for IPv4, its /64 for
    IPv6 (one subscriber's allocation: a host holds a whole /64 and could otherwise walk
    it), None when the peer's address is unknown (then nothing is held off)."""
    if not address:
        return None
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)
