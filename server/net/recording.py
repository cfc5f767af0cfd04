"""``--record DIR``: the node's match log on disk (the edge of :mod:`server.record`).

The tick appends its entries to memory (:class:`~server.record.capture.MatchLog`: references
to the tick's arrays, nothing coded); every block's worth (a second of ticks, or a few
megabytes) is handed to one writer thread that codes it into planes, compresses them, writes
the block and rotates the file past ``--record-max-mb``. The tick never
waits on the disk: a block is written while the next second of ticks runs. A SIGKILL loses
the block being written (its torn tail is recognised on reading) and the ticks held in
memory; a SIGTERM writes them. A disk that refuses a block (full, gone, read-only) loses
that block and ends its file: the recording goes on in a new file, keyframed, when the disk
takes writes again (``record_write_failed`` once an outage, ``record_write_resumed`` after).
An operator may pause the recording and resume it (the admin port's ``POST /record/pause``
and ``/record/resume``): a pause ends the file with a ``pause`` entry per match, and the
resumed recording starts a new one, keyframed, so that a replay knows the gap was meant.

File names sort in the order written: ``REGION.NODE.START.SEQ.arenalog``, START the node's
start (milliseconds of the wall clock), SEQ the file's number.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import IO

from server.logs import EventLogger
from server.record.blocks import FILE_HEADER, Block, BlockWriter, Pending, seal_block
from server.record.capture import MatchLog, block_of
from server.record.entries import encode_block
from server.replication.messages import FullState, TickRecord
from server.sim.match import TickResult
from server.sim.matchset import MatchSet

__all__ = ["SUFFIX", "Recorder"]

SUFFIX = ".arenalog"
log = EventLogger("arena.server")


class Recorder:
    """Writes ``matches``' log under ``directory``, a new file past ``max_bytes``."""

    def __init__(
        self,
        directory: str,
        matches: MatchSet,
        *,
        backend: str,
        region: str,
        node: str,
        max_bytes: int,
        ticks_per_block: int = 60,
    ) -> None:
        os.makedirs(directory, exist_ok=True)
        self.directory = directory
        self.max_bytes = max_bytes
        started = time.time()
        self.log = MatchLog(
            matches, backend=backend, region=region, node=node, started=started,
            blocks=BlockWriter(ticks_per_block),
        )  # fmt: skip
        self._stem = os.path.join(directory, f"{region}.{node}.{int(started * 1000)}")
        self._sequence = 0
        self._file: IO[bytes] | None = None
        self._written = 0
        self._rotated = threading.Event()  # set by the writer: keyframe every match next
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="arena-record")
        self._pending: list[Future[None]] = []
        self._closed = False
        #: An operator paused the recording (the admin port's ``POST /record/pause``).
        self.paused = False
        self.blocks_written = 0
        self.bytes_written = 0
        self.blocks_lost = 0  # blocks the disk did not take
        self._lost_in_outage = 0  # of them, since the last block written
        #: CPU seconds the recording took, on the tick's thread and on the writer's (what
        #: ``arena_record_cpu_seconds_total`` shows: its share of the node, measured in it).
        self.tick_cpu_s = 0.0
        self.writer_cpu_s = 0.0

    # -- the tick's side: memory only ----------------------------------------------------

    def before_tick(self) -> None:
        if self.paused:
            return
        began = time.thread_time()
        self.log.before_tick()
        self.tick_cpu_s += time.thread_time() - began

    def after_tick(self, results: list[TickResult]) -> None:
        if self.paused:
            return
        began = time.thread_time()
        if self._rotated.is_set():
            self._rotated.clear()
            self.log.want_keyframes()
        self.log.after_tick(results)
        self._hand_over_if_due()
        self.tick_cpu_s += time.thread_time() - began

    def followed(self, record: TickRecord | FullState) -> None:
        if self.paused:
            return
        began = time.thread_time()
        self.log.followed(record)
        self._hand_over_if_due()
        self.tick_cpu_s += time.thread_time() - began

    def pause(self) -> bool:
        """Stop logging after this tick: what memory holds is written and its file ended,
        so that every file still replays alone. False: it was paused already."""
        if self.paused or self._closed:
            return False
        self.log.pause()
        self._hand_over()
        self._pending.append(self._writer.submit(self._end_file))
        self.paused = True
        log.info("record_paused", directory=self.directory)
        return True

    def resume(self) -> bool:
        """Log again from the next tick, in a new file, keyframed after that tick. False:
        it was not paused."""
        if not self.paused or self._closed:
            return False
        self.log.resume()
        self.paused = False
        log.info("record_resumed", directory=self.directory)
        return True

    def _hand_over_if_due(self) -> None:
        if self.log.blocks.due:
            self._hand_over()

    def _hand_over(self) -> None:
        taken = self.log.take_block()
        if taken is None or self._closed:
            return
        self._pending = [f for f in self._pending if not f.done()]
        self._pending.append(self._writer.submit(self._write, taken))

    # -- the writer thread ---------------------------------------------------------------

    def _write(self, pending: Pending) -> None:
        began = time.thread_time()
        try:
            sealed = seal_block(block_of(pending))
            try:
                if self._file is None or self._written + len(sealed) > self.max_bytes:
                    self._open_next()
                assert self._file is not None
                self._file.write(sealed)
                self._file.flush()  # in the kernel's page cache: a SIGKILL keeps it
            except OSError as error:
                self._lost(error)
                return
            self._written += len(sealed)
            self.blocks_written += 1
            self.bytes_written += len(sealed)
            if self._lost_in_outage:
                log.info("record_write_resumed", file=self._file.name,
                         blocks_lost=self._lost_in_outage)  # fmt: skip
                self._lost_in_outage = 0
        finally:
            self.writer_cpu_s += time.thread_time() - began

    def _lost(self, error: OSError) -> None:
        """A block the disk did not take (full, gone, read-only): it is lost, and the
        file it tore is cut back to its last whole block and ended. The next block starts
        a new file, whose matches are keyframed again, so that every file written reads
        and replays alone. Said once an outage."""
        self.blocks_lost += 1
        self._lost_in_outage += 1
        if self._lost_in_outage == 1:
            log.error(
                "record_write_failed", directory=self.directory, error=str(error),
                hint="the match log loses its blocks until the disk takes writes again; "
                "it goes on in a new file then",
            )  # fmt: skip
        if self._file is not None:
            path, whole = self._file.name, self._written
            with contextlib.suppress(OSError):
                self._file.close()
            with contextlib.suppress(OSError):
                if whole:
                    os.truncate(path, whole)  # back to its last whole block: it reads clean
                else:
                    os.unlink(path)  # not even its header reached the disk
            self._file = None
        self._rotated.set()

    def _end_file(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def _open_next(self) -> None:
        first = self._file is None
        if self._file is not None:
            self._file.close()
            self._rotated.set()  # (the next tick keyframes: this file replays alone)
        self._sequence += 1
        os.makedirs(self.directory, exist_ok=True)  # (removed under a running node)
        self._file = open(f"{self._stem}.{self._sequence:05d}{SUFFIX}", "xb")
        self._written = 0
        header = FILE_HEADER + seal_block(Block(0, 0, encode_block([self.log.config])))
        self._file.write(header)
        self._written = len(header)
        if not first:
            log.info("record_rotated", file=self._file.name)

    def close(self) -> None:
        """Write what memory holds and close (the node's shutdown)."""
        self._hand_over()
        self._closed = True
        self._writer.shutdown(wait=True)
        if self._file is not None:
            self._file.close()
            self._file = None
