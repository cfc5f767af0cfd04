"""A child process that dies with its parent: no orphaned node, bot worker or compiler.

Launchers (``arena-demo``, ``arena-cluster``, ``arena-bots --workers``, a node's warm-up)
stop their children themselves when they are told to stop. A launcher that is SIGKILLed
cannot; on Linux the kernel then sends each child that asked for it (``PR_SET_PDEATHSIG``)
a signal of its choosing. Elsewhere this is a no-op and the launchers' own clean-up is all.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys

__all__ = [
    "EXIT_WITH_PARENT_ENV",
    "exit_with_parent",
    "exit_with_parent_if_asked",
    "pid_namespace",
    "sigterm_as_interrupt",
]

#: Set to "1" by a launcher in its children's environment: die with the launcher.
EXIT_WITH_PARENT_ENV = "ARENA_EXIT_WITH_PARENT"
_PR_SET_PDEATHSIG = 1


def exit_with_parent(sig: signal.Signals = signal.SIGTERM) -> bool:
    """Ask the kernel to send ``sig`` to this process when its parent dies. True if it
    could (Linux); the parent may have died already, in which case ``sig`` comes now."""
    if not sys.platform.startswith("linux"):
        return False
    parent = os.getppid()
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
        return False
    if os.getppid() != parent:  # it died before we asked
        os.kill(os.getpid(), sig)
    return True


def exit_with_parent_if_asked(sig: signal.Signals = signal.SIGTERM) -> None:
    """:func:`exit_with_parent` when the launcher set :data:`EXIT_WITH_PARENT_ENV`."""
    if os.environ.get(EXIT_WITH_PARENT_ENV) == "1":
        exit_with_parent(sig)


def sigterm_as_interrupt() -> None:
    """Make SIGTERM raise KeyboardInterrupt, as Ctrl-C does, so a launcher's ``finally``
    blocks stop its children on either; a launcher calls this first. While its event loop
    runs, :func:`shared.eventloop.run` with ``cancel_on`` turns the signal into a clean
    cancellation of the main task instead (an exception raised at an arbitrary point of
    the loop could leave its shutdown waiting)."""
    signal.signal(signal.SIGTERM, signal.default_int_handler)


def pid_namespace() -> int | None:
    """The identity of this process's pid namespace (its inode; None where there is none to
    read): a pid means the same process to two processes only when theirs are equal. A node
    in a container says its pid is 1; the host must not signal its own pid 1."""
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return None
