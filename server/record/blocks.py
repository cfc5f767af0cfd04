"""The match log's framing: a file header, then compressed, checksummed blocks (sans-I/O).

A log file is ``MAGIC`` and the format version, then blocks, each::

    "BLK1" | u32 stored bytes | u32 raw bytes | u32 CRC-32 | i64 first tick | i64 last tick
           | u8 codec | stored bytes

The CRC covers everything after itself (the tick range, the codec and the stored bytes), so
one flipped byte anywhere in a block refuses that block, and a block cut short by a SIGKILL
mid-write is recognised as torn: every block before it still reads. A block holds a whole
number of entries (:mod:`server.record.entries`), so nothing spans two blocks. zlib is the
codec (no zstandard on our index); the byte says which, so another can be added.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = [
    "FILE_HEADER",
    "FORMAT_VERSION",
    "Block",
    "BlockWriter",
    "LogCorrupt",
    "LogIncompatible",
    "read_blocks",
    "seal_block",
]

MAGIC = b"ARENALOG"
#: Raised when an entry's meaning changes: a reader refuses other versions in one line.
FORMAT_VERSION = 1
FILE_HEADER = MAGIC + struct.pack("<H", FORMAT_VERSION)
_BLOCK_MARK = b"BLK1"
_HEAD = struct.Struct("<4sIIIqqB")
_CHECKED = struct.Struct("<qqB")  # the part of the head the CRC covers
CODEC_ZLIB = 1
#: The most one block may hold, raw: a larger length is corruption, not a block to allocate.
MAX_BLOCK_BYTES = 64 << 20


class LogCorrupt(ValueError):
    """A block cannot be read: torn, or its checksum refuses it (``block``: its index in
    the file, counting from 0; ``ticks``: its tick range when its head could be read)."""

    def __init__(self, why: str, block: int, ticks: tuple[int, int] | None = None) -> None:
        where = f"block {block}" + (f" (ticks {ticks[0]}..{ticks[1]})" if ticks else "")
        super().__init__(f"{where}: {why}")
        self.block = block
        self.ticks = ticks
        self.torn = why.startswith("torn")


class LogIncompatible(ValueError):
    """Not a match log, or one of another format version."""


@dataclass(frozen=True, slots=True)
class Block:
    """One block's entries (packed, back to back) and the ticks they cover."""

    first_tick: int
    last_tick: int
    payload: bytes


def seal_block(block: Block, level: int = 6) -> bytes:
    """The block as it is written: compressed, headed and checksummed. Pure and GIL-free
    for most of its time (zlib), so the node's edge runs it off the tick's thread."""
    stored = zlib.compress(block.payload, level)
    checked = _CHECKED.pack(block.first_tick, block.last_tick, CODEC_ZLIB)
    crc = zlib.crc32(stored, zlib.crc32(checked))
    head = _HEAD.pack(
        _BLOCK_MARK, len(stored), len(block.payload), crc, block.first_tick, block.last_tick,
        CODEC_ZLIB,
    )  # fmt: skip
    return head + stored


def read_blocks(data: bytes) -> Iterator[Block]:
    """Every block of a log file's bytes, in order; raises :class:`LogIncompatible` for a
    file that is not a log of this version, and :class:`LogCorrupt` at the first block that
    cannot be read (after yielding every block before it)."""
    if not data.startswith(MAGIC):
        raise LogIncompatible("not an arena match log (no ARENALOG header)")
    if len(data) < len(FILE_HEADER):
        raise LogIncompatible("the log's header is cut short")
    (version,) = struct.unpack_from("<H", data, len(MAGIC))
    if version != FORMAT_VERSION:
        raise LogIncompatible(
            f"match log format {version}, this arena-replay reads format {FORMAT_VERSION}"
        )
    at, index = len(FILE_HEADER), 0
    while at < len(data):
        if len(data) - at < _HEAD.size:
            raise LogCorrupt("torn: the file ends inside a block's head", index)
        mark, stored, raw, crc, first, last, codec = _HEAD.unpack_from(data, at)
        ticks = (first, last)
        if mark != _BLOCK_MARK:
            raise LogCorrupt("no block mark where a block should start", index)
        if stored > MAX_BLOCK_BYTES or raw > MAX_BLOCK_BYTES:
            raise LogCorrupt("a block length beyond any block written", index)
        body = data[at + _HEAD.size : at + _HEAD.size + stored]
        if len(body) < stored:
            raise LogCorrupt("torn: the file ends inside the block", index, ticks)
        checked = _CHECKED.pack(first, last, codec)
        if zlib.crc32(body, zlib.crc32(checked)) != crc:
            raise LogCorrupt("checksum mismatch (the block is damaged)", index, ticks)
        if codec != CODEC_ZLIB:
            raise LogCorrupt(f"unknown codec {codec}", index, ticks)
        try:
            payload = zlib.decompress(body)
        except zlib.error:
            raise LogCorrupt("does not decompress", index, ticks) from None
        if len(payload) != raw:
            raise LogCorrupt("decompressed length differs from its head's", index, ticks)
        yield Block(first, last, payload)
        at += _HEAD.size + stored
        index += 1


class BlockWriter:
    """Gathers packed entries into blocks: one is due every ``ticks_per_block`` ticks or
    once ``max_bytes`` are held, whichever comes first. The tick only appends bytes to a
    list; sealing and writing a block is the edge's, off the tick."""

    def __init__(self, ticks_per_block: int = 60, max_bytes: int = 1 << 20) -> None:
        if ticks_per_block < 1 or max_bytes < 1:
            raise ValueError("a block holds at least one tick and one byte")
        self.ticks_per_block = ticks_per_block
        self.max_bytes = max_bytes
        self._entries: list[bytes] = []
        self._held = 0
        self._ticks: set[int] = set()
        self._first: int | None = None
        self._last = 0

    def add(self, entry: bytes, tick: int) -> None:
        """Hold one packed entry of tick ``tick``."""
        self._entries.append(entry)
        self._held += len(entry)
        self._ticks.add(tick)
        self._first = tick if self._first is None else min(self._first, tick)
        self._last = max(self._last, tick)

    @property
    def due(self) -> bool:
        return len(self._ticks) >= self.ticks_per_block or self._held >= self.max_bytes

    @property
    def held_bytes(self) -> int:
        return self._held

    def take(self) -> Block | None:
        """The held entries as one block (None when nothing is held), and hold none."""
        if self._first is None:
            return None
        block = Block(self._first, self._last, b"".join(self._entries))
        self._entries, self._held, self._ticks, self._first, self._last = [], 0, set(), None, 0
        return block
