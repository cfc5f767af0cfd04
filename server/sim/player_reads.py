"""What to do with each read of a seated player's WebSocket (sans-I/O).

:class:`server.net.player_stream.PlayerStream` is the transport's half: it gets bytes from
asyncio and does what this module decides. This half gets a read and the server time and
answers with a :class:`ReadPlan`: the frames dropped over budget (for the edge to report
as offences, and to stop reading a flood for a while), the input frames to hold for the
tick, and the frames to read at once, before or after the inputs held. No socket, no
clock, no callback: a read's whole fate is data a test can look at.

Each read is told by its shape, cheapest first: one whole frame with a 7-bit length (almost
every read: :func:`~server.sim.input_frames.sole_frame_kind`); a few whole frames, inputs
only (a command packet) or mixed with others
(:func:`~server.sim.input_frames.few_frames`); anything else, split by one numba pass
(:func:`~server.sim.input_frames.split_read`), whose last frame may be cut short and wait
for the next reads. Every frame but a close is charged to the connection's budget for its
kind (:class:`~server.sim.input_budget.SeatBudgets`) before anything decodes it; the
surplus of each kind is dropped unread.

Inputs may be held for the tick only while the frame reader is between messages (a read
after a fragment must be read in order), and a read whose frames must be read in order (a
fragmented message, an input with a long length, a framing fault) is read at once, after
this player's held inputs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from server.sim.input_budget import Allowance, FrameKind, SeatBudgets
from server.sim.input_frames import (
    FRAME_CLOSE,
    FRAME_INPUT,
    FRAME_LONG_INPUT,
    FRAME_ODD,
    FRAME_OTHER,
    few_frames,
    sole_frame_kind,
    split_read,
)

__all__ = ["Dropped", "PlayerReads", "ReadPlan", "charge"]


@dataclass(frozen=True, slots=True)
class Dropped:
    """Frames of ``kind`` dropped over budget: ``count`` of them, whether that made an
    offence, and whether the connection floods in that kind (the edge stops reading it a
    while: :attr:`~server.sim.input_budget.Budget.flooding`)."""

    kind: FrameKind
    count: int
    offence: bool
    flooding: bool


@dataclass(slots=True)
class ReadPlan:
    """What to do with one read, in this order: report each drop (one that ends the
    player ends the read: nothing below is done), hold ``hold`` for the tick, read
    ``read_now`` (no input in it: it may pass the inputs held), read ``read_in_order``
    after this player's held inputs."""

    drops: list[Dropped] = field(default_factory=list)
    hold: bytes = b""
    read_now: bytes = b""
    read_in_order: bytes = b""


def charge(
    budgets: SeatBudgets, kind: FrameKind, wanted: int, now: float
) -> tuple[int, Dropped | None]:
    """Charge ``wanted`` frames of ``kind`` at server time ``now``: how many may be read
    (the first ones), and what was dropped, if any (for every transport alike)."""
    granted, offence = budgets.admit(kind, wanted, now)
    if granted == wanted:
        return granted, None
    return granted, Dropped(kind, wanted - granted, offence, budgets.of(kind).flooding)


class PlayerReads:
    """One seated connection's reads: a frame cut short between reads, and its budgets
    (with an ``allowance``; without one nothing is charged nor held, every frame is read
    in order)."""

    def __init__(self, max_size: int, allowance: Allowance | None, now: float) -> None:
        self.max_size = max_size
        self.budgets = None if allowance is None else SeatBudgets(allowance, now)
        self._pending = bytearray()  # a frame the last read cut short
        self._need = 0  # the bytes it takes before the pending ones can be split

    def resumed(self, now: float) -> None:
        """A flood's pause ended at ``now``: the budgets earn nothing for it."""
        if self.budgets is not None:
            self.budgets.forfeit(now)

    def receive(self, data: bytes, now: float, reader_idle: bool) -> ReadPlan:
        """The plan for the read ``data`` at server time ``now``; ``reader_idle``: the
        frame reader is between messages (inputs may be held for the tick)."""
        plan = ReadPlan()
        if self._pending:
            self._pending += data
            if len(self._pending) < self._need:
                return plan
            data, self._pending = bytes(self._pending), bytearray()
        holds = self.budgets is not None and reader_idle
        kind = sole_frame_kind(data)
        if kind >= 0:
            self._sole(plan, data, kind, now, holds)
        elif (few := few_frames(data)) is None:
            self._split(plan, data, now, holds)
        elif FRAME_OTHER in few[1]:
            self._mixed(plan, data, *few, now, holds)
        else:
            self._command_packet(plan, data, few[0], now, holds)
        return plan

    def split(self, data: bytes, now: float, reader_idle: bool) -> ReadPlan:
        """The plan for ``data`` by the general path, whatever its shape (what the
        shortcuts of :meth:`receive` must agree with)."""
        plan = ReadPlan()
        self._split(plan, data, now, self.budgets is not None and reader_idle)
        return plan

    def _admit(self, plan: ReadPlan, kind: FrameKind, wanted: int, now: float) -> int:
        if self.budgets is None:
            return wanted
        granted, dropped = charge(self.budgets, kind, wanted, now)
        if dropped is not None:
            plan.drops.append(dropped)
        return granted

    def _sole(self, plan: ReadPlan, data: bytes, kind: int, now: float, holds: bool) -> None:
        """A read of one whole frame with a 7-bit length."""
        if kind == FRAME_CLOSE:
            plan.read_now = data
        elif kind == FRAME_INPUT:
            if self._admit(plan, FrameKind.INPUT, 1, now):
                if holds:
                    plan.hold = data
                else:
                    plan.read_in_order = data
        elif self._admit(plan, FrameKind.PING, 1, now):
            if kind == FRAME_OTHER:
                plan.read_now = data  # (no input: it may be read before the held ones)
            else:
                plan.read_in_order = data

    def _command_packet(
        self, plan: ReadPlan, data: bytes, ends: list[int], now: float, holds: bool
    ) -> None:
        """A read of a few whole input frames: those the budget grants, from the first,
        held for the tick as one."""
        granted = self._admit(plan, FrameKind.INPUT, len(ends), now)
        if not granted:
            return
        kept = data if granted == len(ends) else data[: ends[granted - 1]]
        if holds:
            plan.hold = kept
        else:
            plan.read_in_order = kept

    def _mixed(
        self,
        plan: ReadPlan,
        data: bytes,
        ends: list[int],
        kinds: list[int],
        now: float,
        holds: bool,
    ) -> None:
        """A read of a few whole inputs and other frames, as :meth:`_split` treats it, in
        plain Python: the inputs the budget grants are held for the tick, the other frames
        it grants are read now."""
        inputs = kinds.count(FRAME_INPUT)
        granted_inputs = self._admit(plan, FrameKind.INPUT, inputs, now) if inputs else 0
        granted_others = self._admit(plan, FrameKind.PING, len(kinds) - inputs, now)
        held: list[bytes] = []
        rest: list[bytes] = []
        kept: list[bytes] = []  # both, in the read's order
        start = 0
        for end, kind in zip(ends, kinds, strict=True):
            if kind == FRAME_INPUT and len(held) < granted_inputs:
                held.append(data[start:end])
                kept.append(held[-1])
            elif kind == FRAME_OTHER and len(rest) < granted_others:
                rest.append(data[start:end])
                kept.append(rest[-1])
            start = end
        if not holds:
            plan.read_in_order = b"".join(kept)
            return
        plan.hold = b"".join(held)
        plan.read_now = b"".join(rest)  # (none of them is an input)

    def _split(self, plan: ReadPlan, data: bytes, now: float, holds: bool) -> None:
        """Any other read: split into frames, the surplus of each kind dropped unread."""
        frames = split_read(data, self.max_size)
        if frames.need > 0:  # the last frame comes with the next reads
            self._pending, self._need = bytearray(data[frames.end :]), frames.need
        if not len(frames.kinds) and frames.need >= 0:
            return
        inputs, others = frames.inputs, frames.others
        granted_inputs = self._admit(plan, FrameKind.INPUT, inputs, now) if inputs else 0
        granted_others = self._admit(plan, FrameKind.PING, others, now) if others else 0
        kinds, bounds = frames.kinds, frames.bounds
        if granted_inputs == inputs and granted_others == others:
            keep = None  # all of them (the usual case: no array work)
        else:
            mine = kinds <= FRAME_LONG_INPUT
            keep = (kinds == FRAME_CLOSE) | (mine & (np.cumsum(mine) <= granted_inputs))
            mine = (kinds == FRAME_OTHER) | (kinds == FRAME_ODD)
            keep |= mine & (np.cumsum(mine) <= granted_others)
        if not holds or frames.in_order:
            fault = data[frames.end :] if frames.need < 0 else b""
            if keep is None or keep.any() or fault:
                plan.read_in_order = _join(data, bounds, keep) + fault
        elif inputs == len(kinds) and keep is None:  # inputs only, all of them
            plan.hold = data[: frames.end]
        else:
            held = kinds == FRAME_INPUT
            rest = ~held
            if keep is not None:
                held &= keep
                rest &= keep
            if held.any():
                plan.hold = _join(data, bounds, held)
            if rest.any():  # (none of them is an input: they may be read before the held ones)
                plan.read_now = _join(data, bounds, rest)


def _join(data: bytes, bounds: np.ndarray, which: np.ndarray | None) -> bytes:
    """The frames ``which`` (None: all) of a split read, in order, as one run of bytes."""
    if which is None:
        return data[: int(bounds[-1])]
    index = np.flatnonzero(which)
    starts, stops = bounds[index].tolist(), bounds[index + 1].tolist()
    return b"".join([data[start:stop] for start, stop in zip(starts, stops, strict=True)])
