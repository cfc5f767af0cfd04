"""What one client holds of the other players, snapshot by snapshot: the baselines its
snapshots' deltas are decoded against.

A snapshot of tick T coded against base B changes the players the client held at B: a
delta or full record sets a player, a gone record forgets one, and every player not named
is held as it was at B (it was not sent this time, as interest management decides). So
the client keeps what it held at each of its newest snapshots (the tick of each value;
the values themselves once per process, :class:`~shared.protocol.deltas.PlayerValues`);
the server keeps the same account of it and codes against the newest one the client
acknowledged.
"""

from __future__ import annotations

import numba
import numpy as np

from shared.protocol.deltas import (
    _BAD,
    _DECODED,
    _MISSING,
    _TOO_SMALL,
    KIND_DELTA,
    KIND_FULL,
    EntityCodec,
    InvalidField,
    MissingBaseline,
    PlayerValues,
    _commit_records,
    _read_records,
    encode_records,
    read_room,
)
from shared.protocol.snapshots import ENTITY_DTYPE

__all__ = ["BASELINES_KEPT", "EntityBaselines", "MissingBaseline", "warm_up"]

#: Snapshots a client keeps: the server codes against no older acknowledged one than this
#: many snapshot intervals back (see ``server.sim.deltas``), so it always holds the base.
BASELINES_KEPT = 16
#: A snapshot coded against a base the client does not hold (or not an earlier one).
NO_BASE = 4


@numba.njit(cache=True, inline="always")
def read_rows(
    data: np.ndarray,
    tick: int,
    base: int,
    row_ticks: np.ndarray,
    rows: np.ndarray,
    store_values: np.ndarray,
    store_ticks: np.ndarray,
    interval: int,
    bits: np.ndarray,
    ids: np.ndarray,
    kinds: np.ndarray,
    values: np.ndarray,
) -> tuple[int, int, int]:
    """Read snapshot ``tick``'s ``data`` against the client's row of snapshot ``base``
    (``row_ticks``: each row's snapshot tick, -1 none; ``rows``: per row and player id, the
    tick of the value held, -1 none, as wide as the store) into the scratch ``ids``,
    ``kinds`` and ``values`` (room for :func:`~shared.protocol.deltas.most_records`),
    changing nothing the client holds. Returns (the status and its number, as
    :func:`~shared.protocol.deltas._read_records`, or :data:`NO_BASE`; the base's row, -1
    for none), for :func:`commit_rows`."""
    source = -1
    if base >= 0:
        if base >= tick:
            return NO_BASE, 0, -1
        for r in range(len(row_ticks)):
            if row_ticks[r] == base:
                source = r
        if source < 0:
            return NO_BASE, 0, -1
    held = rows[source] if source >= 0 else rows[0, :0]
    status, count = _read_records(
        data, held, store_values, store_ticks, interval, bits, ids, kinds, values
    )
    if status == _DECODED and count and ids[count - 1] >= rows.shape[1]:
        return _TOO_SMALL, ids[count - 1], source
    return status, count, source


@numba.njit(cache=True, inline="always")
def commit_rows(
    count: int,
    source: int,
    tick: int,
    row_ticks: np.ndarray,
    rows: np.ndarray,
    ids: np.ndarray,
    kinds: np.ndarray,
    values: np.ndarray,
    store_values: np.ndarray,
    store_ticks: np.ndarray,
    interval: int,
    origin: np.ndarray,
    velocity_half: int,
    records: np.ndarray,
    first: int,
) -> int:
    """Keep what the client holds after snapshot ``tick``, whose ``count`` records
    :func:`read_rows` read against row ``source``, in the row of ``tick`` (or the oldest
    row), and write the records shown to ``records`` from ``first`` on (room for
    ``count``). Returns how many are shown."""
    # The row it is kept in: its own (decoded again), else the oldest (or an empty one).
    target = 0
    for r in range(len(row_ticks)):
        if row_ticks[r] == tick:
            target = r
            break
        if row_ticks[r] < row_ticks[target]:
            target = r
    if source < 0:
        rows[target, :] = -1
    elif source != target:  # (a loop: a slice of one array set from another is copied twice)
        for p in range(rows.shape[1]):
            rows[target, p] = rows[source, p]
    row_ticks[target] = tick
    slot = (tick // interval) % store_values.shape[0]
    return _commit_records(
        count, ids, kinds, values, tick, slot, store_values, store_ticks, origin,
        velocity_half, rows[target], records, first,
    )  # fmt: skip


@numba.njit(cache=True)
def apply_rows(
    data: np.ndarray,
    tick: int,
    base: int,
    row_ticks: np.ndarray,
    rows: np.ndarray,
    store_values: np.ndarray,
    store_ticks: np.ndarray,
    interval: int,
    bits: np.ndarray,
    origin: np.ndarray,
    velocity_half: int,
) -> tuple[int, int, np.ndarray]:
    """:func:`read_rows`, and when the snapshot decodes whole, :func:`commit_rows`, with
    room of their own. Returns (the status and its number; the records shown)."""
    ids, kinds, values = read_room(data, len(bits))
    status, count, source = read_rows(
        data, tick, base, row_ticks, rows, store_values, store_ticks, interval, bits, ids,
        kinds, values,
    )  # fmt: skip
    if status != _DECODED:
        return status, count, np.empty(0, dtype=ENTITY_DTYPE)
    records = np.empty(count, dtype=ENTITY_DTYPE)
    shown = commit_rows(
        count, source, tick, row_ticks, rows, ids, kinds, values, store_values, store_ticks,
        interval, origin, velocity_half, records, 0,
    )  # fmt: skip
    return _DECODED, count, records[:shown]


class EntityBaselines:
    """One client's players at each of its newest :data:`BASELINES_KEPT` snapshots: per
    snapshot, the tick of the value it holds for each player id (-1 none); the values
    live in a :class:`~shared.protocol.deltas.PlayerValues` of the client's world.

    Kept as arrays (a row per snapshot, as wide as the store), so that a kernel reads a
    whole frame against them in one call (:mod:`shared.protocol.reader`)."""

    def __init__(self, kept: int = BASELINES_KEPT) -> None:
        if kept < 1:
            raise ValueError("a client keeps at least one snapshot")
        self.row_ticks = np.full(kept, -1, dtype=np.int64)
        self.rows = np.full((kept, 0), -1, dtype=np.int64)
        self._epoch = -1

    def enter(self, epoch: int, values: PlayerValues) -> None:
        """Ready to decode a snapshot of ``epoch`` with ``values``: a new epoch (another
        primary) starts afresh, its snapshots name no base of the old one; the rows are
        made as wide as the store."""
        if epoch != self._epoch:
            self.row_ticks[:] = -1
            self._epoch = epoch
        players = values.values.shape[1]
        if self.rows.shape[1] < players:
            rows = np.full((len(self.row_ticks), players), -1, dtype=np.int64)
            rows[:, : self.rows.shape[1]] = self.rows
            self.rows = rows

    def apply(
        self, epoch: int, tick: int, base: int, entities: bytes, values: PlayerValues
    ) -> np.ndarray:
        """Decode snapshot ``tick``'s players (coded against ``base``, with the values of
        its world, ``values``) and keep what the client holds after it. Returns the
        records of the players this snapshot shows
        (:data:`~shared.protocol.snapshots.ENTITY_DTYPE`, ascending by id).

        MissingBaseline when ``base`` is not held; InvalidField for a bad blob."""
        return self.decode(epoch, tick, base, np.frombuffer(entities, dtype=np.uint8), values)

    def decode(
        self, epoch: int, tick: int, base: int, data: np.ndarray, values: PlayerValues
    ) -> np.ndarray:
        """:meth:`apply` with the players' bytes as a uint8 array (a view of a frame)."""
        codec = values.codec
        while True:
            self.enter(epoch, values)
            status, at, records = apply_rows(
                data, tick, base, self.row_ticks, self.rows, values.values, values.ticks,
                values.interval, codec.bits, codec.origin, codec.velocity_half,
            )  # fmt: skip
            if status != _TOO_SMALL:
                break
            values.grow(at + 1)  # a good blob naming ids beyond the store: room, once more
        check(status, at, tick, base)
        return records

    def held(self, tick: int) -> np.ndarray | None:
        """Per player id up to the highest held, the tick of the value held after snapshot
        ``tick`` (-1 none)."""
        if tick < 0:
            return None
        found = np.flatnonzero(self.row_ticks == tick)
        if not len(found):
            return None
        row = self.rows[found[0]]
        held = np.flatnonzero(row >= 0)
        return row[: held[-1] + 1 if len(held) else 0].copy()


def check(status: int, at: int, tick: int, base: int) -> None:
    """Raise what a decode's ``status`` says went wrong (nothing when it decoded)."""
    if status == NO_BASE:
        raise MissingBaseline(f"snapshot {tick}: base {base} is not held")
    if status == _MISSING:
        raise MissingBaseline(f"snapshot {tick}: the base value of record {at} is gone")
    if status == _BAD:
        raise InvalidField(f"snapshot.entities: record {at} does not decode")


def warm_up() -> None:
    """Compile (or load from the cache) the decoder's kernel: a swarm calls this before
    its bots connect, so no bot's first snapshot waits for a compile."""
    from shared.arena_map import default_map

    arena = default_map()
    codec = EntityCodec.for_bounds(arena.bounds_min, arena.bounds_max)
    values = np.zeros((1, len(codec.bits)), dtype=np.int32)
    out = np.zeros(codec.max_record_bytes(), dtype=np.uint8)
    ids = np.zeros(1, dtype=np.int64)
    size = encode_records(ids, np.full(1, KIND_FULL), values, values, codec.bits, out)
    store, baselines = PlayerValues(codec, 1), EntityBaselines()
    baselines.apply(0, 1, -1, out[:size].tobytes(), store)
    out[:] = 0
    size = encode_records(ids, np.full(1, KIND_DELTA), values, values, codec.bits, out)
    baselines.apply(0, 2, 1, out[:size].tobytes(), store)
