"""A snapshot frame read whole in one kernel call: the bot swarm's receive path.

A bot process reads 9,000 snapshots a second at 300 bots. :class:`ServerFrameDecoder`
splits each one in Python (its head, its events) and then
:class:`~shared.protocol.baselines.EntityBaselines` decodes its players in a kernel: two
passes over the frame and most of a snapshot's cost in Python. :class:`SnapshotReader`
does it in one: a kernel checks the frame's layout (exactly as the decoder's head reader
does), finds its events' bounds, and decodes its players against the client's baselines.
Only what stays Python is left to Python: the shared body (one the decoder already
decoded, matched by its bytes), the events (each one the decoder already decoded, matched
by its bytes) and the errors. A frame that tells events has its players read in that call
and kept by a second one once the events are known good.

The kernels allocate nothing (``shared.kernel_options.NO_RUNTIME``): the players are read
into the reader's scratch and the records shown written into a chunk that the next
snapshots' share. Compiled with numba's runtime, every array argument cost the call an
allocation and an atomic reference count (and a record array returned, its dtype rebuilt
in Python): at 14 arrays, most of a frame's kernel time.

Any frame it cannot read that way (another layout, a body or an event not yet decoded, a
snapshot the client would not show) is left to the general path, which says exactly what
:func:`~shared.protocol.messages.decode_server` says: the reader changes how fast a frame
is read, never what it means.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numba
import numpy as np

from shared.kernel_options import NO_RUNTIME
from shared.protocol.baselines import EntityBaselines, check, commit_rows, read_rows
from shared.protocol.deltas import _DECODED, _TOO_SMALL, FIELDS, PlayerValues, most_records
from shared.protocol.errors import InvalidField
from shared.protocol.events import SnapshotEvent
from shared.protocol.fields import MAX_ARRAY_LEN, MAX_MAP_LEN, MAX_TICK
from shared.protocol.snapshots import (
    _ACK_KEY,
    _BASE_KEY,
    _ENTITIES_KEY,
    _EVENTS_KEY,
    _MAP_HEADER,
    _MAX_EVENTS,
    _YOU_KEY_AND_ARRAY,
    ENTITY_DTYPE,
    ServerFrameDecoder,
    SnapshotMessage,
)

__all__ = ["ReadSnapshot", "SnapshotReader"]

#: The frame is not laid out as the node writes it (or its events are not plain msgpack
#: within the decoder's limits): the general path reads it.
NOT_LAYOUT = 5
#: The frame tells events: its players are kept once they are known good (a frame the
#: general decoder refuses must change nothing the client holds).
EVENTS_FIRST = 6
#: The players read whole, but more records shown than the chunk has room for: they are
#: kept into a fresh one.
NO_ROOM = 7

_PREFIX = np.frombuffer(_MAP_HEADER + _ACK_KEY, dtype=np.uint8)
_YOU = np.frombuffer(_YOU_KEY_AND_ARRAY, dtype=np.uint8)
_BASE = np.frombuffer(_BASE_KEY, dtype=np.uint8)
_ENTITIES = np.frombuffer(_ENTITIES_KEY, dtype=np.uint8)
_EVENTS = np.frombuffer(_EVENTS_KEY, dtype=np.uint8)
_LITTLE = sys.byteorder == "little"
#: The decoder's limits on an event's arrays and maps.
_MAX_ARRAY, _MAX_MAP = MAX_ARRAY_LEN, MAX_MAP_LEN
_most_records = most_records.py_func  # (from Python: no kernel call for one division)


@numba.njit(cache=True, inline="always")
def _matches(frame: np.ndarray, at: int, expected: np.ndarray) -> bool:
    if at + len(expected) > len(frame):
        return False
    for k in range(len(expected)):
        if frame[at + k] != expected[k]:
            return False
    return True


@numba.njit(cache=True, inline="always")
def _unsigned(frame: np.ndarray, at: int, size: int) -> int:
    """``size`` big-endian bytes at ``at`` (the caller checked they are there)."""
    value = 0
    for k in range(size):
        value = (value << 8) | int(frame[at + k])
    return value


@numba.njit(cache=True, inline="always")
def _after_key(frame: np.ndarray, at: int, key: np.ndarray, tag: int, size: int, limit: int) -> int:
    """Where the ``size``-byte value after ``key`` and its msgpack ``tag`` starts, all of
    it before ``limit``; -1 when the frame has anything else there."""
    if at + len(key) + 1 + size > limit or not _matches(frame, at, key):
        return -1
    at += len(key)
    return at + 1 if frame[at] == tag else -1


@numba.njit(cache=True)
def _skip_value(frame: np.ndarray, at: int, end: int) -> int:
    """Where the msgpack value at ``at`` ends (before ``end``); -1 for one that is cut,
    an extension, a reserved byte, or over the decoder's limits."""
    pending = 1
    while pending:
        if at >= end or pending > end - at:  # (every value takes at least a byte)
            return -1
        tag = int(frame[at])
        pending -= 1
        if tag <= 0x7F or tag >= 0xE0 or tag == 0xC0 or tag == 0xC2 or tag == 0xC3:
            at += 1
        elif tag <= 0x8F:
            pending += 2 * (tag & 0x0F)
            at += 1
        elif tag <= 0x9F:
            pending += tag & 0x0F
            at += 1
        elif tag <= 0xBF:
            at += 1 + (tag & 0x1F)
        elif tag == 0xC4 or tag == 0xD9 or tag == 0xC5 or tag == 0xDA or tag == 0xC6 or tag == 0xDB:
            width = 1 if tag == 0xC4 or tag == 0xD9 else 2 if tag == 0xC5 or tag == 0xDA else 4
            if at + 1 + width > end:
                return -1
            size = _unsigned(frame, at + 1, width)
            at += 1 + width + size
        elif tag == 0xCA or tag == 0xCE or tag == 0xD2:
            at += 5
        elif tag == 0xCB or tag == 0xCF or tag == 0xD3:
            at += 9
        elif tag == 0xCC or tag == 0xD0:
            at += 2
        elif tag == 0xCD or tag == 0xD1:
            at += 3
        elif tag == 0xDC or tag == 0xDD or tag == 0xDE or tag == 0xDF:
            width = 2 if tag == 0xDC or tag == 0xDE else 4
            if at + 1 + width > end:
                return -1
            size = _unsigned(frame, at + 1, width)
            if tag <= 0xDD:
                if size > _MAX_ARRAY:
                    return -1
                pending += size
            else:
                if size > _MAX_MAP:
                    return -1
                pending += 2 * size
            at += 1 + width
        else:
            return -1
    return at if at <= end else -1


@numba.njit(**NO_RUNTIME)  # (it allocates nothing: shared/kernel_options.py)
def _read_frame(
    frame: np.ndarray,
    body_start: int,
    tick: int,
    row_ticks: np.ndarray,
    rows: np.ndarray,
    store_values: np.ndarray,
    store_ticks: np.ndarray,
    interval: int,
    bits: np.ndarray,
    origin: np.ndarray,
    velocity_half: int,
    ints: np.ndarray,
    you_bytes: np.ndarray,
    bounds: np.ndarray,
    ids: np.ndarray,
    kinds: np.ndarray,
    values: np.ndarray,
    records: np.ndarray,
    first: int,
    keep: bool,
) -> tuple[int, int]:
    """Read a snapshot frame whose shared body starts at ``body_start`` (snapshot
    ``tick``): its ack, base, event count and where its players lie into ``ints[:5]``,
    its ``you`` into the six float64s ``you_bytes`` holds, each event's bounds into
    ``bounds``, and its players against the client's rows into the scratch ``ids``,
    ``kinds`` and ``values`` (:func:`~shared.protocol.baselines.read_rows`). A frame that
    tells no event is kept at once (:func:`~shared.protocol.baselines.commit_rows`, the
    records shown written to ``records`` from ``first`` on) when they fit there; one that
    tells events, or whose records do not fit, leaves the read's status, number and base
    row in ``ints[5:8]`` and is kept by a second call with ``keep`` (once its events are
    known good, with room for the records: the players as that read left them). Returns
    (the status and its number: :data:`NOT_LAYOUT`, :data:`EVENTS_FIRST`,
    :data:`NO_ROOM`, or the read's, the number of records shown when it decoded)."""
    if keep:
        return _DECODED, commit_rows(
            ints[6], ints[7], tick, row_ticks, rows, ids, kinds, values, store_values,
            store_ticks, interval, origin, velocity_half, records, first,
        )  # fmt: skip
    nothing = (NOT_LAYOUT, 0)
    if not _matches(frame, 0, _PREFIX):
        return nothing
    at = len(_PREFIX)
    if at >= body_start:
        return nothing
    tag = int(frame[at])
    if tag < 0x80:
        ack, at = tag, at + 1
    elif tag == 0xFF:
        ack, at = -1, at + 1
    elif tag == 0xD2:  # int32: how the node writes -1
        if at + 5 > body_start:
            return nothing
        ack = _unsigned(frame, at + 1, 4)
        if ack >= 1 << 31:
            ack -= 1 << 32
        if ack < -1:
            return nothing
        at += 5
    elif tag == 0xCC or tag == 0xCD or tag == 0xCE:
        size = 1 if tag == 0xCC else 2 if tag == 0xCD else 4
        if at + 1 + size > body_start:
            return nothing
        ack, at = _unsigned(frame, at + 1, size), at + 1 + size
    else:
        return nothing
    if not _matches(frame, at, _YOU):
        return nothing
    at += len(_YOU)
    if at + 6 * 9 > body_start:
        return nothing
    for k in range(6):
        if frame[at] != 0xCB:
            return nothing
        for b in range(8):
            you_bytes[8 * k + b] = frame[at + 1 + (7 - b if _LITTLE else b)]
        at += 9
    you = you_bytes.view(np.float64)
    for k in range(6):
        if not -1e9 <= you[k] <= 1e9:  # (NaN fails too)
            return nothing
    at = _after_key(frame, at, _BASE, 0xD3, 8, body_start)
    if at < 0:
        return nothing
    base = _unsigned(frame, at, 8)  # (an int64 wraps: a big-endian int64 as it is)
    if not -1 <= base <= MAX_TICK:
        return nothing
    start = _after_key(frame, at + 8, _ENTITIES, 0xC6, 4, body_start)
    if start < 0:
        return nothing
    end = start + 4 + _unsigned(frame, start, 4)
    start += 4
    at = _after_key(frame, end, _EVENTS, 0xDD, 4, body_start)
    if at < 0:
        return nothing
    count = _unsigned(frame, at, 4)
    at += 4
    if count > _MAX_EVENTS or count > len(bounds):
        return nothing
    for e in range(count):
        after = _skip_value(frame, at, body_start)
        if after < 0:
            return nothing
        bounds[e, 0], bounds[e, 1] = at, after
        at = after
    if at != body_start:
        return nothing
    most = most_records(end - start)
    if most > len(ids) or most > len(values):
        return nothing  # (the caller gives scratch for the whole frame: never)
    ints[0], ints[1], ints[2], ints[3], ints[4] = ack, base, count, start, end
    status, number, source = read_rows(
        frame[start:end], tick, base, row_ticks, rows, store_values, store_ticks, interval,
        bits, ids, kinds, values,
    )  # fmt: skip
    ints[5], ints[6], ints[7] = status, number, source
    if count:
        return EVENTS_FIRST, 0
    if status != _DECODED:
        return status, number
    if number > len(records) - first:
        return NO_ROOM, number
    return _DECODED, commit_rows(
        number, source, tick, row_ticks, rows, ids, kinds, values, store_values, store_ticks,
        interval, origin, velocity_half, records, first,
    )  # fmt: skip


@dataclass(slots=True)
class ReadSnapshot:
    """What a snapshot frame says, read by :class:`SnapshotReader`: the fields of a
    :class:`~shared.protocol.messages.SnapshotMessage` a client acts on, and its players
    decoded (``records``, :data:`~shared.protocol.snapshots.ENTITY_DTYPE`)."""

    epoch: int
    tick: int
    server_time: float
    state: bytes
    ack: int
    you: tuple[float, ...]
    base: int
    events: tuple[SnapshotEvent, ...]
    records: np.ndarray


class SnapshotReader:
    """Reads a process's snapshot frames in one kernel call each, with the bodies and
    events its ``decoder`` already decoded (:meth:`ServerFrameDecoder.shared_body`)."""

    #: Records a chunk holds: a snapshot's records are a view of the chunk they were
    #: written to (they outlive the frame, in the bot's buffer), so a chunk is freed once
    #: no snapshot of it is held. 1,024 (28 kB: about 20 snapshots of 52 players) keeps
    #: allocations rare, and what a bot that stops receiving pins small: its buffer's 32
    #: snapshots hold at most 32 chunks.
    CHUNK_RECORDS = 1024

    def __init__(self, decoder: ServerFrameDecoder) -> None:
        self.decoder = decoder
        self._ints = np.zeros(8, dtype=np.int64)
        self._you_bytes = np.zeros(48, dtype=np.uint8)
        self._you = self._you_bytes.view(np.float64)
        self._bounds = np.zeros((_MAX_EVENTS, 2), dtype=np.int64)
        self._room(0)
        self._chunk, self._at = np.empty(0, dtype=ENTITY_DTYPE), 0

    def _room(self, most: int) -> None:
        """Scratch for a frame of up to ``most`` records (a frame's players are read
        there before they are kept)."""
        self._ids = np.empty(most, dtype=np.int64)
        self._kinds = np.empty(most, dtype=np.int64)
        self._values = np.empty((most, len(FIELDS)), dtype=np.int32)

    def read(
        self,
        data: bytes,
        body: tuple[SnapshotMessage, int],
        baselines: EntityBaselines,
        values: PlayerValues,
    ) -> ReadSnapshot | None:
        """Read ``data``, whose shared body (``body``: the decoder's message for it and
        where it starts) the decoder gave, against the client's ``baselines`` in the
        world ``values``. None for a frame the general path must read; MissingBaseline or
        InvalidField as :meth:`EntityBaselines.apply` raises them."""
        template, start = body
        tick = template.tick
        frame = np.frombuffer(data, dtype=np.uint8)
        most = _most_records(start)  # (scratch for every record the frame could hold)
        if most > len(self._ids):
            self._room(most)
        codec = values.codec
        baselines.enter(template.epoch, values)
        arguments = (
            frame, start, tick, baselines.row_ticks, baselines.rows, values.values,
            values.ticks, values.interval, codec.bits, codec.origin, codec.velocity_half,
            self._ints, self._you_bytes, self._bounds, self._ids, self._kinds, self._values,
        )  # fmt: skip
        status, number = _read_frame(*arguments, self._chunk, self._at, False)
        if status == NOT_LAYOUT:
            return None
        ack, base, count, first, last, read, read_number, _ = self._ints.tolist()
        events: tuple[SnapshotEvent, ...] = ()
        if status == EVENTS_FIRST:  # (its players are kept once its events are known good)
            events = self._events(data, count)
            status, number = read, read_number
        if status == NO_ROOM or (status == _DECODED and count):
            if len(self._chunk) - self._at < read_number:
                self._chunk, self._at = (
                    np.empty(max(self.CHUNK_RECORDS, read_number), ENTITY_DTYPE),
                    0,
                )
            _, number = _read_frame(*arguments, self._chunk, self._at, True)
            status = _DECODED
        if status == _TOO_SMALL:  # (a good blob naming ids beyond the store: it grows)
            records = baselines.decode(template.epoch, tick, base, frame[first:last], values)
        else:
            check(status, number, tick, base)
            records = self._chunk[self._at : self._at + number]
            self._at += number
        self.decoder.shared += 1
        return ReadSnapshot(
            template.epoch, tick, template.server_time, template.state, ack,
            tuple(self._you.tolist()), base, events, records,
        )  # fmt: skip

    def _events(self, data: bytes, count: int) -> tuple[SnapshotEvent, ...]:
        """The frame's events: those the decoder knows, or, with a new one, what the
        decoder reads of the whole frame the general way (which keeps its events; a
        ProtocolError for a bad one)."""
        known = self.decoder.known_events(data, self._bounds[:count])
        if known is not None:
            return known
        message = self.decoder.decode(data)
        if not isinstance(message, SnapshotMessage):  # (the same bytes: never)
            raise InvalidField("snapshot: not a snapshot read the general way")
        return message.events


def warm_up() -> None:
    """Compile (or load from the cache) the reader's kernel: a swarm calls this before its
    bots connect, so no bot's first snapshot waits for a compile."""
    from shared.arena_map import default_map
    from shared.protocol.deltas import KIND_FULL, EntityCodec, encode_records
    from shared.protocol.events import JoinEvent
    from shared.protocol.snapshots import encode_snapshot, encode_snapshot_body

    arena = default_map()
    codec = EntityCodec.for_bounds(arena.bounds_min, arena.bounds_max)
    values = np.zeros((1, len(codec.bits)), dtype=np.int32)
    out = np.zeros(codec.max_record_bytes(), dtype=np.uint8)
    size = encode_records(
        np.zeros(1, np.int64), np.full(1, KIND_FULL), values, values, codec.bits, out
    )
    body = encode_snapshot_body(1, 0.0, 0)
    frame = encode_snapshot(body, 0, (0.0,) * 6, -1, out[:size].tobytes(), (JoinEvent(0),))
    decoder = ServerFrameDecoder()
    decoder.decode(frame)  # (the body and the event, decoded: the reader reads the rest)
    shared = decoder.shared_body(frame)
    assert shared is not None
    read = SnapshotReader(decoder).read(frame, shared, EntityBaselines(), PlayerValues(codec, 1))
    assert read is not None and len(read.records) == 1
