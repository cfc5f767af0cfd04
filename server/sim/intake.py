"""Input intake: seated players' input frames, held until the tick and queued in one batch.

A seated player's input is applied at the next tick in any case (it waits in the jitter
buffer), so nothing is lost by holding its frame until then: each frame keeps the server
time it arrived at, which is what lag compensation and the RTT estimate use. The tick then
decodes the whole batch in one numba call (:mod:`server.sim.input_frames`) instead of one
Python decode per frame, and queues every row in its match's jitter buffers.

Only input frames that passed their connection's budget are held (the player's stream
decides, :mod:`server.sim.input_budget`), so one connection holds at most its burst and a
tick's worth more between two drains: no client can fill :data:`DEFAULT_LIMIT` for the
others (and a full intake only drains early, queueing its inputs before the tick). A read
the batch decoder cannot vouch for (an unusual but valid encoding, garbage) is handed back
to its reader to be read the ordinary way, in its turn, so a player's inputs keep their
order and its errors and offences are answered as always. Nothing is queued for a reader that
has stopped reading (it left, or lost its seat, or was dropped for offences meanwhile).

Sans-I/O: the arrival time is a parameter, the readers are whatever the edge gives.
"""

from __future__ import annotations

import collections
from typing import Protocol

import numpy as np

from server.sim.input_budget import Allowance, input_allowance
from server.sim.input_frames import FRAME_HEADER_BYTES, InputColumns, decode_input_frames
from server.sim.inputs import InputVerdict
from server.sim.matchset import MatchSet
from shared.protocol import InputMessage

__all__ = ["HeldReader", "InputIntake"]

#: Frames held before a batch even without a tick (a node that stopped ticking, say).
DEFAULT_LIMIT = 4096


class HeldReader(Protocol):
    """The owner of held reads: a seated player's stream, as the intake needs it."""

    @property
    def match(self) -> int: ...

    @property
    def slot(self) -> int: ...

    def reading(self) -> bool:
        """Still seated on its own seat, and its connection open."""
        ...

    def read_now(self, data: bytes) -> None:
        """Read ``data`` the ordinary way, now (an offence may stop it reading)."""
        ...


class InputIntake:
    """Every seated player's held input reads, in arrival order, until :meth:`drain`;
    and the tallies of what was queued, for the edge's metrics."""

    def __init__(
        self,
        matches: MatchSet,
        limit: int = DEFAULT_LIMIT,
        allowance: Allowance | None = None,
    ) -> None:
        self.matches = matches
        self._limit = limit
        #: The input budget of every seated connection: by default the tick rate, with a
        #: second's worth of burst (:func:`server.sim.input_budget.input_allowance`).
        self.allowance = (
            input_allowance(matches.config.tick_rate) if allowance is None else allowance
        )
        self._owners: list[HeldReader] = []
        self._reads: list[bytes] = []
        self._arrivals: list[float] = []
        #: Counts the drains: a reader that remembers it can tell whether a read it held
        #: is still here (and must drain before it reads anything else).
        self.generation = 0
        #: Verdicts of the inputs queued, and their payload bytes, since :meth:`take_tally`.
        self.verdicts: collections.Counter[InputVerdict] = collections.Counter()
        self.payload_bytes = 0

    def __len__(self) -> int:
        return len(self._reads)

    def hold(self, owner: HeldReader, read: bytes, arrival: float) -> int:
        """Hold ``read`` (whole input frames, headers included) that arrived at server time
        ``arrival``, for the next drain; returns that drain's generation."""
        self._owners.append(owner)
        self._reads.append(read)
        self._arrivals.append(arrival)
        if len(self._reads) >= self._limit:
            self.drain()
            return self.generation - 1
        return self.generation

    def receive(self, owner: HeldReader, message: InputMessage, arrival: float) -> None:
        """One input read the ordinary way (not held): queued at once."""
        match = self.matches.matches[owner.match]
        self.verdicts[match.receive_input(owner.slot, message, arrival)] += 1

    def drain(self) -> None:
        """Decode every held read in one batch and queue the rows in arrival order; a read
        the batch cannot vouch for is read the ordinary way, in its turn."""
        if not self._reads:
            return
        owners, reads, arrivals = self._owners, self._reads, self._arrivals
        self._owners, self._reads, self._arrivals = [], [], []
        self.generation += 1
        columns = decode_input_frames(reads)
        count = len(owners)
        kept = np.fromiter((owner.reading() for owner in owners), np.bool_, count)
        sizes = np.fromiter(map(len, reads), np.int64, count)
        rows_kept = int(np.count_nonzero(kept[columns.read_of]))
        # Payload bytes, as the ordinary reader counts them: each frame less its header.
        self.payload_bytes += (
            int(sizes[kept & columns.read_ok].sum()) - FRAME_HEADER_BYTES * rows_kept
        )
        placed = (
            np.fromiter((owner.match for owner in owners), np.int64, count),
            np.fromiter((owner.slot for owner in owners), np.int64, count),
            np.maximum(np.asarray(arrivals, dtype=np.float64), 0.0),
        )
        done = 0  # the rows before this one are queued
        for read in np.flatnonzero(~columns.read_ok).tolist():  # (usually none)
            upto = int(np.searchsorted(columns.read_of, read))
            self._queue(columns, done, upto, kept, placed)
            done = upto
            owner = owners[read]
            if kept[read]:
                owner.read_now(reads[read])
                if not owner.reading():  # dropped for offences: its later reads go with it
                    kept &= np.fromiter((o is not owner for o in owners), np.bool_, count)
        self._queue(columns, done, len(columns.read_of), kept, placed)

    def _queue(
        self,
        columns: InputColumns,
        start: int,
        stop: int,
        kept: np.ndarray,
        placed: tuple[np.ndarray, np.ndarray, np.ndarray],
    ) -> None:
        """Queue decoded rows ``start:stop`` of kept reads, match by match."""
        read_of = columns.read_of[start:stop]
        mine = kept[read_of]
        if not mine.any():
            return
        read_of = read_of[mine]
        ints, floats = columns.ints[start:stop][mine], columns.floats[start:stop][mine]
        match_of, slots, arrivals = (column[read_of] for column in placed)
        matches = self.matches.matches
        if len(matches) == 1:  # (the usual node: no rows to sort out by match)
            self.verdicts.update(matches[0].receive_decoded(slots, ints, floats, arrivals))
            return
        for index in np.unique(match_of).tolist():
            rows = match_of == index
            self.verdicts.update(
                matches[index].receive_decoded(
                    slots[rows], ints[rows], floats[rows], arrivals[rows]
                )
            )

    def take_tally(self) -> tuple[collections.Counter[InputVerdict], int]:
        """The verdicts and payload bytes counted since the last call (then zero)."""
        tally, size = self.verdicts, self.payload_bytes
        self.verdicts, self.payload_bytes = collections.Counter(), 0
        return tally, size
