"""The replication link over real sockets: a primary node, a standby node, fakes and players.

Every node is a real aiohttp app (``server.net.app.create_app``) on 127.0.0.1 on a port the OS
picked, all in the test's event loop. A node's socket is bound before its config is made,
as ``server/net/cli.py`` does, so that its ``public_url`` names its own port. Fake standbys and
players speak the wire protocol by hand, so the tests can make them misbehave on purpose.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import socket
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import msgpack
import pytest
from aiohttp import WSCloseCode, WSMsgType, web

from server.net.app import NODE, NODE_TASK, create_admin_app, create_app
from server.net.node import Node, NodeConfig
from server.replication import messages, state
from server.replication.auth import sign_hello
from server.replication.net.follower import Follower
from server.replication.roles import Role
from server.sim.matchset import MatchSet
from server.tokens import issue_token, verify_token
from shared import protocol

SECRET = bytes(range(100, 132))
OTHER_SECRET = bytes(range(32))
REGION = "test-region"
MAX_PLAYERS = 4
WAIT_S = 10.0  # the bound on every wait for something that should take well under a second


# -- nodes ---------------------------------------------------------------------------------


def bind() -> tuple[socket.socket, str]:
    """A port kept for a node that starts later. Bound, not listening: until the node
    serves on it, a peer asking there is refused (no node yet), not kept waiting as by
    one that may lead (a primary's claim waits for such a peer)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    return sock, f"http://127.0.0.1:{sock.getsockname()[1]}"


@dataclass
class RunningNode:
    url: str
    app: web.Application
    runner: web.AppRunner
    admin_url: str  # its admin port: the full /health, /metrics, /view
    admin_runner: web.AppRunner
    stopped: bool = False

    @property
    def node(self) -> Node:
        return self.app[NODE]

    async def stop(self) -> None:
        """A graceful stop, as on SIGTERM (``server/net/cli.py``): the runner's cleanup."""
        if not self.stopped:
            self.stopped = True
            await self.admin_runner.cleanup()
            await self.runner.cleanup()

    async def crash(self) -> None:
        """Kill the node: it stops ticking at once and its sockets go, as on SIGKILL."""
        task = self.app[NODE_TASK]
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await self.stop()


class Nodes:
    """Starts nodes on sockets bound beforehand; stops every one of them at the end."""

    def __init__(self) -> None:
        self.running: list[RunningNode] = []

    async def start(
        self,
        bound: tuple[socket.socket, str],
        listener: ssl.SSLContext | None = None,
        **options: Any,
    ) -> RunningNode:
        """A node on ``bound`` (with TLS when ``listener`` is given: its URL is https)."""
        sock, url = bound
        if listener is not None:
            url = url.replace("http://", "https://")
        config = NodeConfig(
            **{
                "region": REGION,
                "public_url": url,
                "cluster_secret": SECRET,
                "coordinator": "static",
                "hitreg_backend": "reference",
                "max_players": MAX_PLAYERS,
                **options,
            }
        )
        app = create_app(config)
        runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=0.5)
        admin_sock, admin_url = bind()  # as arena-server --admin-port 0 does
        if listener is not None:
            admin_url = admin_url.replace("http://", "https://")
        admin_runner = web.AppRunner(create_admin_app(app[NODE]), handle_signals=False)
        try:
            await runner.setup()
            await web.SockSite(runner, sock, ssl_context=listener).start()
            await admin_runner.setup()
            await web.SockSite(admin_runner, admin_sock, ssl_context=listener).start()
        except BaseException:
            sock.close()
            admin_sock.close()
            await admin_runner.cleanup()
            await runner.cleanup()
            raise
        running = RunningNode(url, app, runner, admin_url, admin_runner)
        self.running.append(running)
        # As arena-server does: ready (kernels warm, role decided) before anyone is told.
        ready = asyncio.ensure_future(app[NODE].became_ready.wait())
        await asyncio.wait([ready, app[NODE_TASK]], return_when=asyncio.FIRST_COMPLETED)
        ready.cancel()
        if app[NODE_TASK].done():
            app[NODE_TASK].result()  # it failed: say why
        return running

    async def close(self) -> None:
        for running in reversed(self.running):
            await running.stop()


@contextlib.asynccontextmanager
async def cluster() -> AsyncIterator[tuple[Nodes, aiohttp.ClientSession]]:
    nodes = Nodes()
    session = aiohttp.ClientSession()
    try:
        yield nodes, session
    finally:
        await session.close()
        await nodes.close()


async def primary_and_standby(
    nodes: Nodes, **standby_options: Any
) -> tuple[RunningNode, RunningNode]:
    primary_bound, standby_bound = bind(), bind()
    primary = await nodes.start(
        primary_bound,
        node_id="alpha",
        role="primary",
        peers=(standby_bound[1],),
        ack_timeout=0.25,  # room for a loaded test machine; lateness has its own test
        failover_timeout=0.5,
    )
    standby = await nodes.start(
        standby_bound,
        **{
            "node_id": "beta",
            "role": "standby",
            "primary_url": primary.url,
            "peers": (primary.url,),
            "failover_timeout": 0.5,
            **standby_options,
        },
    )
    return primary, standby


async def health(session: aiohttp.ClientSession, url: str) -> dict[str, Any]:
    async with session.get(url + "/health") as response:
        assert response.status == 200
        return await response.json()


async def until(check: Callable[[], Awaitable[Any]], what: str, within: float = WAIT_S) -> Any:
    """Poll ``check`` until it returns something truthy; fail after ``within`` seconds."""
    try:
        async with asyncio.timeout(within):
            # Polling another node's /health (or a fake's record): there is no event to await.
            while not (value := await check()):
                await asyncio.sleep(0.02)
            return value
    except TimeoutError:
        pytest.fail(f"timed out waiting until {what}")


async def standby_state(session: aiohttp.ClientSession, primary: str, node: str) -> str | None:
    for link in (await health(session, primary))["standbys"]:
        if link["node"] == node:
            return link["state"]
    return None


async def until_live(session: aiohttp.ClientSession, primary: str, node: str) -> None:
    async def live() -> bool:
        return await standby_state(session, primary, node) == "in_sync"

    await until(live, f"{node} is a live standby of {primary}")


@contextlib.asynccontextmanager
async def background(coro: Awaitable[None]) -> AsyncIterator[asyncio.Task[None]]:
    """Run ``coro`` while the block runs; cancel and await it after."""
    task = asyncio.ensure_future(coro)
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


# -- a player ------------------------------------------------------------------------------


def forge(
    welcome: protocol.WelcomeMessage,
    secret: bytes = SECRET,
    region: str = REGION,
    slot_offset: int = 0,
    name: str = "ada",
    seat_offset: int = 0,
    expires_at: float | None = None,
) -> str:
    """A token like the welcome's (its seat id and expiry), with one part changed."""
    claim = verify_token(SECRET, welcome.token, REGION, time.time())
    return issue_token(
        secret,
        region,
        welcome.player_id + slot_offset,
        name,
        welcome.match,
        seat_id=claim.seat_id + seat_offset,
        expires_at=claim.expires_at if expires_at is None else expires_at,
    )


@dataclass
class Player:
    session: aiohttp.ClientSession
    ws: aiohttp.ClientWebSocketResponse | None = None
    snapshots: list[protocol.SnapshotMessage] = field(default_factory=list)
    errors: list[protocol.ErrorMessage] = field(default_factory=list)
    closed: asyncio.Event = field(default_factory=asyncio.Event)
    progress: asyncio.Event = field(default_factory=asyncio.Event)

    async def join(self, base_url: str, name: str = "ada", token: str | None = None) -> Any:
        self.ws = await self.session.ws_connect(base_url + "/ws")
        await self.ws.send_bytes(
            protocol.encode(protocol.JoinMessage(protocol.PROTOCOL_VERSION, name, token))
        )
        async with asyncio.timeout(WAIT_S):
            message = await self.ws.receive()
        if message.type is not WSMsgType.BINARY:
            return message
        return protocol.decode_server(message.data)

    async def send_inputs(self, seqs: range) -> None:
        assert self.ws is not None
        for seq in seqs:
            message = protocol.InputMessage(seq, seq, (1.0, 0.0), 0.0, 0.0, 0, 0.0, -1)
            await self.ws.send_bytes(protocol.encode(message))

    async def read(self) -> None:
        """Record every snapshot and error until the server closes the socket."""
        assert self.ws is not None
        try:
            async for message in self.ws:
                if message.type is not WSMsgType.BINARY:
                    continue
                decoded = protocol.decode_server(message.data)
                if isinstance(decoded, protocol.SnapshotMessage):
                    self.snapshots.append(decoded)
                elif isinstance(decoded, protocol.ErrorMessage):
                    self.errors.append(decoded)
                self.progress.set()
        finally:
            self.closed.set()

    async def until_snapshot(self, accept: Callable[[protocol.SnapshotMessage], bool]) -> None:
        async def seen() -> bool:
            return any(accept(s) for s in self.snapshots[-5:])

        await until(seen, "the player got the expected snapshot")

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()


# -- a hand-written standby ----------------------------------------------------------------


async def read_challenge(ws: aiohttp.ClientWebSocketResponse) -> messages.Challenge:
    """The primary's first message on a replication link: the challenge to answer."""
    async with asyncio.timeout(WAIT_S):
        first = await ws.receive()
    assert first.type is WSMsgType.BINARY, first
    challenge = messages.decode(first.data)
    assert isinstance(challenge, messages.Challenge), challenge
    return challenge


@dataclass
class FakeStandby:
    """Speaks the standby's side of /replicate by hand; acks while ``acking`` is set."""

    session: aiohttp.ClientSession
    primary: RunningNode
    node: str = "fake"
    secret: bytes = SECRET
    acking: bool = True
    answer_out_of_sync: bool = False  # ask for a full state when told it is out
    fence_epoch: int | None = None  # answer the next tick record with this epoch
    fenced_tick: int | None = None
    last_acked: int = -1
    received: list[dict[str, Any]] = field(default_factory=list)
    ws: aiohttp.ClientWebSocketResponse | None = None

    async def connect(self) -> None:
        self.ws = await self.session.ws_connect(
            self.primary.url + "/replicate", max_msg_size=64 << 20
        )
        challenge = await read_challenge(self.ws)
        hello = sign_hello(
            self.secret,
            challenge.nonce,
            node=self.node,
            epoch=0,
            tick=0,
            fingerprint=state.config_fingerprint(self.primary.node.matches),
            url="",
        )
        await self.ws.send_bytes(messages.encode(hello))

    async def run(self) -> None:
        assert self.ws is not None
        async for message in self.ws:
            if message.type is not WSMsgType.BINARY:
                continue
            record = msgpack.unpackb(message.data, raw=False)
            self.received.append(record)
            if record.get("type") == "out_of_sync" and self.answer_out_of_sync:
                await self.ws.send_bytes(msgpack.packb({"type": "resync"}))
            if record.get("type") != "ticks":
                continue
            if self.fence_epoch is not None and self.fenced_tick is None:
                self.fenced_tick = int(record["tick"])
                await self.ws.send_bytes(
                    msgpack.packb({"type": "fenced", "epoch": self.fence_epoch})
                )
            elif self.acking:
                self.last_acked = int(record["tick"])
                await self.ws.send_bytes(msgpack.packb({"type": "ack", "tick": self.last_acked}))

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()


def log_lines(caplog: pytest.LogCaptureFixture, event: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if f"event={event} " in r.getMessage()]


# -- the tests -----------------------------------------------------------------------------


async def test_a_standby_follows_the_primary_tick_by_tick() -> None:
    async with cluster() as (nodes, session):
        primary, standby = await primary_and_standby(nodes)

        await until_live(session, primary.admin_url, "beta")
        before = await health(session, primary.admin_url)
        followed = await health(session, standby.admin_url)
        after = await health(session, primary.admin_url)
        # Synchronous replication: the primary starts tick T+1 only once T is held.
        assert before["tick"] - 1 <= followed["tick"] <= after["tick"]
        assert followed["role"] == "standby"
        assert followed["epoch"] == before["epoch"] == 1
        assert followed["failover"] == {}

        async def advanced() -> bool:
            return (await health(session, standby.admin_url))["tick"] >= followed["tick"] + 30

        await until(advanced, "the standby follows 30 more ticks")
        (link,) = (await health(session, primary.admin_url))["standbys"]
        assert link["node"] == "beta"
        assert link["state"] == "in_sync"
        assert link["acked_tick"] > followed["tick"]
        # The primary learnt where the standby is, and tells players.
        assert primary.node.player_endpoints() == (standby.url + "/ws",)


async def test_a_hello_with_a_wrong_secret_is_refused(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="arena")
    async with cluster() as (nodes, session):
        primary_bound, intruder_bound = bind(), bind()
        primary = await nodes.start(primary_bound, node_id="alpha", role="primary")
        intruder = await nodes.start(
            intruder_bound,
            node_id="intruder",
            role="standby",
            primary_url=primary.url,
            cluster_secret=OTHER_SECRET,
        )

        registry = primary.node.metrics.registry

        async def refused_twice() -> bool:  # it keeps retrying
            counted = registry.get_sample_value(
                "arena_peers_refused_total", {"reason": "unauthenticated"}
            )
            return (counted or 0) >= 2

        await until(refused_twice, "the primary refused the intruder")
        # Logged once each side, at warning level, naming the secret; not once a retry.
        (refused,) = log_lines(caplog, "peer_refused")
        assert "reason=unauthenticated" in refused and "ARENA_CLUSTER_SECRET" in refused
        (told,) = log_lines(caplog, "replication_refused")
        assert "reason=unauthenticated" in told and "ARENA_CLUSTER_SECRET" in told
        assert all(
            r.levelno == logging.WARNING for r in caplog.records if "refused" in r.getMessage()
        )
        assert primary.node.hub.links == {}
        assert (await health(session, primary.admin_url))["standbys"] == []
        assert primary.node.learned_peers == {}
        intruding = await health(session, intruder.admin_url)
        assert (intruding["role"], intruding["tick"], intruding["players"]) == ("standby", 0, 0)
        assert intruder.node.follower.primary_id == ""

        # A follower asked directly never gets past the hello: it installs nothing.
        matches = MatchSet(primary.node.matches.config, 1, primary.node.validator)
        follower = Follower(matches, "probe", OTHER_SECRET, 1.0, time.perf_counter, dict)
        try:
            async with asyncio.timeout(WAIT_S):
                outcome = await follower.follow(primary.url)
        finally:
            await follower.close()
        assert outcome.primary == ""
        assert follower.last_record_at is None
        match = matches[0]
        assert (match.tick_number, match.seats, match.history.count) == (0, {}, 0)
        assert primary.node.hub.links == {}


async def test_a_follower_with_a_wrong_secret_reports_that_it_was_refused() -> None:
    async with cluster() as (nodes, _session):
        primary = await nodes.start(bind(), node_id="alpha", role="primary")
        follower = Follower(
            primary.node.matches, "probe", OTHER_SECRET, 1.0, time.perf_counter, dict
        )
        try:
            async with asyncio.timeout(WAIT_S):
                outcome = await follower.follow(primary.url)
        finally:
            await follower.close()

        assert outcome.reason == "refused"


async def answer(
    ws: aiohttp.ClientWebSocketResponse, primary: RunningNode, url: str = ""
) -> messages.Hello:
    """A valid hello for this link's challenge (from the node "fake", telling ``url``)."""
    challenge = await read_challenge(ws)
    return sign_hello(
        SECRET,
        challenge.nonce,
        node="fake",
        epoch=0,
        tick=0,
        fingerprint=state.config_fingerprint(primary.node.matches),
        url=url,
    )


async def refusal(ws: aiohttp.ClientWebSocketResponse) -> tuple[Any, int | None]:
    """The primary's answer to a hello it refuses, and the close code that follows."""
    async with asyncio.timeout(WAIT_S):
        reply = await ws.receive()
        assert reply.type is WSMsgType.BINARY, reply
        closed = await ws.receive()
    assert closed.type in (WSMsgType.CLOSE, WSMsgType.CLOSED), closed
    return messages.decode(reply.data), ws.close_code


def unauthenticated(primary: RunningNode) -> float:
    registry = primary.node.metrics.registry
    counted = registry.get_sample_value("arena_peers_refused_total", {"reason": "unauthenticated"})
    return counted or 0.0


async def _no_links(primary: RunningNode) -> bool:
    return not primary.node.hub.links


async def test_a_replayed_hello_is_refused() -> None:
    async with cluster() as (nodes, session):
        primary = await nodes.start(bind(), node_id="alpha", role="primary")
        first = await session.ws_connect(primary.url + "/replicate", max_msg_size=64 << 20)
        recorded = messages.encode(await answer(first, primary, "http://127.0.0.1:1"))
        await first.send_bytes(recorded)
        async with asyncio.timeout(WAIT_S):
            welcome = messages.decode((await first.receive()).data)
        assert welcome == messages.StandbyWelcome("alpha")  # the hello was good, once
        await first.close()
        await until(lambda: _no_links(primary), "the first link is gone")

        # The same bytes on a new link: its challenge is another one.
        second = await session.ws_connect(primary.url + "/replicate", max_msg_size=64 << 20)
        await read_challenge(second)
        await second.send_bytes(recorded)

        assert await refusal(second) == (messages.Refused("unauthenticated"), 1008)
        assert unauthenticated(primary) == 1
        assert primary.node.hub.links == {}


async def test_a_hello_whose_url_was_changed_is_refused_and_never_announced() -> None:
    async with cluster() as (nodes, session):
        primary = await nodes.start(bind(), node_id="alpha", role="primary")
        ws = await session.ws_connect(primary.url + "/replicate", max_msg_size=64 << 20)
        signed = await answer(ws, primary, url="")
        changed = dataclasses.replace(signed, url="http://attacker.example:80")
        await ws.send_bytes(messages.encode(changed))

        assert await refusal(ws) == (messages.Refused("unauthenticated"), 1008)
        assert unauthenticated(primary) == 1
        assert primary.node.learned_peers == {}
        assert primary.node.player_endpoints() == ()  # what players would be told
        assert primary.node.hub.links == {}


@contextlib.asynccontextmanager
async def primary_with_player_and_fake(
    nodes: Nodes, session: aiohttp.ClientSession, **options: Any
) -> AsyncIterator[tuple[RunningNode, Player, FakeStandby]]:
    """A primary (lateness tests' timings), a player seated on it, a fake standby not yet
    connected; both closed at the end."""
    primary = await nodes.start(
        bind(), node_id="alpha", role="primary", **{"failover_timeout": 0.5, **options}
    )
    player = Player(session)
    fake = FakeStandby(session, primary)
    try:
        assert isinstance(await player.join(primary.url), protocol.WelcomeMessage)
        yield primary, player, fake
    finally:
        await player.close()
        await fake.close()


async def test_a_late_standby_is_waited_for_until_it_knows_it_is_out_then_the_primary_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="arena")
    async with (
        cluster() as (nodes, session),
        primary_with_player_and_fake(nodes, session, ack_timeout=0.1) as (primary, player, fake),
    ):
        await fake.connect()
        async with background(player.read()), background(fake.run()):
            await until_live(session, primary.admin_url, "fake")

            async def admitted() -> bool:  # (health says so once the message is queued)
                return any(r["type"] == "in_sync" for r in fake.received)

            await until(admitted, "the fake standby is told it is in sync")
            registry = primary.node.metrics.registry
            fake.acking = False
            stopped_after = fake.last_acked

            def told() -> list[int]:
                return [r["tick"] for r in fake.received if r["type"] == "out_of_sync"]

            async def told_out() -> bool:
                return bool(told())

            await until(told_out, "the primary tells the silent standby it is out")
            assert told() == [stopped_after + 1]
            assert await standby_state(session, primary.admin_url, "fake") == "leaving"
            await asyncio.sleep(0.5)  # it waits: no tick the standby lacks is shown
            assert max(s.tick for s in player.snapshots) <= stopped_after
            assert registry.get_sample_value("arena_standby_out_of_sync_total") == 1
            assert registry.get_sample_value("arena_ticks_stalled_total") >= 1
            assert (await health(session, primary.admin_url))["degraded"] is False
            marks = log_lines(caplog, "standby_out_of_sync")
            assert f"tick={stopped_after + 1} acked={stopped_after}" in marks[-1]

            # The standby answers (it asks for a full state): it knows it is out, so
            # the primary goes on without it, degraded, and says so.
            fake.answer_out_of_sync = True
            await fake.ws.send_bytes(msgpack.packb({"type": "resync"}))  # type: ignore[union-attr]
            await player.until_snapshot(lambda s: s.tick >= stopped_after + 30)
            ticks = [s.tick for s in player.snapshots]
            assert ticks == sorted(set(ticks))
            found = await health(session, primary.admin_url)
            assert found["degraded"] is True and found["role"] == "primary"
            assert found["standbys"][0]["state"] == "catching_up"
            assert log_lines(caplog, "degraded")

            # Acknowledging again, it catches up and is waited for again.
            fake.acking = True
            await until_live(session, primary.admin_url, "fake")

            async def replicated() -> bool:
                return (await health(session, primary.admin_url))["degraded"] is False

            await until(replicated, "the primary is no longer degraded")


async def test_a_graceful_stop_tells_no_standby_it_is_late() -> None:
    # aiohttp drops what arrives once its shutdown began, a standby's ack included: the
    # tick in flight then must not mark the standby out (it holds every tick shown).
    async with (
        cluster() as (nodes, session),
        primary_with_player_and_fake(nodes, session, ack_timeout=0.1) as (primary, player, fake),
    ):
        await fake.connect()
        async with background(player.read()), background(fake.run()):
            await until_live(session, primary.admin_url, "fake")
            fake.acking = False
            stopped_after = fake.last_acked

            async def in_flight() -> bool:
                ticks = [r["tick"] for r in fake.received if r["type"] == "ticks"]
                return bool(ticks) and ticks[-1] > stopped_after

            await until(in_flight, "a tick the standby does not acknowledge is sent")
            registry = primary.node.metrics.registry
            await primary.stop()

        assert [r for r in fake.received if r["type"] == "out_of_sync"] == []
        assert registry.get_sample_value("arena_standby_out_of_sync_total") == 0
        stopping = {"reason": "stopping"}
        assert registry.get_sample_value("arena_ticks_unpublished_total", stopping) == 1
        assert max(s.tick for s in player.snapshots) <= stopped_after


async def test_a_standby_whose_link_ends_is_dropped_at_once() -> None:
    async with (
        cluster() as (nodes, session),
        primary_with_player_and_fake(nodes, session, ack_timeout=0.1) as (primary, player, fake),
    ):
        await fake.connect()
        async with background(player.read()):
            async with background(fake.run()):
                await until_live(session, primary.admin_url, "fake")
                fake.acking = False
                stopped_after = fake.last_acked
                await fake.close()  # the standby's process is gone
            await player.until_snapshot(lambda s: s.tick >= stopped_after + 30)
            found = await health(session, primary.admin_url)
            assert found["standbys"] == [] and found["degraded"] is True


async def test_with_min_standbys_nothing_is_shown_without_one() -> None:
    async with (
        cluster() as (nodes, session),
        primary_with_player_and_fake(nodes, session, min_standbys=1) as (primary, player, fake),
    ):
        async with background(player.read()):
            await asyncio.sleep(0.3)
            assert player.snapshots == []
            registry = primary.node.metrics.registry
            halted = registry.get_sample_value(
                "arena_ticks_unpublished_total", {"reason": "halted"}
            )
            assert halted is not None and halted > 0
            await fake.connect()
            async with background(fake.run()):
                await player.until_snapshot(lambda s: True)
                assert min(s.tick for s in player.snapshots) > fake.received[1]["tick"] - 2


async def test_a_fenced_primary_steps_down_and_publishes_nothing_more() -> None:
    async with cluster() as (nodes, session):
        primary = await nodes.start(bind(), node_id="alpha", role="primary")
        player = Player(session)
        fake = FakeStandby(session, primary)
        try:
            welcome = await player.join(primary.url)
            assert isinstance(welcome, protocol.WelcomeMessage)
            epoch = welcome.epoch
            await fake.connect()
            async with background(player.read()), background(fake.run()):
                await until_live(session, primary.admin_url, "fake")
                await player.until_snapshot(lambda s: s.tick > fake.last_acked - 5)
                fake.fence_epoch = epoch + 1

                async def stepped_down() -> dict[str, Any] | None:
                    found = await health(session, primary.admin_url)
                    return found if found["role"] == "standby" else None

                after = await until(stepped_down, "the fenced primary steps down")
                async with asyncio.timeout(WAIT_S):
                    await player.closed.wait()

            assert fake.fenced_tick is not None
            assert after["epoch"] == epoch + 1
            assert player.snapshots, "the player was shown ticks before the fence"
            assert all(s.epoch == epoch for s in player.snapshots)
            assert max(s.tick for s in player.snapshots) < fake.fenced_tick
            assert [(e.code, e.fatal) for e in player.errors] == [("not_primary", True)]
            assert player.ws is not None and player.ws.close_code == WSCloseCode.GOING_AWAY
            # A player arriving now is sent elsewhere.
            late = Player(session)
            try:
                refusal = await late.join(primary.url, "late")
            finally:
                await late.close()
            assert isinstance(refusal, protocol.ErrorMessage)
            assert refusal.code == "not_primary"
        finally:
            await player.close()
            await fake.close()


def gauged_role(running: RunningNode) -> tuple[list[str], float | None]:
    """The roles ``arena_node_role`` says 1 for, and ``arena_node_epoch``."""
    get = running.node.metrics.registry.get_sample_value
    roles = [r.value for r in Role if get("arena_node_role", {"region": REGION, "role": r.value})]
    return roles, get("arena_node_epoch", {"region": REGION})


async def resume_after(kill: str) -> tuple[protocol.WelcomeMessage, Any, dict[str, Any], Any]:
    """A player joins the primary and sends inputs; the primary is killed (``crash``) or
    stopped (``stop``); somebody tries the seat with a forged token, then the player comes
    back to the promoted standby with its own."""
    async with cluster() as (nodes, session):
        primary, standby = await primary_and_standby(nodes)
        player, resumed, forger = Player(session), Player(session), Player(session)
        try:
            await until_live(session, primary.admin_url, "beta")
            welcome = await player.join(primary.url)
            assert isinstance(welcome, protocol.WelcomeMessage)
            assert welcome.standbys == (standby.url + "/ws",)
            async with background(player.read()):
                await player.send_inputs(range(20))
                await player.until_snapshot(lambda s: s.ack == 19)
                last_seen = max(s.tick for s in player.snapshots)
                # A loaded machine may have made beta late once since: it must be in sync now,
                # or it rightly may not take over.
                await until_live(session, primary.admin_url, "beta")
                assert gauged_role(standby) == (["standby"], welcome.epoch)
                assert gauged_role(primary) == (["primary"], welcome.epoch)

                await getattr(primary, kill)()

                async def promoted() -> dict[str, Any] | None:
                    found = await health(session, standby.admin_url)
                    done = found["role"] == "primary" and "first_tick_at" in found["failover"]
                    return found if done else None

                after = await until(promoted, "the standby promotes itself")
                assert gauged_role(standby) == (["primary"], after["epoch"])
            forged = forge(welcome, secret=OTHER_SECRET)
            refusal = await forger.join(standby.url, "ada", forged)
            back = await resumed.join(standby.url, "ada", welcome.token)
            if isinstance(back, protocol.WelcomeMessage):
                async with background(resumed.read()):
                    await resumed.until_snapshot(lambda s: s.epoch == back.epoch)
                assert min(s.tick for s in resumed.snapshots) > last_seen
                assert all(s.ack == 19 for s in resumed.snapshots)
            assert after["failover"]["promoted_at_tick"] >= last_seen  # nothing shown is lost
            return welcome, back, after, refusal
        finally:
            await player.close()
            await resumed.close()
            await forger.close()


async def test_when_the_primary_dies_the_standby_promotes_and_players_resume() -> None:
    welcome, back, after, refusal = await resume_after("crash")

    failover = after["failover"]
    assert after["epoch"] == welcome.epoch + 1
    assert failover["previous_primary"] == "alpha"
    assert failover["detected_at"] <= failover["promoted_at"] <= failover["first_tick_at"]
    assert failover["first_tick"] > failover["promoted_at_tick"]
    assert failover["primary_hash"] == failover["promoted_hash"]
    assert after["players"] == 1  # the seat waits for its player
    assert isinstance(back, protocol.WelcomeMessage), back
    assert back.player_id == welcome.player_id
    assert back.ack == 19  # every input it was told about is still applied
    assert back.epoch == welcome.epoch + 1
    assert back.tick >= failover["promoted_at_tick"]
    assert isinstance(refusal, protocol.ErrorMessage)
    assert (refusal.code, refusal.fatal) == ("invalid_token", True)


async def test_players_resume_after_a_graceful_stop_of_the_primary() -> None:
    welcome, back, after, _ = await resume_after("stop")

    assert after["epoch"] == welcome.epoch + 1
    assert isinstance(back, protocol.WelcomeMessage), back
    assert (back.player_id, back.ack) == (welcome.player_id, 19)


@pytest.mark.parametrize(
    "forge",
    [
        lambda welcome: forge(welcome, secret=OTHER_SECRET),
        lambda welcome: forge(welcome, region="another-region"),
        lambda welcome: forge(welcome, slot_offset=1),
        lambda welcome: forge(welcome, name="eve"),
        lambda welcome: forge(welcome, seat_offset=1),  # a later player in the same slot
        lambda welcome: forge(welcome, expires_at=time.time() - 1),
        lambda welcome: welcome.token[:-1] + ("A" if welcome.token[-1] != "A" else "B"),
        lambda welcome: "garbage",
    ],
    ids=[
        "other_secret",
        "other_region",
        "other_seat",
        "other_name",
        "other_incarnation",
        "expired",
        "bad_mac",
        "garbage",
    ],
)
async def test_a_token_that_proves_no_free_seat_is_refused(
    forge: Callable[[protocol.WelcomeMessage], str],
) -> None:
    async with cluster() as (nodes, session):
        primary = await nodes.start(bind(), node_id="alpha", role="primary")
        player, intruder = Player(session), Player(session)
        try:
            welcome = await player.join(primary.url)
            assert isinstance(welcome, protocol.WelcomeMessage)

            refusal = await intruder.join(primary.url, "ada", forge(welcome))

            assert isinstance(refusal, protocol.ErrorMessage)
            assert (refusal.code, refusal.fatal) == ("invalid_token", True)
            assert intruder.ws is not None
            async with asyncio.timeout(WAIT_S):
                await intruder.ws.receive()
            assert intruder.ws.close_code == WSCloseCode.POLICY_VIOLATION
            assert (await health(session, primary.admin_url))["players"] == 1
        finally:
            await player.close()
            await intruder.close()


async def test_a_token_of_a_seat_somebody_is_connected_to_is_refused_for_now() -> None:
    # Most likely the player's own connection, not noticed gone yet: the token stays good.
    async with cluster() as (nodes, session):
        primary = await nodes.start(bind(), node_id="alpha", role="primary")
        player, again = Player(session), Player(session)
        try:
            welcome = await player.join(primary.url)
            assert isinstance(welcome, protocol.WelcomeMessage)

            refusal = await again.join(primary.url, "ada", welcome.token)

            assert isinstance(refusal, protocol.ErrorMessage)
            assert (refusal.code, refusal.fatal) == ("seat_in_use", True)
            assert again.ws is not None
            async with asyncio.timeout(WAIT_S):
                await again.ws.receive()
            assert again.ws.close_code == WSCloseCode.TRY_AGAIN_LATER
            assert (await health(session, primary.admin_url))["players"] == 1
        finally:
            await player.close()
            await again.close()


async def test_a_token_with_a_non_ascii_mac_is_refused_as_invalid() -> None:
    async with cluster() as (nodes, session):
        primary = await nodes.start(bind(), node_id="alpha", role="primary")
        player, intruder = Player(session), Player(session)
        try:
            welcome = await player.join(primary.url)
            assert isinstance(welcome, protocol.WelcomeMessage)
            body = welcome.token.split(".")[0]

            refusal = await intruder.join(primary.url, "ada", body + ".\u00e9")

            assert isinstance(refusal, protocol.ErrorMessage)
            assert refusal.code == "invalid_token"
        finally:
            await player.close()
            await intruder.close()


async def test_a_node_started_as_primary_in_a_led_region_joins_as_a_standby() -> None:
    # What systemd does to a killed primary after its standby took over: it starts it again
    # with the same arguments. It must not start a second, empty match.
    async with cluster() as (nodes, session):
        primary, _standby = await primary_and_standby(nodes)
        late = await nodes.start(
            bind(), node_id="gamma", role="primary", peers=(primary.url,), failover_timeout=0.5
        )
        found = await health(session, late.admin_url)
        assert found["role"] == "standby" and found["epoch"] <= 1
        await until_live(session, primary.admin_url, "gamma")
        assert (await health(session, primary.admin_url))["role"] == "primary"


async def test_a_dropped_player_keeps_its_seat_for_the_grace_period() -> None:
    async with cluster() as (nodes, session):
        primary = await nodes.start(bind(), node_id="alpha", role="primary", seat_grace=0.5)
        player, back, late = Player(session), Player(session), Player(session)
        try:
            welcome = await player.join(primary.url)
            assert isinstance(welcome, protocol.WelcomeMessage)
            async with background(player.read()):
                await player.send_inputs(range(10))
                await player.until_snapshot(lambda s: s.ack == 9)
            await player.close()  # the connection drops (a Wi-Fi hiccup, a crashed client)
            again = await back.join(primary.url, "ada", welcome.token)
            assert isinstance(again, protocol.WelcomeMessage), again
            assert (again.player_id, again.ack) == (welcome.player_id, 9)
            await back.close()
            await asyncio.sleep(1.0)  # past the grace (freed by the primary's peer watch)
            refusal = await late.join(primary.url, "ada", welcome.token)
            assert isinstance(refusal, protocol.ErrorMessage)
            assert refusal.code == "invalid_token"
        finally:
            for one in (player, back, late):
                await one.close()
