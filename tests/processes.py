"""Commands under test run in a session of their own, so that whatever they start can be
listed (every process of the session) and stopped as a whole (SIGTERM, then SIGKILL),
even when the test fails."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

__all__ = ["Session", "children_of", "session_members", "start_session"]


def _processes() -> Iterator[tuple[int, str, int, int]]:
    """(pid, state, parent pid, session id) of every process now."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid pgrp session ...: comm may hold spaces, split after ')'
        state, ppid, _, session = stat.rpartition(")")[2].split()[:4]
        yield int(entry.name), state, int(ppid), int(session)


def session_members(sid: int) -> set[int]:
    """Every live process whose session id is ``sid`` (zombies excluded)."""
    return {pid for pid, state, _, session in _processes() if session == sid and state != "Z"}


def children_of(parent: int) -> set[int]:
    """Live (or unreaped) processes whose parent is ``parent``."""
    return {pid for pid, _, ppid, _ in _processes() if ppid == parent}


class Session:
    """A command started as the leader of a new session; its output is collected."""

    def __init__(self, command: list[str], env: dict[str, str] | None = None) -> None:
        self.process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
            env=env,
        )
        self.sid = self.process.pid
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()

    def _drain(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def wait_for(self, text: str, within: float) -> None:
        """Until a line of its output holds ``text``; AssertionError after ``within`` s."""
        deadline = time.monotonic() + within
        while not any(text in line for line in self.lines):
            if self.process.poll() is not None:
                self._reader.join(2)
                if any(text in line for line in self.lines):
                    return
                raise AssertionError(f"exited ({self.process.returncode}) before {text!r}:\n"
                                     f"{self.output[-2000:]}")  # fmt: skip
            if time.monotonic() > deadline:
                raise AssertionError(f"no {text!r} within {within:g} s:\n{self.output[-2000:]}")
            time.sleep(0.05)

    def members(self) -> set[int]:
        return session_members(self.sid)

    def stop_all(self, grace: float = 10.0) -> None:
        """SIGTERM every process of the session, SIGKILL what is left after ``grace``."""
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
            for pid in self.members():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
            deadline = time.monotonic() + wait
            while self.members() and time.monotonic() < deadline:
                time.sleep(0.05)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(5)
        self._reader.join(2)
        if self.process.stdout is not None:
            self.process.stdout.close()


@contextlib.contextmanager
def start_session(command: list[str], env: dict[str, str] | None = None) -> Iterator[Session]:
    """Run ``command`` in a new session for the block; whatever is left of it at the end
    is stopped (SIGTERM, then SIGKILL), whatever the test's outcome."""
    session = Session(command, env)
    try:
        yield session
    finally:
        session.stop_all()
