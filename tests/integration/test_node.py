"""A real node process and real bots on loopback, for a few seconds."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from pathlib import Path

import aiohttp
import numpy as np
import pytest

from client_sim.latency import LinkProfile, draw_bot, parse_distribution
from client_sim.swarm import Swarm, SwarmConfig
from launch.nodes import NodeProcess
from shared import protocol

pytestmark = pytest.mark.integration


def _swarm(url: str, count: int, duration: float, latency: str = "40ms") -> Swarm:
    rtt = parse_distribution(latency)
    profile = LinkProfile(jitter_ms=1.0, loss=0.0)
    bots = tuple(draw_bot(i, seed=7, rtt=rtt, profile=profile) for i in range(count))
    return Swarm(SwarmConfig(url=url, bots=bots, duration=duration, seed=7))


async def _join(session: aiohttp.ClientSession, url: str, version: int = protocol.PROTOCOL_VERSION):
    ws = await session.ws_connect(url)
    await ws.send_bytes(protocol.encode(protocol.JoinMessage(version, "probe")))
    reply = protocol.decode_server((await ws.receive()).data)
    return ws, reply


async def test_bots_play_inputs_are_acknowledged_and_prediction_holds(node: NodeProcess) -> None:
    result = await _swarm(node.url, count=10, duration=3.0).run()

    assert result.connected == 10
    assert not result.errors
    assert sum(result.inputs_acked) >= 0.9 * sum(result.inputs_sent)
    assert min(result.snapshots) >= 2.0 * 30 * 0.8  # most of ~3 s of 30 Hz snapshots
    assert np.percentile(result.prediction_errors, 99) < 0.1
    # Measured through the modelled link: 40 ms base plus jitter and up to a tick of wait.
    assert 38.0 <= np.median(result.rtt_samples) * 1000 <= 80.0


async def test_a_client_sending_garbage_is_dropped_and_nobody_else_notices(
    node: NodeProcess,
) -> None:
    swarm = _swarm(node.url, count=5, duration=3.0)
    play = asyncio.create_task(swarm.run())
    async with aiohttp.ClientSession() as session:
        ws, welcome = await _join(session, node.url)
        assert isinstance(welcome, protocol.WelcomeMessage)
        codes = []
        for garbage in (
            b"\xc1\xc1",
            b"not msgpack at all",
            protocol.encode(protocol.PingMessage(1, 0.0))[:-2],
        ):
            await ws.send_bytes(garbage)
            while True:
                message = await ws.receive()
                if message.type is not aiohttp.WSMsgType.BINARY:
                    break
                reply = protocol.decode_server(message.data)
                if isinstance(reply, protocol.ErrorMessage):
                    codes.append((reply.code, reply.fatal))
                    break
        closing = await ws.receive()
        assert closing.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)
        assert ws.close_code == aiohttp.WSCloseCode.POLICY_VIOLATION
    assert codes == [("malformed_frame", False)] * 2 + [("malformed_frame", True)]
    result = await play
    assert result.connected == 5
    assert not result.errors
    assert sum(result.inputs_acked) >= 0.9 * sum(result.inputs_sent)


async def test_health_and_metrics_report_the_match(node: NodeProcess) -> None:
    http = node.admin_url
    async with aiohttp.ClientSession() as session:
        ws, _ = await _join(session, node.url)
        await asyncio.sleep(0.3)
        async with session.get(f"{http}/health") as response:
            health = await response.json()
        async with session.get(f"{http}/metrics") as response:
            metrics = await response.text()
        await ws.close()
    assert health["players"] == 1
    assert health["tick"] > 0
    assert health["role"] == "primary"
    assert health["tick_ms_p99"] >= health["tick_ms_p50"] > 0
    assert "arena_tick_duration_seconds_bucket" in metrics
    assert "arena_players 1.0" in metrics
    assert "arena_sent_bytes_total" in metrics


async def test_a_full_node_refuses_with_a_clear_error(small_node: NodeProcess) -> None:
    async with aiohttp.ClientSession() as session:
        first, _ = await _join(session, small_node.url)
        second, _ = await _join(session, small_node.url)
        third, refusal = await _join(session, small_node.url)
        assert isinstance(refusal, protocol.ErrorMessage)
        assert (refusal.code, refusal.fatal) == ("server_full", True)
        await third.receive()
        assert third.close_code == aiohttp.WSCloseCode.TRY_AGAIN_LATER
        await first.close()
        await second.close()


async def test_a_protocol_version_mismatch_is_refused_cleanly(node: NodeProcess) -> None:
    async with aiohttp.ClientSession() as session:
        ws, refusal = await _join(session, node.url, version=99)
        assert isinstance(refusal, protocol.ErrorMessage)
        assert refusal.code == "version_mismatch"
        assert f"protocol {protocol.PROTOCOL_VERSION}" in refusal.message
        await ws.receive()
        assert ws.close_code == aiohttp.WSCloseCode.PROTOCOL_ERROR


async def test_sigterm_tells_clients_and_exits_cleanly(node: NodeProcess) -> None:
    async with aiohttp.ClientSession() as session:
        ws, _ = await _join(session, node.url)
        node.process.send_signal(signal.SIGTERM)
        last_error = None
        async for message in ws:
            reply = protocol.decode_server(message.data)
            if isinstance(reply, protocol.ErrorMessage):
                last_error = reply
        assert last_error is not None and last_error.code == "shutdown"
        assert ws.close_code == aiohttp.WSCloseCode.GOING_AWAY
    assert await asyncio.to_thread(node.process.wait, 10) == 0


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (["client_sim.cli", "--latency", "lognorml(median=40ms)"], "unknown distribution"),
        (["client_sim.cli", "--count", "0"], "--count"),
        (["server.net.cli", "--tick-rate", "500"], "500 Hz"),
        (["server.net.cli", "--map", "/nonexistent/map.json"], "cannot read map file"),
        (["server.net.cli", "--port", "99999"], "is not a port"),
        (["server.net.cli", "--max-rewind-ms", "nan"], "finite number"),
        (["server.net.cli", "--hitreg-backend", "cuda"], "backend 'cuda' is unavailable"),
        (["client_sim.cli", "--latency", "1e308s"], "longer than 60 s"),
        (["client_sim.cli", "--json", "/nonexistent/r.json"], "does not exist"),
        (["client_sim.cli", "--duration", "inf"], "--duration"),
        (["client_sim.cli", "--input-rate", "0"], "--input-rate"),
        (["launch.demo", "--latency", "bogus(1)"], "unknown distribution"),
        (["launch.demo", "--json", "/nonexistent/r.json"], "does not exist"),
        (["launch.demo", "--regions", "na,atlantis"], "atlantis"),
        (["launch.chaos", "pause", "--node", "x", "--for", "1e9s"], "longer than 60 s"),
        (["launch.cluster", "--regions", "na", "--json", "/nonexistent/c.json"], "not exist"),
    ],
)
def test_bad_command_lines_get_one_line_and_no_traceback(command: list[str], expected: str):
    done = subprocess.run(
        [sys.executable, "-m", *command], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert expected in done.stderr
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_a_user_mistake_found_after_start_is_one_line_too() -> None:
    """An etcd that does not answer, a directory that does not answer: exit 1, one line."""
    for command, expected in (
        (["server.net.cli", "--port", "0", "--coordinator", "etcd://127.0.0.1:1"], "unreachable"),
        (["client_sim.cli", "--directory", "http://127.0.0.1:1", "--count", "1"], "reach"),
    ):
        done = subprocess.run(
            [sys.executable, "-m", *command], capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 1, done
        assert "Traceback" not in done.stderr, done.stderr
        assert expected in done.stderr.strip().splitlines()[-1], done.stderr


def test_bot_workers_play_and_report_as_one(node: NodeProcess, tmp_path: Path) -> None:
    report_path = tmp_path / "report.json"
    # (--allow-invalid: a busy test machine may slow the bots; this test is about workers)
    command = ["client_sim.cli", "--server", node.url, "--server-admin", node.admin_url,
               "--count", "4", "--workers", "2", "--allow-invalid"]  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", *command, "--duration", "3", "--quiet", "--json",
         str(report_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(report_path.read_text())
    assert report["bots"]["connected"] == 4 and report["bots"]["workers"] == 2
    made = report["provenance"]
    assert made["arguments"][:2] == ["--server", node.url] and made["seed"] == 1
    assert made["report_version"] == 1 and made["started_at"].endswith("+00:00")
