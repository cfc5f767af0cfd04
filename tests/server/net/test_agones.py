"""The node's Agones SDK client: the lifecycle's decisions exactly (sans-I/O), then the
client against a fake SDK server that implements the documented REST contract, then a
real in-process node driving it (Ready after its warm-up, Health while it ticks and none
while its tick loop is stalled, labels, Allocate and Shutdown at the match's start and
end, Shutdown as it stops). A real ``sdk-server --local`` is exercised by
tests/integration/test_agones_node.py."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from server.lifecycle import (
    DEFAULT_SDK_URL,
    Action,
    AgonesLifecycle,
    NodeView,
    Outcome,
    SdkCall,
    check_label_value,
    check_sdk_url,
    sdk_url_from_env,
)
from server.net.agones import AgonesSdk, Reporter, drive, exchange, lifecycle_context
from server.net.app import NODE, NODE_TASK, NodeConfig, create_app
from shared import protocol
from tests.server.net.conftest import LogLines

URL = "http://10.0.0.7:7777"
LABEL_PREFIX = "agones.dev/sdk-"  # what the SDK server puts before a key (SetLabel)


def view(status: str = "ready", role: str = "primary", epoch: int = 1, players: int = 0,
         ticks: int = 0) -> NodeView:  # fmt: skip
    return NodeView(status, role, epoch, players, ticks)


def sent(calls: list[SdkCall]) -> list[str]:
    return [
        f"{c.action.method} {c.action.path}" + (f" {c.key}={c.value}" if c.key else "")
        for c in calls
    ]


def answer_all(lifecycle: AgonesLifecycle, calls: list[SdkCall], now: float) -> None:
    for call in calls:
        lifecycle.answered(call, Outcome.OK, now)


# -- the lifecycle, sans-I/O -----------------------------------------------------------


def test_a_warming_node_only_pings_then_labels_annotates_and_says_ready() -> None:
    life = AgonesLifecycle("eu-west", URL, health_interval=2.0)
    assert sent(life.poll(0.0, view("warming_up", "starting", 0))) == ["POST /health"]
    assert life.poll(1.0, view("warming_up", "starting", 0)) == []
    calls = life.poll(2.5, view("ready", "primary", 1, ticks=3))
    assert sent(calls) == [
        "POST /health",
        "PUT /metadata/label region=eu-west",
        "PUT /metadata/label role=primary",
        "PUT /metadata/label epoch=1",
        "PUT /metadata/annotation url=http://10.0.0.7:7777",
        "POST /ready",
    ]
    assert [c.body for c in calls[:2]] == [{}, {"key": "region", "value": "eu-west"}]
    answer_all(life, calls, 2.5)
    then = life.poll(2.6, view("ready", "primary", 1, ticks=5))
    assert sent(then) == ["GET /gameserver"] and then[0].body is None
    answer_all(life, then, 2.6)
    assert life.poll(2.7, view("ready", "primary", 1, ticks=10)) == []


def test_health_is_pinged_while_the_primary_ticks_and_withheld_while_its_loop_stalls() -> None:
    life = AgonesLifecycle("r", URL, health_interval=2.0)
    for t in (0.0, 0.1):  # ready, then GET /gameserver
        answer_all(life, life.poll(t, view(ticks=1)), t)
    assert sent(life.poll(2.0, view(ticks=120))) == ["POST /health"]
    assert life.poll(4.0, view(ticks=120)) == [] and life.pulse.stalled  # no tick since
    assert life.poll(9.0, view(ticks=120)) == [] and life.pulse.stalled
    assert sent(life.poll(9.1, view(ticks=121))) == ["POST /health"]  # it ticks again
    assert not life.pulse.stalled


@pytest.mark.parametrize("status,role", [("ready", "standby"), ("warming_up", "starting"),
                                         ("starting", "starting")])  # fmt: skip
def test_a_node_that_does_not_tick_is_alive_while_its_event_loop_runs(
    status: str, role: str
) -> None:
    life = AgonesLifecycle("r", URL, health_interval=2.0)
    pings = [sum(c.action is Action.HEALTH for c in life.poll(t, view(status, role)))
             for t in (0.0, 1.0, 2.0, 3.0, 4.0)]  # fmt: skip
    assert pings == [1, 0, 1, 0, 1]


def test_labels_follow_a_promotion_and_a_step_down() -> None:
    life = AgonesLifecycle("r", URL, health_interval=1e9)
    answer_all(life, life.poll(0.0, view(role="standby", epoch=1)), 0.0)
    answer_all(life, life.poll(0.1, view(role="standby", epoch=1)), 0.1)  # GET /gameserver
    assert life.poll(0.2, view(role="standby", epoch=1)) == []
    promoted = life.poll(0.3, view(role="primary", epoch=2))
    assert sent(promoted) == ["PUT /metadata/label role=primary", "PUT /metadata/label epoch=2"]
    answer_all(life, promoted, 0.3)
    assert sent(life.poll(0.4, view(role="standby", epoch=3))) == [
        "PUT /metadata/label role=standby",
        "PUT /metadata/label epoch=3",
    ]


def test_allocate_when_the_match_starts_and_shutdown_when_it_ends() -> None:
    standby = AgonesLifecycle("r", URL, health_interval=1e9)
    for t in (0.0, 0.1):
        answer_all(standby, standby.poll(t, view(role="standby", players=3)), t)
    assert standby.poll(0.2, view(role="standby", players=3)) == []  # it follows the match
    assert not standby.allocated
    life = AgonesLifecycle("r", URL, health_interval=1e9)
    for t in (0.0, 0.1):
        answer_all(life, life.poll(t, view()), t)
    start = life.poll(0.3, view(players=1))
    assert sent(start) == ["POST /allocate"] and start[0].reason == "match_start"
    answer_all(life, start, 0.3)
    assert life.poll(0.4, view(players=7)) == []
    end = life.poll(0.5, view(players=0))
    assert sent(end) == ["POST /shutdown"] and end[0].reason == "match_end"
    answer_all(life, end, 0.5)
    assert life.finished and life.poll(9.0, view(players=2)) == [] and life.farewell() == []


def test_a_stopping_node_says_shutdown_once() -> None:
    life = AgonesLifecycle("r", URL, health_interval=2.0)
    assert sent(life.farewell()) == ["POST /shutdown"]
    calls = life.poll(0.0, view("stopping"))
    assert sent(calls) == ["POST /shutdown"] and calls[0].reason == "stopping"
    answer_all(life, calls, 0.0)
    assert life.poll(5.0, view("stopping")) == [] and life.farewell() == []


def test_an_unanswered_call_is_tried_again_after_a_growing_backoff() -> None:
    life = AgonesLifecycle("r", URL, health_interval=1e9, jitter=lambda: 1.0)
    now, waits = 0.0, []
    for _ in range(6):
        calls = life.poll(now, view())
        assert "PUT /metadata/label region=r" in sent(calls)  # not done: asked again
        life.answered(calls[0], Outcome.UNANSWERED, now)
        assert life.poll(life.retry_at - 1e-6, view()) == []  # backing off
        waits.append(round(life.retry_at - now, 3))
        now = life.retry_at
    assert waits == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0]
    first = life.poll(now, view())
    answer_all(life, first, now)  # answered: the next failure starts from 0.5 s again
    assert life.readied
    life.answered(SdkCall(Action.HEALTH), Outcome.UNANSWERED, now)
    assert life.retry_at - now == 0.5


def test_a_refused_call_is_not_repeated() -> None:
    life = AgonesLifecycle("r", URL, health_interval=1e9)
    calls = life.poll(0.0, view())
    for call in calls:
        life.answered(call, Outcome.REFUSED, 0.0)
    assert sent(life.poll(0.0, view())) == ["GET /gameserver"]


def test_the_sdk_url_and_the_region_label_are_checked_in_one_line() -> None:
    assert check_sdk_url("http://localhost:9358/") == "http://localhost:9358"
    assert check_sdk_url("http://127.0.0.1:1") == "http://127.0.0.1:1"
    for bad in ("localhost:9358", "https://localhost:9358", "http://localhost",
                "http://localhost:99999", "http://:9358", "http://localhost:9358/sdk"):  # fmt: skip
        with pytest.raises(ValueError, match="--agones-url"):
            check_sdk_url(bad)
    assert check_label_value("--region", "eu-west_2.a") == "eu-west_2.a"
    for bad in ("eu west", "-eu", "eu-", "x" * 64, "eu/west"):
        with pytest.raises(ValueError, match="Agones label"):
            check_label_value("--region", bad)
    assert sdk_url_from_env({}) == DEFAULT_SDK_URL == "http://localhost:9358"
    assert sdk_url_from_env({"AGONES_SDK_HTTP_PORT": "9400"}) == "http://localhost:9400"
    with pytest.raises(ValueError, match="--region"):
        NodeConfig(region="eu west", agones_url="http://localhost:9358")
    with pytest.raises(ValueError, match="--agones-url"):
        NodeConfig(agones_url="http://localhost")


# -- a fake SDK server -------------------------------------------------------------------


class FakeSdkServer:
    """Agones' SDK REST gateway as documented (agones.dev/site/docs/guides/client-sdks/rest/,
    ``sdks/swagger/sdk.swagger.json`` of v1.31.0) and as ``sdk-server --local`` answers:
    the lifecycle calls take a JSON object (``sdkEmpty``: an empty body is answered 400),
    the metadata calls ``{"key", "value"}`` strings (stored under ``agones.dev/sdk-``),
    ``GET /gameserver`` the GameServer. Every call is recorded, with its time."""

    def __init__(self) -> None:
        self.calls: list[tuple[float, str, Any]] = []
        self.state = "Scheduled"
        self.labels: dict[str, str] = {"islocal": "true"}
        self.annotations: dict[str, str] = {}
        self.refuse: set[str] = set()  # "METHOD /path" answered 400
        self.runner: web.AppRunner | None = None

    def paths(self, since: float = 0.0) -> list[str]:
        return [call for at, call, _ in self.calls if at >= since]

    def count(self, call: str, since: float = 0.0) -> int:
        return self.paths(since).count(call)

    def application(self) -> web.Application:
        app = web.Application()
        for path, state in (("/ready", "Ready"), ("/allocate", "Allocated"),
                            ("/shutdown", "Shutdown"), ("/health", None)):  # fmt: skip
            app.router.add_post(path, self._lifecycle(state))
        app.router.add_put("/metadata/label", self._metadata(self.labels))
        app.router.add_put("/metadata/annotation", self._metadata(self.annotations))
        app.router.add_get("/gameserver", self._gameserver)
        return app

    async def _body(self, request: web.Request) -> Any:
        try:
            return json.loads(await request.read())
        except ValueError:
            return None

    def _refused(self, request: web.Request, body: Any) -> web.Response | None:
        what = f"{request.method} {request.path}"
        self.calls.append((time.monotonic(), what, body))
        if what in self.refuse:
            return web.json_response({"code": 3, "message": "refused by the test"}, status=400)
        return None

    def _lifecycle(self, state: str | None) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def handler(request: web.Request) -> web.Response:
            body = await self._body(request)
            if (refused := self._refused(request, body)) is not None:
                return refused
            if not isinstance(body, dict):
                return web.json_response({"code": 3, "message": "unexpected EOF"}, status=400)
            if state is not None:
                self.state = state
            return web.json_response({})

        return handler

    def _metadata(self, into: dict[str, str]) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def handler(request: web.Request) -> web.Response:
            body = await self._body(request)
            if (refused := self._refused(request, body)) is not None:
                return refused
            if not (isinstance(body, dict) and set(body) == {"key", "value"}
                    and all(isinstance(v, str) for v in body.values())):  # fmt: skip
                return web.json_response({"code": 3, "message": "bad KeyValue"}, status=400)
            into[LABEL_PREFIX + body["key"]] = body["value"]
            return web.json_response({})

        return handler

    async def _gameserver(self, request: web.Request) -> web.Response:
        self._refused(request, None)
        return web.json_response({
            "object_meta": {"name": "local", "namespace": "default", "labels": self.labels,
                            "annotations": self.annotations},
            "status": {"state": self.state, "address": "127.0.0.1",
                       "ports": [{"name": "default", "port": 7777}]},
        })  # fmt: skip

    async def start(self, port: int = 0) -> str:
        self.runner = web.AppRunner(self.application())
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", port)
        await site.start()
        bound = self.runner.addresses[0][1]
        return f"http://127.0.0.1:{bound}"

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()


@contextlib.asynccontextmanager
async def fake_sdk(port: int = 0) -> AsyncIterator[tuple[FakeSdkServer, str]]:
    fake = FakeSdkServer()
    url = await fake.start(port)
    try:
        yield fake, url
    finally:
        await fake.stop()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def eventually(check: Callable[[], bool], within: float = 10.0) -> None:
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, "not within the time"
        await asyncio.sleep(0.01)


# -- the client against the fake ---------------------------------------------------------


async def test_the_client_makes_the_documented_calls() -> None:
    async with fake_sdk() as (fake, url), aiohttp.ClientSession() as session:
        sdk = AgonesSdk(url + "/", session)
        life = AgonesLifecycle("eu-west", URL, health_interval=1e9)
        report = Reporter(dict)
        for _ in range(2):
            await exchange(life, sdk, life.poll(0.0, view(players=1)), time.monotonic, report)
        await exchange(life, sdk, life.poll(0.0, view(players=1)), time.monotonic, report)
        assert fake.paths() == [
            "POST /health",
            "PUT /metadata/label", "PUT /metadata/label", "PUT /metadata/label",
            "PUT /metadata/annotation",
            "POST /ready",
            "GET /gameserver",
            "POST /allocate",
        ]  # fmt: skip
        assert [body for _, _, body in fake.calls[:2]] == [{}, {"key": "region",
                                                                 "value": "eu-west"}]  # fmt: skip
        assert fake.state == "Allocated"
        assert fake.labels == {
            "islocal": "true",
            "agones.dev/sdk-region": "eu-west",
            "agones.dev/sdk-role": "primary",
            "agones.dev/sdk-epoch": "1",
        }
        assert fake.annotations == {"agones.dev/sdk-url": URL}


async def test_a_missing_sidecar_is_logged_and_retried_until_it_answers(logs: LogLines) -> None:
    port = free_port()
    async with aiohttp.ClientSession() as session:
        life = AgonesLifecycle("r", URL, health_interval=0.05)
        task = asyncio.create_task(
            drive(
                life,
                AgonesSdk(f"http://127.0.0.1:{port}", session),
                lambda: view(ticks=1),
                time.monotonic,
                Reporter(dict),
                poll=0.01,
            )
        )
        try:
            await eventually(lambda: bool(logs.events("agones_sdk_unanswered")))
            assert 'call="POST /health"' in logs.events("agones_sdk_unanswered")[0]
            assert not life.readied
            async with fake_sdk(port) as (fake, _):  # the sidecar starts late
                await eventually(lambda: fake.state == "Ready")
                assert fake.count("POST /ready") == 1
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    assert len(logs.events("agones_sdk_unanswered")) == 1  # throttled: one line a while


async def test_a_refused_call_is_logged_once(logs: LogLines) -> None:
    async with fake_sdk() as (fake, url), aiohttp.ClientSession() as session:
        fake.refuse.add("PUT /metadata/annotation")
        life = AgonesLifecycle("r", URL, health_interval=1e9)
        for _ in range(3):
            await exchange(life, AgonesSdk(url, session), life.poll(0.0, view()),
                           time.monotonic, Reporter(dict))  # fmt: skip
        assert fake.count("PUT /metadata/annotation") == 1 and fake.state == "Ready"
        (line,) = logs.events("agones_sdk_refused")
        assert 'call="PUT /metadata/annotation"' in line and "400" in line


# -- a real node driving it ----------------------------------------------------------------


@contextlib.asynccontextmanager
async def agones_node(
    sdk_url: str, **options: Any
) -> AsyncIterator[tuple[web.Application, asyncio.Event]]:
    """An in-process node on a port of its own with the SDK client, as ``arena-server
    --agones`` wires it, pinging every 0.1 s, and an Event that holds its tick loop while
    set."""
    sock = socket.create_server(("127.0.0.1", 0))
    public_url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    config = NodeConfig(region="eu-west", hitreg_backend="reference", agones_url=sdk_url,
                        public_url=public_url, **options)  # fmt: skip
    app = create_app(config)
    node = app[NODE]
    stall = asyncio.Event()
    tick = node.ticker.run_tick

    async def stallable_tick(number: int) -> None:
        if stall.is_set():
            await asyncio.Event().wait()  # held, as a tick waiting forever would be
        await tick(number)

    node.ticker.run_tick = stallable_tick  # type: ignore[method-assign]
    app.cleanup_ctx.append(lifecycle_context(node, poll=0.01, health_interval=0.1))
    runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=0.5)
    await runner.setup()
    try:
        await web.SockSite(runner, sock).start()
        ready = asyncio.ensure_future(node.became_ready.wait())
        await asyncio.wait([ready, app[NODE_TASK]], return_when=asyncio.FIRST_COMPLETED)
        ready.cancel()
        if app[NODE_TASK].done():
            app[NODE_TASK].result()
        yield app, stall
    finally:
        await runner.cleanup()


async def test_a_node_says_ready_after_its_warm_up_labels_itself_and_pings_while_ticking(
    logs: LogLines,
) -> None:
    async with fake_sdk() as (fake, url):
        async with agones_node(url) as (app, _):
            node = app[NODE]
            await eventually(lambda: fake.state == "Ready")
            assert len(logs.events("warmed_up")) == 1
            # Ready came after the warm-up and the role: the labels first.
            order = fake.paths()
            assert order.index("POST /ready") > order.index("PUT /metadata/label")
            assert node.warm and fake.labels["agones.dev/sdk-role"] == "primary"
            assert fake.labels["agones.dev/sdk-region"] == "eu-west"
            assert fake.labels["agones.dev/sdk-epoch"] == str(node.matches.epoch) == "1"
            await eventually(lambda: bool(logs.events("agones_gameserver")))
            assert logs.events("agones_gameserver")[0].startswith(
                "event=agones_gameserver gameserver=local state=Ready"
            )
            began = time.monotonic()
            await asyncio.sleep(0.6)
            assert fake.count("POST /health", began) >= 3
        assert fake.paths()[-1] == "POST /shutdown" and fake.state == "Shutdown"
        assert "reason=stopping" in logs.events("agones_shutdown")[0]


async def test_a_stalled_tick_loop_stops_the_health_pings(logs: LogLines) -> None:
    async with fake_sdk() as (fake, url), agones_node(url) as (app, stall):
        await eventually(lambda: fake.count("POST /health") >= 2)
        stall.set()
        await asyncio.sleep(0.25)  # a ping for the last ticks may still go
        stalled_at = time.monotonic()
        await asyncio.sleep(0.8)  # eight intervals
        assert fake.count("POST /health", stalled_at) == 0
        assert logs.events("agones_health_withheld")
        assert app[NODE].ready  # the node is still up: only its tick loop is stuck


async def test_allocate_when_the_first_player_joins_and_shutdown_when_the_match_ends(
    logs: LogLines,
) -> None:
    async with fake_sdk() as (fake, url), agones_node(url, seat_grace=0.0) as (app, _):
        await eventually(lambda: fake.state == "Ready")
        async with aiohttp.ClientSession() as session:
            ws = await session.ws_connect(app[NODE].config.public_url + "/ws")
            await ws.send_bytes(protocol.encode(protocol.JoinMessage(
                protocol.PROTOCOL_VERSION, "probe")))  # fmt: skip
            await ws.receive()
            await eventually(lambda: bool(logs.events("agones_allocate")))
            assert fake.state == "Allocated"
            assert "reason=match_start" in logs.events("agones_allocate")[0]
            await ws.close()
        # (The node logs a call once the SDK answered it, after the fake took the state:
        # the line is waited for, not only the state; a busy CI run once looked between.)
        await eventually(lambda: bool(logs.events("agones_shutdown")))
        assert fake.state == "Shutdown"
        assert "reason=match_end" in logs.events("agones_shutdown")[0]
