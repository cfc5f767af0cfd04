"""The static coordinator against tiny aiohttp peers serving /peer on 127.0.0.1."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from hypothesis import given
from hypothesis import strategies as st

from server.coordination import Coordinator, CoordinatorError, parse_coordinator_spec
from server.coordination.epochs import EpochStore
from server.coordination.net import EtcdCoordinator, StaticCoordinator, make_coordinator
from server.coordination.net.static import PeerHealth, decide_campaign, parse_health

PeerFactory = Callable[..., Awaitable[str]]


@pytest.fixture
async def peer() -> AsyncIterator[PeerFactory]:
    """Start fake nodes: ``await peer(node, role, epoch, tick, delay=0.0)`` -> base URL."""
    servers: list[TestServer] = []

    async def start(
        node: str, role: str, epoch: int, tick: int, *, delay: float = 0.0, body: Any = None
    ) -> str:
        async def health(request: web.Request) -> web.Response:
            if delay:
                await asyncio.sleep(delay)
            answer = (
                body
                if body is not None
                else {
                    "node": node,
                    "role": role,
                    "epoch": epoch,
                    "replicated_tick": tick,
                    "players": 3,
                }
            )
            return web.json_response(answer)

        app = web.Application()
        app.router.add_get("/peer", health)
        server = TestServer(app, host="127.0.0.1")
        await server.start_server()
        servers.append(server)
        return str(server.make_url("")).rstrip("/")

    try:
        yield start
    finally:
        for server in servers:
            await server.close()


@pytest.fixture
def closed_port_url() -> str:
    """A URL where nothing listens (the port was free a moment ago)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


async def started(node_id: str, peers: list[str], wait: float = 5.0) -> StaticCoordinator:
    """A coordinator that waits ``wait`` for each round of answers: long by default, so
    a busy machine does not turn a slow answer into a missing one (the tests about
    timeouts pass a short one and peers that answer far later)."""
    coordinator = StaticCoordinator(node_id, peers, timeout=wait)
    await coordinator.start()
    return coordinator


async def test_highest_replicated_tick_wins(peer: PeerFactory) -> None:
    b = await peer("b", "standby", 3, 120)
    c = await peer("c", "standby", 3, 90)
    me = await started("a", [b, c])
    try:
        # b holds more ticks than a: a must not lead
        assert await me.campaign(node_id="a", url="u", replicated_tick=100, known_epoch=3) is None
        assert await me.confirm() is False
        # a holds the most ticks: it wins, one epoch above everything seen
        assert await me.campaign(node_id="a", url="u", replicated_tick=121, known_epoch=3) == 4
        assert await me.confirm() is True
    finally:
        await me.close()
    assert await me.confirm() is False  # closed: no longer leads


async def test_tie_goes_to_the_lowest_node_id(peer: PeerFactory) -> None:
    b = await peer("node-b", "standby", 2, 50)
    d = await peer("node-d", "standby", 2, 50)
    lower = await started("node-a", [b, d])
    higher = await started("node-c", [b, d])
    try:
        assert (
            await lower.campaign(node_id="node-a", url="u", replicated_tick=50, known_epoch=2) == 3
        )
        assert (
            await higher.campaign(node_id="node-c", url="u", replicated_tick=50, known_epoch=2)
            is None
        )
    finally:
        await lower.close()
        await higher.close()


async def test_every_standby_agrees_on_one_winner(peer: PeerFactory) -> None:
    ticks = {"s1": 70, "s2": 75, "s3": 75}
    urls = {n: await peer(n, "standby", 5, t) for n, t in ticks.items()}
    verdicts = {}
    for node, tick in ticks.items():
        me = await started(node, list(urls.values()))  # its own URL too: ignored
        try:
            verdicts[node] = await me.campaign(
                node_id=node, url=urls[node], replicated_tick=tick, known_epoch=5
            )
        finally:
            await me.close()
    assert verdicts == {"s1": None, "s2": 6, "s3": None}


async def test_a_reachable_primary_blocks_the_campaign(peer: PeerFactory) -> None:
    primary = await peer("p", "primary", 7, 10)
    me = await started("s", [primary])
    try:
        assert await me.campaign(node_id="s", url="u", replicated_tick=999, known_epoch=7) is None
        assert await me.leader() == ("p", primary, 7)
    finally:
        await me.close()


async def test_a_stale_primary_does_not_block(peer: PeerFactory) -> None:
    # A primary reporting an epoch below what this standby already knows was fenced.
    old = await peer("p", "primary", 4, 10)
    me = await started("s", [old])
    try:
        assert await me.campaign(node_id="s", url="u", replicated_tick=10, known_epoch=6) == 7
    finally:
        await me.close()


async def test_a_starting_peer_neither_blocks_nor_competes(peer: PeerFactory) -> None:
    leaving = await peer("a", "starting", 3, 500)
    me = await started("z", [leaving])
    try:
        assert await me.campaign(node_id="z", url="u", replicated_tick=1, known_epoch=3) == 4
    finally:
        await me.close()


async def test_slow_and_unreachable_peers_are_ignored_within_the_timeout(
    peer: PeerFactory, closed_port_url: str
) -> None:
    # The paused primary (and a paused standby with more ticks) answer too late to count.
    paused_primary = await peer("p", "primary", 9, 300, delay=10.0)
    paused_standby = await peer("a", "standby", 9, 300, delay=10.0)
    live = await peer("c", "standby", 9, 200)
    me = await started("b", [paused_primary, paused_standby, closed_port_url, live], wait=0.2)
    try:
        began = time.monotonic()
        epoch = await me.campaign(node_id="b", url="u", replicated_tick=250, known_epoch=9)
        elapsed = time.monotonic() - began
    finally:
        await me.close()
    assert epoch == 10
    assert elapsed < 5.0  # bounded by the 0.2 s timeout, not by the 10 s pauses


async def test_epoch_is_one_above_the_highest_seen(peer: PeerFactory) -> None:
    # A standby that already followed a newer primary than this node knows of.
    ahead = await peer("b", "standby", 12, 10)
    me = await started("a", [ahead])
    try:
        assert await me.campaign(node_id="a", url="u", replicated_tick=11, known_epoch=8) == 13
    finally:
        await me.close()


async def test_garbage_health_is_treated_as_unreachable(peer: PeerFactory) -> None:
    garbage = await peer("x", "standby", 0, 0, body={"node": "x", "role": "standby", "epoch": "9"})
    me = await started("a", [garbage])
    try:
        assert await me.poll_peers() == []
        assert await me.campaign(node_id="a", url="u", replicated_tick=0, known_epoch=1) == 2
    finally:
        await me.close()


async def test_claim_initial(peer: PeerFactory, closed_port_url: str) -> None:
    alone = await started("a", [closed_port_url])
    try:
        assert await alone.claim_initial(node_id="a", url="http://a") == 1
        assert await alone.leader() == ("a", "http://a", 1)
        assert await alone.confirm() is True
    finally:
        await alone.close()
    b = await peer("b", "standby", 41, 0)
    behind = await started("a", [b])
    try:
        assert await behind.claim_initial(node_id="a", url="http://a") == 42
    finally:
        await behind.close()
    resuming = await started("a", [closed_port_url])
    try:  # a checkpoint of epoch 57: the resumed match must fence it
        assert await resuming.claim_initial(node_id="a", url="http://a", known_epoch=57) == 58
    finally:
        await resuming.close()


async def test_claim_initial_over_a_live_primary_or_a_held_match_is_refused(
    peer: PeerFactory,
) -> None:
    live = await peer("b", "primary", 3, 500)
    holder = await peer("c", "standby", 3, 480)
    for other, message in ((live, "already has a primary: node 'b'"), (holder, "holds the region")):
        claimant = await started("a", [other])
        try:
            with pytest.raises(CoordinatorError, match=message) as info:
                await claimant.claim_initial(node_id="a", url="http://a")
            assert "\n" not in str(info.value) and "standby" in str(info.value)
            assert await claimant.confirm() is False
        finally:
            await claimant.close()


async def silent_until(answer: asyncio.Event) -> tuple[TestServer, str]:
    """A peer that accepts connections but answers ``/peer`` (as a primary) only once
    ``answer`` is set: paused, or cut off, until then."""

    async def health(request: web.Request) -> web.Response:
        await answer.wait()
        return web.json_response(
            {"node": "b", "role": "primary", "epoch": 7, "replicated_tick": 900}
        )

    app = web.Application()
    app.router.add_get("/peer", health)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    return server, str(server.make_url("")).rstrip("/")


async def test_a_claim_waits_for_a_silent_peer_that_may_lead() -> None:
    """A node restarted while its peer is cut off must not claim the region: the peer may
    still serve its players, and a second primary would lose what they were shown."""
    answer = asyncio.Event()
    server, url = await silent_until(answer)
    claimant = await started("a", [url], wait=0.05)
    try:
        claim = asyncio.create_task(claimant.claim_initial(node_id="a", url="http://a"))
        await asyncio.sleep(0.6)  # three rounds and more: still silent, still waiting
        assert not claim.done() and not claimant.leading
        answer.set()  # the cut heals: it leads
        with pytest.raises(CoordinatorError, match="already has a primary: node 'b'"):
            await asyncio.wait_for(claim, 5)
    finally:
        await claimant.close()
        await server.close()


async def test_a_silent_peer_that_is_gone_lets_the_claim_through() -> None:
    server, url = await silent_until(asyncio.Event())
    claimant = await started("a", [url], wait=0.05)
    try:
        claim = asyncio.create_task(claimant.claim_initial(node_id="a", url="http://a"))
        await asyncio.sleep(0.3)
        assert not claim.done()
        await server.close()  # nothing listens there now: no node to wait for
        assert await asyncio.wait_for(claim, 5) == 1
    finally:
        await claimant.close()


async def test_epochs_used_are_never_claimed_again_after_a_restart(
    closed_port_url: str, tmp_path: Path
) -> None:
    for expected in (1, 2, 3):  # the same node, restarted with nobody else around
        node = StaticCoordinator("a", [closed_port_url], epochs=EpochStore(str(tmp_path), "r", "a"))
        await node.start()
        try:
            assert await node.claim_initial(node_id="a", url="http://a") == expected
        finally:
            await node.close()
    node = StaticCoordinator("a", [closed_port_url], epochs=EpochStore(str(tmp_path), "r", "a"))
    await node.start()
    try:  # and a campaign goes above them too
        assert await node.campaign(node_id="a", url="u", replicated_tick=1, known_epoch=0) == 4
    finally:
        await node.close()


async def test_a_standby_that_is_not_eligible_never_wins(peer: PeerFactory) -> None:
    ahead = await peer(
        "b",
        "standby",
        3,
        0,
        body={"node": "b", "role": "standby", "epoch": 3, "replicated_tick": 900,
              "eligible": False},
    )  # fmt: skip
    me = await started("a", [ahead])
    try:  # b holds more ticks, but not every tick shown: a, which does, leads
        assert await me.campaign(node_id="a", url="u", replicated_tick=100, known_epoch=3) == 4
    finally:
        await me.close()


async def test_depose_is_a_no_op(peer: PeerFactory) -> None:
    primary = await peer("p", "primary", 2, 0)
    me = await started("s", [primary])
    try:
        await me.depose(node_id="p")
        assert await me.leader() == ("p", primary, 2)
    finally:
        await me.close()


@pytest.fixture
async def primary_then_standby() -> AsyncIterator[tuple[str, list[int]]]:
    """A peer whose first answer says it leads and every later one that it follows (a
    primary that stepped down between two rounds), and the count of questions asked."""
    asked = [0]

    async def health(request: web.Request) -> web.Response:
        asked[0] += 1
        role = "primary" if asked[0] == 1 else "standby"
        return web.json_response({"node": "p", "role": role, "epoch": 5, "replicated_tick": 0})

    app = web.Application()
    app.router.add_get("/peer", health)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        yield str(server.make_url("")).rstrip("/"), asked
    finally:
        await server.close()


async def test_a_campaign_takes_the_answers_asked_ahead_of_it_once(
    primary_then_standby: tuple[str, list[int]],
) -> None:
    url, asked = primary_then_standby
    me = await started("s", [url], wait=2.0)
    try:
        me.foresee_campaign()
        # The round begun ahead saw a primary: that campaign is lost, with no new question.
        assert await me.campaign(node_id="s", url="u", replicated_tick=9, known_epoch=5) is None
        assert asked[0] == 1
        # The next campaign asks anew (and the peer now follows).
        assert await me.campaign(node_id="s", url="u", replicated_tick=9, known_epoch=5) == 6
        assert asked[0] == 2
    finally:
        await me.close()


async def test_answers_asked_too_long_before_a_campaign_are_not_taken(
    primary_then_standby: tuple[str, list[int]],
) -> None:
    url, asked = primary_then_standby
    me = await started("s", [url], wait=0.5)
    try:
        me.foresee_campaign()
        async with asyncio.timeout(5.0):
            while asked[0] == 0:  # the round ahead has asked (and seen a primary)
                await asyncio.sleep(0.01)
        await asyncio.sleep(2.5 * me.foresight)
        assert await me.campaign(node_id="s", url="u", replicated_tick=9, known_epoch=5) == 6
        assert asked[0] == 2
    finally:
        await me.close()


async def test_not_started_is_a_local_error() -> None:
    me = StaticCoordinator("a", ["http://127.0.0.1:1"])
    with pytest.raises(RuntimeError, match="not started"):
        await me.campaign(node_id="a", url="u", replicated_tick=0, known_epoch=0)


# -- the rule alone (sans-I/O) ------------------------------------------------------------

peers_strategy = st.lists(
    st.builds(
        PeerHealth,
        url=st.just("http://x"),
        node=st.sampled_from(["a", "b", "c", "d", "e"]),
        role=st.sampled_from(["standby", "starting"]),
        epoch=st.integers(0, 20),
        replicated_tick=st.integers(0, 5),
    ),
    max_size=5,
    unique_by=lambda p: p.node,
)


@given(peers=peers_strategy, tick=st.integers(0, 5), known=st.integers(0, 20))
def test_rule_at_most_one_winner_and_epoch_rises(
    peers: list[PeerHealth], tick: int, known: int
) -> None:
    everyone = [*peers, PeerHealth("http://me", "m", "standby", known, tick)]
    standbys = [p for p in everyone if p.role == "standby"]
    winners = []
    for me in standbys:
        others = [p for p in everyone if p.node != me.node]
        epoch = decide_campaign(
            node_id=me.node, replicated_tick=me.replicated_tick, known_epoch=me.epoch, peers=others
        )
        if epoch is not None:
            winners.append(me)
            assert epoch > me.epoch
            assert epoch > max(p.epoch for p in everyone)
    assert len(winners) == 1
    best = max(p.replicated_tick for p in standbys)
    assert winners[0].replicated_tick == best
    assert winners[0].node == min(p.node for p in standbys if p.replicated_tick == best)


def test_parse_health_rejects_bad_bodies() -> None:
    ok = {"node": "a", "role": "primary", "epoch": 1, "replicated_tick": 2}
    assert parse_health("u", ok) == PeerHealth("u", "a", "primary", 1, 2)
    bad: object
    for bad in (
        [],
        {**ok, "node": 3},
        {**ok, "role": "leader"},
        {**ok, "epoch": True},
        {**ok, "epoch": -1},
        {**ok, "replicated_tick": 1.5},
        {k: v for k, v in ok.items() if k != "epoch"},
    ):
        with pytest.raises(ValueError):
            parse_health("u", bad)


# -- make_coordinator ---------------------------------------------------------------------


def test_make_static() -> None:
    c: Coordinator = make_coordinator("static", node_id="a", peers=["http://127.0.0.1:9001/"])
    assert isinstance(c, StaticCoordinator)
    assert c.kind == "static"
    assert c.peers == ("http://127.0.0.1:9001",)
    assert isinstance(c, Coordinator)


@pytest.mark.parametrize(
    ("spec", "endpoint"),
    [
        ("etcd://127.0.0.1:23790", "http://127.0.0.1:23790"),
        ("etcd://etcd.internal:2379", "http://etcd.internal:2379"),
        ("etcd://[::1]:4001", "http://[::1]:4001"),
    ],
)
def test_make_etcd(spec: str, endpoint: str) -> None:
    c = make_coordinator(spec, node_id="a", region="eu")
    assert isinstance(c, EtcdCoordinator)
    assert c.kind == "etcd"
    assert c.endpoint == endpoint
    assert c.key == "/arena/eu/leader"
    assert parse_coordinator_spec(spec) == ("etcd", (endpoint,))


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("", "empty coordinator"),
        ("Static", "unknown coordinator 'Static'"),
        ("zookeeper://h:1", "unknown coordinator scheme 'zookeeper://'"),
        ("http://h:1", "unknown coordinator scheme 'http://'"),
        ("etcd://", "expected etcd://HOST:PORT"),
        ("etcd://host", "missing port"),
        ("etcd://:2379", "missing host"),
        ("etcd://host:notaport", "bad port"),
        ("etcd://host:0", "bad port"),
        ("etcd://host:70000", "bad port"),
        ("etcd://host:2379/v3", "nothing else"),
        ("etcd://a:1,", "nothing else"),
        ("etcd://a:1,a:1", "listed twice"),
        ("etcd://user@host:1", "nothing else"),
    ],
)
def test_bad_specs_are_one_line_errors(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as info:
        make_coordinator(spec, node_id="a")
    assert "\n" not in str(info.value)
    assert "static" in str(info.value) or "etcd://" in str(info.value) or "port" in str(info.value)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"node_id": ""}, "empty node id"),
        ({"node_id": "a", "peers": ["127.0.0.1:9000"]}, "bad peer URL"),
        ({"node_id": "a", "peers": ["http://127.0.0.1:9000/health"]}, "no path"),
    ],
)
def test_bad_static_arguments(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message) as info:
        make_coordinator("static", **kwargs)
    assert "\n" not in str(info.value)


def test_bad_region() -> None:
    with pytest.raises(ValueError, match="bad region"):
        make_coordinator("etcd://127.0.0.1:1", node_id="a", region="eu/west")
