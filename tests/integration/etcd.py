"""A real, throw-away etcd for integration tests: ``from tests.integration.etcd import etcd_url``.

Each use starts its own single-member etcd on 127.0.0.1 with client and peer ports picked at
run time (never 2379/2380) and a data directory in a temporary folder, waits until it answers,
and always stops it (SIGTERM, then SIGKILL) and removes the folder.

Without an ``etcd`` binary the tests are skipped (``apt-get install etcd-server``), except in
CI (``CI=true``), where a missing etcd is a failure: CI installs it in ``.ci/run``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

__all__ = ["EtcdProcess", "etcd_binary", "etcd_process", "etcd_url", "running_etcd"]

START_TIMEOUT = 15.0  # seconds; a cold etcd on a busy 2-core machine takes ~1 s


def etcd_binary() -> str:
    """The path of ``etcd``; skips the test (fails it in CI) when there is none."""
    path = shutil.which("etcd")
    if path is None:
        message = "etcd not installed (apt-get install etcd-server)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{message}: CI must install it (.ci/run)", pytrace=False)
        pytest.skip(message)
    return path


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class EtcdProcess:
    """One running etcd member; ``url`` is its client URL (``http://127.0.0.1:PORT``)."""

    def __init__(self, process: subprocess.Popen[bytes], url: str, log_path: Path) -> None:
        self.process = process
        self.url = url
        self.log_path = log_path

    @property
    def endpoint(self) -> str:
        """The ``--coordinator`` spelling of this etcd: ``etcd://127.0.0.1:PORT``."""
        return "etcd://" + self.url.removeprefix("http://")

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 5 s; idempotent."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/health", timeout=0.5) as response:
            return bool(json.loads(response.read()).get("health") == "true")
    except (OSError, ValueError, urllib.error.URLError):
        return False


@contextlib.contextmanager
def running_etcd() -> Iterator[EtcdProcess]:
    """Start an etcd, yield it once it is healthy, and always stop it and delete its data."""
    binary = etcd_binary()
    workdir = Path(tempfile.mkdtemp(prefix="arena-etcd-"))
    try:
        for _attempt in range(3):  # a picked port can be taken before etcd binds it
            client, peer = _free_port(), _free_port()
            if client == peer:
                continue
            url, peer_url = f"http://127.0.0.1:{client}", f"http://127.0.0.1:{peer}"
            data_dir = workdir / f"data-{client}"
            log_path = workdir / f"etcd-{client}.log"
            with open(log_path, "wb") as log_file:
                process = subprocess.Popen(
                    [
                        binary,
                        "--name=test",
                        f"--data-dir={data_dir}",
                        f"--listen-client-urls={url}",
                        f"--advertise-client-urls={url}",
                        f"--listen-peer-urls={peer_url}",
                        f"--initial-advertise-peer-urls={peer_url}",
                        f"--initial-cluster=test={peer_url}",
                        "--log-level=warn",
                    ],
                    stdin=subprocess.DEVNULL,
                    stdout=log_file,
                    stderr=subprocess.STDOUT,
                )
            etcd = EtcdProcess(process, url, log_path)
            try:
                deadline = time.monotonic() + START_TIMEOUT
                while process.poll() is None and time.monotonic() < deadline:
                    if _answers(url):
                        break
                    time.sleep(0.05)
                else:
                    if process.poll() is None:
                        pytest.fail(
                            f"etcd did not answer on {url} within {START_TIMEOUT:g} s:\n"
                            + etcd.log_tail(),
                            pytrace=False,
                        )
                    continue  # exited early (port taken?): try other ports
                yield etcd
                return
            finally:
                etcd.stop()
        pytest.fail("etcd exited at start three times:\n" + etcd.log_tail(), pytrace=False)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture
def etcd_process() -> Iterator[EtcdProcess]:
    """A running etcd that the test may :meth:`~EtcdProcess.stop` itself."""
    with running_etcd() as etcd:
        yield etcd


@pytest.fixture
def etcd_url() -> Iterator[str]:
    """The client URL (``http://127.0.0.1:PORT``) of a fresh etcd, stopped after the test."""
    with running_etcd() as etcd:
        yield etcd.url
