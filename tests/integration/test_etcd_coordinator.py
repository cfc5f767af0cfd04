"""The etcd coordinator against a real etcd (started per test on free ports, see etcd.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from server.coordination import CoordinatorError, CoordinatorUnavailable
from server.coordination.net import EtcdCoordinator, make_coordinator
from tests.integration.etcd import EtcdProcess, etcd_binary, etcd_process, etcd_url

__all__ = ["etcd_process", "etcd_url"]  # fixtures, re-exported so pytest finds them

pytestmark = pytest.mark.integration

Factory = Callable[..., Awaitable[EtcdCoordinator]]


@pytest.fixture
async def coordinators(etcd_url: str) -> AsyncIterator[Factory]:
    """``await make()`` -> a started coordinator on the test's etcd; all closed afterwards."""
    made: list[EtcdCoordinator] = []

    async def make(**kwargs: object) -> EtcdCoordinator:
        c = EtcdCoordinator(etcd_url, region="test", **kwargs)  # type: ignore[arg-type]
        await c.start()
        made.append(c)
        return c

    try:
        yield make
    finally:
        for c in made:
            await c.close()


async def wait_until(predicate: Callable[[], Awaitable[bool]], limit: float) -> float:
    """Poll ``predicate`` every 0.1 s; the seconds it took (fails the test past ``limit``)."""
    loop = asyncio.get_running_loop()
    began = loop.time()
    async with asyncio.timeout(limit):
        # Polling is the point: the state lives in etcd, there is no event to wait on.
        while not await predicate():
            await asyncio.sleep(0.1)
    return loop.time() - began


async def test_claim_campaign_depose_and_fencing(coordinators: Factory) -> None:
    a, b = await coordinators(), await coordinators()
    epoch_a = await a.claim_initial(node_id="a", url="http://a")
    assert epoch_a > 0
    assert await a.confirm() is True
    assert await b.leader() == ("a", "http://a", epoch_a)

    # While a holds the key, b cannot win, whatever it has replicated.
    assert (
        await b.campaign(node_id="b", url="http://b", replicated_tick=10**6, known_epoch=epoch_a)
        is None
    )
    assert await b.confirm() is False
    assert await a.confirm() is True

    # b saw a fall silent: depose a, then campaign.
    await b.depose(node_id="b")  # names someone else: nothing happens
    assert await a.confirm() is True
    await b.depose(node_id="a")
    epoch_b = await b.campaign(node_id="b", url="http://b", replicated_tick=7, known_epoch=epoch_a)
    assert epoch_b is not None and epoch_b > epoch_a
    assert await b.confirm() is True
    assert await a.leader() == ("b", "http://b", epoch_b)

    # a is fenced: its next keep-alive finds the lease revoked, and it confirms no more
    # (no request per tick: confirm reads what the keep-alive learnt).
    await wait_until(lambda: _refuses(a), limit=1.5)
    await asyncio.sleep(1.2)
    assert await a.confirm() is False
    assert a._lease_lost  # the keep-alive saw the revoked lease
    # and a cannot take the key back while b holds it
    assert (
        await a.campaign(node_id="a", url="http://a", replicated_tick=0, known_epoch=epoch_b)
        is None
    )
    assert await b.confirm() is True


async def test_campaign_is_idempotent_for_the_holder(coordinators: Factory) -> None:
    a = await coordinators()
    epoch = await a.campaign(node_id="a", url="http://a", replicated_tick=1, known_epoch=0)
    assert epoch is not None
    # A retry (say the first answer was lost) finds its own key: same epoch, still leader.
    assert await a.campaign(node_id="a", url="http://a", replicated_tick=1, known_epoch=0) == epoch
    assert await a.confirm() is True


async def test_claim_initial_when_another_leads_is_a_clear_error(coordinators: Factory) -> None:
    a, b = await coordinators(), await coordinators()
    epoch = await a.claim_initial(node_id="a", url="http://a")
    with pytest.raises(CoordinatorError, match="already has a leader: node 'a'") as info:
        await b.claim_initial(node_id="b", url="http://b")
    assert "\n" not in str(info.value)
    assert await a.confirm() is True
    assert await b.leader() == ("a", "http://a", epoch)


async def test_a_claim_below_a_checkpoint_epoch_is_refused_and_released(
    coordinators: Factory,
) -> None:
    """An etcd whose revisions are behind a checkpoint's epoch (its data was lost) would
    let the resumed match be fenced by nothing: the claim is refused, the key let go."""
    a, b = await coordinators(), await coordinators()
    with pytest.raises(CoordinatorError, match="was its data lost"):
        await a.claim_initial(node_id="a", url="http://a", known_epoch=10**9)
    assert await b.leader() is None
    assert await b.claim_initial(node_id="b", url="http://b") > 0


async def test_restarted_primary_waits_out_its_own_stale_lease(coordinators: Factory) -> None:
    old = await coordinators()
    first = await old.claim_initial(node_id="a", url="http://a")
    await old.close(release=False)  # the process died; its lease still runs for up to 2 s
    new = await coordinators()
    loop = asyncio.get_running_loop()
    began = loop.time()
    # It does not take the key over (a standby holding the match would campaign the moment
    # the key goes, and must win over this empty node): it waits for the lease to expire.
    second = await new.claim_initial(node_id="a", url="http://a")
    assert loop.time() - began > 0.5
    assert second > first
    assert await new.confirm() is True


async def test_a_restart_finds_the_standby_that_took_over(coordinators: Factory) -> None:
    old, standby = await coordinators(), await coordinators()
    first = await old.claim_initial(node_id="a", url="http://a")
    await old.close(release=False)
    await standby.depose(node_id="a")
    taken = await standby.campaign(
        node_id="b", url="http://b", replicated_tick=9, known_epoch=first
    )
    assert taken is not None
    new = await coordinators()
    with pytest.raises(CoordinatorError, match="already has a leader: node 'b'"):
        await new.claim_initial(node_id="a", url="http://a")


async def test_closing_the_leader_releases_the_key(coordinators: Factory) -> None:
    a, b = await coordinators(), await coordinators()
    epoch_a = await a.claim_initial(node_id="a", url="http://a")
    await a.close()
    assert await a.confirm() is False
    assert await b.leader() is None  # gone at once, not after the TTL
    epoch_b = await b.campaign(node_id="b", url="http://b", replicated_tick=0, known_epoch=epoch_a)
    assert epoch_b is not None and epoch_b > epoch_a


async def test_a_leader_that_stops_keeping_its_lease_alive_expires(coordinators: Factory) -> None:
    a, b = await coordinators(), await coordinators()
    epoch_a = await a.claim_initial(node_id="a", url="http://a")
    # Kept alive, the key outlives its 2 s TTL.
    await asyncio.sleep(2.5)
    assert await a.confirm() is True
    assert await b.leader() == ("a", "http://a", epoch_a)

    # The process freezes: no keep-alive, no revoke.
    await a.close(release=False)
    took = await wait_until(lambda: _no_leader(b), limit=6.0)
    assert took > 0.5  # it expired by TTL, it was not deleted
    epoch_b = await b.campaign(node_id="b", url="http://b", replicated_tick=0, known_epoch=epoch_a)
    assert epoch_b is not None and epoch_b > epoch_a


async def _no_leader(c: EtcdCoordinator) -> bool:
    return await c.leader() is None


async def _refuses(c: EtcdCoordinator) -> bool:
    return await c.confirm() is False


async def test_a_leader_whose_keepalive_stalls_cannot_confirm(coordinators: Factory) -> None:
    # A keep-alive slower than the TTL (a starved or paused process) loses the lease.
    a = await coordinators(keepalive_interval=5.0)
    await a.claim_initial(node_id="a", url="http://a")
    assert await a.confirm() is True
    await asyncio.sleep(2.2)
    assert await a.confirm() is False


async def test_etcd_stopped(etcd_process: EtcdProcess) -> None:
    a = EtcdCoordinator(etcd_process.url, region="test", request_timeout=0.5)
    b = EtcdCoordinator(etcd_process.url, region="test", request_timeout=0.5)
    await a.start()
    await b.start()
    try:
        await a.claim_initial(node_id="a", url="http://a")
        assert await a.confirm() is True
        etcd_process.stop()
        # Its keep-alive fails; once a whole TTL passed without one, it confirms no more.
        await wait_until(lambda: _refuses(a), limit=3.5)
        with pytest.raises(CoordinatorUnavailable, match="unreachable") as info:
            await b.campaign(node_id="b", url="http://b", replicated_tick=0, known_epoch=1)
        assert "\n" not in str(info.value)
        with pytest.raises(CoordinatorUnavailable):
            await b.leader()
        with pytest.raises(CoordinatorUnavailable):
            await b.depose(node_id="a")
    finally:
        await a.close()  # revoking fails quietly: etcd is gone
        await b.close()


async def test_start_without_etcd_is_unavailable(etcd_process: EtcdProcess) -> None:
    etcd_process.stop()
    c = make_coordinator(etcd_process.endpoint, node_id="a")
    with pytest.raises(
        CoordinatorUnavailable, match=r"etcd at http://127\.0\.0\.1:\d+ unreachable"
    ):
        await c.start()
    await c.close()


async def test_regions_are_independent(coordinators: Factory, etcd_url: str) -> None:
    a = await coordinators()
    other = EtcdCoordinator(etcd_url, region="elsewhere")
    await other.start()
    try:
        epoch_a = await a.claim_initial(node_id="a", url="http://a")
        epoch_x = await other.claim_initial(node_id="x", url="http://x")
        assert epoch_x > epoch_a
        assert await other.leader() == ("x", "http://x", epoch_x)
        assert await a.leader() == ("a", "http://a", epoch_a)
        assert await a.confirm() is True
        assert await other.confirm() is True
    finally:
        await other.close()


@pytest.mark.parametrize(
    ("ci", "outcome"), [("true", pytest.fail.Exception), ("", pytest.skip.Exception)]
)
def test_missing_etcd_skips_but_fails_in_ci(
    monkeypatch: pytest.MonkeyPatch, tmp_path: object, ci: str, outcome: type[BaseException]
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("CI", ci)
    with pytest.raises(outcome, match="etcd not installed"):
        etcd_binary()
