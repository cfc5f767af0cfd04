"""A tick's input frames decoded in one call (sans-I/O, numba).

Every seated player sends one ``input`` frame a tick. Decoding them one by one in Python
(unmask, msgpack into a dict, check eight fields, build the message) was the largest part
of the node's CPU per player-tick after the socket calls. Instead the node holds each read
of a player's socket that :func:`split_read` finds inputs in until the tick, and one serial numba
kernel unmasks and decodes all of them into columns.

The kernel decodes only the common shape of a valid input: final, masked, binary frames
with a 7-bit length, whose payload is a msgpack map of exactly the nine keys of ``input``
(``type`` first or not, each once), ints as msgpack ints, floats as msgpack floats (32 or
64 bit), ``move`` an array of two floats, with every value in the range the protocol
allows. For such a frame its row equals what :func:`shared.protocol.decode_client`
returns. A read with anything else in it (another message type, a malformed frame, an int
where a float goes) is marked not ok, and the caller reads it the ordinary way, which gives
the precise error; so the kernel never has to name an error, only to be sure when it says
ok.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np
from numba.extending import register_jitable

from shared.protocol import MAX_TICK, U32_MAX

__all__ = ["FRAME_HEADER_BYTES", "InputColumns", "decode_input_frames", "split_read"]

#: A client frame's header with a 7-bit length: FIN + opcode, mask bit + length, masking key.
FRAME_HEADER_BYTES = 6
#: The smallest valid input payload (every value in its shortest encoding, floats in 32
#: bits); a ping's is under 40 bytes, so pings are never held (they are answered at once).
PAYLOAD_MIN_BYTES = 93
#: A read longer than this (eight inputs or so) is read at once, the ordinary way.
HOLD_MAX_BYTES = 1024

# Key numbers: the order of the columns below. "type" is checked, not stored.
_KEYS = (b"seq", b"tick", b"ack_tick", b"buttons", b"move", b"yaw", b"pitch", b"view_time")
_TYPE_KEY = len(_KEYS)
_INPUT = (105, 110, 112, 117, 116)  # "input"
_ALL_KEYS = (1 << (len(_KEYS) + 1)) - 1


@register_jitable
def _key(payload: np.ndarray, at: int, size: int) -> int:
    """The key number of the ``size``-byte string at ``at``; -1 if it is not one."""
    c = payload[at]
    if size == 3:
        if c == 115 and payload[at + 1] == 101 and payload[at + 2] == 113:  # seq
            return 0
        if c == 121 and payload[at + 1] == 97 and payload[at + 2] == 119:  # yaw
            return 5
    elif size == 4:
        word = (
            (np.int64(c) << 24)
            | (np.int64(payload[at + 1]) << 16)
            | (np.int64(payload[at + 2]) << 8)
            | np.int64(payload[at + 3])
        )
        if word == 0x7469636B:  # tick
            return 1
        if word == 0x6D6F7665:  # move
            return 4
        if word == 0x74797065:  # type
            return 8
    elif size == 5:
        if (
            c == 112
            and payload[at + 1] == 105
            and payload[at + 2] == 116
            and payload[at + 3] == 99
            and payload[at + 4] == 104
        ):  # pitch
            return 6
    elif size == 7:
        expected = (98, 117, 116, 116, 111, 110, 115)  # buttons
        for k in range(7):
            if payload[at + k] != expected[k]:
                return -1
        return 3
    elif size == 8:
        expected8 = (97, 99, 107, 95, 116, 105, 99, 107)  # ack_tick
        for k in range(8):
            if payload[at + k] != expected8[k]:
                return -1
        return 2
    elif size == 9:
        expected9 = (118, 105, 101, 119, 95, 116, 105, 109, 101)  # view_time
        for k in range(9):
            if payload[at + k] != expected9[k]:
                return -1
        return 7
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
        if raw > np.uint64(MAX_TICK):  # beyond every integer field's range
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
    if size < PAYLOAD_MIN_BYTES or payload[0] != 0x89:  # a map of nine entries
        return False
    at, seen = 1, 0
    for _ in range(9):
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
        if key == _TYPE_KEY:  # "input"
            if at + 6 > size or payload[at] != 0xA5:
                return False
            for k in range(5):
                if payload[at + 1 + k] != _INPUT[k]:
                    return False
            at += 6
        elif key <= 3:
            found, value, taken = _integer(payload, at, size)
            if not found:
                return False
            ints[row, key] = value
            at += taken
        else:  # floats: "move"'s two, or one
            count, column = 1, key - 3
            if key == 4:
                if payload[at] != 0x92:
                    return False
                count, column = 2, 0
                at += 1
            for element in range(count):
                if at >= size:
                    return False
                tag = payload[at]
                if tag == 0xCB and at + 9 <= size:
                    bits64[0] = _big_endian(payload, at + 1, 8)
                    floats[row, column + element] = as_float64[0]
                    at += 9
                elif tag == 0xCA and at + 5 <= size:
                    bits32[0] = np.uint32(_big_endian(payload, at + 1, 4))
                    floats[row, column + element] = np.float64(as_float32[0])
                    at += 5
                else:
                    return False
    if seen != _ALL_KEYS or at != size:
        return False
    seq, tick, ack, buttons = ints[row, 0], ints[row, 1], ints[row, 2], ints[row, 3]
    move_x, move_y = floats[row, 0], floats[row, 1]
    yaw, pitch, view = floats[row, 2], floats[row, 3], floats[row, 4]
    return (
        0 <= seq <= U32_MAX
        and 0 <= tick <= MAX_TICK
        and -1 <= ack <= MAX_TICK
        and 0 <= buttons <= 255
        and -1e6 <= move_x <= 1e6
        and -1e6 <= move_y <= 1e6
        and yaw - yaw == 0.0
        and pitch - pitch == 0.0
        and 0.0 <= view <= 1e9
    )


@numba.njit(cache=True, nogil=True)
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
    capacity = int(starts[-1]) // (FRAME_HEADER_BYTES + PAYLOAD_MIN_BYTES)
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


def split_read(data: bytes) -> tuple[bytes, bytes] | None:
    """One read of a client's socket, if it is whole final frames with 7-bit lengths, as
    (its input-sized binary frames, its other frames), each part in order: the inputs are
    worth holding for :func:`decode_input_frames` (which still checks them), the others
    (pings, a close, garbage) are read at once; none of them can be an input, so the two
    parts may be read in either order. None for anything else: read it all, in order."""
    size = len(data)
    if size < FRAME_HEADER_BYTES or size > HOLD_MAX_BYTES:
        return None
    first, length = data[0], data[1] ^ 0x80  # (a client masks: length > 125 if it did not)
    if size == FRAME_HEADER_BYTES + length and length <= 125:  # one frame: the usual read
        if first == 0x82 and length >= PAYLOAD_MIN_BYTES:
            return data, b""
        return (b"", data) if first & 0x80 and first & 0x0F else None
    inputs: list[bytes] = []
    others: list[bytes] = []
    at = 0
    while at < size:
        if size - at < FRAME_HEADER_BYTES:
            return None
        first, length = data[at], data[at + 1] ^ 0x80
        end = at + FRAME_HEADER_BYTES + length
        if length > 125 or end > size or not first & 0x80 or not first & 0x0F:
            return None  # cut short, unmasked, long, or a fragment: the ordinary reader's
        (inputs if first == 0x82 and length >= PAYLOAD_MIN_BYTES else others).append(data[at:end])
        at = end
    return b"".join(inputs), b"".join(others)
