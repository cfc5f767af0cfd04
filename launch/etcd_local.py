"""A throw-away etcd on 127.0.0.1, from Debian's ``etcd-server`` package: one member
(:func:`running_etcd`) or a cluster of several (:func:`running_etcd_cluster`).

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
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "EtcdProcess",
    "EtcdTls",
    "EtcdUnavailable",
    "LocalEtcdCluster",
    "find_etcd",
    "running_etcd",
    "running_etcd_cluster",
]

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
        """The ``--coordinator`` spelling of this etcd: ``etcd://127.0.0.1:PORT`` (``etcds://``
        over TLS)."""
        scheme, _, rest = self.url.partition("://")
        return ("etcds://" if scheme == "https" else "etcd://") + rest

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def kill(self) -> None:
        """SIGKILL, as a crashed machine: no goodbye to the other members or the clients."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=5)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 5 s; idempotent."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)


@dataclass(frozen=True, slots=True)
class EtcdTls:
    """PEM files for an etcd that serves its clients over TLS and asks them for a
    certificate signed by ``ca`` (``--client-cert-auth``)."""

    ca: str
    server_cert: str
    server_key: str
    client_cert: str
    client_key: str

    def client_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=self.ca)
        context.load_cert_chain(self.client_cert, self.client_key)
        return context


def _answers(url: str, tls: EtcdTls | None = None) -> bool:
    context = tls.client_context() if tls is not None else None
    try:
        with urllib.request.urlopen(url + "/health", timeout=0.5, context=context) as response:
            return bool(json.loads(response.read()).get("health") == "true")
    except (OSError, ValueError, urllib.error.URLError):
        return False


@contextlib.contextmanager
def running_etcd(
    binary: str | None = None, host: str = "127.0.0.1", tls: EtcdTls | None = None
) -> Iterator[EtcdProcess]:
    """Start an etcd on ``host`` (``tls``: over https, asking clients for a certificate),
    yield it once it is healthy, and always stop it and delete its data."""
    binary = binary or find_etcd()
    if binary is None:
        raise EtcdUnavailable("etcd is not installed (apt-get install etcd-server)")
    workdir = Path(tempfile.mkdtemp(prefix="arena-etcd-"))
    try:
        for _attempt in range(3):  # a picked port can be taken before etcd binds it
            client, peer = _free_port(), _free_port()
            if client == peer:
                continue
            scheme = "https" if tls is not None else "http"
            url, peer_url = f"{scheme}://{host}:{client}", f"http://{host}:{peer}"
            secure = (
                [
                    f"--cert-file={tls.server_cert}",
                    f"--key-file={tls.server_key}",
                    f"--trusted-ca-file={tls.ca}",
                    "--client-cert-auth",
                ]
                if tls is not None
                else []
            )
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
                        *secure,
                    ],
                    stdin=subprocess.DEVNULL,
                    stdout=log_file,
                    stderr=subprocess.STDOUT,
                )
            etcd = EtcdProcess(process, url, log_path)
            try:
                deadline = time.monotonic() + START_TIMEOUT
                while process.poll() is None and time.monotonic() < deadline:
                    if _answers(url, tls):
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


class LocalEtcdCluster:
    """Several members of one etcd cluster; ``address`` lists them all for
    ``--coordinator``/``--registry`` (``etcd://127.0.0.1:P1,127.0.0.1:P2,...``)."""

    def __init__(self, members: list[EtcdProcess]) -> None:
        self.members = members

    @property
    def address(self) -> str:
        return "etcd://" + ",".join(m.url.removeprefix("http://") for m in self.members)

    @property
    def urls(self) -> list[str]:
        return [m.url for m in self.members]

    def log_tail(self, lines: int = 10) -> str:
        return "\n".join(f"[{m.url}]\n{m.log_tail(lines)}" for m in self.members)


@contextlib.contextmanager
def running_etcd_cluster(
    size: int = 3, binary: str | None = None, host: str = "127.0.0.1"
) -> Iterator[LocalEtcdCluster]:
    """Start ``size`` members of one cluster on ``host``, yield them once every member is
    healthy (a leader elected), and always stop them and delete their data."""
    binary = binary or find_etcd()
    if binary is None:
        raise EtcdUnavailable("etcd is not installed (apt-get install etcd-server)")
    if not 1 <= size <= 7:
        raise ValueError("an etcd cluster has 1 to 7 members")
    workdir = Path(tempfile.mkdtemp(prefix="arena-etcd-cluster-"))
    members: list[EtcdProcess] = []
    try:
        ports: set[int] = set()
        while len(ports) < 2 * size:
            ports.add(_free_port())
        picked = sorted(ports)
        clients, peers = picked[:size], picked[size:]
        names = [f"m{i}" for i in range(size)]
        initial = ",".join(f"{n}=http://{host}:{p}" for n, p in zip(names, peers, strict=True))
        for name, client, peer in zip(names, clients, peers, strict=True):
            url, peer_url = f"http://{host}:{client}", f"http://{host}:{peer}"
            log_path = workdir / f"etcd-{name}.log"
            with open(log_path, "wb") as log_file:
                process = subprocess.Popen(
                    [
                        binary,
                        f"--name={name}",
                        f"--data-dir={workdir / name}",
                        f"--listen-client-urls={url}",
                        f"--advertise-client-urls={url}",
                        f"--listen-peer-urls={peer_url}",
                        f"--initial-advertise-peer-urls={peer_url}",
                        f"--initial-cluster={initial}",
                        "--initial-cluster-state=new",
                        f"--initial-cluster-token=arena-{workdir.name}",
                        "--log-level=warn",
                    ],
                    stdin=subprocess.DEVNULL,
                    stdout=log_file,
                    stderr=subprocess.STDOUT,
                )
            members.append(EtcdProcess(process, url, log_path))
        cluster = LocalEtcdCluster(members)
        deadline = time.monotonic() + START_TIMEOUT
        waiting = list(members)
        while waiting and time.monotonic() < deadline:
            if any(m.process.poll() is not None for m in members):
                raise EtcdUnavailable("an etcd member exited at start\n" + cluster.log_tail())
            waiting = [m for m in waiting if not _answers(m.url)]
            time.sleep(0.05)
        if waiting:
            raise EtcdUnavailable(
                f"etcd cluster not healthy within {START_TIMEOUT:g} s\n" + cluster.log_tail()
            )
        yield cluster
    finally:
        for member in members:
            member.stop()
        shutil.rmtree(workdir, ignore_errors=True)
