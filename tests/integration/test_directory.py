"""A real ``arena-directory`` process on 127.0.0.1 (port picked by the OS), spoken to over HTTP."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest

from server.directory import DEV_SECRET, Heartbeat, sign, signed_heartbeat, verify
from server.directory.auth import HeartbeatSequence, Stamp, sign_heartbeat
from server.directory.net import cli

pytestmark = pytest.mark.integration

SECRET = "integration-cluster-secret-0123"
SEQUENCE = HeartbeatSequence(time.time())
TIMEOUT_S = 1.0  # the failover test's heartbeat timeout; the others use 10 s
_LISTENING = re.compile(r"event=listening url=(\S+)")


@dataclass
class Directory:
    process: subprocess.Popen[str]
    url: str


def _command(*args: str) -> list[str]:
    return [sys.executable, "-m", "server.directory.net.cli", *args]


def _env(secret: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "ARENA_CLUSTER_SECRET"}
    if secret is not None:
        env["ARENA_CLUSTER_SECRET"] = secret
    return {**env, "PYTHONUNBUFFERED": "1"}


@contextlib.contextmanager
def run_directory(*args: str, secret: str | None = SECRET) -> Iterator[Directory]:
    """Start the directory on a free loopback port; SIGTERM it (it must exit 0) at the end."""
    process = subprocess.Popen(
        _command("--host", "127.0.0.1", "--port", "0", "--log-level", "warning", *args),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=_env(secret),
    )
    try:
        assert process.stdout is not None
        deadline = time.monotonic() + 30.0
        url = None
        while url is None:
            line = process.stdout.readline()
            if not line:
                raise RuntimeError(f"the directory exited during start-up ({process.wait()})")
            if match := _LISTENING.search(line):
                url = match.group(1)
            elif time.monotonic() > deadline:
                raise RuntimeError("the directory did not start listening in time")
        yield Directory(process, url)
        process.send_signal(signal.SIGTERM)
        assert process.wait(10) == 0  # a clean stop on SIGTERM
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()


@pytest.fixture
def directory() -> Iterator[Directory]:
    # A long heartbeat timeout: nodes registered once stay live however slow the machine.
    with run_directory(
        "--heartbeat-timeout", "10", "--reservation-ttl", "30", "--overflow-slack-ms", "40"
    ) as running:
        yield running


@pytest.fixture
def quick_directory() -> Iterator[Directory]:
    with run_directory("--heartbeat-timeout", str(TIMEOUT_S)) as running:
        yield running


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
        yield session


def node(node_id: str, region: str, **changes: Any) -> Heartbeat:
    fields: dict[str, Any] = {
        "node_id": node_id,
        "region": region,
        "endpoint": f"ws://127.0.0.1:9/{node_id}/ws",
        "probe": f"http://127.0.0.1:9/{node_id}/probe",
        "role": "primary",
        "epoch": 1,
        "matches": 1,
        "players": 0,
        "capacity": 2,
    }
    fields.update(changes)
    return Heartbeat(**fields)


async def send(
    http: aiohttp.ClientSession, url: str, beat: Heartbeat, secret: str = SECRET
) -> tuple[int, dict[str, Any]]:
    body, headers = signed_heartbeat(secret, beat, now=time.time(), sequence=SEQUENCE.next())
    async with http.post(f"{url}/nodes/heartbeat", data=body, headers=headers) as response:
        return response.status, await response.json()


async def ask(
    http: aiohttp.ClientSession, url: str, player: str, rtt: dict[str, float]
) -> tuple[int, dict[str, Any]]:
    async with http.post(f"{url}/seat", json={"player": player, "rtt_ms": rtt}) as response:
        if response.status == 503:
            assert response.headers["Retry-After"] == "1"
        return response.status, await response.json()


async def get(http: aiohttp.ClientSession, url: str) -> dict[str, Any]:
    async with http.get(url) as response:
        assert response.status == 200
        return await response.json()


async def test_seats_go_to_the_nearest_region_spread_over_nodes_then_overflow(
    directory: Directory, http: aiohttp.ClientSession
) -> None:
    url = directory.url
    for beat in (node("eu-1", "eu"), node("eu-2", "eu"), node("na-1", "na", capacity=1)):
        assert (await send(http, url, beat))[0] == 200
    european = {"eu": 22.0, "na": 95.0, "asia": 170.0}
    granted = [await ask(http, url, f"p{i}", european) for i in range(4)]
    assert [(s, b["region"], b["node_id"]) for s, b in granted] == [
        (200, "eu", "eu-1"),
        (200, "eu", "eu-2"),
        (200, "eu", "eu-1"),
        (200, "eu", "eu-2"),
    ]
    status, answer = granted[0]
    assert answer["endpoint"] == "ws://127.0.0.1:9/eu-1/ws"
    assert (answer["epoch"], answer["rtt_ms"], answer["best_region"]) == (1, 22.0, "eu")
    assert answer["expires_at"] == pytest.approx(time.time() + 30, abs=5)
    reservation = verify(SECRET, answer["reservation"], "eu-1", time.time())
    assert (reservation.player, reservation.region) == ("p0", "eu")

    # eu is full; na is 73 ms farther than eu: beyond the 40 ms slack.
    status, refused = await ask(http, url, "p4", european)
    assert (status, refused["error"]) == (503, "no_capacity")
    assert refused["best_region"] == "eu" and "\n" not in refused["message"]
    # A player between the two: na is within 40 ms of eu, so it overflows there.
    status, overflow = await ask(http, url, "p5", {"eu": 40.0, "na": 75.0})
    assert (status, overflow["region"], overflow["node_id"], overflow["best_region"]) == (
        200,
        "na",
        "na-1",
        "eu",
    )
    assert overflow["overflow"] is True
    # A heartbeat showing the joins settles the reservations, not the other way round.
    _, ack = await send(http, url, node("eu-1", "eu", players=2))
    assert (ack["status"], ack["reserved"]) == ("routable", 0)

    health = await get(http, f"{url}/health")
    assert (health["nodes_live"], health["regions"]) == (3, ["eu", "na"])
    assert (health["seats_granted"], health["seats_refused"]) == (5, 1)
    async with http.get(f"{url}/metrics") as response:
        metrics = await response.text()
    assert 'arena_directory_seat_requests_total{outcome="granted"} 4.0' in metrics
    assert 'arena_directory_seat_requests_total{outcome="overflow"} 1.0' in metrics
    assert 'arena_directory_seat_requests_total{outcome="no_capacity"} 1.0' in metrics
    assert 'arena_directory_heartbeats_total{outcome="accepted"} 4.0' in metrics
    assert 'arena_directory_nodes_live{region="eu",state="routable"} 2.0' in metrics


async def test_a_captured_heartbeat_sent_again_is_refused(
    directory: Directory, http: aiohttp.ClientSession
) -> None:
    """Someone on the path keeps a node's heartbeat and sends it once the node is gone: the
    running directory refuses it (and counts it), whatever copy of the bytes is sent."""
    body, headers = signed_heartbeat(
        SECRET, node("eu-9", "eu"), now=time.time(), sequence=SEQUENCE.next()
    )
    url = f"{directory.url}/nodes/heartbeat"
    async with http.post(url, data=body, headers=headers) as response:
        assert response.status == 200
    for _ in range(2):
        async with http.post(url, data=body, headers=headers) as response:
            assert response.status == 401
            assert (await response.json())["error"] == "replayed"
    async with http.get(f"{directory.url}/metrics") as response:
        metrics = await response.text()
    assert 'arena_directory_heartbeats_total{outcome="replayed"} 2.0' in metrics


async def test_unauthenticated_and_malformed_requests_are_refused_with_json(
    directory: Directory, http: aiohttp.ClientSession
) -> None:
    url = directory.url
    beat = node("eu-1", "eu")
    body, headers = signed_heartbeat(SECRET, beat, now=time.time(), sequence=SEQUENCE.next())

    def stamped(data: bytes) -> dict[str, str]:
        stamp = Stamp("eu-1", int(time.time() * 1000), SEQUENCE.next())
        return {
            "X-Arena-Node": stamp.node_id,
            "X-Arena-Time": str(stamp.time_ms),
            "X-Arena-Sequence": str(stamp.sequence),
            "X-Arena-Signature": sign_heartbeat(SECRET, data, stamp),
        }

    async def post(path: str, data: bytes, headers: dict[str, str]) -> tuple[int, str]:
        async with http.post(f"{url}{path}", data=data, headers=headers) as response:
            answer = await response.json()
            assert set(answer) >= {"error", "message"} and "\n" not in answer["message"]
            return response.status, answer["error"]

    assert await post("/nodes/heartbeat", body, {}) == (401, "unauthenticated")
    assert (await send(http, url, beat, secret="not-the-cluster-secret!"))[0] == 401
    assert await post("/nodes/heartbeat", body + b" ", headers) == (401, "bad_signature")
    garbage = b"{not json"
    unstamped = {"X-Arena-Signature": sign(SECRET, garbage)}
    assert await post("/nodes/heartbeat", garbage, unstamped) == (401, "unauthenticated")
    assert await post("/nodes/heartbeat", garbage, stamped(garbage)) == (400, "malformed")
    bad = node("eu-1", "eu").encode().replace(b'"capacity":2', b'"capacity":-2')
    assert await post("/nodes/heartbeat", bad, stamped(bad)) == (400, "invalid_field")
    huge = b"x" * (65 * 1024)
    assert await post("/nodes/heartbeat", huge, {}) == (413, "too_large")
    assert await post("/seat", b"", {}) == (400, "malformed")
    assert await post("/seat", b"[1, 2]", {}) == (400, "malformed")
    assert await post("/seat", b'{"player": "a", "rtt_ms": {}}', {}) == (400, "invalid_field")
    assert await post("/seat", b'{"player": "a", "rtt_ms": {"eu": -3}}', {}) == (
        400,
        "invalid_field",
    )
    assert await post("/seat", b'{"player": "", "rtt_ms": {"eu": 3}}', {}) == (
        400,
        "invalid_field",
    )
    # Nothing above registered a node; measured-but-unknown regions are no region at all.
    assert await post("/seat", b'{"player": "a", "rtt_ms": {"mars": 3}}', {}) == (
        503,
        "no_region",
    )
    async with http.get(f"{url}/nowhere") as response:
        assert (response.status, (await response.json())["error"]) == (404, "not_found")
    health = await get(http, f"{url}/health")
    assert (health["nodes_known"], health["seats_granted"]) == (0, 0)


async def test_failover_regions_show_the_new_primary_and_seats_follow_it(
    quick_directory: Directory, http: aiohttp.ClientSession
) -> None:
    url = quick_directory.url
    beats = {
        "eu-1": node("eu-1", "eu", epoch=1, capacity=10),
        "eu-2": node("eu-2", "eu", role="standby", epoch=1, capacity=10),
    }

    async def heartbeat_forever() -> None:
        while True:
            for beat in list(beats.values()):
                await send(http, url, beat)
            await asyncio.sleep(TIMEOUT_S / 5)

    task = asyncio.create_task(heartbeat_forever())
    try:
        await asyncio.sleep(0.1)
        [eu] = (await get(http, f"{url}/regions"))["regions"]
        assert eu["primary"]["node_id"] == "eu-1"
        assert [s["node_id"] for s in eu["standbys"]] == ["eu-2"]
        assert eu["probe"] == "http://127.0.0.1:9/eu-1/probe"
        # The primary dies; the standby is promoted with a higher epoch.
        del beats["eu-1"]
        beats["eu-2"] = node("eu-2", "eu", role="primary", epoch=2, capacity=10)
        await asyncio.sleep(TIMEOUT_S * 1.5)
        [eu] = (await get(http, f"{url}/regions"))["regions"]
        assert (eu["primary"]["node_id"], eu["primary"]["epoch"]) == ("eu-2", 2)
        assert eu["standbys"] == [] and eu["fenced"] == []
        status, answer = await ask(http, url, "late", {"eu": 25.0})
        assert (status, answer["node_id"], answer["epoch"]) == (200, "eu-2", 2)
        # The old primary comes back from a partition still saying epoch 1: it is fenced.
        status, ack = await send(http, url, node("eu-1", "eu", epoch=1, capacity=10))
        assert (status, ack["status"], ack["group_epoch"]) == (200, "fenced", 2)
        [eu] = (await get(http, f"{url}/regions"))["regions"]
        assert [f["node_id"] for f in eu["fenced"]] == ["eu-1"]
        for i in range(3):
            assert (await ask(http, url, f"p{i}", {"eu": 25.0}))[1]["node_id"] == "eu-2"
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    # Everyone silent: the region drops out of routing after the timeout.
    await asyncio.sleep(TIMEOUT_S * 1.5)
    assert (await get(http, f"{url}/regions"))["regions"] == []
    status, answer = await ask(http, url, "orphan", {"eu": 25.0})
    assert (status, answer["error"]) == (503, "no_region")


async def test_the_development_secret_only_when_asked_for(http: aiohttp.ClientSession) -> None:
    with run_directory("--insecure-dev-secret", secret=None) as running:
        status, ack = await send(http, running.url, node("eu-1", "eu"), secret=DEV_SECRET)
        assert (status, ack["status"]) == (200, "routable")


def test_a_missing_secret_stops_the_command_with_one_line_and_exit_2() -> None:
    done = subprocess.run(
        _command("--port", "0"), capture_output=True, text=True, env=_env(None), timeout=30
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith("arena-directory: error: ARENA_CLUSTER_SECRET is not set")
    assert "--insecure-dev-secret" in done.stderr


@pytest.mark.parametrize(
    ("args", "secret", "expected"),
    [
        (("--secret-env", "MY_SECRET"), SECRET, "MY_SECRET is not set"),
        ((), "short", "shorter than 16 characters"),
        (("--heartbeat-timeout", "0"), SECRET, "heartbeat timeout must be > 0"),
        (("--overflow-slack-ms", "-5"), SECRET, "overflow slack must be between"),
        (("--reservation-ttl", "nan"), SECRET, "reservation TTL"),
        (("--port", "http"), SECRET, "argument --port: invalid int value"),
        (("--port", "70000"), SECRET, "--port: 70000 is outside"),
        (("--bogus",), SECRET, "unrecognized arguments: --bogus"),
        (("--secret-env", "1X"), SECRET, "is not an environment variable name"),
    ],
)
def test_bad_arguments_get_one_line_and_exit_2(
    args: tuple[str, ...],
    secret: str | None,
    expected: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.delenv("MY_SECRET", raising=False)
    monkeypatch.setenv("ARENA_CLUSTER_SECRET", secret or "")
    try:
        code = cli.main(["--port", "0", *args])
    except SystemExit as stop:  # argparse's own errors
        code = stop.code  # type: ignore[assignment]
    captured = capsys.readouterr()
    assert code == 2
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("arena-directory: ")
    assert expected in lines[0]
