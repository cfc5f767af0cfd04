"""Ready means ready: on an empty kernel cache a node answers ``/live`` at once, ``/health``
(and ``/ws``) 503 while it compiles, and says it listens only once it can serve."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.processes import start_session

pytestmark = pytest.mark.integration

#: A cold compile on a busy 2-core machine: tens of seconds.
COLD_READY_S = 300.0


def get(url: str) -> tuple[int, dict[str, Any] | None]:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read() or b"null")
    except OSError:
        return 0, None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_cold_node_is_alive_at_once_and_ready_only_once_it_can_serve(tmp_path: Path) -> None:
    port, admin_port = free_port(), free_port()
    base, admin = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{admin_port}"
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "empty-cache")}
    command = [sys.executable, "-m", "server.net.cli", "--port", str(port), "--log-level", "info",
               "--admin-port", str(admin_port)]  # fmt: skip
    with start_session(command, env) as node:
        node.wait_for("event=warming_up", 120)
        deadline = time.monotonic() + 60
        while (live := get(base + "/live"))[0] != 200:  # the socket is bound before warming
            assert time.monotonic() < deadline, node.output
            time.sleep(0.05)
        status, health = get(base + "/health")
        assert status == 503 and health is not None, (status, health)
        assert (health["ready"], health["status"]) == (False, "warming_up")
        assert live[1] == {"alive": True, "status": "warming_up"}
        assert get(base + "/ws")[0] == 503  # no player is let in meanwhile
        assert "event=listening" not in node.output
        node.wait_for("event=listening", COLD_READY_S)
        status, health = get(admin + "/health")
        assert status == 200 and health is not None
        assert (health["ready"], health["status"], health["role"]) == (True, "ready", "primary")
        warm_up = health["warm_up"]
        assert warm_up["cold"] and warm_up["cache_dir"] == str(tmp_path / "empty-cache")
        if (os.cpu_count() or 1) > 1:
            assert warm_up["workers"] >= 2 and warm_up["worker_compile_events"] > 0
        # The warmed_up line is logged before the listening line.
        lines = node.output.splitlines()
        warmed = next(i for i, line in enumerate(lines) if "event=warmed_up" in line)
        assert warmed < next(i for i, line in enumerate(lines) if "event=listening" in line)


def test_a_warm_cache_is_loaded_not_compiled() -> None:
    """What the install step does (``--warm-cache``; quick when it is warm already), then a
    node that loads every kernel and compiles none."""
    warming = subprocess.run(
        [sys.executable, "-m", "server.net.cli", "--warm-cache"],
        capture_output=True,
        text=True,
        timeout=COLD_READY_S,
    )
    assert warming.returncode == 0 and "kernel cache" in warming.stdout, warming
    command = [sys.executable, "-m", "server.net.cli", "--port", "0", "--log-level", "info"]
    with start_session(command) as node:
        node.wait_for("event=listening", 120)
        (line,) = [line for line in node.output.splitlines() if "event=warmed_up" in line]
        assert "cold=false" in line and "compile_events=0" in line, line
