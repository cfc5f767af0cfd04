"""Every numba kernel of a node compiled, or loaded from the cache, before it serves anyone.

A cold compile of the node's kernels is seconds of CPU (tens of seconds of wall time on a
busy 2-core machine). Done on the event loop it blocked ``/health`` and signals, and done
after the node said it was listening it made the first players wait. So:

* the node warms up before it is ready (``/health`` answers 503 meanwhile) and off the
  event loop: loading runs in a daemon thread, so SIGTERM still stops the node at once (a
  thread cannot be cancelled; a daemon one does not hold the exit);
* a cold cache is filled by forked worker processes, one group of kernels each, as many
  at a time as the machine has cores, the longest groups first; the node then only loads
  (a few hundredths of a second). Forked, because a fresh interpreter pays half a second
  of imports and numba set-up per worker; the fork happens before the node has any
  thread or connection, and a worker only compiles, writes one line and ``_exit``\\ s;
* nodes that start at the same time on one machine fill the cache once: a lock file in
  the cache folder lets the first fill it and the others wait, then load;
* a stamp file records that the cache holds every kernel of these sources, numba and
  Python, at this checkout's path; without it the workers run (when it lies, the node
  still compiles what it lacks);
* the bots' snapshot decoder (with their view, sight-line and shot kernels) is a group too,
  though the node never runs it: a swarm on this machine then loads it, where compiling
  it blocked the swarm's event loop (and an in-process node's, in the tests) for about
  10 s of CPU.

``arena-server --warm-cache`` fills the cache and exits: the install step runs it, so a
first demo loads instead of compiling.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import functools
import hashlib
import json
import os
import platform
import signal
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypeVar

from shared import jitcache

__all__ = ["GROUPS", "WarmUpError", "WarmUpReport", "in_daemon_thread", "warm_up_kernels"]

T = TypeVar("T")

#: The CPU kernel groups compiled side by side on a cold start, longest first (so the
#: cores finish together): about 10 (the bots' snapshot decoder, alone in a fresh
#: process), 5.0 (the node's snapshot codec, interest and fog), 3.5, 2.8, 1.2, 1.0 and 0.9 s of
#: CPU on the 2-core machine. The node never runs the decoder; it is in the cache so that
#: bots started on this machine (the demo's, the tests') load it instead of compiling it.
GROUPS = ("decoder", "deltas", "projectiles", "hitscan", "grid", "frames", "queues")
#: Source files whose contents the kernels are compiled from (their globals included).
_SOURCES = jitcache.KERNEL_SOURCES
_ROOT = Path(__file__).resolve().parents[2]


class WarmUpError(RuntimeError):
    """The kernels could not be compiled; the message says which and why, in one line."""


@dataclass(frozen=True, slots=True)
class WarmUpReport:
    """How the warm-up went: ``cold`` when something had to be compiled."""

    seconds: float
    cold: bool
    compile_events: int  # in the node's own process (0 when everything loaded)
    worker_compile_events: int
    workers: int
    cache_dir: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@contextlib.contextmanager
def counting_compiles() -> Iterator[list[int]]:
    """numba's compile events (one per function specialisation compiled) while inside;
    the count is the list's only item."""
    from numba.core import event

    count = [0]

    class Listener(event.Listener):
        def on_start(self, ev: event.Event) -> None:
            pass

        def on_end(self, ev: event.Event) -> None:
            count[0] += 1

    listener = Listener()
    event.register("numba:compile", listener)
    try:
        yield count
    finally:
        event.unregister("numba:compile", listener)


def warm_group(group: str) -> int:
    """Compile (or load) one group of the CPU kernels; returns numba's compile events."""
    from server.sim import deltas, inputs
    from server.sim.hitreg import make_validator
    from server.sim.input_frames import decode_input_frames, split_read
    from shared import movement, rayhits, sightlines
    from shared.protocol import baselines, between, reader

    with counting_compiles() as count:
        if group in ("hitscan", "projectiles"):
            make_validator("cpu").warm_up((group,))
        elif group == "grid":
            make_validator("cpu").warm_up(("broad_phase",))
        elif group == "frames":
            decode_input_frames([])
            split_read(b"", 1)
        elif group == "queues":
            inputs.warm_up()
            movement.warm_up()
        elif group == "deltas":
            deltas.warm_up()
        elif group == "decoder":
            baselines.warm_up()
            reader.warm_up()
            between.warm_up()
            sightlines.warm_up()
            rayhits.warm_up()
        else:
            raise ValueError(f"unknown kernel group {group!r}; known: {', '.join(GROUPS)}")
    return count[0]


def warm_in_process(validator: Any) -> int:
    """Compile (or load) every kernel the node runs, in this process; compile events."""
    from server.sim import deltas, inputs
    from server.sim.input_frames import decode_input_frames, split_read
    from shared import movement

    with counting_compiles() as count:
        validator.warm_up()
        decode_input_frames([])
        split_read(b"", 1)
        inputs.warm_up()
        movement.warm_up()
        deltas.warm_up()
    return count[0]


def stamp_path() -> Path:
    """The file that says the cache holds every CPU kernel of these sources, at this path
    (numba keys its cache by the source's path: a second clone has a cache of its own)."""
    import numba

    digest = hashlib.sha256()
    machine = (numba.__version__, sys.version, platform.machine(), platform.processor())
    for part in (*machine, str(_ROOT)):
        digest.update(part.encode() + b"\0")
    for source in _SOURCES:
        digest.update((_ROOT / source).read_bytes())
    return jitcache.cache_dir() / f"arena-kernels-{digest.hexdigest()[:16]}.ready"


async def in_daemon_thread(function: Callable[..., T], *args: Any) -> T:
    """``function(*args)`` in a daemon thread, awaited. Unlike ``asyncio.to_thread`` the
    interpreter does not wait for it at exit, so a node told to stop mid-compile stops."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def run() -> None:
        try:
            result = function(*args)
        except BaseException as error:  # handed to the awaiting task
            deliver = functools.partial(_settle, future, None, error)
        else:
            deliver = functools.partial(_settle, future, result, None)
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits any more
            loop.call_soon_threadsafe(deliver)

    threading.Thread(target=run, name="kernel-warm-up", daemon=True).start()
    return await future


def _settle(future: asyncio.Future[T], result: T | None, error: BaseException | None) -> None:
    if future.done():  # the awaiting task was cancelled
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)  # type: ignore[arg-type]


@contextlib.asynccontextmanager
async def _cache_lock() -> AsyncIterator[None]:
    """One filler per cache folder at a time (a node starting beside another waits)."""
    descriptor = os.open(jitcache.cache_dir() / "arena-kernels.lock", os.O_RDWR | os.O_CREAT)
    try:
        while True:
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                await asyncio.sleep(0.1)
        yield
    finally:
        os.close(descriptor)  # (releases the lock)


def _worker(group: str, reply: int) -> None:
    """A forked worker's whole life: compile ``group``, write one JSON line, ``_exit``."""
    code = 1
    try:
        for sig in (signal.SIGTERM, signal.SIGINT):  # the parent's loop handlers are not ours
            signal.signal(sig, signal.SIG_DFL)
        signal.set_wakeup_fd(-1)
        from shared.lifetime import exit_with_parent

        exit_with_parent(signal.SIGKILL)
        line = {"group": group, "compile_events": warm_group(group)}
        code = 0
    except BaseException as error:  # reported to the parent, which names the group
        line = {"group": group, "error": f"{type(error).__name__}: {error}"}
    finally:
        with contextlib.suppress(OSError):
            os.write(reply, json.dumps(line).encode() + b"\n")
        os._exit(code)


async def _run_worker(group: str) -> int:
    """Fork a worker for ``group`` and await its line; its compile events. A cancelled
    wait kills the worker."""
    loop = asyncio.get_running_loop()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child never returns)
        os.close(read_end)
        _worker(group, write_end)
    os.close(write_end)
    received = bytearray()
    finished = loop.create_future()

    def readable() -> None:
        chunk = os.read(read_end, 65536)
        received.extend(chunk)
        if not chunk and not finished.done():
            finished.set_result(None)

    loop.add_reader(read_end, readable)
    try:
        await finished
        await asyncio.to_thread(os.waitpid, pid, 0)  # it closed its pipe: it is exiting
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)  # noqa: ASYNC222 (a SIGKILLed child is reaped at once)
        raise
    finally:
        loop.remove_reader(read_end)
        os.close(read_end)
    try:
        line = json.loads(bytes(received).decode())
    except ValueError:
        raise WarmUpError(f"compiling the {group} kernels failed: the worker died") from None
    if "error" in line:
        raise WarmUpError(f"compiling the {group} kernels failed: {line['error']}")
    return int(line["compile_events"])


async def _fill_cache(workers: int) -> int:
    """Compile every group in forked workers, ``workers`` at a time; compile events."""
    import numba

    numba.njit(_identity)(0)  # numba's one-time set-up, once here rather than per worker
    slots = asyncio.Semaphore(workers)

    async def one(group: str) -> int:
        async with slots:
            return await _run_worker(group)

    try:
        async with asyncio.TaskGroup() as tasks:
            counts = [tasks.create_task(one(group)) for group in GROUPS]
    except* WarmUpError as failed:  # the others were stopped: name the first that failed
        raise failed.exceptions[0] from None
    return sum(count.result() for count in counts)


def _identity(value: int) -> int:
    return value


async def warm_up_kernels(validator: Any, workers: int | None = None) -> WarmUpReport:
    """Make every kernel of ``validator`` and the input path ready in this process.

    With the CPU backend, no stamp and ``workers`` > 1 (default: the core count), first
    fills the cache with forked workers; on two cores that halved a cold start (12.3 s to
    about 5.5 s). With one core the node compiles in-process only.
    """
    began = time.perf_counter()
    workers = os.cpu_count() or 1 if workers is None else workers
    cold = False
    worker_events = 0
    if validator.backend == "cpu" and workers > 1:
        async with _cache_lock():
            stamp = stamp_path()
            if not stamp.exists():
                cold = True
                worker_events = await _fill_cache(workers)
                stamp.write_text(json.dumps({"written": time.time()}) + "\n")
    events = await in_daemon_thread(warm_in_process, validator)
    return WarmUpReport(
        seconds=round(time.perf_counter() - began, 3),
        cold=cold or events > 0,
        compile_events=events,
        worker_compile_events=worker_events,
        workers=min(workers, len(GROUPS)) if cold else 0,
        cache_dir=str(jitcache.cache_dir()),
    )
