"""A node's matches as match-log entries, tick by tick (sans-I/O).

The node's edge calls :meth:`MatchLog.before_tick` right before the tick (the seat changes
and the round-trip estimates of that moment are what the tick will use: both change between
ticks, as players join and echo probes) and :meth:`MatchLog.after_tick` with the tick's
results; a standby calls :meth:`MatchLog.followed` with each record it applied. Entries
go to a :class:`~server.record.blocks.BlockWriter` as they are: a tick entry refers to the
tick's released input arrays (each tick's are new; nothing writes to them later) and its
shots, a keyframe to the copy of the state it took. Packing, coding the inputs' columns and
compressing is :func:`block_of`'s, which the edge runs on its writer thread with the block's
sealing, so the tick pays for little more than a few appends.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from server.record import entries
from server.record.blocks import Block, BlockWriter, Pending
from server.replication.messages import FullState, MatchState, TickRecord
from server.replication.state import capture_match
from server.sim.match import SEAT_JOIN, SEAT_LEAVE, Match, TickResult
from server.sim.matchset import MatchSet
from shared.protocol import ShotEvent, encode_event

__all__ = ["MatchLog", "block_of", "keyframe_entry", "state_from_keyframe"]

#: What a logged input row and a seat's per-tick counts take, coded and not yet compressed
#: (ten 64-bit columns and a few narrow ones; three counts): a block's size before coding.
_ROW_BYTES, _SEAT_BYTES, _ENTRY_BYTES = 96, 24, 128


def keyframe_entry(index: int, epoch: int, state: MatchState) -> dict[str, Any]:
    """A ``key`` entry: match ``index``'s whole state (with its history ring)."""
    return {
        "k": entries.KIND_KEY, "m": index, "e": epoch, "t": state.tick,
        "state": {f.name: getattr(state, f.name) for f in fields(state)},
    }  # fmt: skip


def _keyframe_size(state: MatchState) -> int:
    blobs = [*state.world.values(), *(state.history or {}).values()]
    return _ENTRY_BYTES + sum(len(blob) for blob in blobs if isinstance(blob, bytes))


def block_of(pending: Pending) -> Block:
    """A pending block's entries coded into its planes (the writer thread's work)."""
    return Block(pending.first_tick, pending.last_tick, entries.encode_block(pending.entries))


def state_from_keyframe(entry: dict[str, Any]) -> MatchState:
    try:
        return MatchState(**entry["state"])
    except (KeyError, TypeError, ValueError) as error:
        raise entries.LogEntryError(f"a keyframe does not decode: {error}") from None


class MatchLog:
    """What a node's matches log; ``keyframe_ticks``: ticks between keyframes."""

    def __init__(
        self,
        matches: MatchSet,
        *,
        backend: str,
        region: str,
        node: str,
        started: float,
        keyframe_ticks: int = 600,
        blocks: BlockWriter | None = None,
    ) -> None:
        self.matches = matches
        self.blocks = blocks or BlockWriter()
        self.keyframe_ticks = keyframe_ticks
        self.config = entries.config_entry(
            matches.config, len(matches), backend, region, node, started
        )
        capacity = matches.config.max_players
        count = len(matches)
        for match in matches.matches:
            match.seat_log = []
        self._all_slots = np.arange(capacity)
        self._rtt_told = np.full((count, capacity, 2), np.nan)
        self._rtt: list[list[list[float]]] = [[] for _ in range(count)]
        self._seats: list[list[list[Any]]] = [[] for _ in range(count)]
        #: The tick each match's next keyframe is due after (-1: at the next tick), and the
        #: epoch its last tick was logged in (a new one: a promotion, keyframe it).
        self._key_after = [-1] * count
        self._epoch = [-1] * count
        self._rtt_epoch = [-1] * count  # the epoch the estimates were last logged in
        #: Per match, the seats a standby last saw (slot -> seat id), to log their changes.
        self._followed: list[dict[int, int]] = [{} for _ in range(count)]
        for match in matches.matches:  # where a replay of the first tick logged starts
            self._keyframe(match)

    def want_keyframes(self) -> None:
        """Keyframe every match after its next tick (a new file: each file replays alone)."""
        self._key_after = [-1] * len(self._key_after)

    # -- an operator's pause -------------------------------------------------------------

    def pause(self) -> None:
        """Say in the log that every match's recording pauses after its current tick: a
        replay then knows the ticks up to the next keyframe were left out on purpose."""
        for match in self.matches.matches:
            entry = entries.pause_entry(match.index, match.epoch, match.tick_number)
            self.blocks.add(entry, match.tick_number, _ENTRY_BYTES)
            match.seat_log = None  # (nothing piles up while paused)

    def resume(self) -> None:
        """Log again from the next tick, as from a start: the estimates that changed
        meanwhile are forgotten and every estimate is logged again, and every match is
        keyframed after its next tick, where a replay goes on from."""
        for match in self.matches.matches:
            match.seat_log = []
            match.probes.take_changed()
            # (a standby: the seats changed meanwhile are its keyframe's, not its next tick's)
            self._followed[match.index] = {slot: s.seat_id for slot, s in match.seats.items()}
        self._rtt_epoch = [-1] * len(self._rtt_epoch)
        self.want_keyframes()

    # -- a primary's ticks -------------------------------------------------------------

    def before_tick(self) -> None:
        for match in self.matches.matches:
            k = match.index
            changes = match.seat_log or []
            match.seat_log = []
            self._seats[k] = [list(change) for change in changes]
            everyone = match.epoch != self._rtt_epoch[k]  # a start or a promotion
            self._rtt_epoch[k] = match.epoch
            self._rtt[k] = self._rtt_changes(match, [change[1] for change in changes], everyone)

    def _rtt_changes(self, match: Match, seated: list[int], everyone: bool) -> list[list[float]]:
        """The estimates that changed since last logged, and those of the seats in
        ``seated`` (or of every active seat when ``everyone``), as rows to log. Only the
        seats whose estimate was set since the last tick are looked at (most ticks a few
        probes' echoes came in), and those compared bit for bit (NaN, unknown, equals
        itself): an echo that leaves an estimate as it was logs nothing."""
        told = self._rtt_told[match.index]
        set_since = match.probes.take_changed()
        if not seated and not everyone and not set_since:
            return []
        if everyone:
            slots, forced = self._all_slots, np.ones(len(self._all_slots), dtype=bool)
        else:
            slots = np.array(sorted({*set_since, *seated}), dtype=np.int64)
            forced = np.isin(slots, seated) if seated else np.zeros(len(slots), dtype=bool)
        now = match.probes.estimates(slots)
        same = (now.view(np.uint64) == told[slots].view(np.uint64)).all(axis=1)
        picked = ~same | (forced & match.world.active[slots])
        changed = slots[picked]
        told[changed] = now[picked]
        rows = np.nan_to_num(now[picked], nan=-1.0).tolist()
        return [[slot, *row] for slot, row in zip(changed.tolist(), rows, strict=True)]

    def after_tick(self, results: list[TickResult]) -> None:
        for match, result in zip(self.matches.matches, results, strict=True):
            k = match.index
            released = match.released
            entry = entries.TickEntry(
                match=k,
                epoch=match.epoch,
                tick=match.tick_number,
                after=match.previous_tick,
                seats=self._seats[k],
                rtt=self._rtt[k],
                inputs=released,
                shots=[],
                hash=result.state_hash or match.world.state_hash(),
                source="p",
            )
            shots = [e for e in result.events if type(e) is ShotEvent]
            self.blocks.add(_Computed(entry, shots), match.tick_number, _tick_size(entry))
            self._seats[k], self._rtt[k] = [], []
            self._keyframe_if_due(match)

    def _keyframe_if_due(self, match: Match) -> None:
        k = match.index
        if match.tick_number <= self._key_after[k] and match.epoch == self._epoch[k]:
            return
        self._keyframe(match)

    def _keyframe(self, match: Match) -> None:
        k = match.index
        state = capture_match(match, [], full=True)
        self.blocks.add(
            keyframe_entry(k, match.epoch, state), match.tick_number, _keyframe_size(state)
        )
        self._key_after[k] = match.tick_number + self.keyframe_ticks
        self._epoch[k] = match.epoch

    # -- a standby's ---------------------------------------------------------------------

    def followed(self, record: TickRecord | FullState) -> None:
        """Log a record this standby applied: a tick's hash, shots and seat changes (no
        inputs: a standby receives the world, not them), or a full state as a keyframe."""
        for match, state in zip(self.matches.matches, record.matches, strict=True):
            k = match.index
            seated = {slot: seat.seat_id for slot, seat in match.seats.items()}
            before = self._followed[k]
            changes: list[list[Any]] = [
                [SEAT_LEAVE, slot, seat_id, "", 0.0]
                for slot, seat_id in before.items()
                if seated.get(slot) != seat_id
            ]
            changes += [
                [SEAT_JOIN, slot, seat_id, match.seats[slot].name, match.seats[slot].interp_delay]
                for slot, seat_id in seated.items()
                if before.get(slot) != seat_id
            ]
            self._followed[k] = seated
            if isinstance(record, FullState):
                entry = keyframe_entry(k, record.epoch, state)
                self.blocks.add(entry, state.tick, _keyframe_size(state))
                continue
            followed = entries.TickEntry(
                match=k, epoch=record.epoch, tick=state.tick, after=state.after, seats=changes,
                rtt=[], inputs=None, shots=[e for e in state.events if e.get("kind") == "shot"],
                hash=state.hash, source="s",
            )  # fmt: skip
            self.blocks.add(followed, state.tick, _tick_size(followed))
            self._keyframe_if_due(match)

    def take_block(self) -> Pending | None:
        """The entries held, as a pending block (:func:`block_of` codes it); the next
        entry starts the next block."""
        return self.blocks.take()


@dataclass(frozen=True, slots=True)
class _Computed:
    """A primary's tick as its tick leaves it: its shots still events (frozen), made
    into maps with the rest on the writer thread."""

    entry: entries.TickEntry
    shots: list[ShotEvent]

    def to_entry(self) -> dict[str, Any]:
        return {**self.entry.to_entry(), "shots": [encode_event(e) for e in self.shots]}


def _tick_size(entry: entries.TickEntry) -> int:
    released = entry.inputs
    if released is None:
        return _ENTRY_BYTES
    return _ENTRY_BYTES + _ROW_BYTES * len(released.slot) + _SEAT_BYTES * len(released.guess)
