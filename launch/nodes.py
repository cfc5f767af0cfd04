"""Nodes as child processes: ``arena-server`` started, waited for until ready, stopped.

What the launchers, the torture, the benches and the integration tests start nodes with.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path

from launch.health import base_url
from launch.supervisor import READY_WITHIN_S, Child

__all__ = ["NodeProcess", "running_node", "start_node"]

Progress = Callable[[str], None]


class NodeProcess:
    """A node running as a child process, the URL players reach it on, and its admin
    port's (the full ``/health``, ``/metrics``, ``/view``)."""

    def __init__(self, child: Child, url: str) -> None:
        self._child = child
        self.url = url
        self.admin_url = child.admin_url or ""  # "" only with --admin-port off

    @property
    def process(self) -> subprocess.Popen[str]:
        return self._child.process

    @property
    def base_url(self) -> str:
        """``http://host:port``: what players and peers use (``/probe``, ``/peer``)."""
        return base_url(self.url)

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM (the node closes its sockets cleanly), then SIGKILL if it hangs."""
        self._child.stop(timeout)


@contextlib.contextmanager
def start_node(
    *args: str,
    ready_within: float = READY_WITHIN_S,
    env: dict[str, str] | None = None,
    progress: Progress | None = None,
    prefix: Sequence[str] = (),
) -> Iterator[NodeProcess]:
    """Run ``arena-server --port 0 --admin-port 0 ARGS`` (ARGS may name another admin
    port, or ``off``) until the block ends; yields once it is ready
    (its kernels compiled or loaded). Its log goes to ``$ARENA_NODE_LOGS/<node-id>.log``
    when that is set (else a temporary file, quoted if it fails to start). ``prefix``: a
    command to run it under (``ip netns exec NAME``)."""
    admin = () if "--admin-port" in args else ("--admin-port", "0")
    command = [
        *prefix, sys.executable, "-m", "server.net.cli", "--host", "127.0.0.1", "--port", "0",
        *admin, *args,
    ]  # fmt: skip
    log_dir = os.environ.get("ARENA_NODE_LOGS")
    node_id = args[args.index("--node-id") + 1] if "--node-id" in args else "node"
    child = Child(
        node_id, command, env=env, log_path=Path(log_dir) / f"{node_id}.log" if log_dir else None
    )
    try:
        yield NodeProcess(child, child.wait_ready(ready_within, progress))
    finally:
        child.stop()


@contextlib.asynccontextmanager
async def running_node(
    *args: str, env: dict[str, str] | None = None, ready_within: float = READY_WITHIN_S
) -> AsyncIterator[NodeProcess]:
    """:func:`start_node` for a coroutine: the node starts and stops in a thread, so the
    event loop (bots that play on it included) never freezes while a node boots or stops.
    (The thread is the executor's, which outlives the node: a child dies with the thread
    that started it.)"""
    stack = contextlib.ExitStack()
    node = await asyncio.to_thread(
        stack.enter_context, start_node(*args, env=env, ready_within=ready_within)
    )
    try:
        yield node
    finally:
        await asyncio.to_thread(stack.close)
