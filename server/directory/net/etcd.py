"""The directory's registry and reservations in etcd (``arena-directory --registry etcd://``).

The edge of :mod:`server.directory.etcd_state`: it sends that module's transactions to etcd's
v3 JSON gateway with aiohttp and keeps the leases; :class:`EtcdDirectory` answers requests
with :class:`~server.directory.service.Directory`'s checks, policy and answers around it. No
state of its own matters: every directory pointed at the same etcd answers the same, and
one dying loses nothing but the requests it was answering (which clients send to the next).

Leases: a node's (heartbeat timeout rounded up, >= 2 s) is granted by the directory that
first hears the node and kept alive by every beat it answers; a directory hearing a node
whose lease it does not know grants a new one (the old one, then unused, expires). The
reservations share a lease per second (:class:`~server.directory.etcd_state.LeaseBucket`).
A lease that vanished under a request (``requested lease not found``) is granted anew and
the request tried again.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import random
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from server.coordination.base import CoordinatorError, CoordinatorUnavailable
from server.coordination.etcd_config import EtcdCluster
from server.coordination.etcd_gateway import (
    GRPC_NOT_FOUND,
    EtcdRequestError,
    gateway_int,
    range_op,
    txn_body,
)
from server.coordination.net.etcd import as_cluster
from server.coordination.net.etcd_client import EtcdClient
from server.directory.etcd_state import (
    GroupState,
    KeyLayout,
    LeaseBucket,
    Snapshot,
    delete_txns,
    heartbeat_outcome,
    heartbeat_result,
    heartbeat_txn,
    node_lease_ttl,
    read_snapshot,
    reserve_result,
    reserve_txn,
    snapshot_txn,
    to_settle,
)
from server.directory.policy import Placement
from server.directory.registry import HeartbeatOutcome
from server.directory.reservations import reservation_id
from server.directory.service import Answer, Directory
from server.logs import EventLogger
from shared.directory import Heartbeat, SeatRequest

__all__ = ["EtcdDirectory", "EtcdRegistry"]

log = EventLogger("arena.directory")

# A transaction whose comparison failed is built again from what it read; more failures
# than this in a row mean etcd is changing faster than one request can follow.
_ATTEMPTS = 16
_CONFLICT_JITTER_S = 0.002


class EtcdRegistry:
    """The shared registry: heartbeats recorded, snapshots read, seats taken, in etcd.

    ``clock``: monotonic seconds, for the reservation lease's one-second buckets only.
    """

    def __init__(
        self,
        cluster: EtcdCluster | str | Sequence[str],
        *,
        heartbeat_timeout: float,
        reservation_ttl: float,
        request_timeout: float = 2.0,
        layout: KeyLayout | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = EtcdClient(as_cluster(cluster), request_timeout=request_timeout)
        self.heartbeat_timeout = heartbeat_timeout
        self.node_ttl = node_lease_ttl(heartbeat_timeout)
        self.request_timeout = request_timeout
        self.layout = layout or KeyLayout()
        self.clock = clock
        self._bucket = LeaseBucket(reservation_ttl)
        self._node_leases: dict[str, int] = {}
        self._groups: dict[tuple[str, str], GroupState] = {}

    async def start(self) -> None:
        """Open the session and make sure etcd answers (:class:`CoordinatorUnavailable`
        with one line when it does not)."""
        if self.client.started:
            raise RuntimeError("etcd registry already started")
        await self.client.start()
        try:
            await self._post("kv/txn", txn_body([], [range_op(self.layout.nodes)]))
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        """Close the session; leases are left to expire (nodes keep beating elsewhere)."""
        await self.client.close()

    # -- heartbeats -------------------------------------------------------------------------

    async def record(self, beat: Heartbeat, now: float) -> HeartbeatOutcome:
        """Store ``beat`` (received at unix time ``now``) and settle what it claims."""
        layout = self.layout
        lease = await self._node_lease(beat.node_id)
        key = (beat.region, beat.group_key)
        group = self._groups.get(key, GroupState(0, 0))
        for _ in range(_ATTEMPTS):
            body = heartbeat_txn(
                layout,
                beat,
                expires_at=now + self.heartbeat_timeout,
                lease=lease,
                group=group,
                claimed=beat.claimed or (),
            )
            try:
                answer = await self._post("kv/txn", body)
            except EtcdRequestError as error:
                if error.code != GRPC_NOT_FOUND:
                    raise
                self._node_leases.pop(beat.node_id, None)  # expired between two beats
                lease = await self._node_lease(beat.node_id)
                continue
            result = heartbeat_result(answer, beat, group)
            if isinstance(result, GroupState):
                group = result  # another member's beat came first: again, from what it wrote
                continue
            self._groups[key] = result.group
            settled = to_settle(beat, result)
            for txn in delete_txns(layout, beat.node_id, settled):
                await self._post("kv/txn", txn)
            return heartbeat_outcome(beat, group, result, settled, now)
        raise CoordinatorUnavailable(f"group {key[1]!r} changed under {_ATTEMPTS} heartbeats")

    async def _node_lease(self, node_id: str) -> int:
        """The node's lease, kept alive by this call (a new one if it expired or is unknown)."""
        lease = self._node_leases.get(node_id)
        if lease is not None:
            body = await self._post("lease/keepalive", {"ID": str(lease)})
            result = body.get("result")
            if isinstance(result, dict) and gateway_int(result.get("TTL")) > 0:
                return lease
        lease = await self._grant(self.node_ttl)
        self._node_leases[node_id] = lease
        return lease

    async def _grant(self, ttl: int) -> int:
        body = await self._post("lease/grant", {"TTL": str(ttl)})
        lease = gateway_int(body.get("ID"))
        if not lease:
            raise CoordinatorError(f"etcd at {self.client.endpoint} granted no lease")
        return lease

    # -- seats --------------------------------------------------------------------------------

    async def snapshot(self, player: str | None = None) -> Snapshot:
        """Every node, group epoch and reservation (and ``player``'s), at one revision."""
        snapshot = read_snapshot(
            self.layout, await self._post("kv/txn", snapshot_txn(self.layout, player))
        )
        if snapshot.unreadable:
            log.warning(
                "etcd_records_unreadable", count=snapshot.unreadable, etcd=self.client.endpoint
            )
        return snapshot

    async def reserve(
        self,
        snapshot: Snapshot,
        placement: Placement,
        *,
        rid: str,
        player: str,
        expires_at: float,
    ) -> Snapshot | None:
        """Take the seat ``placement`` chose if the node's seats are as ``snapshot`` saw them:
        None when taken, else a fresh snapshot to choose again from."""
        now = self.clock()
        lease = self._bucket.current(now)
        if lease is None:
            lease = await self._grant(self._bucket.ttl_s)
            self._bucket.granted(lease, now)
        body = reserve_txn(
            self.layout,
            snapshot,
            node_id=placement.node_id,
            rid=rid,
            player=player,
            region=placement.region,
            expires_at=expires_at,
            lease=lease,
        )
        try:
            answer = await self._post("kv/txn", body)
        except EtcdRequestError as error:
            if error.code != GRPC_NOT_FOUND:
                raise
            # The shared lease or the node's is gone: a new one, and a fresh look.
            self._bucket.forget()
            return await self.snapshot(player)
        return reserve_result(self.layout, answer)

    # -- HTTP ---------------------------------------------------------------------------------

    @property
    def endpoint(self) -> str:
        """The etcd member this registry talks to now."""
        return self.client.endpoint

    async def _post(self, path: str, payload: dict[str, Any]) -> dict[str, Any]:
        if not self.client.started:
            raise RuntimeError("etcd registry not started: call start() first")
        return await self.client.post(path, payload)


class EtcdDirectory:
    """The directory's requests answered over the shared registry: ``directory`` checks,
    chooses and answers; ``registry`` stores. Any error reaching etcd is a 503
    ``unavailable`` (the client asks the next directory)."""

    def __init__(self, directory: Directory, registry: EtcdRegistry) -> None:
        self.directory = directory
        self.registry = registry
        self.seat_conflicts = 0  # seats another directory took first (fencing at work)
        # One seat decision at a time per directory: its own requests would otherwise all
        # choose the same least-loaded node and fail each other's comparisons. Fencing by
        # revision is for the other directories.
        self._seating = asyncio.Lock()

    async def heartbeat(self, body: bytes, headers: Mapping[str, str], remote: str = "-") -> Answer:
        directory = self.directory
        beat = directory.admit(body, headers, remote)
        if not isinstance(beat, Heartbeat):
            return beat
        try:
            outcome = await self.registry.record(beat, directory.wall())
        except CoordinatorError as error:
            return directory.unavailable("heartbeat", str(error))
        return directory.acknowledge(beat, outcome)

    async def seat(self, document: object) -> Answer:
        directory = self.directory
        request = directory.seat_request(document)
        if not isinstance(request, SeatRequest):
            return request
        try:
            async with self._seating:
                return await self._seat(request)
        except CoordinatorError as error:
            return directory.unavailable("seat", str(error))

    async def _seat(self, request: SeatRequest) -> Answer:
        directory = self.directory
        snapshot = await self.registry.snapshot(request.player)
        player = request.player

        def tie_break(node_id: str) -> str:
            return hashlib.blake2b(f"{player}\0{node_id}".encode(), digest_size=8).hexdigest()

        for _ in range(_ATTEMPTS):
            wall = directory.wall()
            decision = directory.place(request, snapshot.views(wall), wall, tie_break)
            if not isinstance(decision, Placement):
                return decision
            token = directory.token(request, decision, wall)
            fresh = await self.registry.reserve(
                snapshot,
                decision,
                rid=reservation_id(token),
                player=request.player,
                expires_at=round(wall + directory.config.reservation_ttl, 3),
            )
            if fresh is None:
                return directory.granted(request, decision, token, wall)
            self.seat_conflicts += 1
            log.debug("seat_conflict", node=decision.node_id, player=request.player)
            snapshot = fresh
            # Another directory took a seat there first: choose again from what it wrote,
            # after a pause short enough not to let it take the next one first every time
            # but jittered, so that two directories do not keep colliding in step.
            await asyncio.sleep(random.uniform(0, _CONFLICT_JITTER_S))
        return directory.unavailable("seat", f"seats changed under {_ATTEMPTS} attempts")

    async def regions(self) -> Answer:
        directory = self.directory
        try:
            snapshot = await self.registry.snapshot()
        except CoordinatorError as error:
            return directory.unavailable("regions", str(error))
        wall = directory.wall()
        return 200, directory.listing(snapshot.views(wall), wall)

    async def health(self) -> Answer:
        directory = self.directory
        shared = {"registry": "etcd", "etcd": self.registry.endpoint}  # the member in use
        try:
            snapshot = await self.registry.snapshot()
        except CoordinatorError as error:
            return 503, {"status": "unavailable", "reason": str(error), **shared}
        wall = directory.wall()
        health = directory.health_of(snapshot.views(wall), wall, len(snapshot.nodes))
        return 200, {**health, **shared, "seat_conflicts": self.seat_conflicts}

    async def refresh_gauges(self) -> None:
        """The per-region gauges from a fresh snapshot (left as they were if etcd is away)."""
        with contextlib.suppress(CoordinatorError):
            snapshot = await self.registry.snapshot()
            wall = self.directory.wall()
            self.directory.gauges_of(snapshot.views(wall), wall)
