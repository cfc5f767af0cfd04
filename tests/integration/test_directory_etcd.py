"""Two ``arena-directory --registry etcd://`` processes over one real etcd: nodes heartbeat to
either, bots are seated through both, one directory is SIGKILLed while seats are being
handed out, and nothing changes for players (``docs/routing.md``)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from client_sim.geography import DirectoryError, NoCapacity
from client_sim.latency import LinkProfile
from client_sim.routing import Directories, route_bots
from server.directory.net import cli
from server.directory.net.etcd import EtcdRegistry
from server.directory.policy import Placement
from server.net.registration import ClaimLedger, heartbeat_loop
from shared.directory import Heartbeat
from tests.integration.etcd import running_etcd
from tests.processes import Session, start_session

pytestmark = pytest.mark.integration

SECRET = "etcd-directory-integration-secret"
CAPACITY = 15  # seats per node
TIMEOUT_S = 3.0  # the directories' heartbeat timeout (and so the nodes' lease TTL)
_URL = re.compile(r"event=listening url=(\S+)")


@contextlib.contextmanager
def directory(registry: str) -> Iterator[tuple[Session, str]]:
    """An ``arena-directory`` sharing ``registry``, in a session of its own, until the block
    ends (stopped with SIGTERM, then SIGKILL, whatever happened)."""
    env = {**os.environ, "ARENA_CLUSTER_SECRET": SECRET, "PYTHONUNBUFFERED": "1"}
    command = [
        sys.executable, "-m", "server.directory.net.cli", "--host", "127.0.0.1", "--port", "0",
        "--registry", registry, "--heartbeat-timeout", str(TIMEOUT_S),
        "--reservation-ttl", "120", "--log-level", "warning",
    ]  # fmt: skip
    with start_session(command, env) as session:
        session.wait_for("event=listening", within=30)
        found = next(m for line in session.lines if (m := _URL.search(line)))
        yield session, found.group(1)


@contextlib.asynccontextmanager
async def probes() -> AsyncIterator[str]:
    """What the bots time: any HTTP answer is a round trip (one server for both nodes)."""

    async def answer(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_get("/probe/{node}", answer)
    runner = web.AppRunner(app)
    await runner.setup()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    try:
        await web.TCPSite(runner, "127.0.0.1", port).start()
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


def node_beat(node_id: str, base: str) -> Heartbeat:
    return Heartbeat(
        node_id=node_id,
        region="eu",
        endpoint=f"ws://127.0.0.1:9/{node_id}/ws",
        probe=f"{base}/probe/{node_id}",
        role="primary",
        epoch=1,
        matches=1,
        players=0,
        capacity=CAPACITY,
    )


async def listed(http: aiohttp.ClientSession, url: str) -> dict[str, int]:
    """Node id -> outstanding reservations, as ``url`` lists region eu."""
    async with http.get(f"{url}/regions") as response:
        body = await response.json()
    return {
        n["node_id"]: n["reserved"]
        for region in body["regions"]
        for n in region["primaries"]
        if region["region"] == "eu"
    }


async def until(check: Any, within: float = 20.0) -> None:
    async with asyncio.timeout(within):
        while not await check():
            await asyncio.sleep(0.1)


async def test_two_directories_one_killed_mid_seating_no_seat_lost_none_over_seated() -> None:
    with (
        running_etcd() as etcd,
        directory(etcd.endpoint) as (first, one),
        directory(etcd.endpoint) as (_, two),
    ):
        async with probes() as base, aiohttp.ClientSession() as http:
            beats = {"eu-1": node_beat("eu-1", base), "eu-2": node_beat("eu-2", base)}
            # Each node prefers another directory; both fall back on the other one.
            loops = {
                node_id: asyncio.create_task(
                    heartbeat_loop(
                        directory_url=urls,
                        secret=SECRET.encode(),
                        describe=functools.partial(beats.__getitem__, node_id),
                        interval=0.5,
                        claims=ClaimLedger(),
                    )
                )
                for node_id, urls in (("eu-1", f"{one},{two}"), ("eu-2", f"{two},{one}"))
            }
            try:
                await run_the_scenario(http, first, one, two, loops)
            finally:
                for task in loops.values():
                    task.cancel()
                await asyncio.gather(*loops.values(), return_exceptions=True)


async def run_the_scenario(
    http: aiohttp.ClientSession,
    first: Session,
    one: str,
    two: str,
    loops: dict[str, asyncio.Task[None]],
) -> None:
    async def both_registered() -> bool:
        seen = [set(await listed(http, url)) for url in (one, two)]
        return seen == [{"eu-1", "eu-2"}] * 2

    await until(both_registered)

    # Bots through route_bots, half asking each directory first: 10 seats.
    waves = [Directories(f"{one},{two}"), Directories(f"{two},{one}")]
    seated = await asyncio.gather(
        *(
            route_bots(
                directory=d,
                population="eu:1.0",
                count=5,
                seed=seed,
                profile=LinkProfile(),
                name_prefix=f"wave{seed}",
            )
            for seed, d in enumerate(waves)
        )
    )
    granted: dict[str, int] = {"eu-1": 0, "eu-2": 0}
    for _, routes in seated:
        for route in routes:
            granted[route.node_id] += 1
    assert sum(granted.values()) == 10

    # Then more players than seats are left, from four clients, two sharing each list of
    # directories (one preferring each); the first directory is SIGKILLed after 8 answers.
    shared = [Directories(f"{one},{two}"), Directories(f"{two},{one}")]
    clients = [shared[i % 2] for i in range(4)]
    refused: list[str] = []
    answered = 0
    killed = asyncio.Event()

    async def client(index: int, directories: Directories) -> None:
        nonlocal answered
        for n in range(8):
            try:
                seat = await directories.seat(f"c{index}-{n}", {"eu": 20.0}, http)
                granted[seat.node_id] += 1
            except NoCapacity as refusal:
                refused.append(refusal.code)
            answered += 1
            if answered == 8:
                os.kill(first.process.pid, signal.SIGKILL)
                killed.set()
            await asyncio.sleep(0.05)

    await asyncio.gather(*(client(i, d) for i, d in enumerate(clients)))
    assert killed.is_set() and first.process.wait(5) == -signal.SIGKILL
    everyone = waves + shared
    retried = sum(d.retries for d in everyone)
    figures: dict[str, object] = {
        "seat_requests": sum(d.requests for d in everyone),
        "retried": retried,
        "failed": sum(d.failures for d in everyone),
        "granted": granted,
        "refused": len(refused),
    }
    async with http.get(f"{two}/health") as response:
        figures["seat_conflicts_at_survivor"] = (await response.json())["seat_conflicts"]
    print("directory-etcd figures:", json.dumps(figures))
    assert figures["failed"] == 0, figures
    assert retried >= 1, figures  # the clients preferring the dead one moved on
    assert set(refused) <= {"no_capacity"}, refused
    # Nobody over-seated: as answered, and as the surviving directory counts it in etcd.
    assert all(count <= CAPACITY for count in granted.values()), figures
    reserved = await listed(http, two)
    assert all(count <= CAPACITY for count in reserved.values()), reserved
    # Every seat was handed out (a seat whose answer died with the directory is retried,
    # and the retry releases the first reservation).
    assert sum(reserved.values()) == 2 * CAPACITY, reserved
    assert sum(granted.values()) >= 2 * CAPACITY - retried, figures

    # eu-1 preferred the dead directory: its beats went on to the other one, so after
    # two heartbeat timeouts it is still listed; eu-2 stops beating and its lease expires.
    loops["eu-2"].cancel()
    await asyncio.sleep(2 * TIMEOUT_S)

    async def only_eu_1() -> bool:
        return set(await listed(http, two)) == {"eu-1"}

    await until(only_eu_1, within=TIMEOUT_S + 5)
    async with http.get(f"{two}/health") as response:
        health = await response.json()
    assert (health["registry"], health["nodes_known"]) == ("etcd", 1)


def test_an_etcd_that_does_not_answer_stops_the_command_with_one_line_and_exit_2() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens there once closed
    env = {**os.environ, "ARENA_CLUSTER_SECRET": SECRET}
    done = subprocess.run(
        [sys.executable, "-m", "server.directory.net.cli", "--port", "0",
         "--registry", f"etcd://127.0.0.1:{port}"],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "unreachable" in lines[0], done.stderr
    assert lines[0].startswith(f"arena-directory: error: --registry etcd://127.0.0.1:{port}")


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        ("etcd", "is neither 'memory' nor etcd://HOST:PORT[,HOST:PORT...]"),
        ("http://127.0.0.1:2379", "is neither 'memory' nor etcd://HOST:PORT[,HOST:PORT...]"),
        ("static", "is neither 'memory' nor etcd://HOST:PORT[,HOST:PORT...]"),
        ("etcd://h", "missing port in etcd address"),
        ("etcd://h:1,h:1", "a member is listed twice"),
    ],
)
def test_a_registry_that_is_neither_memory_nor_etcd_is_one_line_and_exit_2(
    spec: str, reason: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ARENA_CLUSTER_SECRET", SECRET)
    assert cli.main(["--port", "0", "--registry", spec]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("arena-directory: error: --registry: ")
    assert repr(spec) in lines[0] and reason in lines[0]


async def test_a_directory_that_loses_etcd_says_unavailable_and_clients_move_on() -> None:
    with running_etcd() as etcd, directory(etcd.endpoint) as (_, lonely):
        async with aiohttp.ClientSession() as http:
            etcd.stop()
            async with http.post(
                f"{lonely}/seat", json={"player": "p", "rtt_ms": {"eu": 20.0}}
            ) as response:
                body = await response.json()
            assert (response.status, body["error"]) == (503, "unavailable")
            async with http.get(f"{lonely}/health") as response:
                assert response.status == 503
            # The bot's client tries the next directory once, then gives up with that error.
            directories = Directories(f"{lonely},http://127.0.0.1:9")
            with pytest.raises(DirectoryError) as failure:
                await directories.seat("p", {"eu": 20.0}, http)
            assert (directories.requests, directories.retries, directories.failures) == (1, 1, 1)
            assert failure.value.code == "unreachable"


async def test_a_seat_chosen_on_a_stale_snapshot_is_refused_by_the_revision_fence() -> None:
    """Two directories read the same last free seat; the second to write reads again."""
    beat = dataclasses.replace(node_beat("eu-1", "http://127.0.0.1:9"), capacity=1)
    with running_etcd() as etcd:
        one, two = (
            EtcdRegistry(etcd.url, heartbeat_timeout=TIMEOUT_S, reservation_ttl=60)
            for _ in range(2)
        )
        await one.start()
        await two.start()
        try:
            await one.record(beat, time.time())
            stale = await one.snapshot("alice")
            fresh = await two.snapshot("bob")
            [region] = stale.views(time.time())
            place = Placement("eu", "eu-1", beat.endpoint, 1, 20.0, "eu", 20.0)
            expires = time.time() + 60
            taken = await two.reserve(
                fresh, place, rid="00000000000000b0", player="bob", expires_at=expires
            )
            assert taken is None  # bob has the only seat
            again = await one.reserve(
                stale, place, rid="00000000000000a1", player="alice", expires_at=expires
            )
            assert again is not None  # alice's directory saw the seat free: refused
            assert [n.free for n in region.nodes] == [1]
            assert [n.free for r in again.views(time.time()) for n in r.nodes] == [0]
        finally:
            await one.close()
            await two.close()


async def test_after_etcd_stalls_past_the_nodes_leases_the_region_comes_back_by_itself() -> None:
    """etcd paused (SIGSTOP) for longer than a node's lease: the directory answers 503
    meanwhile, and once etcd runs again the node's next beats register it anew and players
    are seated, with nothing done by hand."""
    with running_etcd() as etcd, directory(etcd.endpoint) as (_, url):
        async with probes() as base, aiohttp.ClientSession() as http:
            beat = node_beat("eu-1", base)
            loop = asyncio.create_task(
                heartbeat_loop(
                    directory_url=url,
                    secret=SECRET.encode(),
                    describe=lambda: beat,
                    interval=0.5,
                    claims=ClaimLedger(),
                )
            )
            try:

                async def registered() -> bool:
                    return set(await listed(http, url)) == {"eu-1"}

                await until(registered)
                etcd.process.send_signal(signal.SIGSTOP)
                try:
                    await asyncio.sleep(TIMEOUT_S + 2.0)  # past the node's lease
                    async with http.get(f"{url}/health") as response:
                        assert response.status == 503
                finally:
                    etcd.process.send_signal(signal.SIGCONT)
                await until(registered)
                seat = await Directories(url).seat("after-the-stall", {"eu": 20.0}, http)
                assert seat.node_id == "eu-1"
            finally:
                loop.cancel()
                await asyncio.gather(loop, return_exceptions=True)
