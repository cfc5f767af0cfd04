"""A tick's input frames decoded in one call, and a read split into its frames (sans-I/O,
numba).

Every seated player sends one ``input`` frame a tick. Decoding them one by one in Python
(unmask, msgpack into a dict, check eight fields, build the message) was the largest part
of the node's CPU per player-tick after the socket calls. Instead the node holds the input
frames of each read of a player's socket until the tick, and one serial numba kernel
unmasks and decodes all of them into columns.

The kernel decodes only the common shape of a valid input: final, masked, binary frames
with a 7-bit length, whose payload is a msgpack map of exactly the nine keys of ``input``
(``type`` first or not, each once, as short strings), ints as msgpack ints, numbers as
msgpack floats (32 or 64 bit) or as msgpack ints within ±2⁵³ (the protocol takes an
integer wherever it documents a number), ``move`` an array of two, with every value in the
range the protocol allows. For such a frame its row equals what
:func:`shared.protocol.decode_client` returns. A read with anything else in it (another
message type, a malformed frame, a float where an int goes) is marked not ok, and the
caller reads it the ordinary way, which gives the precise error; so the kernel never has
to name an error, only to be sure when it says ok.

Before that, :func:`split_read` walks a read's frame headers in one numba pass and tells
each frame's kind by what it is: a binary frame is an input when its payload is a msgpack
map whose ``type`` is ``"input"`` (the pass unmasks only the bytes it walks: the map's
tags and keys up to ``type``, its value, and never a value it skips). So the player's
stream can charge every frame to its connection's budget for its kind
(:mod:`server.sim.input_budget`) and drop the surplus before anything decodes it: however
many frames one read holds (64 KiB of empty frames are 10,000), the Python work it causes
is bounded by the budget. A read of one frame or a few, whose maps give ``type`` first as
every client we know writes it, is told in a few lines of Python instead
(:func:`sole_frame_kind`, :func:`few_frames`), exactly as the pass would tell it.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numba
import numpy as np
from numba.extending import register_jitable

from shared.kernel_options import NO_RUNTIME
from shared.protocol.inputs import FLOAT_COLUMNS, INPUT_FIELDS, INPUT_MIN_BYTES, INT_COLUMNS

__all__ = [
    "FRAME_CLOSE",
    "FRAME_HEADER_BYTES",
    "FRAME_INPUT",
    "FRAME_LONG_INPUT",
    "FRAME_ODD",
    "FRAME_OTHER",
    "InputColumns",
    "ReadFrames",
    "decode_input_frames",
    "few_frames",
    "sole_frame_kind",
    "split_read",
]

#: A client frame's header with a 7-bit length: FIN + opcode, mask bit + length, masking key.
FRAME_HEADER_BYTES = 6

# The keys of an input, in INPUT_FIELDS order, then "type" (checked, not stored), as a
# table the kernel compares against: numba freezes these global arrays into the kernel.
_NAMES = [field.name.encode() for field in INPUT_FIELDS] + [b"type"]
_KEY_BYTES = np.zeros((len(_NAMES), max(map(len, _NAMES))), dtype=np.uint8)
for _row, _name in enumerate(_NAMES):
    _KEY_BYTES[_row, : len(_name)] = np.frombuffer(_name, dtype=np.uint8)
_KEY_LENGTH = np.array([len(name) for name in _NAMES], dtype=np.int64)
# What each key holds, where its value goes, and the bounds it must keep.
_INT, _FLOAT, _FLOAT_PAIR, _TYPE = 0, 1, 2, 3
_KIND_OF = {"int": _INT, "float": _FLOAT, "float_pair": _FLOAT_PAIR}
_KEY_KIND = np.array([_KIND_OF[f.kind] for f in INPUT_FIELDS] + [_TYPE], dtype=np.int64)
_KEY_COLUMN = np.array([f.column for f in INPUT_FIELDS] + [-1], dtype=np.int64)
_INT_LOW = np.array([f.low if f.kind == "int" else 0 for f in INPUT_FIELDS] + [0], np.int64)
_INT_HIGH = np.array([f.high if f.kind == "int" else 0 for f in INPUT_FIELDS] + [0], np.int64)
_FLOAT_LOW = np.array([f.low for f in INPUT_FIELDS] + [0.0], dtype=np.float64)
_FLOAT_HIGH = np.array([f.high for f in INPUT_FIELDS] + [0.0], dtype=np.float64)
_INPUT = np.frombuffer(b"input", dtype=np.uint8).copy()
_ALL_KEYS = (1 << len(_NAMES)) - 1
#: No integer field goes beyond this: a larger msgpack uint is no input of ours.
_INT_CEILING = max(int(f.high) for f in INPUT_FIELDS if f.kind == "int")
#: An integer where a number goes is taken within ±2⁵³ (every one exactly a float64);
#: beyond, the ordinary reader converts it.
_EXACT_INTEGER = 2**53
if _INT_CEILING != _EXACT_INTEGER:
    raise AssertionError("_integer's ceiling is the exact-integer bound of float fields")
if (len(INT_COLUMNS), len(FLOAT_COLUMNS)) != (4, 5):
    raise AssertionError("InputColumns and its users assume 4 int and 5 float columns")


@register_jitable
def _key(payload: np.ndarray, at: int, size: int) -> int:
    """The key number of the ``size``-byte string at ``at``; -1 if it is not one."""
    for key in range(_KEY_LENGTH.shape[0]):
        if _KEY_LENGTH[key] != size:
            continue
        same = True
        for k in range(size):
            if payload[at + k] != _KEY_BYTES[key, k]:
                same = False
                break
        if same:
            return key
    return -1


@register_jitable
def _big_endian(payload: np.ndarray, at: int, size: int) -> np.uint64:
    value = np.uint64(0)
    for k in range(size):
        value = (value << np.uint64(8)) | np.uint64(payload[at + k])
    return value


@register_jitable
def _integer(payload: np.ndarray, at: int, size: int) -> tuple[bool, np.int64, int]:
    """The msgpack integer at ``at``: (found, value, bytes it takes)."""
    tag = payload[at]
    if tag <= 0x7F:  # positive fixint
        return True, np.int64(tag), 1
    if tag >= 0xE0:  # negative fixint
        return True, np.int64(tag) - 256, 1
    if 0xCC <= tag <= 0xCF:  # uint 8/16/32/64
        width = 1 << (tag - 0xCC)
        if at + 1 + width > size:
            return False, np.int64(0), 0
        raw = _big_endian(payload, at + 1, width)
        if raw > np.uint64(_INT_CEILING):  # beyond every integer field's range
            return False, np.int64(0), 0
        return True, np.int64(raw), 1 + width
    if 0xD0 <= tag <= 0xD3:  # int 8/16/32/64
        width = 1 << (tag - 0xD0)
        if at + 1 + width > size:
            return False, np.int64(0), 0
        shift = np.uint64(64 - 8 * width)
        raw = _big_endian(payload, at + 1, width) << shift
        return True, np.int64(raw) >> np.int64(shift), 1 + width  # sign-extended
    return False, np.int64(0), 0


@register_jitable
def _input(
    payload: np.ndarray,
    size: int,
    ints: np.ndarray,
    floats: np.ndarray,
    row: int,
    bits64: np.ndarray,
    as_float64: np.ndarray,
    bits32: np.ndarray,
    as_float32: np.ndarray,
) -> bool:
    """Decode the unmasked ``payload[:size]`` into ``row`` of the columns; True when it is
    a valid input of the common shape (see the module). ``as_float64``/``as_float32`` are
    float views of ``bits64``/``bits32``: a float's bits are written as an integer and read
    back as the float."""
    if size < INPUT_MIN_BYTES or payload[0] != 0x89:  # a map of nine entries
        return False
    at, seen = 1, 0
    for _ in range(_KEY_LENGTH.shape[0]):
        if at >= size or payload[at] & 0xE0 != 0xA0:  # keys are short strings
            return False
        key_size = payload[at] & 0x1F
        if at + 1 + key_size >= size:
            return False
        key = _key(payload, at + 1, key_size)
        at += 1 + key_size
        if key < 0 or seen & (1 << key):
            return False
        seen |= 1 << key
        kind = _KEY_KIND[key]
        if kind == _TYPE:  # "input"
            if at + 6 > size or payload[at] != 0xA5:
                return False
            for k in range(5):
                if payload[at + 1 + k] != _INPUT[k]:
                    return False
            at += 6
        elif kind == _INT:
            found, value, taken = _integer(payload, at, size)
            if not found or value < _INT_LOW[key] or value > _INT_HIGH[key]:
                return False
            ints[row, _KEY_COLUMN[key]] = value
            at += taken
        else:  # floats: "move"'s two, or one
            count = 1
            if kind == _FLOAT_PAIR:
                if payload[at] != 0x92:
                    return False
                count = 2
                at += 1
            for element in range(count):
                if at >= size:
                    return False
                tag = payload[at]
                if tag == 0xCB and at + 9 <= size:
                    bits64[0] = _big_endian(payload, at + 1, 8)
                    number = as_float64[0]
                    at += 9
                elif tag == 0xCA and at + 5 <= size:
                    bits32[0] = np.uint32(_big_endian(payload, at + 1, 4))
                    number = np.float64(as_float32[0])
                    at += 5
                else:  # an integer: taken as the float it equals
                    found, value, taken = _integer(payload, at, size)
                    if not found or value < -_EXACT_INTEGER or value > _EXACT_INTEGER:
                        return False
                    number = np.float64(value)
                    at += taken
                # finite (NaN and infinities fail it), and within the field's bounds
                if not (number - number == 0.0 and _FLOAT_LOW[key] <= number <= _FLOAT_HIGH[key]):
                    return False
                floats[row, _KEY_COLUMN[key] + element] = number
    return seen == _ALL_KEYS and at == size


@numba.njit(nogil=True, **NO_RUNTIME)  # (it allocates nothing: shared/kernel_options.py)
def _decode(
    reads: np.ndarray,
    starts: np.ndarray,
    read_of: np.ndarray,
    ints: np.ndarray,
    floats: np.ndarray,
    read_ok: np.ndarray,
    payload: np.ndarray,
    bits64: np.ndarray,
    as_float64: np.ndarray,
    bits32: np.ndarray,
    as_float32: np.ndarray,
) -> int:
    """Read ``r`` is ``reads[starts[r]:starts[r + 1]]``: decode its frames into the next
    rows (``read_of``: each row's read) and set ``read_ok[r]`` when every frame is a valid
    input of the common shape; a read that is not keeps no rows. Returns the row count.
    The last five arguments are scratch space (see :func:`decode_input_frames`)."""
    rows = 0
    for r in range(len(starts) - 1):
        at, end, first, good = starts[r], starts[r + 1], rows, True
        while at < end:
            if end - at < FRAME_HEADER_BYTES or reads[at] != 0x82 or reads[at + 1] < 0x80:
                good = False  # not one final, masked, binary frame with a 7-bit length
                break
            size = reads[at + 1] - 0x80
            if size > 125 or at + FRAME_HEADER_BYTES + size > end:
                good = False
                break
            for k in range(size):  # unmask
                payload[k] = reads[at + FRAME_HEADER_BYTES + k] ^ reads[at + 2 + (k & 3)]
            if not _input(
                payload, size, ints, floats, rows, bits64, as_float64, bits32, as_float32
            ):
                good = False
                break
            read_of[rows] = r
            rows += 1
            at += FRAME_HEADER_BYTES + size
        read_ok[r] = good
        if not good:
            rows = first
    return rows


@dataclass(frozen=True, slots=True)
class InputColumns:
    """The decoded inputs, one row each, in arrival order. ``read_ok[r]``: read ``r`` was
    all valid inputs; ``read_of``: each row's read. ``ints``: seq, tick, ack_tick,
    buttons; ``floats``: move x, move y, yaw, pitch, view_time."""

    read_ok: np.ndarray
    read_of: np.ndarray
    ints: np.ndarray
    floats: np.ndarray


def decode_input_frames(reads: list[bytes]) -> InputColumns:
    """Decode the inputs in whole reads of client WebSocket frames (headers included)."""
    count = len(reads)
    starts = np.zeros(count + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, reads), dtype=np.int64, count=count), out=starts[1:])
    capacity = int(starts[-1]) // (FRAME_HEADER_BYTES + INPUT_MIN_BYTES)
    read_of = np.empty(capacity, dtype=np.int64)
    ints = np.empty((capacity, 4), dtype=np.int64)
    floats = np.empty((capacity, 5), dtype=np.float64)
    read_ok = np.empty(count, dtype=np.bool_)
    joined = np.frombuffer(b"".join(reads), dtype=np.uint8)
    # Scratch space made here rather than in the kernel: numba's allocation and view
    # overloads were a third of the kernel's cold compile.
    bits64, bits32 = np.empty(1, np.uint64), np.empty(1, np.uint32)
    rows = _decode(
        joined, starts, read_of, ints, floats, read_ok,
        np.empty(128, np.uint8), bits64, bits64.view(np.float64), bits32, bits32.view(np.float32),
    )  # fmt: skip
    return InputColumns(read_ok, read_of[:rows], ints[:rows], floats[:rows])


# -- splitting a read into its frames ----------------------------------------------------
# What split_read makes of each whole frame of a read, before anything decodes it.

#: A final binary frame with a 7-bit length whose ``type`` is ``"input"``: the batch
#: decodes it.
FRAME_INPUT = 0
#: An input (by its ``type``) in a final binary frame with a longer length: the ordinary
#: reader's.
FRAME_LONG_INPUT = 1
#: Any other final binary frame (a ping, a probe echo, a sighting, garbage), a text frame,
#: a WebSocket ping or pong.
FRAME_OTHER = 2
#: A close frame: nothing after it counts.
FRAME_CLOSE = 3
#: Anything else (a fragment, RSV bits, an unknown opcode): the ordinary reader judges it.
FRAME_ODD = 4

_TYPE_KEY = np.frombuffer(b"type", dtype=np.uint8).copy()


@register_jitable
def _unmasked(data: np.ndarray, at: int, key: int, k: int) -> int:
    """Byte ``k`` of the payload at ``data[at:]``, unmasked with the key at ``data[key:]``."""
    return data[at + k] ^ data[key + (k & 3)]


@register_jitable
def _unmasked_uint(data: np.ndarray, at: int, key: int, k: int, width: int) -> int:
    """The big-endian unsigned integer of ``width`` payload bytes from ``k``, unmasked."""
    value = 0
    for j in range(width):
        value = (value << 8) | _unmasked(data, at, key, k + j)
    return value


@register_jitable
def _str_at(data: np.ndarray, at: int, key: int, k: int, length: int) -> tuple[int, int]:
    """(start, size) of the msgpack ``str`` at payload byte ``k``; (-1, 0) if there is none
    whole within ``length`` bytes."""
    if k >= length:
        return -1, 0
    tag = _unmasked(data, at, key, k)
    if 0xA0 <= tag <= 0xBF:  # fixstr
        start, size = k + 1, tag & 0x1F
    elif 0xD9 <= tag <= 0xDB:  # str 8/16/32
        width = 1 << (tag - 0xD9)
        if k + 1 + width > length:
            return -1, 0
        start, size = k + 1 + width, _unmasked_uint(data, at, key, k + 1, width)
    else:
        return -1, 0
    if start + size > length:
        return -1, 0
    return start, size


@register_jitable
def _same(data: np.ndarray, at: int, key: int, k: int, text: np.ndarray) -> bool:
    for j in range(text.shape[0]):
        if _unmasked(data, at, key, k + j) != text[j]:
            return False
    return True


@register_jitable
def _skip(data: np.ndarray, at: int, key: int, k: int, length: int) -> int:
    """The payload byte after the msgpack value at ``k`` (arrays and maps with all they
    hold); -1 for a malformed or cut value. Unmasks only tags and lengths."""
    pending = 1  # values still to skip
    while pending > 0:
        if k >= length:
            return -1
        tag = _unmasked(data, at, key, k)
        pending -= 1
        if tag <= 0x7F or tag >= 0xE0 or tag == 0xC0 or tag == 0xC2 or tag == 0xC3:
            k += 1  # fixint, nil, bool
        elif tag <= 0x8F:  # fixmap
            pending += 2 * (tag & 0x0F)
            k += 1
        elif tag <= 0x9F:  # fixarray
            pending += tag & 0x0F
            k += 1
        elif tag <= 0xBF:  # fixstr
            k += 1 + (tag & 0x1F)
        elif tag == 0xC1:  # never used
            return -1
        elif 0xCA <= tag <= 0xD8:  # numbers and fixext: a size by the tag alone
            k += _FIXED_SIZE[tag - 0xCA]
        else:  # bin, ext, str, array, map 8/16/32: a length follows
            if tag <= 0xC6:  # bin 8/16/32
                width, extra, items = 1 << (tag - 0xC4), 0, 0
            elif tag <= 0xC9:  # ext 8/16/32 (and their type byte)
                width, extra, items = 1 << (tag - 0xC7), 1, 0
            elif tag <= 0xDB:  # str 8/16/32
                width, extra, items = 1 << (tag - 0xD9), 0, 0
            elif tag <= 0xDD:  # array 16/32
                width, extra, items = 2 << (tag - 0xDC), 0, 1
            else:  # map 16/32
                width, extra, items = 2 << (tag - 0xDE), 0, 2
            if k + 1 + width > length:
                return -1
            count = _unmasked_uint(data, at, key, k + 1, width)
            k += 1 + width
            if items:
                pending += items * count
            else:
                k += extra + count
    return k if k <= length else -1


# Bytes taken by float 32/64, uint 8-64, int 8-64 and fixext 1-16 (tags 0xCA-0xD8).
_FIXED_SIZE = np.array([5, 9, 2, 3, 5, 9, 2, 3, 5, 9, 3, 4, 6, 10, 18], dtype=np.int64)


@register_jitable
def _is_input(data: np.ndarray, at: int, key: int, length: int) -> bool:
    """Whether the masked payload of ``length`` bytes at ``data[at:]`` (its key at
    ``data[key:]``) is a msgpack map whose ``type`` entry is the string ``"input"``: the
    first ``type`` key decides (a map repeats no key). Whether the rest is a valid input
    is not asked: the decoder's question."""
    if length < 1:
        return False
    tag = _unmasked(data, at, key, 0)
    if 0x80 <= tag <= 0x8F:
        entries, k = tag & 0x0F, 1
    elif tag == 0xDE or tag == 0xDF:
        width = 2 << (tag - 0xDE)
        if 1 + width > length:
            return False
        entries, k = _unmasked_uint(data, at, key, 1, width), 1 + width
    else:
        return False
    for _ in range(entries):  # (each entry takes 2 bytes at least: bounded by length)
        if k >= length:
            return False
        start, size = _str_at(data, at, key, k, length)
        if size == 4 and _same(data, at, key, start, _TYPE_KEY):
            start, size = _str_at(data, at, key, start + 4, length)
            return size == 5 and _same(data, at, key, start, _INPUT)
        k = _skip(data, at, key, k, length)
        if k < 0:
            return False
        k = _skip(data, at, key, k, length)
        if k < 0:
            return False
    return False


@register_jitable
def _kind(data: np.ndarray, at: int, length: int, head: int) -> int:
    """The kind of the whole masked frame at ``data[at:]``: its payload length, header size
    (the masking key included)."""
    first = data[at]
    if first == 0x82:
        if _is_input(data, at + head, at + head - 4, length):
            return FRAME_INPUT if head == FRAME_HEADER_BYTES else FRAME_LONG_INPUT
        return FRAME_OTHER
    if first == 0x88:
        return FRAME_CLOSE
    if first == 0x81 or first == 0x89 or first == 0x8A:
        return FRAME_OTHER
    return FRAME_ODD


@numba.njit(cache=True, nogil=True)
def _split(
    data: np.ndarray, max_size: int, bounds: np.ndarray, kinds: np.ndarray, tally: np.ndarray
) -> tuple[int, int]:
    """Walk the frame headers of ``data`` from its start (see :class:`ReadFrames`): fills
    ``bounds`` and ``kinds``, counts the frames of each kind in ``tally``; returns (whole
    frames, need)."""
    size, at, count, need = data.shape[0], 0, 0, 0
    while at < size:
        if size - at < 2:
            need = 2
            break
        code = data[at + 1] ^ 0x80
        if code > 127:  # not masked: a client's framing fault
            need = -1
            break
        length, head = np.int64(code), 2
        if code == 126:
            if size - at < 4:
                need = 4
                break
            length, head = np.int64(_big_endian(data, at + 2, 2)), 4
        elif code == 127:
            if size - at < 10:
                need = 10
                break
            raw = _big_endian(data, at + 2, 8)
            if raw > np.uint64(max_size):
                need = -1
                break
            length, head = np.int64(raw), 10
        if length > max_size:  # too big: the ordinary reader closes with 1009
            need = -1
            break
        total = head + 4 + int(length)  # (the masking key)
        if size - at < total:
            need = total
            break
        bounds[count] = at
        kind = _kind(data, at, int(length), head + 4)
        kinds[count] = kind
        tally[kind] += 1
        count += 1
        at += total
        if kind == FRAME_CLOSE:
            break
    bounds[count] = at
    return count, need


@dataclass(frozen=True, slots=True)
class ReadFrames:
    """The whole frames at the start of a read of a client's socket: frame ``i`` is
    ``data[bounds[i]:bounds[i + 1]]``, of kind ``kinds[i]`` (a ``FRAME_*``); ``tally[k]``
    frames are of kind ``k``. Beyond :attr:`end` is, by ``need``: 0, nothing that counts
    (the read was whole frames, or a close came); > 0, a frame cut short, which takes
    ``need`` bytes from :attr:`end` before it can be split; < 0, a framing fault
    (unmasked, too big) for the ordinary reader to raise."""

    bounds: np.ndarray
    kinds: np.ndarray
    tally: list[int]
    need: int

    @property
    def end(self) -> int:
        return int(self.bounds[-1])

    @property
    def inputs(self) -> int:
        """Input frames (by their ``type``): what the input budget is charged."""
        return self.tally[FRAME_INPUT] + self.tally[FRAME_LONG_INPUT]

    @property
    def others(self) -> int:
        """Frames neither inputs nor a close: what the ping budget is charged."""
        return self.tally[FRAME_OTHER] + self.tally[FRAME_ODD]

    @property
    def in_order(self) -> bool:
        """Some frame is one only the ordinary reader can read (or fault on): the read's
        frames must all be read by it, in order."""
        return bool(self.tally[FRAME_LONG_INPUT] or self.tally[FRAME_ODD] or self.need < 0)


def split_read(data: bytes, max_size: int) -> ReadFrames:
    """Split one read of a client's socket that begins at a frame's start into its whole
    frames, each told by its header and its ``type`` (one numba pass, however many frames:
    nothing is decoded). ``max_size``: the largest frame allowed."""
    size = len(data)
    bounds = np.empty(size // FRAME_HEADER_BYTES + 1, dtype=np.int64)
    kinds = np.empty(size // FRAME_HEADER_BYTES, dtype=np.uint8)
    tally = np.zeros(FRAME_ODD + 1, dtype=np.int64)
    count, need = _split(np.frombuffer(data, dtype=np.uint8), max_size, bounds, kinds, tally)
    return ReadFrames(bounds[: count + 1], kinds[:count], tally.tolist(), need)


#: A masking key repeated over 12 bytes is the key times this.
_REPEAT_KEY = 0x000000010000000100000001
_PEEK = 12  # bytes: a map's tag, "type" as a fixstr, "input" as a fixstr
#: A frame's masking key and its payload's first 8 and next 4 bytes, as integers: after
#: a fixmap's tag, "type": "input" first is _TYPE_IN (7 bytes) and _PUT (4).
_KEY_AND_PEEK = struct.Struct(">IQI")
_TYPE_IN = int.from_bytes(b"\xa4type\xa5i", "big")
_PUT = int.from_bytes(b"nput", "big")
_LOW_56 = (1 << 56) - 1


def _told_kind(data: bytes, at: int, length: int) -> int:
    """The kind of the whole masked binary frame with a 7-bit length at ``data[at:]`` when
    its first bytes tell it: a payload that is no map, or a map whose first key is
    ``type`` with a short string value (as every client we know writes it); -1 otherwise
    (then only the kernel's walk can tell). Equal to the kernel's answer where it answers."""
    peek = min(length, _PEEK)
    if not peek:
        return FRAME_OTHER
    key = int.from_bytes(data[at + 2 : at + 6], "big") * _REPEAT_KEY >> 8 * (_PEEK - peek)
    head = (int.from_bytes(data[at + 6 : at + 6 + peek], "big") ^ key).to_bytes(peek, "big")
    tag = head[0]
    if not (0x80 <= tag <= 0x8F or tag == 0xDE or tag == 0xDF):
        return FRAME_OTHER  # not a map: no input
    if 0x81 <= tag <= 0x8F and head[1:6] == b"\xa4type" and peek > 6 and 0xA0 <= head[6] <= 0xBF:
        return FRAME_INPUT if head[6:12] == b"\xa5input" else FRAME_OTHER
    return -1


def _python_kind(data: bytes, at: int, length: int) -> int:
    """:func:`_kind` of a whole masked frame with a 7-bit length at ``data[at:]``, in a few
    lines of Python; -1 where only the kernel's walk can tell."""
    first = data[at]
    if first == 0x82:
        if length >= _PEEK:  # first, the usual frame (an input, "type" first): one unpack
            key, head, tail = _KEY_AND_PEEK.unpack_from(data, at + 2)
            head ^= key * 0x100000001
            if tail ^ key == _PUT and head & _LOW_56 == _TYPE_IN and 0x81 <= head >> 56 <= 0x8F:
                return FRAME_INPUT
        return _told_kind(data, at, length)
    if first == 0x88:
        return FRAME_CLOSE
    if first == 0x81 or first == 0x89 or first == 0x8A:
        return FRAME_OTHER
    return FRAME_ODD


def sole_frame_kind(data: bytes) -> int:
    """The kind of a read that is one whole masked frame with a 7-bit length (the usual
    read: one input), without the kernel; -1 for any other read, or one only the kernel's
    walk can tell."""
    size = len(data)
    if size < FRAME_HEADER_BYTES:
        return -1
    length = data[1] ^ 0x80  # (a client masks: length > 127 if it did not)
    if length > 125 or size != FRAME_HEADER_BYTES + length:
        return -1
    return _python_kind(data, 0, length)


#: The most frames :func:`few_frames` walks: a command packet holds a few inputs, and a
#: ping or a sighting may ride with them.
_FEW_FRAMES = 8


def few_frames(data: bytes) -> tuple[list[int], list[int]] | None:
    """Where each frame ends and its kind, for a read of two to eight whole frames with
    7-bit lengths, each an input or another message (a client's command packet: the
    inputs since its last one, with a ping or a sighting), told without the kernel; None
    for any other read (which :func:`split_read` then splits). Most reads are one frame or
    one of these: a kernel call and its arrays cost more than the walk."""
    ends: list[int] = []
    kinds: list[int] = []
    at, size = 0, len(data)
    while at < size:
        if len(ends) == _FEW_FRAMES or size - at < FRAME_HEADER_BYTES:
            return None
        length = data[at + 1] ^ 0x80  # (a client masks: length > 127 if it did not)
        end = at + FRAME_HEADER_BYTES + length
        if length > 125 or end > size:
            return None
        kind = _python_kind(data, at, length)
        if kind != FRAME_INPUT and kind != FRAME_OTHER:
            return None
        ends.append(end)
        kinds.append(kind)
        at = end
    return (ends, kinds) if len(ends) > 1 else None
