"""Leader election in etcd through its v3 JSON gateway (no client library, just aiohttp).

Design (the election recipe of etcd's ``concurrency`` package, reduced to one key):

* Each coordinator holds a lease (TTL 2 s, etcd's minimum with default raft timings) and
  keeps it alive every 0.5 s from a task it owns.
* The election key ``/arena/{region}/leader`` holds ``{"node", "url", "lease"}`` and is
  attached to the leader's lease, so it disappears when the leader stops keeping the lease
  alive (crash, pause, partition from etcd) or revokes it (``close``, ``depose``).
* A campaign is one transaction: create the key if its ``create_revision`` is 0 (it does not
  exist), else read it. The winner's fencing epoch is the revision of that transaction, which
  is the key's ``create_revision``: etcd's revision only ever rises, so every new leader gets
  a higher epoch than every earlier one.
* ``confirm`` is a linearizable range of the key (etcd's default for ``/v3/kv/range``): True
  only while the key still names this node with the epoch it won, on a lease that the
  keep-alive has not seen expire.

How the gateway's answers are read is :mod:`server.coordination.etcd_gateway` (sans-I/O);
requests go through :class:`~server.coordination.net.etcd_client.EtcdClient`, which moves to
the next member of the cluster when one fails, so the keep-alive outlives the member it was
talking to (etcd keeps a lease alive on every member, and a new raft leader extends them).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
from collections.abc import Sequence
from typing import Any

from server.coordination.base import (
    CoordinatorError,
    LeaderInfo,
    RegionTaken,
)
from server.coordination.etcd_config import EtcdCluster
from server.coordination.etcd_gateway import (
    GRPC_NOT_FOUND,
    ElectionHolder,
    EtcdRequestError,
    encoded,
    gateway_int,
    holder_from_range,
    holder_from_txn,
)
from server.coordination.net.etcd_client import EtcdClient
from server.logs import EventLogger

__all__ = ["EtcdCoordinator", "as_cluster"]

log = EventLogger("arena.coordination")


def as_cluster(where: EtcdCluster | str | Sequence[str]) -> EtcdCluster:
    """An :class:`EtcdCluster` from itself, members' base URLs, or one comma-separated string
    of them (``http://h1:2379,http://h2:2379``)."""
    if isinstance(where, EtcdCluster):
        return where
    members = where.split(",") if isinstance(where, str) else list(where)
    return EtcdCluster(tuple(member.strip().rstrip("/") for member in members if member.strip()))


def _region_ok(region: str) -> bool:
    return bool(region) and "/" not in region and region.isprintable() and region.strip() == region


class EtcdCoordinator:
    """Leadership of one region through an etcd 3.4+ cluster's JSON gateway."""

    kind = "etcd"
    foresight = 0.0  # a campaign asks etcd only: nothing to ask ahead of it

    def __init__(
        self,
        cluster: EtcdCluster | str | Sequence[str],
        *,
        region: str = "default",
        node_id: str = "",
        ttl: int = 2,
        keepalive_interval: float = 0.5,
        request_timeout: float = 1.0,
    ) -> None:
        if not _region_ok(region):
            raise ValueError(f"bad region {region!r}: needs a non-empty name without '/'")
        if type(ttl) is not int or ttl < 1:
            raise ValueError("etcd lease TTL must be a whole number of seconds >= 1")
        for name, value in (
            ("keep-alive interval", keepalive_interval),
            ("timeout", request_timeout),
        ):
            if not math.isfinite(value) or value <= 0:
                raise ValueError(f"etcd {name} must be a positive number of seconds")
        self.client = EtcdClient(as_cluster(cluster), request_timeout=request_timeout)
        self.region = region
        self.node_id = node_id
        self.key = f"/arena/{region}/leader"
        self.ttl = ttl
        self.keepalive_interval = keepalive_interval
        self.request_timeout = request_timeout
        self._keepalive: asyncio.Task[None] | None = None
        self._lease: int | None = None
        self._lease_deadline = 0.0  # loop time after which the lease may be gone
        self._lease_lost = False
        self._keepalive_failing = False
        self._leading: tuple[str, int, int] | None = None  # (node, epoch, lease) once won

    # -- life cycle -----------------------------------------------------------------------

    async def start(self) -> None:
        """Open the session, grant this node's lease and start keeping it alive."""
        if self.client.started:
            raise RuntimeError("etcd coordinator already started")
        await self.client.start()
        try:
            await self._grant()
        except BaseException:
            await self.client.close()
            raise
        self._keepalive = asyncio.create_task(self._keepalive_loop(), name="etcd-keepalive")

    async def close(self, *, release: bool = True) -> None:
        """Stop the keep-alive and (``release=True``) revoke the lease, deleting a held key.

        ``release=False`` walks away like a crashed process: the key stays until its lease
        expires, one TTL later.
        """
        task, self._keepalive = self._keepalive, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        lease = self._lease
        if release and lease is not None and not self._lease_lost and self.client.started:
            try:
                await self._revoke(lease)
            except CoordinatorError as exc:
                log.warning("lease_release_failed", lease=f"{lease:x}", reason=str(exc))
            else:
                if self._leading is not None:
                    log.info("leadership_released", coordinator="etcd", region=self.region)
        self._leading = None
        self._lease = None
        await self.client.close()

    # -- the interface --------------------------------------------------------------------

    async def campaign(
        self, *, node_id: str, url: str, replicated_tick: int, known_epoch: int
    ) -> int | None:
        epoch = await self._acquire(node_id, url)
        log.info(
            "campaign",
            coordinator="etcd",
            region=self.region,
            node=node_id,
            replicated_tick=replicated_tick,
            known_epoch=known_epoch,
            won=epoch is not None,
            won_epoch=epoch if epoch is not None else "-",
        )
        if epoch is not None and epoch <= known_epoch:
            await self._give_up(epoch)
            raise CoordinatorError(
                f"etcd revision {epoch} is not above the known epoch {known_epoch}: "
                "was etcd's data reset? fencing would break, refusing to lead"
            )
        return epoch

    async def claim_initial(self, *, node_id: str, url: str, known_epoch: int = 0) -> int:
        epoch = await self._acquire(node_id, url)
        loop = asyncio.get_running_loop()
        give_up = loop.time() + self.ttl + 1.0
        while epoch is None and loop.time() < give_up:
            holder = await self._read()
            if holder is not None and (holder.node, holder.url) != (node_id, url):
                break  # another node leads
            if holder is not None:
                # A previous run of this very node, whose lease has not expired yet: wait for
                # it rather than take it over, so that a standby holding the match (which
                # campaigns the moment the key goes) wins over this fresh, empty node.
                log.info(
                    "stale_self_lease", region=self.region, node=node_id, lease=f"{holder.lease:x}"
                )
                await asyncio.sleep(0.25)
            # (no holder: the lease expired between our attempt and the read; try again)
            epoch = await self._acquire(node_id, url)
        if epoch is None:
            who = await self.leader()
            shown = f"node {who[0]!r} at {who[1]} (epoch {who[2]})" if who else "another node"
            raise RegionTaken(
                f"region {self.region!r} already has a leader: {shown}; "
                "start this node as a standby",
                who[1] if who else "",
            )
        if epoch <= known_epoch:  # an etcd that lost its data: its revisions start over
            await self.step_down()
            raise CoordinatorError(
                f"etcd gave epoch {epoch}, not above {known_epoch} (the checkpoint's): was "
                "its data lost? resume with the coordinator that issued that epoch"
            )
        log.info(
            "claim_initial",
            coordinator="etcd",
            region=self.region,
            node=node_id,
            claimed_epoch=epoch,
        )
        return epoch

    def foresee_campaign(self) -> None:
        return None

    @property
    def leading(self) -> bool:
        """Whether this node still holds the key, as far as its keep-alive knows."""
        leading = self._leading
        return (
            leading is not None
            and not self._lease_lost
            and self._lease == leading[2]
            and asyncio.get_running_loop().time() < self._lease_deadline
        )

    async def confirm(self) -> bool:
        # No request per tick: a degraded primary (no standby in sync) may publish while
        # its lease, kept alive every half second, holds. Nobody else is eligible to take
        # the key from it meanwhile (docs/failover.md).
        return self.leading

    async def step_down(self) -> None:
        """Give the key back (if it is still ours), so the next campaign finds it free."""
        leading, self._leading = self._leading, None
        if leading is not None and not self._lease_lost:
            try:
                await self._delete_if(leading[1])
            except CoordinatorError as exc:
                log.warning("step_down_release_failed", coordinator="etcd", reason=str(exc))

    async def depose(self, *, node_id: str) -> None:
        holder = await self._read()
        if holder is None or holder.node != node_id:
            return
        log.info(
            "depose",
            coordinator="etcd",
            region=self.region,
            deposed=node_id,
            deposed_epoch=holder.create_revision,
            lease=f"{holder.lease:x}",
        )
        if holder.lease:
            await self._revoke(holder.lease)
        else:  # not attached to a lease (written by hand?): delete it only if unchanged
            await self._delete_if(holder.create_revision)

    async def leader(self) -> LeaderInfo | None:
        holder = await self._read()
        if holder is None:
            return None
        if not holder.node:
            raise CoordinatorError(f"etcd key {self.key} does not hold an Arena leader record")
        return holder.node, holder.url, holder.create_revision

    # -- leases ---------------------------------------------------------------------------

    async def _grant(self) -> None:
        loop = asyncio.get_running_loop()
        sent = loop.time()
        body = await self._post("lease/grant", {"TTL": str(self.ttl)})
        lease, ttl = gateway_int(body.get("ID")), gateway_int(body.get("TTL"))
        if not lease or ttl <= 0:
            raise CoordinatorError(f"etcd granted no lease: {body.get('error', 'no ID')}")
        self._lease = lease
        self._lease_deadline = sent + ttl
        self._lease_lost = False
        log.debug("lease_granted", lease=f"{lease:x}", ttl_s=ttl)

    async def _ensure_lease(self) -> int:
        if not self.client.started:
            raise RuntimeError("etcd coordinator not started: call start() first")
        if (
            self._lease is None
            or self._lease_lost
            or asyncio.get_running_loop().time() >= self._lease_deadline
        ):
            await self._grant()
        assert self._lease is not None
        return self._lease

    def _mark_lost(self, lease: int, reason: str) -> None:
        if lease != self._lease or self._lease_lost:
            return
        self._lease_lost = True
        if self._leading is not None:
            node, epoch, _ = self._leading
            self._leading = None
            log.warning(
                "leadership_lost",
                coordinator="etcd",
                region=self.region,
                node=node,
                held_epoch=epoch,
                reason=reason,
            )
        else:
            log.info("lease_lost", lease=f"{lease:x}", reason=reason)

    async def _keepalive_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(self.keepalive_interval)
            lease = self._lease
            if lease is None or self._lease_lost:
                continue  # a new lease is granted by the next campaign
            sent = loop.time()
            try:
                body = await self._post("lease/keepalive", {"ID": str(lease)})
            except CoordinatorError as exc:
                if not self._keepalive_failing:
                    self._keepalive_failing = True
                    log.warning("keepalive_failing", lease=f"{lease:x}", reason=str(exc))
                if loop.time() >= self._lease_deadline:
                    self._mark_lost(lease, "keepalive_failed")
                continue
            if self._keepalive_failing:
                self._keepalive_failing = False
                log.info("keepalive_recovered", lease=f"{lease:x}")
            result = body.get("result")
            try:
                ttl = gateway_int(result.get("TTL")) if isinstance(result, dict) else 0
            except (TypeError, ValueError):
                ttl = 0  # not an answer we understand: do not count on the lease
            if ttl <= 0:  # the lease is gone: expired, or revoked by a depose
                self._mark_lost(lease, "lease_expired")
            elif lease == self._lease:
                self._lease_deadline = sent + ttl

    async def _revoke(self, lease: int) -> None:
        try:
            await self._post("lease/revoke", {"ID": str(lease)})
        except EtcdRequestError as exc:
            if exc.code != GRPC_NOT_FOUND:
                raise  # "requested lease not found": already gone, which is what we want
        if lease == self._lease:
            self._mark_lost(lease, "revoked")

    # -- the election key -----------------------------------------------------------------

    async def _acquire(self, node_id: str, url: str) -> int | None:
        """One campaign transaction; the epoch when this node holds the key, else None."""
        if not node_id:
            raise ValueError("empty node id: every node of a region needs its own id")
        for attempt in (1, 2):
            lease = await self._ensure_lease()
            value = json.dumps({"node": node_id, "url": url, "lease": lease}, sort_keys=True)
            key = encoded(self.key)
            try:
                body = await self._post(
                    "kv/txn",
                    {
                        "compare": [{"key": key, "target": "CREATE", "create_revision": "0"}],
                        "success": [
                            {
                                "request_put": {
                                    "key": key,
                                    "value": encoded(value),
                                    "lease": str(lease),
                                }
                            }
                        ],
                        "failure": [{"request_range": {"key": key}}],
                    },
                )
            except EtcdRequestError as exc:
                if exc.code == GRPC_NOT_FOUND and attempt == 1:
                    self._mark_lost(lease, "lease_expired")  # our lease vanished: new one, again
                    continue
                raise
            if body.get("succeeded"):
                epoch = gateway_int(body.get("header", {}).get("revision"))
            else:
                holder = holder_from_txn(body)
                if holder is None or (holder.node, holder.lease) != (node_id, lease):
                    return None
                epoch = holder.create_revision  # ours already: a retried campaign
            self._leading = (node_id, epoch, lease)
            return epoch
        return None

    async def _give_up(self, epoch: int) -> None:
        self._leading = None
        await self._delete_if(epoch)

    async def _delete_if(self, create_revision: int) -> None:
        key = encoded(self.key)
        await self._post(
            "kv/txn",
            {
                "compare": [
                    {"key": key, "target": "CREATE", "create_revision": str(create_revision)}
                ],
                "success": [{"request_delete_range": {"key": key}}],
            },
        )

    async def _read(self) -> ElectionHolder | None:
        if not self.client.started:
            raise RuntimeError("etcd coordinator not started: call start() first")
        body = await self._post("kv/range", {"key": encoded(self.key)})
        return holder_from_range(body.get("kvs"))

    # -- HTTP -----------------------------------------------------------------------------

    @property
    def endpoint(self) -> str:
        """The etcd member this coordinator talks to now."""
        return self.client.endpoint

    async def _post(self, path: str, payload: dict[str, Any]) -> dict[str, Any]:
        if not self.client.started:
            raise RuntimeError("etcd coordinator not started: call start() first")
        return await self.client.post(path, payload)
