"""A real ``arena-server --agones`` process against an SDK server: the fake of
tests/server/net/test_agones.py (the documented REST contract) always, and Agones' own
``sdk-server --local`` when ``ARENA_AGONES_SDK_SERVER`` names its binary (built by
deploy/agones/build-sdk-server.sh; docs/agones.md)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
import urllib.request
from typing import Any

import pytest

from tests.processes import Session, start_session
from tests.server.net.test_agones import fake_sdk, free_port

pytestmark = pytest.mark.integration

#: A node is ready in seconds with a warm cache; room for a busy machine.
READY_S = 120.0
SDK_SERVER_ENV = "ARENA_AGONES_SDK_SERVER"


def node_command(sdk_url: str, *args: str) -> list[str]:
    return [sys.executable, "-m", "server.net.cli", "--port", "0", "--region", "eu-west",
            "--node-id", "eu-1", "--agones", "--agones-url", sdk_url, *args]  # fmt: skip


def stop(session: Session, within: float = 30.0) -> int:
    """SIGTERM the node alone and wait for it to exit; its exit status."""
    os.kill(session.process.pid, signal.SIGTERM)
    return session.process.wait(within)


async def test_a_node_process_speaks_the_sdk_from_ready_to_shutdown_on_sigterm() -> None:
    async with fake_sdk() as (fake, url):
        with start_session(node_command(url)) as node:
            await asyncio.to_thread(node.wait_for, "event=listening", READY_S)
            deadline = time.monotonic() + 30
            while fake.state != "Ready":
                assert time.monotonic() < deadline, node.output
                await asyncio.sleep(0.05)
            assert fake.labels["agones.dev/sdk-region"] == "eu-west"
            assert fake.labels["agones.dev/sdk-role"] == "primary"
            assert fake.labels["agones.dev/sdk-epoch"] == "1"
            assert fake.annotations["agones.dev/sdk-url"].startswith("http://127.0.0.1:")
            ready_at = next(at for at, call, _ in fake.calls if call == "POST /ready")
            await asyncio.sleep(5.5)  # a ping every 2 s (and a poll) while it ticks
            assert fake.count("POST /health", ready_at) >= 2, fake.paths()
            assert await asyncio.to_thread(stop, node) == 0, node.output
            assert fake.paths()[-1] == "POST /shutdown" and fake.state == "Shutdown"
            assert "event=agones_shutdown reason=stopping" in node.output
            assert "Traceback" not in node.output


async def test_a_node_whose_sidecar_never_answers_serves_all_the_same() -> None:
    sdk_url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    with start_session(node_command(sdk_url)) as node:
        await asyncio.to_thread(node.wait_for, "event=listening", READY_S)
        await asyncio.to_thread(node.wait_for, "event=agones_sdk_unanswered", 30)
        assert await asyncio.to_thread(stop, node) == 0, node.output
        assert "Traceback" not in node.output


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as answer:
        return json.loads(answer.read())


@pytest.mark.skipif(
    not os.environ.get(SDK_SERVER_ENV),
    reason=f"set {SDK_SERVER_ENV} to Agones' sdk-server binary "
    "(deploy/agones/build-sdk-server.sh builds it) to run the node against it",
)
def test_a_node_process_against_agones_own_sdk_server() -> None:
    binary = os.environ[SDK_SERVER_ENV]
    http_port, grpc_port = free_port(), free_port()
    sdk = [binary, "--local", "--address", "localhost", "--http-port", str(http_port),
           "--grpc-port", str(grpc_port)]  # fmt: skip
    sdk_url = f"http://127.0.0.1:{http_port}"
    with start_session(sdk) as sidecar, start_session(node_command(sdk_url)) as node:
        sidecar.wait_for("Starting SDKServer grpc-gateway", 30)
        node.wait_for("event=listening", READY_S)
        # (Its local GameServer says Ready from the start: the node's log says when it was.)
        node.wait_for("event=agones_ready", 30)
        node.wait_for("event=agones_gameserver gameserver=local state=Ready", 30)
        found = get_json(sdk_url + "/gameserver")
        labels = found["object_meta"]["labels"]
        assert labels["agones.dev/sdk-region"] == "eu-west"
        assert labels["agones.dev/sdk-role"] == "primary"
        assert labels["agones.dev/sdk-epoch"] == "1"
        assert found["object_meta"]["annotations"]["agones.dev/sdk-url"].startswith("http://")
        assert sidecar.output.count("Ready request has been received!") == 1
        time.sleep(4.5)
        assert stop(node) == 0, node.output
        assert get_json(sdk_url + "/gameserver")["status"]["state"] == "Shutdown"
        assert sidecar.output.count("Health Ping Received!") >= 2, sidecar.output
        assert "Traceback" not in node.output
