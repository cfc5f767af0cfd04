"""The primary's checkpoints on disk (``--checkpoint-dir``), and finding the newest one.

Every ``--checkpoint-interval`` seconds a primary captures the tick it has just published
(a copy: the tick loop goes on at once) and a worker thread encodes it, writes it to a
temporary file, fsyncs it, renames it into place and fsyncs the folder, so a crash leaves
either the old set of files or the new one, never half a checkpoint; it then keeps the
newest :data:`KEEP` of this region and deletes the rest. One write at a time: a disk slower
than the interval skips checkpoints (counted) rather than queueing them.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Mapping
from pathlib import Path

from server.logs import EventLogger
from server.net.metrics import NodeMetrics
from server.replication.checkpoint import (
    Checkpoint,
    CheckpointError,
    decode_checkpoint,
    encode_checkpoint,
    file_name,
    newest_first,
)
from server.replication.messages import ConfigFingerprint

__all__ = ["KEEP", "CheckpointWriter", "newest_checkpoint"]

log = EventLogger("arena.server")

KEEP = 3  # checkpoints kept per region (a damaged newest one falls back to the next)


class CheckpointWriter:
    """Writes one region's checkpoints to ``folder`` (see the module)."""

    def __init__(
        self,
        folder: str,
        region: str,
        interval: float,
        metrics: NodeMetrics,
        log_fields: Mapping[str, object],
    ) -> None:
        self.folder = Path(folder)
        self.region = region
        self.interval = interval
        self.metrics = metrics
        self.log_fields = log_fields
        self.last: tuple[int, int, float] | None = None  # (epoch, tick, wall time) written
        self._next_at = 0.0
        self._writing: asyncio.Task[None] | None = None

    def due(self, now: float) -> bool:
        """Whether a checkpoint is due at monotonic time ``now`` (and not still writing)."""
        if now < self._next_at:
            return False
        if self._writing is not None and not self._writing.done():
            self.metrics.checkpoints_skipped.inc()
            self._next_at = now + self.interval
            return False
        self._next_at = now + self.interval
        return True

    def write(self, checkpoint: Checkpoint) -> None:
        """Write ``checkpoint`` in a worker thread; the caller goes on at once."""
        self._writing = asyncio.ensure_future(self._write(checkpoint))

    async def _write(self, checkpoint: Checkpoint) -> None:
        began = time.monotonic()
        try:
            size = await asyncio.to_thread(self._write_file, checkpoint)
        except OSError as error:
            self.metrics.checkpoints_failed.inc()
            log.error("checkpoint_failed", error=str(error)[:200], **self.log_fields)
            return
        self.last = (checkpoint.epoch, checkpoint.tick, checkpoint.wall_time)
        self.metrics.checkpoints_written.inc()
        self.metrics.checkpoint_tick.set(checkpoint.tick)
        self.metrics.checkpoint_seconds.observe(time.monotonic() - began)
        log.debug(
            "checkpoint",
            checkpoint_epoch=checkpoint.epoch,
            tick=checkpoint.tick,
            bytes=size,
            **self.log_fields,
        )

    def _write_file(self, checkpoint: Checkpoint) -> int:
        data = encode_checkpoint(checkpoint)
        self.folder.mkdir(parents=True, exist_ok=True)
        final = self.folder / file_name(self.region, checkpoint.epoch, checkpoint.tick)
        partial = final.with_name(f".{final.name}.{os.getpid()}.partial")
        with open(partial, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(partial, final)
        folder = os.open(self.folder, os.O_RDONLY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)
        for old in newest_first(os.listdir(self.folder), self.region)[KEEP:]:
            (self.folder / old).unlink(missing_ok=True)
        return len(data)

    async def close(self) -> None:
        """Let a write under way finish (a stopping primary's last checkpoint is whole)."""
        if self._writing is not None:
            await asyncio.gather(self._writing, return_exceptions=True)


def newest_checkpoint(
    folder: str, region: str, fingerprint: ConfigFingerprint, log_fields: Mapping[str, object]
) -> Checkpoint | None:
    """The newest readable checkpoint of ``region`` in ``folder`` (None: none there); a
    damaged or foreign file is logged and the next one tried."""
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return None
    for name in newest_first(names, region):
        try:
            return decode_checkpoint((Path(folder) / name).read_bytes(), region, fingerprint)
        except (OSError, CheckpointError) as error:
            log.warning("checkpoint_skipped", file=name, reason=str(error), **log_fields)
    return None
