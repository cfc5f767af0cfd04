"""The embedded coordinator: standbys agree on a new primary by asking each other's /peer.

No extra process, no quorum. The rule (:func:`decide_campaign`) is pure and deterministic, so
standbys that see the same peers reach the same verdict:

1. a reachable peer reporting ``role=primary`` at an epoch ``>= known_epoch`` is alive, and
   blocks the campaign (a paused or dead primary simply does not answer within the timeout);
2. among the reachable standbys and this node, the highest ``replicated_tick`` wins, then the
   lowest node id;
3. the winner's epoch is ``max(known_epoch, every epoch seen, every epoch this node ever
   used) + 1``; the epochs used are kept on disk (:mod:`server.coordination.epochs`).

Only a node that is *eligible* (it holds every tick shown: it is in the primary's commit
set) campaigns, and only once the primary's lease from it has run out, so a paused,
partitioned or deposed primary has gone silent by itself before anyone takes over
(``docs/failover.md``). A node that ended up with a live primary's ``/peer`` answering
while it campaigned simply follows it again.
"""

from __future__ import annotations

import asyncio
import math
import ssl
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

import aiohttp

from server.coordination.base import CoordinatorError, LeaderInfo, RegionTaken
from server.coordination.epochs import EpochStore
from server.coordination.net.peers import ask_peers
from server.logs import EventLogger
from server.replication.roles import Role

__all__ = ["PeerHealth", "PeerPoll", "StaticCoordinator", "decide_campaign", "parse_health"]

log = EventLogger("arena.coordination")

#: Roles a node reports in ``/peer`` (a starting one answers 503 until it is ready).
ROLES = frozenset(role.value for role in Role)
#: A claim waits for a silent peer: asked again this often, said in the log this often.
SILENT_PEER_RETRY_S = 0.2
SILENT_PEER_LOG_S = 10.0


@dataclass(frozen=True, slots=True)
class PeerHealth:
    """What one peer's ``GET /peer`` said about it."""

    url: str
    node: str
    role: str
    epoch: int
    replicated_tick: int
    eligible: bool = True  # a standby that holds every tick shown (may be promoted)

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
    """Validate a ``/peer`` JSON body; :class:`ValueError` (one line) when it is not one."""
    if not isinstance(body, dict):
        raise ValueError("peer health: body is not a JSON object")
    node, role = body.get("node"), body.get("role")
    if not isinstance(node, str) or not isinstance(role, str):
        raise ValueError("peer health: 'node' and 'role' must be strings")
    epoch, tick = body.get("epoch"), body.get("replicated_tick")
    if type(epoch) is not int or type(tick) is not int:
        raise ValueError("peer health: 'epoch' and 'replicated_tick' must be integers")
    eligible = body.get("eligible", True)
    if type(eligible) is not bool:
        raise ValueError("peer health: 'eligible' must be true or false")
    return PeerHealth(
        url=url, node=node, role=role, epoch=epoch, replicated_tick=tick, eligible=eligible
    )


def decide_campaign(
    *, node_id: str, replicated_tick: int, known_epoch: int, peers: Iterable[PeerHealth]
) -> int | None:
    """The static election rule over the peers that answered in time (sans-I/O).

    The caller is eligible (it holds every tick shown); only eligible standbys compete.
    Returns this node's new epoch when it wins, ``None`` when another node should lead.
    """
    seen = [p for p in peers if p.node != node_id]
    if any(p.role == "primary" and p.epoch >= known_epoch for p in seen):
        return None  # the primary is alive after all
    candidates = [(replicated_tick, node_id)]
    candidates += [(p.replicated_tick, p.node) for p in seen if p.role == "standby" and p.eligible]
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


@dataclass(frozen=True, slots=True)
class PeerPoll:
    """One round of ``/peer`` questions: who answered, and who may be alive but did not
    answer in time (a refused connection means nothing listens there: not counted)."""

    answered: list[PeerHealth]
    silent: list[str]


class StaticCoordinator:
    """Leader election among peers that know each other's base URLs.

    ``peers`` may include this node's own URL: answers naming ``node_id`` are ignored.
    ``timeout`` bounds every round of ``/peer`` requests (they run concurrently).
    ``epochs`` keeps the highest epoch this node used across restarts.
    """

    kind = "static"

    def __init__(
        self,
        node_id: str,
        peers: Sequence[str],
        *,
        timeout: float = 0.05,
        epochs: EpochStore | None = None,
        tls: ssl.SSLContext | bool = True,
    ) -> None:
        if not node_id:
            raise ValueError("empty node id: every node of a region needs its own id")
        if not math.isfinite(timeout) or timeout <= 0:
            raise ValueError("static coordinator timeout must be a positive number of seconds")
        self.node_id = node_id
        self.peers: tuple[str, ...] = tuple(dict.fromkeys(_check_peer_url(u) for u in peers))
        self.timeout = timeout
        self.epochs = epochs or EpochStore("", "", node_id)
        self.tls = tls  # how an https:// peer's certificate is checked (True: system CAs)
        self._session: aiohttp.ClientSession | None = None
        self._leading: tuple[str, int] | None = None  # (url, epoch) once this node won
        #: The round of questions started ahead of a campaign (:meth:`foresee_campaign`),
        #: with the loop time it started.
        self._foreseen: tuple[float, asyncio.Task[PeerPoll]] | None = None

    @property
    def foresight(self) -> float:
        """One round of ``/peer`` questions: started that long before the primary's silence
        counts, its answers are in when the campaign needs them."""
        return self.timeout

    @property
    def leading(self) -> bool:
        return self._leading is not None

    async def start(self) -> None:
        if self._session is None:
            try:  # a damaged file or a folder we cannot write stops the node, with one line
                self.epochs.load()
                self.epochs.check_writable()
            except (OSError, ValueError) as error:
                raise CoordinatorError(str(error)) from None
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0, ssl=self.tls),
                timeout=aiohttp.ClientTimeout(total=self.timeout),
            )

    async def close(self) -> None:
        self._leading = None
        self._drop_foreseen()
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    def foresee_campaign(self) -> None:
        self._drop_foreseen()
        loop = asyncio.get_running_loop()
        self._foreseen = (loop.time(), loop.create_task(self.poll()))

    def _drop_foreseen(self) -> None:
        foreseen, self._foreseen = self._foreseen, None
        if foreseen is not None and not foreseen[1].done():
            foreseen[1].cancel()

    async def _campaign_poll(self) -> PeerPoll:
        """The round started ahead of this campaign if it is recent (begun no longer ago
        than twice the foresight: the silence counted after it started), else a new one."""
        foreseen, self._foreseen = self._foreseen, None
        if foreseen is not None:
            started, task = foreseen
            if asyncio.get_running_loop().time() - started <= 2 * self.foresight:
                return await task
            task.cancel()
        return await self.poll()

    async def campaign(
        self, *, node_id: str, url: str, replicated_tick: int, known_epoch: int
    ) -> int | None:
        peers = (await self._campaign_poll()).answered
        epoch = decide_campaign(
            node_id=node_id,
            replicated_tick=replicated_tick,
            known_epoch=max(known_epoch, self.epochs.load()),
            peers=peers,
        )
        log.info(
            "campaign",
            coordinator="static",
            node=node_id,
            replicated_tick=replicated_tick,
            known_epoch=known_epoch,
            peers_answered=len(peers),
            peers=len(self.peers),
            won=epoch is not None,
            won_epoch=epoch if epoch is not None else "-",
        )
        if epoch is not None:
            self.epochs.save(epoch)
            self._leading = (url, epoch)
        return epoch

    async def confirm(self) -> bool:
        # Static has nobody to ask: a degraded primary (no standby in sync) publishes on
        # its own record, which is safe because no other node is eligible to take over.
        return self._leading is not None

    async def step_down(self) -> None:
        self._leading = None

    async def depose(self, *, node_id: str) -> None:
        # Nothing to revoke: the silent primary's lease from its standbys has expired
        # before any of them campaigns (docs/failover.md).
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

    async def claim_initial(self, *, node_id: str, url: str, known_epoch: int = 0) -> int:
        """Lead a new match, unless the region already has one: a peer that leads, or a
        peer that holds a match (it may take over; this node would start an empty one).
        Waits first while a peer is silent (:meth:`_poll_until_none_silent`)."""
        poll = await self._poll_until_none_silent(node_id)
        others = [p for p in poll.answered if p.node != node_id]
        for p in others:
            if p.role == "primary":
                raise RegionTaken(
                    f"region already has a primary: node {p.node!r} at {p.url} (epoch "
                    f"{p.epoch}); start this node as a standby (--role standby --primary "
                    f"{p.url})",
                    p.url,
                )
            if p.replicated_tick > 0:
                raise RegionTaken(
                    f"node {p.node!r} at {p.url} holds the region's match (tick "
                    f"{p.replicated_tick}); start this node as a standby so it can take over",
                    p.url,
                )
        epoch = max([self.epochs.load(), known_epoch, *(p.epoch for p in others)]) + 1
        self.epochs.save(epoch)
        self._leading = (url, epoch)
        return epoch

    async def _poll_until_none_silent(self, node_id: str) -> PeerPoll:
        """Ask the peers until none is silent. A peer that is bound but does not answer
        may lead (paused, or cut off from this node while it serves its players): a match
        claimed or resumed from a checkpoint beside it would be a second primary, and the
        ticks it showed since the checkpoint would be lost. A starting peer answers within
        moments; one that never does keeps this node waiting, said every
        :data:`SILENT_PEER_LOG_S`."""
        poll = await self.poll()
        loop = asyncio.get_running_loop()
        said_at = -math.inf
        while poll.silent:
            if loop.time() - said_at >= SILENT_PEER_LOG_S:
                said_at = loop.time()
                log.warning(
                    "claim_waits_for_silent_peer",
                    coordinator="static",
                    node=node_id,
                    peer=poll.silent[0],
                    why="bound but not answering: it may lead; this node claims once it "
                    "answers or nothing listens there",
                )
            await asyncio.sleep(SILENT_PEER_RETRY_S)
            poll = await self.poll()
        return poll

    async def poll_peers(self) -> list[PeerHealth]:
        """Ask every peer's ``/peer`` at once; those that fail or are late are left out."""
        return (await self.poll()).answered

    async def poll(self) -> PeerPoll:
        """Ask every peer's ``/peer`` at once (see :class:`PeerPoll`)."""
        session = self._session
        if session is None:
            raise RuntimeError("static coordinator not started: call start() first")
        answers, silent = await ask_peers(session, self.peers, self.timeout)
        answered = []
        for url, body in answers:
            try:
                found = parse_health(url, body)
            except ValueError as exc:
                silent.append(url)
                log.debug("peer_unanswered", peer=url, reason=str(exc))
                continue
            if found.node != self.node_id:
                answered.append(found)
        return PeerPoll(answered, silent)
