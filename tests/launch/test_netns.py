"""The namespaces ``arena-chaos torture`` cuts a link between (root and ip netns only)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from launch import netns

REASON = netns.unavailable()
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"no network namespaces: {REASON}")

PORT = 8089


def reaches(prefix: tuple[str, ...], address: str) -> bool:
    """Whether a TCP connection from inside ``prefix`` (() for the host) gets through."""
    probe = (
        "import socket,sys\n"
        f"try: socket.create_connection(({address!r}, {PORT}), timeout=0.5).close()\n"
        "except OSError: sys.exit(1)\n"
    )
    return subprocess.run([*prefix, sys.executable, "-c", probe]).returncode == 0


@pytest.fixture
def spaces() -> Iterator[netns.Namespaces]:
    with netns.isolated(("a", "b")) as made:
        server = subprocess.Popen(
            [*made.prefix("b"), sys.executable, "-m", "http.server", str(PORT),
             "--bind", made.addresses["b"]],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 10
            while not reaches((), made.addresses["b"]) and time.monotonic() < deadline:
                time.sleep(0.1)
            yield made
        finally:
            server.kill()
            server.wait()


def test_a_cut_separates_the_two_nodes_and_not_the_host(spaces: netns.Namespaces) -> None:
    b = spaces.addresses["b"]
    assert reaches((), b) and reaches(tuple(spaces.prefix("a")), b)
    spaces.cut("a", "b")
    assert not reaches(tuple(spaces.prefix("a")), b)
    assert reaches((), b)  # the players still reach both sides
    spaces.heal("a", "b")
    assert reaches(tuple(spaces.prefix("a")), b)


def test_everything_made_is_removed() -> None:
    with netns.isolated(("a", "b")) as made:
        names = set(made.names.values())
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not names & {line.split()[0] for line in listed.splitlines() if line.strip()}
