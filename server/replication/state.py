"""A node's matches as replication records, and back (sans-I/O).

After every tick the primary captures each match: what its components export (the world's
arrays, combat's bookkeeping and projectiles in flight, the seats with each one's
acknowledged input), the tick's events, the join counter and a hash of the world. A
standby applies the record to its own matches, appends the same snapshot to its own
history ring (so lag compensation works right after a promotion) and checks the hash. A
record carries the full state rather than a delta: at 300 players it is about 40 KB,
trivial on a regional network, and a standby can never drift.

A *full state* adds each match's history ring, for a standby that joins late or has
missed a record.
"""

from __future__ import annotations

from collections.abc import Sequence

from server.replication.messages import ConfigFingerprint, FullState, MatchState, TickRecord
from server.sim.match import Match
from server.sim.matchset import MatchSet
from server.sim.replica import StateMismatch
from shared.protocol import SnapshotEvent, decode_event, encode_event

__all__ = [
    "HashMismatch",
    "ReplicationGap",
    "apply",
    "apply_match",
    "capture_full",
    "capture_match",
    "capture_tick",
    "config_fingerprint",
    "install_match",
]


class ReplicationGap(Exception):
    """A record does not follow the state this standby holds: it needs a full state."""


class HashMismatch(Exception):
    """After applying a record the world differs from the primary's: full state needed."""


def config_fingerprint(matches: Match | MatchSet) -> ConfigFingerprint:
    """What two nodes must share for one to replicate the other."""
    config = matches.config
    return ConfigFingerprint(
        matches=len(matches) if isinstance(matches, MatchSet) else 1,
        tick_rate=config.tick_rate,
        max_players=config.max_players,
        history_snapshots=config.history_snapshots,
        map=config.arena.name,
        snapshot_interval=config.snapshot_interval,
    )


def capture_match(
    match: Match, events: Sequence[SnapshotEvent], full: bool = False, state_hash: str = ""
) -> MatchState:
    """One match after its latest tick (with its history ring when ``full``); ``state_hash``:
    the world's hash when the caller has it already (the tick just computed it)."""
    return MatchState(
        tick=match.tick_number,
        after=match.previous_tick,
        world=match.world.array_state(),
        combat=match.combat.export_state(),
        seats=match.seat_state(),
        joins=match.joins,
        events=[encode_event(event) for event in events],
        hash=state_hash or match.world.state_hash(),
        history=match.history.export_state() if full else None,
    )


def capture_tick(
    matches: MatchSet,
    events: Sequence[Sequence[SnapshotEvent]],
    epoch: int,
    state_hashes: Sequence[str] = (),
) -> TickRecord:
    """One tick of every match of a node, as one record; ``state_hashes``: each match's
    world hash as the tick left it, where the tick computed it (a snapshot tick's; an empty
    one is computed here)."""
    hashes = list(state_hashes) or [""] * len(matches.matches)
    return TickRecord(
        epoch=epoch,
        tick=matches.tick_number,
        matches=tuple(
            capture_match(match, match_events, state_hash=digest)
            for match, match_events, digest in zip(matches.matches, events, hashes, strict=True)
        ),
    )


def capture_full(matches: MatchSet, epoch: int) -> FullState:
    """Every match of a node, with history: what a joining standby starts from."""
    return FullState(
        epoch=epoch,
        tick=matches.tick_number,
        matches=tuple(capture_match(match, [], full=True) for match in matches.matches),
    )


def apply(matches: MatchSet, record: TickRecord | FullState) -> None:
    """Apply a node's record (a tick, or a full state) to every match."""
    if len(record.matches) != len(matches):
        raise ReplicationGap("the record holds another number of matches")
    for match, state in zip(matches.matches, record.matches, strict=True):
        if isinstance(record, FullState):
            install_match(match, state, record.epoch)
        else:
            apply_match(match, state, record.epoch)


def _restore(match: Match, state: MatchState, epoch: int) -> None:
    try:
        match.world.restore_arrays(state.world)
        match.combat.import_state(state.combat)
    except StateMismatch as error:
        raise ReplicationGap(str(error)) from None
    match.restore_seats(state.seats)
    match.joins = state.joins
    match.previous_tick, match.tick_number = state.after, state.tick
    match.epoch = max(match.epoch, epoch)


def apply_match(match: Match, state: MatchState, epoch: int) -> None:
    """Follow the primary by one tick; raises if this standby cannot (gap, hash)."""
    if state.history is not None:
        raise ValueError("apply_match takes a tick's state, not a full state")
    if state.tick <= match.tick_number:
        return  # already held (a resend after a reconnect)
    if state.after != match.tick_number:
        raise ReplicationGap(
            f"record of tick {state.tick} follows tick {state.after}, not {match.tick_number}"
        )
    _restore(match, state, epoch)
    match.record_history()
    if match.world.state_hash() != state.hash:
        raise HashMismatch(f"state hash differs at tick {match.tick_number}")
    # The events the primary's next snapshot carries, so that this node's first one after a
    # promotion carries them too (cleared on a snapshot tick: the primary sent them).
    if match.config.is_snapshot_tick(state.tick):
        match.unsent_events = []
    else:
        match.unsent_events.extend(decode_event(event) for event in state.events)


def install_match(match: Match, state: MatchState, epoch: int) -> None:
    """Replace this node's match with the primary's (a late join or a repair)."""
    if state.history is None:
        raise ValueError("install_match takes a full state")
    _restore(match, state, epoch)
    match.unsent_events = []  # (those of the ticks before are not in a full state)
    try:
        match.history.import_state(state.history)
    except StateMismatch as error:
        raise ReplicationGap(str(error)) from None
    if match.world.state_hash() != state.hash:
        raise HashMismatch("state hash differs after a full transfer")
