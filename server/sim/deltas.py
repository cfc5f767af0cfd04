"""Each client's players of a snapshot, coded against the snapshot it acknowledged.

The server keeps the same account of every client that the client keeps of itself
(:class:`shared.protocol.baselines.EntityBaselines`): after each snapshot sent to it, the
tick of the value it holds for every player (-1 for none). A client's next snapshot is
coded against its newest acknowledged one (the ``ack_tick`` of its inputs) when that is
one this node sent it and no more than ``BASELINES_KEPT`` snapshot intervals old, else
against nothing (every record full). The values themselves live once, in a ring of the
quantised world of the newest snapshot ticks; a player whose held value has left the ring
is sent in full.

Sans-I/O: arrays in, bytes out; every seated client of a match is coded in one compiled
call per snapshot tick. A seat given to another player starts its account afresh.
"""

from __future__ import annotations

import numba
import numpy as np

from server.sim.fog import Fog
from server.sim.interest import InterestConfig, select_players
from shared.kernel_options import NO_RUNTIME
from shared.protocol import ShotEvent, SnapshotEvent, snapshot_heads
from shared.protocol.baselines import BASELINES_KEPT
from shared.protocol.deltas import (
    KIND_DELTA,
    KIND_FULL,
    KIND_GONE,
    VALUE_RING,
    EntityCodec,
    write_gone,
    write_record,
)

__all__ = ["VALUE_RING", "DeltaEncoder", "warm_up"]

_GROWTH = 64  # the accounts grow by this many slots at a time


class DeltaEncoder:
    """One match's accounts of what its clients hold, and their coded players."""

    def __init__(
        self,
        codec: EntityCodec,
        capacity: int,
        snapshot_interval: int,
        interest: InterestConfig,
        kept: int = BASELINES_KEPT,
        fog: Fog | None = None,
    ) -> None:
        """``fog``: withholds the enemies a client cannot see (None: interest alone)."""
        self.codec = codec
        self.fog = fog
        self.capacity = capacity
        self.interval = snapshot_interval
        self.interest = interest
        self.kept = kept
        fields = len(codec.bits)
        self.ring_values = np.zeros((VALUE_RING, capacity, fields), dtype=np.int32)
        self.ring_ticks = np.full(VALUE_RING, -1, dtype=np.int64)
        self.acked = np.full(capacity, -1, dtype=np.int64)
        # Per client slot: the tick of each player's held value after each of its newest
        # snapshots (rows by snapshot number), the tick of each row, whose seat it is;
        # per pair of slots: the priority accumulator and the end of their fight.
        self.known: np.ndarray
        self.known_ticks: np.ndarray
        self.seat_ids: np.ndarray
        self.priority: np.ndarray
        self.fight_until: np.ndarray
        self._size = 0
        self._resize(min(capacity, _GROWTH))
        # Scratch of encode(): every client's records, one after another; each distinct
        # record, encoded once (the pool) and where it lies (the memo).
        self._out = np.zeros(0, dtype=np.uint8)
        self._memo = np.empty((0, 0, 2), dtype=np.int64)
        self._pool = np.zeros(0, dtype=np.uint8)
        #: What was coded: clients' snapshots, their bytes, records by kind (tally()).
        self.clients_coded = 0
        self.bytes_coded = 0
        self._tally = np.zeros(4, dtype=np.int64)

    def _resize(self, size: int) -> None:
        """Accounts for slots ``[0, size)`` (they grow with the highest seated slot, so a
        node configured for many players pays for the ones it seats)."""
        old = self._size
        known = np.full((size, self.kept, size), -1, dtype=np.int64)
        known_ticks = np.full((size, self.kept), -1, dtype=np.int64)
        seat_ids = np.full(size, -1, dtype=np.int64)
        priority = np.zeros((size, size), dtype=np.float64)
        fight_until = np.full((size, size), -np.inf)
        if old:
            known[:old, :, :old] = self.known
            known_ticks[:old] = self.known_ticks
            seat_ids[:old] = self.seat_ids
            priority[:old, :old] = self.priority
            fight_until[:old, :old] = self.fight_until
        self.known, self.known_ticks, self.seat_ids = known, known_ticks, seat_ids
        self.priority, self.fight_until = priority, fight_until
        self._size = size

    def tally(self) -> dict[str, int]:
        """Counts since the start: clients' snapshots coded, their ``entities`` bytes, the
        records sent by kind and the distinct records encoded (the rest were copies); with
        a fog, its account (:meth:`Fog.tally`)."""
        delta, full, gone, encoded = self._tally.tolist()
        return {
            "coded": self.clients_coded,
            "bytes": self.bytes_coded,
            "records_delta": delta,
            "records_full": full,
            "records_gone": gone,
            "records_encoded": encoded,
            **(self.fog.tally() if self.fog is not None else {}),
        }

    # -- what the clients say and do ----------------------------------------------------

    def forget(self, slot: int) -> None:
        """A seat freed or given to a player: the fights of whoever held it end (its new
        player's own, noted from now on, count before its first snapshot too)."""
        if slot < self._size:
            self.fight_until[slot] = -np.inf
            self.fight_until[:, slot] = -np.inf
        if self.fog is not None:
            self.fog.forget(np.array([slot]))

    def note_acks(self, slots: np.ndarray, ack_ticks: np.ndarray) -> None:
        """Inputs released this tick: each names its client's newest snapshot."""
        if len(slots):
            np.maximum.at(self.acked, slots, ack_ticks)

    def note_fights(self, events: list[SnapshotEvent], now: float) -> None:
        """Shots that hit somebody: shooter and victim stay relevant to each other."""
        until = now + self.interest.fight_memory_s
        for event in events:
            if type(event) is ShotEvent and event.victim >= 0:
                a, b = event.shooter, event.victim
                if max(a, b) >= self._size:
                    self._resize(min(self.capacity, -(-(max(a, b) + 1) // _GROWTH) * _GROWTH))
                self.fight_until[a, b] = self.fight_until[b, a] = until

    # -- a snapshot tick ------------------------------------------------------------------

    def encode(
        self,
        tick: int,
        now: float,
        slots: np.ndarray,
        seat_ids: np.ndarray,
        present: np.ndarray,
        pos: np.ndarray,
        yaw: np.ndarray,
        values: np.ndarray,
        margins: np.ndarray | None = None,
    ) -> tuple[np.ndarray, list[bytes], np.ndarray]:
        """Snapshot ``tick``'s coded players for the clients in ``slots`` (whose seats are
        ``seat_ids``): (each one's base tick, each one's ``entities``, the players each is
        sent: ``(C, size)`` bool, by slot). ``present``, ``pos``, ``yaw``: the world's per
        slot; ``values``: its quantised state (:meth:`EntityCodec.quantise`,
        ``(capacity, 10)``); ``margins``: each client's fog margin, seconds
        (:meth:`Fog.margins`; needed with a fog)."""
        ring = (tick // self.interval) % VALUE_RING
        self.ring_values[ring] = values
        self.ring_ticks[ring] = tick
        if not len(slots):
            return np.empty(0, dtype=np.int64), [], np.zeros((0, 0), dtype=np.bool_)
        live = np.flatnonzero(present)
        size = int(max(slots.max(), live.max() if len(live) else 0)) + 1
        if size > self._size:
            self._resize(min(self.capacity, -(-size // _GROWTH) * _GROWTH))
        size = self._size
        bases = np.empty(len(slots), dtype=np.int64)
        base_rows = np.empty(len(slots), dtype=np.int64)
        if _bases(
            slots, seat_ids, self.seat_ids, self.acked, self.known_ticks, tick, self.interval,
            self.kept, bases, base_rows,
        ):  # fmt: skip
            stale = self.seat_ids[slots] != seat_ids
            changed = slots[stale]  # another player in the seat: nothing of the last one's holds
            self.known[changed] = -1
            self.known_ticks[changed] = -1
            self.priority[changed] = 0.0
            self.priority[:, changed] = 0.0
            self.acked[changed] = -1
            if self.fog is not None:
                self.fog.forget(changed)
            # (its fights are its own: a seat's old ones went when it was freed, forget())
            self.seat_ids[changed] = seat_ids[stale]
        write_row = (tick // self.interval) % self.kept
        shown = present[:size]
        selected = select_players(
            self.interest, slots, pos[:size], yaw[:size], shown, self.fight_until, now,
            self.priority,
        )  # fmt: skip
        if self.fog is not None:
            assert margins is not None, "a fog needs each client's margin"
            fights = self.fight_until[slots, :size] > now
            self.fog.withhold(slots, margins, pos[:size], shown, selected, fights)
        widest = self.codec.max_record_bytes()
        width = size * widest  # the most one client's records can take
        if len(self._out) < len(slots) * width or self._memo.shape[1] != size:
            self._out = np.zeros(max(len(slots) * width, len(self._out)), dtype=np.uint8)
            self._memo = np.empty((VALUE_RING + 1, size, 2), dtype=np.int64)
            self._pool = np.zeros((VALUE_RING + 1) * width, dtype=np.uint8)
        ends = np.zeros(len(slots), dtype=np.int64)
        _encode_clients(
            slots, base_rows, write_row, tick, selected, values[:size], shown, self.known,
            self.known_ticks, self.ring_values, self.ring_ticks, self.interval,
            self.codec.bits, widest, self._memo, self._pool, self._out, ends, self._tally,
        )  # fmt: skip
        coded = int(ends[-1])
        self.clients_coded += len(slots)
        self.bytes_coded += coded
        records = self._out[:coded].tobytes()
        bounds = [0, *ends.tolist()]
        blobs = [records[bounds[c] : bounds[c + 1]] for c in range(len(slots))]
        return bases, blobs, selected


@numba.njit(**NO_RUNTIME)  # (it allocates nothing: shared/kernel_options.py)
def _encode_clients(
    viewers: np.ndarray,
    base_rows: np.ndarray,
    write_row: int,
    tick: int,
    selected: np.ndarray,
    current: np.ndarray,
    present: np.ndarray,
    known: np.ndarray,
    known_ticks: np.ndarray,
    ring_values: np.ndarray,
    ring_ticks: np.ndarray,
    interval: int,
    bits: np.ndarray,
    widest: int,
    memo: np.ndarray,
    pool: np.ndarray,
    out: np.ndarray,
    ends: np.ndarray,
    tally: np.ndarray,
) -> None:
    """Every viewer's records, and its account after this snapshot (row ``write_row``,
    whose tick ``known_ticks`` then holds).

    A record depends only on the player and the tick of the value its client holds (or on
    none: a full one), so each distinct one is encoded once into ``pool`` and copied to
    every client that needs it (``memo``: its offset and length per held value's ring slot,
    the last row for full records; reset here). The viewers' records go into ``out`` one
    after another (writes that stay together in the cache), viewer c's ending at
    ``ends[c]``; ``widest``: the most bytes a record takes. ``tally``: records written by
    kind (delta, full, gone) and records encoded, added to."""
    players = len(present)
    ring = len(ring_ticks)
    memo[:, :, 0] = -1
    pooled = 0
    deltas = fulls = gones = 0  # (counted in registers, added to ``tally`` at the end)
    at = 0  # bytes: the clients' records lie one after another in ``out``
    for c in range(len(viewers)):
        s, b = viewers[c], base_rows[c]
        last_held, last_slot = -2, ring  # most held values are of one tick: its ring slot
        for e in range(players):
            held = known[s, b, e] if b >= 0 else -1
            if not present[e]:
                if held >= 0:
                    out[at : at + 3] = 0
                    at = write_gone(out, at * 8, e) >> 3
                    gones += 1
                known[s, write_row, e] = -1
                continue
            if not selected[c, e]:
                known[s, write_row, e] = held
                continue
            if held != last_held:
                last_held, last_slot = held, ring
                if held >= 0:
                    last_slot = (held // interval) % ring
                    if ring_ticks[last_slot] != held:
                        last_slot = ring  # the value it holds left the ring: sent in full
            slot = last_slot
            start, size = memo[slot, e, 0], memo[slot, e, 1]
            if start < 0:
                has_old = slot < ring
                old = ring_values[slot, e] if has_old else current[e]
                start = pooled
                pool[start : start + widest] = 0
                pooled = write_record(pool, start * 8, e, current[e], old, has_old, bits) >> 3
                size = pooled - start
                memo[slot, e, 0], memo[slot, e, 1] = start, size
                tally[3] += 1
            for i in range(size):  # (a record is a few bytes: a loop beats a slice copy)
                out[at + i] = pool[start + i]
            at += size
            if slot < ring:
                deltas += 1
            else:
                fulls += 1
            known[s, write_row, e] = tick
        ends[c] = at
        known_ticks[s, write_row] = tick
    tally[KIND_DELTA] += deltas
    tally[KIND_FULL] += fulls
    tally[KIND_GONE] += gones


@numba.njit(cache=True)
def _bases(
    slots: np.ndarray,
    seat_ids: np.ndarray,
    held_seat_ids: np.ndarray,
    acked: np.ndarray,
    known_ticks: np.ndarray,
    tick: int,
    interval: int,
    kept: int,
    bases: np.ndarray,
    base_rows: np.ndarray,
) -> bool:
    """Each client's base for snapshot ``tick`` into ``bases`` (-1 none) and its row of
    the account into ``base_rows``: the snapshot it acknowledged (``acked``), if older than
    ``tick``, within the ``kept`` rows and still in its row. True when a seat has another
    player than ``held_seat_ids`` says: nothing of the last one's holds (its base is -1;
    the caller forgets the rest)."""
    stale = False
    for c in range(len(slots)):
        s = slots[c]
        held = acked[s]
        if held_seat_ids[s] != seat_ids[c]:
            stale, held = True, -1
        row = (max(held, 0) // interval) % kept
        if 0 <= held < tick and tick - held <= kept * interval and known_ticks[s, row] == held:
            bases[c], base_rows[c] = held, row
        else:
            bases[c], base_rows[c] = -1, -1
    return stale


def warm_up() -> None:
    """Compile (or load from the cache) the encoder's, interest's and fog's kernels, and
    those of a snapshot tick's history and heads."""
    from server.sim import fog
    from shared.arena_map import default_map

    fog.warm_up()
    arena = default_map()
    codec = EntityCodec.for_bounds(arena.bounds_min, arena.bounds_max)
    encoder = DeltaEncoder(codec, 2, 1, InterestConfig())
    present = np.ones(2, dtype=np.bool_)
    pos, yaw = np.zeros((2, 3)), np.zeros(2)
    values = codec.quantise(pos, pos, yaw, yaw, np.zeros(2), present)
    codec.shown_positions(pos)  # (what the history keeps, every snapshot tick)
    snapshot_heads(np.array([-1, 1]), np.zeros((2, 6)))  # (each seat's head)
    slots, seats = np.arange(2), np.arange(2)
    encoder.encode(1, 0.0, slots, seats, present, pos, yaw, values)
    encoder.note_acks(slots, np.ones(2, dtype=np.int64))
    encoder.encode(2, 0.0, slots, seats, present, pos, yaw, values)
