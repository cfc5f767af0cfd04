"""The node's container image, built from this checkout, and containers of it that the tests
start and always remove (``test_image.py``, ``test_compose.py``).

podman comes from Debian (``apt-get install podman runc debootstrap``); without it these
tests skip, except in CI (``CI=true``), where ``.ci/run`` installs it and a missing one
fails. No image registry is needed: ``deploy/image/build.sh`` makes the base with
debootstrap once per machine, and podman's layer cache makes a rebuild with unchanged
sources a matter of seconds.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.tools import missing_tool, required_tool

ROOT = Path(__file__).resolve().parents[2]
#: The tests' own tag, so that they never replace an ``arena:latest`` someone built.
IMAGE = "localhost/arena:test"
BASE = "localhost/arena-base:bookworm"
#: A cold base and build took about two minutes on the 2-core machine; room for a busy one.
BUILD_WITHIN_S = 900.0
#: podman's default ulimits are above some hosts' hard limits (the container then fails to
#: start); these are below (deploy/image/build.sh uses the same).
ULIMITS = ("--ulimit", "nofile=16384:16384", "--ulimit", "nproc=4096:4096")


def podman_binary() -> str:
    """The path of ``podman``; skips the test (fails it in CI) when there is none."""
    return required_tool("podman", "podman runc debootstrap")


def podman_command() -> list[str]:
    """``podman`` with the runtime these tests use: runc where installed (Debian's crun
    refuses a hybrid cgroup layout, which some CI machines have)."""
    command = [podman_binary()]
    if shutil.which("runc"):
        command += ["--runtime", "runc"]
    return command


def podman(*args: str, timeout: float = 60.0, check: bool = True) -> str:
    """Run ``podman ARGS``; its stdout. A failure names the command and its output."""
    done = subprocess.run(
        [*podman_command(), *args], capture_output=True, text=True, timeout=timeout
    )
    if check and done.returncode != 0:
        raise AssertionError(
            f"podman {' '.join(args[:3])} ... exited {done.returncode}: "
            f"{(done.stderr or done.stdout)[-2000:]}"
        )
    return done.stdout


def podman_logs(name: str, tail: int | None = None) -> str:
    """A container's output, stdout and stderr (where the node's log lines go) together."""
    args = ["logs", *(["--tail", str(tail)] if tail else []), name]
    done = subprocess.run([*podman_command(), *args], capture_output=True, text=True, timeout=30)
    return done.stdout + done.stderr


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="session")
def arena_image() -> str:
    """``localhost/arena:test`` built from the checkout (``deploy/image/build.sh``), once per
    session; its base is made first when this machine has none."""
    podman_binary()
    exists = subprocess.run([*podman_command(), "image", "exists", BASE], capture_output=True)
    if exists.returncode != 0:
        if shutil.which("debootstrap") is None:
            missing_tool(f"{BASE} is missing and debootstrap is not installed (apt-get install "
                     "debootstrap) to make it")  # fmt: skip
        if os.geteuid() != 0:
            pytest.skip(f"{BASE} is missing and making it needs root: "
                        "run deploy/image/make-base.sh as root once")  # fmt: skip
    began = time.monotonic()
    try:
        done = subprocess.run(
            [str(ROOT / "deploy" / "image" / "build.sh"), "node"],
            capture_output=True,
            text=True,
            timeout=BUILD_WITHIN_S,
            env={**os.environ, "ARENA_ENGINE": "podman", "ARENA_IMAGE": IMAGE},
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"building {IMAGE} took over {BUILD_WITHIN_S:g} s", pytrace=False)
    if done.returncode != 0:
        pytest.fail(f"building {IMAGE} failed ({done.returncode}):\n"
                    f"{(done.stdout + done.stderr)[-3000:]}", pytrace=False)  # fmt: skip
    print(f"image {IMAGE} built in {time.monotonic() - began:.1f} s")
    return IMAGE


class Containers:
    """Containers of one test, each with a unique name; :meth:`remove_all` removes every one
    (the fixture calls it, whatever the test's outcome)."""

    def __init__(self, image: str, logs: Path) -> None:
        self.image = image
        self.prefix = f"arena-test-{uuid.uuid4().hex[:8]}"
        self.names: list[str] = []
        self._logs = logs

    def run(
        self,
        name: str,
        *args: str,
        options: tuple[str, ...] = (),
        env: dict[str, str] | None = None,
    ) -> str:
        """``podman run -d`` of the image with the node's ``args``; the container's name.
        ``env``: variables passed by name (their values stay off the command line)."""
        full = f"{self.prefix}-{name}"
        self.names.append(full)
        passed = [flag for key in env or {} for flag in ("--env", key)]
        command = [*podman_command(), "run", "-d", "--name", full, *ULIMITS, *passed]
        done = subprocess.run(
            [*command, *options, self.image, *args],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, **(env or {})},
        )
        if done.returncode != 0:
            raise AssertionError(f"podman run {name} exited {done.returncode}: {done.stderr}")
        return full

    def logs(self, name: str) -> str:
        return podman_logs(name)

    def exit_code(self, name: str) -> int:
        return int(podman("inspect", "--format", "{{.State.ExitCode}}", name).strip())

    def remove_all(self) -> None:
        for name in self.names:  # kept for the test's report (shown when it failed)
            text = podman_logs(name)
            (self._logs / f"{name}.log").write_text(text)
            print(f"--- {name} (last lines)\n" + "\n".join(text.splitlines()[-15:]))
        if self.names:
            podman("rm", "--force", "--time", "0", *self.names, check=False, timeout=120)


@pytest.fixture
def containers(arena_image: str, tmp_path: Path) -> Iterator[Containers]:
    """Start containers of the image; every one is removed after the test."""
    started = Containers(arena_image, tmp_path)
    try:
        yield started
    finally:
        started.remove_all()


@pytest.fixture
def free_ports() -> Callable[[int], list[int]]:
    """``free_ports(n)``: n distinct free loopback ports."""

    def pick(count: int) -> list[int]:
        ports: set[int] = set()
        while len(ports) < count:
            ports.add(free_port())
        return sorted(ports)

    return pick
