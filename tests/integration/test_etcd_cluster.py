"""The etcd clients against a real three-member etcd cluster: the member a leader talks to
dies, and the leader (a coordinator, and a real ``arena-server``) keeps its lease, its key
and its epoch on the other two; the directory's registry carries on too.

Losing a follower costs nothing but the reconnection, with the default 2 s lease. Losing
etcd's raft leader also costs an election (1-2 s with etcd's default timings), during which
no member answers a keep-alive: a lease of 5 s (``--etcd-lease-ttl 5``) rides it out.
"""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request

import pytest

from launch.health import node_health
from launch.nodes import running_node
from server.coordination.etcd_config import EtcdCluster
from server.coordination.net import EtcdCoordinator, make_coordinator
from server.directory.net.etcd import EtcdRegistry
from shared.directory import Heartbeat
from tests.integration.etcd import LocalEtcdCluster, etcd_cluster

__all__ = ["etcd_cluster"]  # the fixture, re-exported so pytest finds it

pytestmark = pytest.mark.integration

#: Longer than the lease's TTL and a raft election together.
WATCH_S = 6.0
#: The lease each case needs (the raft leader's loss: longer than an election and a
#: keep-alive interval together).
TTL_S = {"raft_leader": 5, "follower": 2}


async def hold_for(coordinator: EtcdCoordinator, seconds: float) -> list[float]:
    """Check every 0.1 s for ``seconds`` that ``coordinator`` still leads; the loop times at
    which it did not (empty when it held throughout)."""
    loop = asyncio.get_running_loop()
    lapses: list[float] = []
    end = loop.time() + seconds
    while loop.time() < end:
        if not coordinator.leading:
            lapses.append(loop.time())
        await asyncio.sleep(0.1)
    return lapses


def raft_leader_first(cluster: LocalEtcdCluster) -> None:
    """Order ``cluster.members`` with etcd's raft leader first (the hardest member to lose:
    its death also costs an election)."""

    def status(url: str) -> tuple[int, int]:
        request = urllib.request.Request(url + "/v3/maintenance/status", data=b"{}")
        with urllib.request.urlopen(request, timeout=2) as answer:
            body = json.loads(answer.read())
        return int(body["header"]["member_id"]), int(body["leader"])

    ids = {url: status(url) for url in cluster.urls}
    cluster.members.sort(key=lambda m: ids[m.url][0] != ids[m.url][1])


def wait_for_a_raft_leader(urls: list[str], limit: float = 10.0) -> None:
    """Block until a member of ``urls`` reports a raft leader (after one was killed)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        for url in urls:
            try:
                with urllib.request.urlopen(url + "/health", timeout=0.5) as answer:
                    if json.loads(answer.read()).get("health") == "true":
                        return
            except (OSError, ValueError):
                pass
        time.sleep(0.1)
    raise AssertionError(f"no raft leader among {urls} within {limit:g} s")


@pytest.mark.parametrize("lost", ["raft_leader", "follower"])
async def test_a_leader_keeps_its_lease_when_its_etcd_member_dies(
    etcd_cluster: LocalEtcdCluster, lost: str
) -> None:
    raft_leader_first(etcd_cluster)
    if lost == "follower":
        etcd_cluster.members.append(etcd_cluster.members.pop(0))
    ttl = TTL_S[lost]
    leader = make_coordinator(etcd_cluster.address, node_id="a", region="test", etcd_lease_ttl=ttl)
    rival = make_coordinator(etcd_cluster.address, node_id="b", region="test")
    assert isinstance(leader, EtcdCoordinator) and isinstance(rival, EtcdCoordinator)
    await leader.start()
    await rival.start()
    try:
        epoch = await leader.claim_initial(node_id="a", url="http://a")
        lease = leader._lease
        talking_to = leader.endpoint
        assert talking_to == etcd_cluster.urls[0]

        etcd_cluster.members[0].kill()
        assert await hold_for(leader, WATCH_S) == []
        assert leader.endpoint != talking_to  # it moved to another member
        assert leader.client.switches >= 1
        assert leader._lease == lease and not leader._lease_lost
        assert await leader.confirm() is True
        assert await rival.leader() == ("a", "http://a", epoch)
        won = await rival.campaign(
            node_id="b", url="http://b", replicated_tick=10**6, known_epoch=epoch
        )
        assert won is None  # the key is still a's: nothing expired

        # and a second loss (no quorum left) fails safe: within a TTL of the last keep-alive
        # the last member answered (before it noticed it had lost the quorum), no confirm.
        etcd_cluster.members[1].kill()
        async with asyncio.timeout(ttl + 6.0):
            while await leader.confirm():
                await asyncio.sleep(0.1)
        assert leader.leading is False
    finally:
        await leader.close(release=False)
        await rival.close(release=False)


async def test_a_node_whose_first_member_is_down_starts_on_the_next(
    etcd_cluster: LocalEtcdCluster,
) -> None:
    etcd_cluster.members[0].kill()
    await asyncio.to_thread(wait_for_a_raft_leader, etcd_cluster.urls[1:])
    coordinator = make_coordinator(etcd_cluster.address, node_id="a", region="test")
    assert isinstance(coordinator, EtcdCoordinator)
    await coordinator.start()
    try:
        epoch = await coordinator.claim_initial(node_id="a", url="http://a")
        assert epoch > 0
        assert coordinator.endpoint in etcd_cluster.urls[1:]
        assert await hold_for(coordinator, 3.0) == []
        assert await coordinator.confirm() is True
    finally:
        await coordinator.close()


async def test_a_primary_node_keeps_its_role_and_epoch_when_its_etcd_member_dies(
    etcd_cluster: LocalEtcdCluster,
) -> None:
    """A real ``arena-server`` with no standby (so it asks etcd's word before every tick):
    the raft leader it talks to is killed, and it stays primary at the same epoch."""
    raft_leader_first(etcd_cluster)
    async with running_node(
        "--node-id", "a", "--log-level", "warning", "--tick-rate", "30",
        "--coordinator", etcd_cluster.address, "--etcd-lease-ttl", "5",
    ) as node:  # fmt: skip
        before = await node_health(node.url)
        assert before is not None and before["role"] == "primary"
        etcd_cluster.members[0].kill()
        loop = asyncio.get_running_loop()
        end = loop.time() + WATCH_S
        while loop.time() < end:
            health = await node_health(node.url, within=2.0)
            assert health is not None
            assert (health["role"], health["epoch"]) == ("primary", before["epoch"])
            await asyncio.sleep(0.2)


async def test_the_directorys_registry_carries_on_when_its_etcd_member_dies(
    etcd_cluster: LocalEtcdCluster,
) -> None:
    registry = EtcdRegistry(
        EtcdCluster.from_address(etcd_cluster.address), heartbeat_timeout=5.0, reservation_ttl=10.0
    )
    beat = Heartbeat(
        node_id="eu-1", region="eu", endpoint="ws://127.0.0.1:9/ws",
        probe="http://127.0.0.1:9/health", role="primary", epoch=1, matches=1, players=0,
        capacity=10,
    )  # fmt: skip
    await registry.start()
    try:
        await registry.record(beat, time.time())
        talking_to = registry.endpoint
        next(m for m in etcd_cluster.members if m.url == talking_to).kill()
        await asyncio.to_thread(
            wait_for_a_raft_leader, [u for u in etcd_cluster.urls if u != talking_to]
        )
        await registry.record(beat, time.time())
        assert registry.endpoint != talking_to
        snapshot = await registry.snapshot()
        assert list(snapshot.nodes) == ["eu-1"]
    finally:
        await registry.close()
