"""systemd's notify protocol: datagrams on a socket of the test's own, from the functions
and from a real ``arena-server`` started as systemd would (``NOTIFY_SOCKET``,
``WATCHDOG_USEC``): ``READY=1`` once it serves, ``WATCHDOG=1`` while it ticks and none
while its tick loop is stalled, ``STOPPING=1`` on SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web

from server.lifecycle import NodeView
from server.net.sd_notify import notify, status_context, watchdog_interval
from tests.processes import start_session

#: A node is ready in seconds with a warm cache; room for a busy machine.
READY_S = 120.0


class NotifySocket:
    """What systemd listens on: a unix datagram socket (bound in ``folder``)."""

    def __init__(self, folder: Path) -> None:
        self.path = str(folder / "notify.sock")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.sock.settimeout(0.05)
        self.received: list[tuple[float, str]] = []

    def read(self, within: float = 0.0) -> list[str]:
        """Every datagram so far (waiting up to ``within`` s for more), one a string."""
        deadline = time.monotonic() + within
        while True:
            try:
                data = self.sock.recv(4096)
                self.received.append((time.monotonic(), data.decode()))
            except TimeoutError:
                if time.monotonic() >= deadline:
                    return [text for _, text in self.received]

    def lines(self, within: float = 0.0) -> list[str]:
        return [line for text in self.read(within) for line in text.split("\n")]

    def wait_for(self, line: str, within: float) -> None:
        deadline = time.monotonic() + within
        while line not in self.lines(0.05):
            assert time.monotonic() < deadline, f"no {line!r} in {self.lines()}"


@pytest.fixture
def notify_socket(tmp_path: Path) -> Iterator[NotifySocket]:
    listener = NotifySocket(tmp_path)
    try:
        yield listener
    finally:
        listener.sock.close()


def test_notify_sends_one_datagram_of_lines(notify_socket: NotifySocket) -> None:
    env = {"NOTIFY_SOCKET": notify_socket.path}
    assert notify("READY=1", "STATUS=primary at epoch 1, 0 players", environ=env)
    assert notify_socket.read() == ["READY=1\nSTATUS=primary at epoch 1, 0 players"]


def test_notify_reaches_an_abstract_socket() -> None:
    name = f"arena-test-{os.getpid()}-{time.monotonic_ns()}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind("\0" + name)
        assert notify("STOPPING=1", environ={"NOTIFY_SOCKET": "@" + name})
        assert sock.recv(100) == b"STOPPING=1"


def test_without_systemd_nothing_is_sent() -> None:
    assert not notify("READY=1", environ={})
    assert not notify("READY=1", environ={"NOTIFY_SOCKET": "vsock:2:1"})  # not ours to speak
    assert status_context(lambda: NodeView("ready", "primary", 1, 0, 0), dict, environ={}) is None


def test_a_socket_that_is_gone_is_a_log_line_not_an_error(tmp_path: Path) -> None:
    handler = logging.Handler()
    lines: list[str] = []
    handler.emit = lambda record: lines.append(record.getMessage())  # type: ignore[method-assign]
    logger = logging.getLogger("arena.server")
    logger.addHandler(handler)
    try:
        assert not notify("READY=1", environ={"NOTIFY_SOCKET": str(tmp_path / "gone.sock")})
    finally:
        logger.removeHandler(handler)
    assert len(lines) <= 1 and all(line.startswith("event=sd_notify_failed") for line in lines)


def test_the_watchdog_interval_is_half_of_watchdog_sec() -> None:
    pid = str(os.getpid())
    assert watchdog_interval({"WATCHDOG_USEC": "30000000"}) == 15.0
    assert watchdog_interval({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": pid}) == 15.0
    assert watchdog_interval({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "1"}) is None
    for off in ({}, {"WATCHDOG_USEC": "0"}, {"WATCHDOG_USEC": "soon"}):
        assert watchdog_interval(off) is None


async def test_the_watchdog_is_pinged_while_the_primary_ticks_and_not_while_it_stalls(
    notify_socket: NotifySocket,
) -> None:
    ticks = 0
    ticking = True

    def view() -> NodeView:
        nonlocal ticks
        ticks += ticking
        return NodeView("ready", "primary", 1, 2, ticks)

    env = {"NOTIFY_SOCKET": notify_socket.path, "WATCHDOG_USEC": "200000"}  # pings: 0.1 s
    context = status_context(view, dict, environ=env)
    assert context is not None
    running = context(web.Application())
    await anext(running)
    try:
        await asyncio.sleep(0.6)
        lines = notify_socket.lines()
        assert lines[0] == "STATUS=primary at epoch 1, 2 players"
        assert lines.count("WATCHDOG=1") >= 3
        ticking = False
        await asyncio.sleep(0.15)  # a ping for the last ticks may still go
        notify_socket.read()
        stalled_at = time.monotonic()
        await asyncio.sleep(0.6)
        notify_socket.read()
        assert not [t for t, text in notify_socket.received if t > stalled_at]
    finally:
        with contextlib.suppress(StopAsyncIteration):
            await anext(running)


@pytest.mark.integration
def test_a_node_started_as_systemd_does_notifies_ready_watchdog_and_stopping(
    notify_socket: NotifySocket,
) -> None:
    env = {**os.environ, "NOTIFY_SOCKET": notify_socket.path, "WATCHDOG_USEC": "2000000"}
    command = [sys.executable, "-m", "server.net.cli", "--port", "0", "--region", "eu-west"]
    with start_session(command, env) as node:
        node.wait_for("event=warming_up", READY_S)
        notify_socket.wait_for("READY=1", READY_S)
        node.wait_for("event=listening", 10)  # READY=1 comes with it
        statuses = [line for line in notify_socket.lines() if line.startswith("STATUS=")]
        assert "STATUS=primary at epoch 1, 0 players" in statuses
        assert "STOPPING=1" not in notify_socket.lines()
        began = time.monotonic()
        while notify_socket.lines().count("WATCHDOG=1") < 2:  # every 1 s while it ticks
            assert time.monotonic() - began < 30, notify_socket.lines()
            notify_socket.read(0.1)
        os.kill(node.process.pid, signal.SIGTERM)
        assert node.process.wait(30) == 0, node.output
        assert "STOPPING=1" in notify_socket.lines(0.1)
        assert "Traceback" not in node.output
