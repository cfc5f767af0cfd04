"""Every long-running command stops everything it started: SIGTERM (or a SIGKILL of the
launcher itself) mid-run leaves no process of its session behind.

Each command runs as the leader of a new session; what is left is every live process of
that session, which is also how the tests clean up when they fail.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from launch.nodes import NodeProcess
from tests.processes import Session, start_session

pytestmark = pytest.mark.integration

PYTHON = sys.executable
#: A node is ready in seconds with a warm cache; room for a busy machine.
READY_S = 120.0


def left_after(session: Session, sig: signal.Signals, within: float = 60.0) -> set[int]:
    """Send ``sig`` to the command alone; what of its session still runs after it exited
    (and a few seconds for its children to go)."""
    os.kill(session.process.pid, sig)
    session.process.wait(within)
    deadline = time.monotonic() + 10.0
    while session.members() and time.monotonic() < deadline:
        time.sleep(0.05)
    return session.members()


def test_a_node_stops_at_once_during_a_cold_warm_up(tmp_path: Path) -> None:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "empty-cache")}
    command = [PYTHON, "-m", "server.net.cli", "--port", "0", "--log-level", "info"]
    with start_session(command, env) as node:
        node.wait_for("event=warming_up", READY_S)
        if (os.cpu_count() or 1) > 1:  # the warm-up's workers compile the kernels
            deadline = time.monotonic() + 10
            while len(node.members()) < 2 and time.monotonic() < deadline:
                time.sleep(0.02)
            assert len(node.members()) >= 2, node.output
        began = time.monotonic()
        assert left_after(node, signal.SIGTERM) == set()
        assert node.process.returncode == 0, node.output
        assert time.monotonic() - began < 30  # not after the compile (seconds of CPU)
        assert "event=listening" not in node.output  # it never said it was ready


def test_a_ready_node_stops_on_sigterm() -> None:
    with start_session([PYTHON, "-m", "server.net.cli", "--port", "0"]) as node:
        node.wait_for("event=listening", READY_S)
        assert left_after(node, signal.SIGTERM) == set()
        assert node.process.returncode == 0


def test_the_demo_stops_its_nodes_on_sigterm(tmp_path: Path) -> None:
    command = [PYTHON, "-m", "launch.demo", "--bots", "4", "--duration", "120"]
    with start_session([*command, "--json", str(tmp_path / "r.json")]) as demo:
        demo.wait_for("arena-bots: bots", READY_S * 2)
        assert len(demo.members()) == 3  # the demo, its primary and its standby
        assert left_after(demo, signal.SIGTERM) == set()
        assert demo.process.returncode == 130
        assert "everything it started was stopped" in demo.output


def test_the_cluster_stops_everything_on_sigterm() -> None:
    command = [PYTHON, "-m", "launch.cluster", "--regions", "eu", "--standbys", "1"]
    with start_session(command) as cluster:
        cluster.wait_for("running;", READY_S * 2)
        assert len(cluster.members()) == 4  # itself, the directory, a primary, a standby
        assert left_after(cluster, signal.SIGTERM) == set()
        assert cluster.process.returncode == 0


def test_a_sigkilled_cluster_leaves_nothing_either() -> None:
    """The launcher cannot clean up: its children die with it (parent-death signal)."""
    command = [PYTHON, "-m", "launch.cluster", "--regions", "eu", "--standbys", "0"]
    with start_session(command) as cluster:
        cluster.wait_for("running;", READY_S * 2)
        assert len(cluster.members()) == 3
        assert left_after(cluster, signal.SIGKILL) == set()


def test_bot_workers_stop_with_arena_bots_on_sigterm(node: NodeProcess) -> None:
    command = [PYTHON, "-m", "client_sim.cli", "--server", node.url,
               "--server-admin", node.admin_url, "--count", "4"]  # fmt: skip
    with start_session([*command, "--workers", "2", "--duration", "120"]) as bots:
        bots.wait_for("arena-bots[w1]: bots", READY_S)
        assert len(bots.members()) >= 3  # arena-bots and its two workers
        assert left_after(bots, signal.SIGTERM) == set()
        assert bots.process.returncode == 130
