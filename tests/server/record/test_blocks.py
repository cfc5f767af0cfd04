"""The match log's framing: what a torn tail, a flipped byte, rotation and a full disk leave
readable."""

from __future__ import annotations

import errno
import io
import logging
import os
from pathlib import Path

import pytest
import zstandard

from server.net import recording
from server.net.recording import SUFFIX, Recorder
from server.record.blocks import (
    FILE_HEADER,
    RAW,
    ZSTD,
    Block,
    BlockWriter,
    LogCorrupt,
    LogIncompatible,
    Pending,
    _expanded,
    read_blocks,
    seal_block,
)
from server.record.entries import config_from_entry
from server.record.replay import replay_match
from server.record.timeline import read_recording
from server.sim.hitreg.backend import make_validator
from tests.server.record.scenes import log_file, recorded_match


def _blocks(n: int) -> list[bytes]:
    return [seal_block(Block(10 * i, 10 * i + 9, (os.urandom(50) * 20,))) for i in range(n)]


def test_blocks_read_back_with_their_ticks_and_planes() -> None:
    noise = os.urandom(3000)
    blocks = [Block(10 * i, 10 * i + 9, (bytes([i]) * 1000, noise, b"", b"ab")) for i in range(3)]
    data = FILE_HEADER + b"".join(seal_block(b) for b in blocks)
    assert list(read_blocks(data)) == blocks


def test_a_plane_is_compressed_only_where_that_pays() -> None:
    runs, noise = bytes(5000), os.urandom(5000)
    both = len(seal_block(Block(0, 0, (runs, noise))))
    assert both < len(noise) + 200  # the zeros shrank to almost nothing
    assert both > len(noise)  # the noise is kept as it is: nothing can shrink it


def test_planes_of_every_method_read_and_an_unknown_one_is_refused() -> None:
    plane = bytes(range(256)) * 20
    assert _expanded(ZSTD, zstandard.ZstdCompressor().compress(plane), len(plane)) == plane
    assert _expanded(RAW, plane, len(plane)) == plane
    with pytest.raises(ValueError, match="does not decompress"):
        _expanded(ZSTD, b"\x28\xb5\x2f\xfd" + bytes(12), len(plane))
    for unknown in (1, 9):  # 1: raw deflate, which only format 2 wrote
        with pytest.raises(ValueError, match=f"unknown method {unknown}"):
            _expanded(unknown, plane, len(plane))


@pytest.mark.parametrize("kept", [0.01, 0.1, 0.5, 0.99])
def test_a_torn_tail_loses_only_its_block(kept: float) -> None:
    sealed = _blocks(4)
    data = log_file(sealed)
    cut = max(1, int(len(sealed[-1]) * kept))
    torn = data[: len(data) - len(sealed[-1]) + cut]  # the last block cut short
    read: list[Block] = []
    with pytest.raises(LogCorrupt) as error:
        read.extend(read_blocks(torn))
    assert [b.first_tick for b in read] == [0, 10, 20]
    assert error.value.torn and error.value.block == 3
    assert "block 3" in str(error.value)


def test_a_flipped_byte_refuses_its_block_by_checksum() -> None:
    sealed = _blocks(4)
    data = bytearray(log_file(sealed))
    at = len(FILE_HEADER) + len(sealed[0]) + len(sealed[1]) + 40  # in block 2's body
    data[at] ^= 0x01
    read: list[Block] = []
    with pytest.raises(LogCorrupt) as error:
        read.extend(read_blocks(bytes(data)))
    assert [b.first_tick for b in read] == [0, 10]
    assert str(error.value) == "block 2 (ticks 20..29): checksum mismatch (the block is damaged)"
    assert "\n" not in str(error.value)


def test_a_flipped_byte_in_a_blocks_tick_range_is_caught_too() -> None:
    sealed = _blocks(2)
    data = bytearray(log_file(sealed))
    data[len(FILE_HEADER) + len(sealed[0]) + 20] ^= 0x80  # block 1's first tick
    with pytest.raises(LogCorrupt, match=r"block 1 .*checksum"):
        list(read_blocks(bytes(data)))


def test_another_version_or_another_file_is_refused_in_one_line() -> None:
    newer = b"ARENALOG" + (99).to_bytes(2, "little")
    with pytest.raises(LogIncompatible, match=r"format 99, this arena-replay reads format 3$"):
        list(read_blocks(newer))
    older = b"ARENALOG" + (1).to_bytes(2, "little")
    with pytest.raises(LogIncompatible, match=r"format 1, .* format 3 \(record it again"):
        list(read_blocks(older))
    with pytest.raises(LogIncompatible, match="not an arena match log"):
        list(read_blocks(b"{'json': true}"))


def test_the_writer_makes_a_block_per_ticks_or_bytes() -> None:
    writer = BlockWriter(ticks_per_block=3, max_bytes=100)
    for tick in (1, 1, 2):
        writer.add("x", tick, 1)
    assert not writer.due
    writer.add("y", 3, 1)
    assert writer.due
    assert writer.take() == Pending(1, 3, ["x", "x", "x", "y"]) and writer.take() is None
    writer.add("z", 4, 100)
    assert writer.due


def test_the_recorder_rotates_by_size_and_every_file_reads_alone(tmp_path: Path) -> None:
    matches, _ = recorded_match(ticks=30)
    recorder = Recorder(
        str(tmp_path), matches, backend="reference", region="r", node="n",
        max_bytes=6_000, ticks_per_block=10,
    )  # fmt: skip
    for tick in range(matches.tick_number + 1, matches.tick_number + 400):
        recorder.before_tick()
        recorder.after_tick(matches.tick(tick))
    recorder.close()
    files = sorted(tmp_path.glob(f"*{SUFFIX}"))
    assert len(files) >= 3, [path.stat().st_size for path in files]
    assert all(path.stat().st_size <= 6_000 for path in files[:-1])
    for path in files:
        alone = read_recording([(path.name, path.read_bytes())])
        assert alone.config is not None and not alone.damaged
    later = read_recording([(files[-1].name, files[-1].read_bytes())])
    assert later.keys.get(0), "a rotated file starts its match again from a keyframe"
    together = read_recording([(path.name, path.read_bytes()) for path in files])
    assert together.config is not None
    config = config_from_entry(together.config)
    validator = make_validator("reference")
    outcome = replay_match(together, config, validator, 0, start=matches.tick_number - 420)
    assert outcome.exact and not outcome.problems and outcome.ticks > 350


class _FullDisk:
    """Opens real files whose writes numbered in ``failing`` (counted across files, from 1)
    fail as on a full disk, after half of their bytes reached it (a torn write)."""

    def __init__(self, failing: range) -> None:
        self.failing = failing
        self.writes = 0

    def open(self, path: str, mode: str) -> _FlakyFile:
        return _FlakyFile(self, open(path, mode))


class _FlakyFile:
    def __init__(self, disk: _FullDisk, file: io.BufferedWriter) -> None:
        self.disk, self.file, self.name = disk, file, file.name

    def write(self, data: bytes) -> int:
        self.disk.writes += 1
        if self.disk.writes in self.disk.failing:
            self.file.write(data[: len(data) // 2])
            self.file.flush()
            raise OSError(errno.ENOSPC, "No space left on device")
        return self.file.write(data)

    def flush(self) -> None:
        self.file.flush()

    def close(self) -> None:
        self.file.close()


def test_a_full_disk_loses_only_the_blocks_it_refused_and_every_file_reads_clean(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Writes 1-4: the first file's header and three blocks; 5: a block, torn; 6 and 7: the
    # headers of the next two files, torn; then the disk takes writes again.
    disk = _FullDisk(range(5, 8))
    monkeypatch.setattr(recording, "open", disk.open, raising=False)
    matches, _ = recorded_match(ticks=30)
    recorder = Recorder(
        str(tmp_path), matches, backend="reference", region="r", node="n",
        max_bytes=10**9, ticks_per_block=10,
    )  # fmt: skip
    first = matches.tick_number + 1
    with caplog.at_level(logging.INFO, logger="arena.server"):
        for tick in range(first, first + 120):
            recorder.before_tick()
            recorder.after_tick(matches.tick(tick))
            for pending in recorder._pending:
                pending.result()  # (one block at a time: the writes' numbers are the blocks')
        recorder.close()
    assert recorder.blocks_lost == 3 and disk.writes > 8
    said = [record.getMessage() for record in caplog.records]
    assert sum("record_write_failed" in line for line in said) == 1, said
    assert any("record_write_resumed" in line and "blocks_lost=3" in line for line in said), said
    files = sorted(tmp_path.glob(f"*{SUFFIX}"))
    assert len(files) == 2, "the files whose header tore are gone"
    for path in files:  # each reads clean, starts from a keyframe and replays alone
        alone = read_recording([(path.name, path.read_bytes())])
        assert alone.config is not None and not alone.damaged, path.name
        assert alone.keys.get(0), path.name
        config = config_from_entry(alone.config)
        outcome = replay_match(alone, config, make_validator("reference"), 0)
        assert outcome.exact and not outcome.problems and outcome.ticks > 20, path.name
