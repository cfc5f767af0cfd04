"""The etcd coordinator and the directory's registry against a real etcd with its own
authentication on: a user and password, a token, and a new token when etcd forgets one."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from server.coordination import CoordinatorError
from server.coordination.etcd_config import EtcdAccess, EtcdCluster
from server.coordination.net import EtcdCoordinator
from server.directory.net.etcd import EtcdRegistry
from tests.integration.etcd import etcd_url

__all__ = ["etcd_url"]  # the fixture, re-exported so pytest finds it

pytestmark = pytest.mark.integration

PASSWORD = "root-password-for-tests"


def gateway(url: str, path: str, body: dict[str, object], token: str = "") -> dict[str, object]:
    headers = {"Authorization": token} if token else {}
    request = urllib.request.Request(
        f"{url}/v3/{path}", data=json.dumps(body).encode(), headers=headers
    )
    with urllib.request.urlopen(request, timeout=5) as answer:
        document = json.loads(answer.read())
    assert isinstance(document, dict)
    return document


def enable_auth(url: str) -> None:
    """etcd's recipe: a root user with the root role, then auth on."""
    gateway(url, "auth/user/add", {"name": "root", "password": PASSWORD})
    gateway(url, "auth/user/grant", {"user": "root", "role": "root"})
    gateway(url, "auth/enable", {})


async def test_a_user_with_its_password_leads_and_a_wrong_one_is_refused(etcd_url: str) -> None:
    enable_auth(etcd_url)
    with pytest.raises(urllib.error.HTTPError):  # no token: etcd refuses
        gateway(etcd_url, "kv/range", {"key": "YQ=="})
    access = EtcdAccess(user="root", password=PASSWORD)
    leader = EtcdCoordinator(EtcdCluster((etcd_url,), access), region="test")
    await leader.start()
    try:
        epoch = await leader.claim_initial(node_id="a", url="http://a")
        assert await leader.confirm() is True
        assert await leader.leader() == ("a", "http://a", epoch)
        # etcd forgets the token (here: revoked by hand, as a restart or expiry would): the
        # next request authenticates again and goes through.
        assert leader.client._token is not None
        leader.client._token = "not-a-token-etcd-knows.1"
        assert await leader.leader() == ("a", "http://a", epoch)
        assert leader.client._token != "not-a-token-etcd-knows.1"
    finally:
        await leader.close()

    wrong = EtcdCoordinator(
        EtcdCluster((etcd_url,), EtcdAccess(user="root", password="wrong")), region="test"
    )
    with pytest.raises(CoordinatorError, match="authentication failed") as info:
        await wrong.start()
    assert "\n" not in str(info.value)


async def test_the_directorys_registry_authenticates_too(etcd_url: str) -> None:
    enable_auth(etcd_url)
    anonymous = EtcdRegistry(etcd_url, heartbeat_timeout=1.5, reservation_ttl=10.0)
    with pytest.raises(CoordinatorError, match="user name is empty"):
        await anonymous.start()
    access = EtcdAccess(user="root", password=PASSWORD)
    registry = EtcdRegistry(
        EtcdCluster((etcd_url,), access), heartbeat_timeout=1.5, reservation_ttl=10.0
    )
    await registry.start()
    try:
        snapshot = await registry.snapshot()
        assert not snapshot.nodes
    finally:
        await registry.close()
