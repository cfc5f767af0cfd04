"""A launcher's child processes: started, waited for until ready, and always stopped.

``arena-demo``, ``arena-cluster``, the benches and the integration tests all start nodes
(and the directory) as child processes. What they share, and why:

* **Nothing outlives its launcher.** Children stay in the launcher's process group (so
  ``kill -TERM -PGID`` or a terminal's Ctrl-C reaches them all) and are told to die with it
  (``ARENA_EXIT_WITH_PARENT``: Linux's parent-death signal), so a launcher that is itself
  SIGKILLed leaves nothing behind either. :meth:`Child.stop` is SIGTERM (the node tells its
  players and closes cleanly), then SIGKILL after a bound, then reaping.
* **Ready means ready.** A node prints ``event=listening url=...`` (or, with ``--log-format
  json``, ``{"event":"listening","url":...}``) on stdout only once it can serve
  (its kernels compiled or loaded); :meth:`Child.wait_ready` waits for that line with a
  bound sized for a cold, busy machine and says what it is waiting for meanwhile.
* **A child's own error is passed on.** Its stderr goes to a log file (one the launcher
  names, or a temporary one); when it dies during start-up the error names the child, its
  exit code and its last log line.
* stdout is drained by a thread, so a chatty child never blocks on a full pipe.

Every launcher and bench starts its children here (``bench/startup.py``'s counting launcher
and CPU hog, ``bench/server_load.py``'s ``arena-bots`` too); ``tests/processes.py`` is the
tests' own harness, which runs a command under test as a session of its own.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path

from shared.lifetime import EXIT_WITH_PARENT_ENV

__all__ = ["READY_WITHIN_S", "Child", "ChildError", "listening_field", "listening_url", "stop_all"]

#: How long a launcher waits for a node to be ready by default. A cold compile took up to
#: 95 s on a busy 2-core machine before the warm-up was parallelised; leave room for that.
READY_WITHIN_S = 300.0
_LISTENING = re.compile(r"event=listening ")


def listening_field(line: str, name: str) -> str | None:
    """Field ``name`` of a child's ``listening`` line, in either log format (None: the line
    is another one, or it has no such field)."""
    if line.startswith("{"):
        try:
            event = json.loads(line)
        except ValueError:
            return None
        if isinstance(event, dict) and event.get("event") == "listening":
            value = event.get(name)
            return value if isinstance(value, str) else None
        return None
    if not _LISTENING.search(line):
        return None
    found = re.search(rf"(?:^|\s){re.escape(name)}=(\S+)", line)
    return found.group(1) if found else None


def listening_url(line: str) -> str | None:
    """The URL a child's ``listening`` line announces (None: the line is another one)."""
    return listening_field(line, "url")


Progress = Callable[[str], None]


class ChildError(RuntimeError):
    """A child did not come up; the message is one line for the user."""


class Child:
    """One child process of a launcher (see the module)."""

    def __init__(
        self,
        name: str,
        command: list[str],
        *,
        env: Mapping[str, str | None] | None = None,
        cwd: Path | None = None,
        log_path: Path | None = None,
        inherit_stderr: bool = False,
    ) -> None:
        """``env``: on top of the launcher's environment (``None`` removes a variable);
        ``log_path``: where its stderr goes (appended); default a temporary file, deleted
        once it is stopped; ``inherit_stderr``: the launcher's stderr instead."""
        self.name = name
        self.url: str | None = None
        self.admin_url: str | None = None  # a node's --admin-port, when it has one
        self._listening = threading.Event()
        self._own_log = log_path is None and not inherit_stderr
        if inherit_stderr:
            self.log_path: Path | None = None
            log = None
        else:
            if log_path is None:
                handle, name_of = tempfile.mkstemp(prefix=f"arena-{name}-", suffix=".log")
                os.close(handle)
                log_path = Path(name_of)
            log_path.parent.mkdir(parents=True, exist_ok=True)
            self.log_path = log_path
            log = open(log_path, "a", encoding="utf-8")
        environment = {**os.environ, "PYTHONUNBUFFERED": "1", EXIT_WITH_PARENT_ENV: "1"}
        for key, value in (env or {}).items():
            if value is None:
                environment.pop(key, None)
            else:
                environment[key] = value
        try:
            self.process = subprocess.Popen(
                command,
                stdout=subprocess.PIPE,
                stderr=log,
                stdin=subprocess.DEVNULL,
                text=True,
                cwd=cwd,
                env=environment,
            )
        finally:
            if log is not None:
                log.close()  # the child has its own descriptor
        self._reader = threading.Thread(target=self._drain, name=f"{name}-stdout", daemon=True)
        self._reader.start()

    def _drain(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if self.url is None and (url := listening_url(line)) is not None:
                self.admin_url = listening_field(line, "admin")
                self.url = url
                self._listening.set()
        self._listening.set()  # EOF: it exited; whoever waits must look at poll()

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def wait(self, timeout: float | None = None) -> int:
        """Its exit code once it exits (subprocess.TimeoutExpired after ``timeout`` s)."""
        return self.process.wait(timeout)

    def _last_log_line(self) -> str:
        """The last line of its stderr log ("" when there is none)."""
        if self.log_path is None:
            return ""
        with contextlib.suppress(OSError):
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
            return " | ".join(text.strip().splitlines()[-1:])
        return ""

    def exited_error(self) -> ChildError:
        """The error for a child that exited during start-up: its code and last words."""
        code = self.process.wait()
        last = self._last_log_line()
        return ChildError(
            f"{self.name} exited during start-up with code {code}" + (f": {last}" if last else "")
        )

    def wait_ready(
        self, within: float = READY_WITHIN_S, progress: Progress | None = None, every: float = 10
    ) -> str:
        """Wait until it says it listens (its URL), at most ``within`` seconds; every
        ``every`` seconds meanwhile, tell ``progress`` what we are waiting for."""
        began = time.monotonic()
        while not self._listening.wait(min(every, max(0.0, began + within - time.monotonic()))):
            waited = time.monotonic() - began
            if waited >= within:
                raise ChildError(
                    f"{self.name} was not ready within {within:g} s (still warming up? "
                    f"its log: {self.log_path or 'above'})"
                )
            if progress is not None:
                progress(f"waiting for {self.name} to be ready ({waited:.0f} s so far)")
        if self.url is None:  # its output ended: it exited
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(5.0)
            raise self.exited_error()
        return self.url

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM, then SIGKILL after ``timeout`` seconds; reaped and closed. Idempotent."""
        stop_all([self], timeout)

    def _signal(self, sig: signal.Signals) -> None:
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(sig)

    def _close(self) -> None:
        """After it exited: reap it, collect the reader, remove a temporary log."""
        self.process.wait()
        self._reader.join(timeout=2.0)
        if self.process.stdout is not None:
            self.process.stdout.close()
        if self._own_log and self.log_path is not None:
            with contextlib.suppress(OSError):
                self.log_path.unlink()


def stop_all(children: Iterable[Child], timeout: float = 10.0) -> None:
    """SIGTERM them all, wait up to ``timeout`` for each, SIGKILL whatever is left, reap.
    Safe to interrupt: whatever happens, nothing is left running."""
    children = list(children)
    try:
        for child in children:
            child._signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for child in children:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.process.wait(max(0.0, deadline - time.monotonic()))
    finally:
        for child in children:
            child._signal(signal.SIGKILL)
        for child in children:
            child._close()


@contextlib.contextmanager
def cpu_hog(enabled: bool = True) -> Iterator[None]:
    """One process spinning on a core for the duration of the block (the benches' and
    ``arena-chaos torture --hog``'s busy machine); killed and reaped after it."""
    if not enabled:
        yield
        return
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        hog.kill()
        hog.wait()
