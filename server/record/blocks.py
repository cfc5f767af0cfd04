"""The match log's framing: a file header, then checksummed blocks of planes (sans-I/O).

A log file is ``MAGIC`` and the format version, then blocks, each::

    "BLK1" | u32 stored bytes | u32 raw bytes | u32 CRC-32 | i64 first tick | i64 last tick
           | u8 codec | stored bytes

and a block's stored bytes (codec ``CODEC_PLANES``) are its planes::

    u16 planes | per plane: u8 method, u32 stored bytes, u32 raw bytes | the planes' bytes

A plane is one stream of bytes the block's coder made
(:func:`server.record.entries.encode_block`): its entries, their inputs' column widths, or
one byte of one column of its inputs (:mod:`server.record.columns`). Each is compressed on
its own with Zstandard (``ZSTD``, level 1: a quarter of deflate's CPU for a log a few per
cent smaller, ``bench/recording.py``) or kept as it is (``RAW``) when that does not pay, as
for bytes that are noise. (Method 1 was raw deflate, which format 2's first writers
used.)

The CRC covers everything after itself (the tick range, the codec and the stored bytes), so
one flipped byte anywhere in a block refuses that block, and a block cut short by a SIGKILL
mid-write is recognised as torn: every block before it still reads. A block holds a whole
number of entries, so nothing spans two blocks. The codec byte says how a block is laid
out, so another can be added.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import zstandard

__all__ = [
    "FILE_HEADER",
    "FORMAT_VERSION",
    "Block",
    "BlockWriter",
    "LogCorrupt",
    "LogIncompatible",
    "Pending",
    "read_blocks",
    "seal_block",
]

MAGIC = b"ARENALOG"
#: Raised when an entry's or a block's meaning changes: a reader refuses other versions in
#: one line (format 1 stored each block as one zlib stream of msgpack entries; format 2
#: moves and angles only as the XOR of their bits, before the node kept them to steps).
FORMAT_VERSION = 3
FILE_HEADER = MAGIC + struct.pack("<H", FORMAT_VERSION)
_BLOCK_MARK = b"BLK1"
_HEAD = struct.Struct("<4sIIIqqB")
_CHECKED = struct.Struct("<qqB")  # the part of the head the CRC covers
_COUNT = struct.Struct("<H")
_PLANE = struct.Struct("<BII")
CODEC_PLANES = 2
RAW, ZSTD = 0, 2
#: The most one block may hold, raw: a larger length is corruption, not a block to allocate.
MAX_BLOCK_BYTES = 64 << 20
#: Planes shorter than this are kept raw: a frame's own header would eat what it saves.
_SHORT = 16
#: A plane is compressed only when that saves at least this share of it.
_WORTH = 0.97
#: Zstandard's level: 1 costs the writer least, and higher levels shrank the log by 0-2 %.
ZSTD_LEVEL = 1


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
    """One block's planes (as its coder made them) and the ticks they cover."""

    first_tick: int
    last_tick: int
    planes: tuple[bytes, ...]


def _compressed(plane: bytes, squeezer: zstandard.ZstdCompressor) -> bytes | None:
    """``plane`` compressed, or None when that does not pay (Zstandard passes noise
    through at memory speed, so no probe is needed first)."""
    if len(plane) < _SHORT:
        return None
    stored = squeezer.compress(plane)
    return stored if len(stored) <= _WORTH * len(plane) else None


def seal_block(block: Block, level: int = ZSTD_LEVEL) -> bytes:
    """The block as it is written: each plane compressed where that pays, headed and
    checksummed. Pure and GIL-free for most of its time (Zstandard), so the node's edge
    runs it off the tick's thread."""
    squeezer = zstandard.ZstdCompressor(level=level, write_checksum=False)
    heads, bodies = [_COUNT.pack(len(block.planes))], []
    for plane in block.planes:
        compressed = _compressed(plane, squeezer)
        method, body = (RAW, plane) if compressed is None else (ZSTD, compressed)
        heads.append(_PLANE.pack(method, len(body), len(plane)))
        bodies.append(body)
    stored = b"".join(heads + bodies)
    raw = sum(len(plane) for plane in block.planes)
    checked = _CHECKED.pack(block.first_tick, block.last_tick, CODEC_PLANES)
    crc = zlib.crc32(stored, zlib.crc32(checked))
    head = _HEAD.pack(
        _BLOCK_MARK, len(stored), raw, crc, block.first_tick, block.last_tick, CODEC_PLANES
    )
    return head + stored


def _expanded(method: int, part: bytes, length: int) -> bytes:
    """A plane's bytes as its coder made them; ValueError: they do not decompress."""
    if method == RAW:
        return part
    try:
        if method == ZSTD:
            return zstandard.ZstdDecompressor().decompress(part, max_output_size=length)
    except zstandard.ZstdError:
        raise ValueError("a plane does not decompress") from None
    raise ValueError(f"a plane of unknown method {method}")


def _planes(body: bytes) -> tuple[list[bytes], int]:
    """A block's stored bytes as its planes, and their raw length; ValueError: not so."""
    (count,) = _COUNT.unpack_from(body, 0)
    at = _COUNT.size + count * _PLANE.size
    if at > len(body):
        raise ValueError("its plane table is cut short")
    planes, raw = [], 0
    for index in range(count):
        method, stored, length = _PLANE.unpack_from(body, _COUNT.size + index * _PLANE.size)
        part = body[at : at + stored]
        if len(part) < stored:
            raise ValueError("a plane runs past the block")
        plane = _expanded(method, part, length)
        if len(plane) != length:
            raise ValueError("a plane's length differs from its table's")
        planes.append(plane)
        raw += length
        at += stored
    if at != len(body):
        raise ValueError("bytes after its last plane")
    return planes, raw


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
            + (" (record it again with this version)" if version < FORMAT_VERSION else "")
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
        if codec != CODEC_PLANES:
            raise LogCorrupt(f"unknown codec {codec}", index, ticks)
        try:
            planes, length = _planes(body)
        except (ValueError, struct.error) as error:
            raise LogCorrupt(f"its planes do not read: {error}", index, ticks) from None
        if length != raw:
            raise LogCorrupt("its planes' length differs from its head's", index, ticks)
        yield Block(first, last, tuple(planes))
        at += _HEAD.size + stored
        index += 1


@dataclass(frozen=True, slots=True)
class Pending:
    """A block's entries as the tick left them (not yet coded), and the ticks they cover."""

    first_tick: int
    last_tick: int
    entries: list[Any]


class BlockWriter:
    """Gathers entries into blocks: one is due every ``ticks_per_block`` ticks or once
    about ``max_bytes`` are held, whichever comes first. The tick only appends references
    to a list (``size``: roughly what the entry will take, coded but not compressed);
    coding, compressing and writing a block is the edge's, off the tick."""

    def __init__(self, ticks_per_block: int = 60, max_bytes: int = 4 << 20) -> None:
        if ticks_per_block < 1 or max_bytes < 1:
            raise ValueError("a block holds at least one tick and one byte")
        self.ticks_per_block = ticks_per_block
        self.max_bytes = max_bytes
        self._entries: list[Any] = []
        self._held = 0
        self._ticks: set[int] = set()
        self._first: int | None = None
        self._last = 0

    def add(self, entry: Any, tick: int, size: int) -> None:
        """Hold one entry of tick ``tick``."""
        self._entries.append(entry)
        self._held += size
        self._ticks.add(tick)
        self._first = tick if self._first is None else min(self._first, tick)
        self._last = max(self._last, tick)

    @property
    def due(self) -> bool:
        return len(self._ticks) >= self.ticks_per_block or self._held >= self.max_bytes

    def take(self) -> Pending | None:
        """The held entries as one pending block (None when nothing is held), and hold
        none."""
        if self._first is None:
            return None
        pending = Pending(self._first, self._last, self._entries)
        self._entries, self._held, self._ticks, self._first, self._last = [], 0, set(), None, 0
        return pending
