"""The embedded coordinator: standbys agree on a new primary by asking each other's /health.

No extra process, no quorum. The rule (:func:`decide_campaign`) is pure and deterministic, so
standbys that see the same peers reach the same verdict:

1. a reachable peer reporting ``role=primary`` at an epoch ``>= known_epoch`` is alive, and
   blocks the campaign (a paused or dead primary simply does not answer within the timeout);
2. among the reachable standbys and this node, the highest ``replicated_tick`` wins, then the
   lowest node id;
3. the winner's epoch is ``max(known_epoch, every epoch seen) + 1``.

Limits, stated plainly: the static coordinator cannot tell a dead primary from a partitioned
one, and it cannot stop a partitioned primary from publishing. Under a network partition both
sides can believe they lead; whoever meets both resolves it by the higher epoch. ``confirm``
therefore cannot verify anything and answers from this node's own record.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

import aiohttp

from server.coordination.base import LeaderInfo
from server.replication.roles import Role

__all__ = ["PeerHealth", "StaticCoordinator", "decide_campaign", "parse_health"]

log = logging.getLogger("arena.coordination")

#: Roles a node reports in ``/health`` (a starting one answers 503 until it is ready).
ROLES = frozenset(role.value for role in Role)


@dataclass(frozen=True, slots=True)
class PeerHealth:
    """What one peer's ``GET /health`` said about it."""

    url: str
    node: str
    role: str
    epoch: int
    replicated_tick: int

    def __post_init__(self) -> None:
        if not self.node:
            raise ValueError("peer health: empty node id")
        if self.role not in ROLES:
            raise ValueError(f"peer health: unknown role {self.role!r}")
        for name in ("epoch", "replicated_tick"):
            value = getattr(self, name)
            if type(value) is not int or value < 0:
                raise ValueError(f"peer health: {name} must be a non-negative integer")


def parse_health(url: str, body: object) -> PeerHealth:
    """Validate a ``/health`` JSON body; :class:`ValueError` (one line) when it is not one."""
    if not isinstance(body, dict):
        raise ValueError("peer health: body is not a JSON object")
    node, role = body.get("node"), body.get("role")
    if not isinstance(node, str) or not isinstance(role, str):
        raise ValueError("peer health: 'node' and 'role' must be strings")
    epoch, tick = body.get("epoch"), body.get("replicated_tick")
    if type(epoch) is not int or type(tick) is not int:
        raise ValueError("peer health: 'epoch' and 'replicated_tick' must be integers")
    return PeerHealth(url=url, node=node, role=role, epoch=epoch, replicated_tick=tick)


def decide_campaign(
    *, node_id: str, replicated_tick: int, known_epoch: int, peers: Iterable[PeerHealth]
) -> int | None:
    """The static election rule over the peers that answered in time (sans-I/O).

    Returns this node's new epoch when it wins, ``None`` when another node should lead.
    """
    seen = [p for p in peers if p.node != node_id]
    if any(p.role == "primary" and p.epoch >= known_epoch for p in seen):
        return None  # the primary is alive after all
    candidates = [(replicated_tick, node_id)]
    candidates += [(p.replicated_tick, p.node) for p in seen if p.role == "standby"]
    _, winner = min(candidates, key=lambda c: (-c[0], c[1]))
    if winner != node_id:
        return None
    return max([known_epoch, *(p.epoch for p in seen)]) + 1


def _check_peer_url(url: str) -> str:
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = None
    if parts.scheme not in ("http", "https") or not parts.hostname or port is None:
        raise ValueError(f"bad peer URL {url!r}: expected http://HOST:PORT")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ValueError(f"bad peer URL {url!r}: give the node's base URL, no path")
    return url.rstrip("/")


class StaticCoordinator:
    """Leader election among peers that know each other's base URLs.

    ``peers`` may include this node's own URL: answers naming ``node_id`` are ignored.
    ``timeout`` bounds every round of ``/health`` requests (they run concurrently).
    """

    kind = "static"

    def __init__(self, node_id: str, peers: Sequence[str], *, timeout: float = 0.1) -> None:
        if not node_id:
            raise ValueError("empty node id: every node of a region needs its own id")
        if not math.isfinite(timeout) or timeout <= 0:
            raise ValueError("static coordinator timeout must be a positive number of seconds")
        self.node_id = node_id
        self.peers: tuple[str, ...] = tuple(dict.fromkeys(_check_peer_url(u) for u in peers))
        self.timeout = timeout
        self._session: aiohttp.ClientSession | None = None
        self._leading: tuple[str, int] | None = None  # (url, epoch) once this node won

    async def start(self) -> None:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0),
                timeout=aiohttp.ClientTimeout(total=self.timeout),
            )

    async def close(self) -> None:
        self._leading = None
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    async def campaign(
        self, *, node_id: str, url: str, replicated_tick: int, known_epoch: int
    ) -> int | None:
        peers = await self.poll_peers()
        epoch = decide_campaign(
            node_id=node_id,
            replicated_tick=replicated_tick,
            known_epoch=known_epoch,
            peers=peers,
        )
        log.info(
            "event=campaign coordinator=static node=%s replicated_tick=%d known_epoch=%d "
            "peers_answered=%d/%d won=%s epoch=%s",
            node_id,
            replicated_tick,
            known_epoch,
            len(peers),
            len(self.peers),
            epoch is not None,
            epoch if epoch is not None else "-",
        )
        if epoch is not None:
            self._leading = (url, epoch)
        return epoch

    async def confirm(self) -> bool:
        # Static cannot verify anything: a partitioned primary would answer True as well.
        # This only says that this node won leadership through this coordinator.
        return self._leading is not None

    async def depose(self, *, node_id: str) -> None:
        # Nothing to revoke: the silent primary keeps believing it leads until it meets a
        # higher epoch (see the module docstring).
        return None

    async def leader(self) -> LeaderInfo | None:
        peers = await self.poll_peers()
        known = [(p.epoch, p.node, p.url) for p in peers if p.role == "primary"]
        if self._leading is not None:
            known.append((self._leading[1], self.node_id, self._leading[0]))
        if not known:
            return None
        epoch, node, url = max(known, key=lambda k: (k[0], k[1]))
        return node, url, epoch

    async def claim_initial(self, *, node_id: str, url: str) -> int:
        peers = await self.poll_peers()
        epoch = max([0, *(p.epoch for p in peers if p.node != node_id)]) + 1
        live = [p for p in peers if p.role == "primary" and p.node != node_id]
        if live:
            log.warning(
                "event=claim_over_live_primary coordinator=static node=%s other=%s "
                "other_epoch=%d epoch=%d",
                node_id,
                live[0].node,
                live[0].epoch,
                epoch,
            )
        self._leading = (url, epoch)
        return epoch

    async def poll_peers(self) -> list[PeerHealth]:
        """Ask every peer's ``/health`` at once; those that fail or are late are left out."""
        session = self._session
        if session is None:
            raise RuntimeError("static coordinator not started: call start() first")
        results: list[PeerHealth | None] = [None] * len(self.peers)

        async def ask(i: int, url: str) -> None:
            try:
                async with asyncio.timeout(self.timeout):
                    async with session.get(url + "/health") as response:
                        if response.status != 200:
                            raise ValueError(f"HTTP {response.status}")
                        body = await response.json(content_type=None)
                results[i] = parse_health(url, body)
            except (TimeoutError, aiohttp.ClientError, ValueError) as exc:
                log.debug("event=peer_unanswered peer=%s reason=%s", url, type(exc).__name__)

        async with asyncio.TaskGroup() as group:
            for i, url in enumerate(self.peers):
                group.create_task(ask(i, url))
        return [r for r in results if r is not None and r.node != self.node_id]
