"""A throw-away, single-member etcd on 127.0.0.1, from Debian's ``etcd-server`` package.

What ``arena-chaos torture --coordinator etcd`` and the tests use: client and peer ports
picked at run time (never 2379/2380), a data directory in a temporary folder, started and
waited for until it answers, always stopped (SIGTERM, then SIGKILL) and removed.
"""

from __future__ import annotations

import contextlib
import json
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

__all__ = ["EtcdProcess", "EtcdUnavailable", "find_etcd", "running_etcd"]

START_TIMEOUT = 15.0  # seconds; a cold etcd on a busy 2-core machine takes ~1 s


class EtcdUnavailable(RuntimeError):
    """No etcd binary, or it would not start (one line, with its log's tail after it)."""


def find_etcd() -> str | None:
    """The path of Debian's ``etcd`` (``apt-get install etcd-server``), if installed."""
    return shutil.which("etcd")


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
def running_etcd(binary: str | None = None, host: str = "127.0.0.1") -> Iterator[EtcdProcess]:
    """Start an etcd on ``host``, yield it once it is healthy, and always stop it and delete
    its data."""
    binary = binary or find_etcd()
    if binary is None:
        raise EtcdUnavailable("etcd is not installed (apt-get install etcd-server)")
    workdir = Path(tempfile.mkdtemp(prefix="arena-etcd-"))
    try:
        for _attempt in range(3):  # a picked port can be taken before etcd binds it
            client, peer = _free_port(), _free_port()
            if client == peer:
                continue
            url, peer_url = f"http://{host}:{client}", f"http://{host}:{peer}"
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
                        raise EtcdUnavailable(
                            f"etcd did not answer on {url} within {START_TIMEOUT:g} s\n"
                            + etcd.log_tail()
                        )
                    continue  # exited early (port taken?): try other ports
                yield etcd
                return
            finally:
                etcd.stop()
        raise EtcdUnavailable("etcd exited at start three times\n" + etcd.log_tail())
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
