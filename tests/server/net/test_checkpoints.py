"""The checkpoint writer: whole files only, the newest few kept, a slow disk skipped."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

import pytest

from server.net.checkpoints import KEEP, CheckpointWriter, newest_checkpoint
from server.net.metrics import NodeMetrics
from server.replication import state as records
from server.replication.checkpoint import Checkpoint, file_name
from tests.server.replication.test_checkpoint import new_matches, played


def writer_in(folder: Path) -> CheckpointWriter:
    return CheckpointWriter(str(folder), "eu-west", 1.0, NodeMetrics(), {"node": "test"})


def taken(tick: int, epoch: int = 1) -> Checkpoint:
    matches = played(tick)
    return Checkpoint(
        "eu-west",
        records.config_fingerprint(matches),
        float(tick),
        records.capture_full(matches, epoch),
    )


async def test_checkpoints_are_renamed_into_place_and_only_the_newest_kept(
    tmp_path: Path,
) -> None:
    writer = writer_in(tmp_path / "ckpt")
    for tick in range(1, KEEP + 3):
        writer.write(taken(tick))
        await writer.close()
    names = sorted(os.listdir(tmp_path / "ckpt"))
    assert names == sorted(file_name("eu-west", 1, t) for t in range(3, KEEP + 3))
    assert writer.last == (1, KEEP + 2, float(KEEP + 2))
    fingerprint = records.config_fingerprint(new_matches())
    newest = newest_checkpoint(str(tmp_path / "ckpt"), "eu-west", fingerprint, {"node": "test"})
    assert newest is not None and newest.tick == KEEP + 2


async def test_a_damaged_newest_checkpoint_falls_back_to_the_one_before(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    writer = writer_in(tmp_path)
    for tick in (4, 9):
        writer.write(taken(tick))
        await writer.close()
    (tmp_path / file_name("eu-west", 1, 9)).write_bytes(b"torn")
    fingerprint = records.config_fingerprint(new_matches())
    newest = newest_checkpoint(str(tmp_path), "eu-west", fingerprint, {"node": "test"})
    assert newest is not None and newest.tick == 4
    assert "event=checkpoint_skipped" in caplog.text
    nowhere = str(tmp_path / "none")
    assert newest_checkpoint(nowhere, "eu-west", fingerprint, {"node": "test"}) is None


async def test_one_write_at_a_time_a_slow_disk_skips_checkpoints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = writer_in(tmp_path)
    disk = threading.Event()
    slow = writer._write_file

    def write_slowly(checkpoint: Checkpoint) -> int:
        disk.wait(10)
        return slow(checkpoint)

    monkeypatch.setattr(writer, "_write_file", write_slowly)
    assert writer.due(100.0)
    writer.write(taken(3))
    assert not writer.due(100.5)  # within the interval
    assert not writer.due(101.5)  # due, but the last one is still being written
    assert writer.metrics.checkpoints_skipped._value.get() == 1
    disk.set()
    await writer.close()
    assert writer.last is not None and writer.due(103.0)


async def test_a_write_that_fails_is_logged_and_counted_never_raised(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    writer = writer_in(blocked)
    writer.write(taken(2))
    await asyncio.wait_for(writer.close(), 10)
    assert writer.last is None
    assert writer.metrics.checkpoints_failed._value.get() == 1
    assert "event=checkpoint_failed" in caplog.text
