"""Re-run a recorded match through the same :class:`~server.sim.match.Match` code and check
every tick (sans-I/O: the caller times it and prints).

A replay starts from a keyframe (the latest at or before ``--from``), then, tick by tick,
applies the logged seat changes and round-trip estimates, feeds the logged inputs to
:meth:`Match.advance` in place of its own queues, judges the shots with the same kernels,
and compares the world's hash, the shots' verdicts and the seats with the log. A keyframe
on the way also compares the world seat by seat, which names the player a hash only says
drifted.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from server.record import entries
from server.record.capture import state_from_keyframe
from server.record.timeline import Recording
from server.replication.state import HashMismatch, ReplicationGap, install_match
from server.sim import inputs
from server.sim.combat import ShotTrace, judge
from server.sim.hitreg.backend import HitValidator
from server.sim.lagcomp import LinkEstimate
from server.sim.match import SEAT_JOIN, SEAT_LEAVE, Match, MatchConfig, MatchFull, TickResult
from shared import movement
from shared.protocol import ShotEvent, encode_event

__all__ = [
    "Mismatch",
    "ReplayOutcome",
    "ReplayedTick",
    "replay_match",
    "replay_ticks",
    "warm_up",
]

_SHOT_KEYS = ("shooter", "seq", "result", "victim", "hitbox", "damage", "judged")


@dataclass(frozen=True, slots=True)
class Mismatch:
    tick: int
    kind: str  # "hash", "verdict", "seat", "world"
    what: str

    def line(self) -> str:
        return f"tick {self.tick}: {self.kind} differs: {self.what}"


@dataclass(slots=True)
class ReplayOutcome:
    match: int
    ticks: int = 0
    first_tick: int = -1
    last_tick: int = -1
    shots: int = 0
    hash_mismatches: int = 0
    verdict_mismatches: int = 0
    seat_mismatches: int = 0
    world_mismatches: int = 0
    mismatches: list[Mismatch] = field(default_factory=list)  # the first few, in order
    problems: list[str] = field(default_factory=list)  # what kept ticks from replaying
    notes: list[str] = field(default_factory=list)  # ticks skipped that a standby holds

    def note(self, mismatch: Mismatch, keep: int = 10) -> None:
        """Keep the first ``keep`` of each kind (a drift fails every hash after it; the
        keyframe that names the drifted seat comes later)."""
        if sum(m.kind == mismatch.kind for m in self.mismatches) < keep:
            self.mismatches.append(mismatch)

    @property
    def exact(self) -> bool:
        return not (
            self.hash_mismatches
            or self.verdict_mismatches
            or self.seat_mismatches
            or self.world_mismatches
        )


def _start_key(
    recording: Recording, match: int, lineage: list[entries.TickEntry], start: int | None
) -> tuple[tuple[int, int], dict[str, Any]] | None:
    """The keyframe to start from: on the lineage (taken after one of its ticks in its
    epoch, or after the tick one of them follows, in any: a new epoch's first tick follows
    its predecessor's), the latest at or before ``start`` (else the first)."""
    computed = {(t.epoch, t.tick) for t in lineage}
    followed = {t.after for t in lineage}
    keys = sorted(
        (
            where
            for where in recording.keys.get(match, {})
            if where in computed or where[1] in followed
        ),
        key=lambda where: (where[1], where[0]),
    )
    if not keys:
        return None
    chosen = keys[0]
    if start is not None:
        for where in keys:
            if where[1] <= start:
                chosen = where
    return chosen, recording.keys[match][chosen]


@dataclass(frozen=True, slots=True)
class ReplayedTick:
    """One tick just replayed: its log entry, the match after it and the shots it judged,
    traced (their lines: what a viewer draws; tracing costs one record a shot)."""

    entry: entries.TickEntry
    match: Match
    traces: list[ShotTrace]
    #: The tick's result (with ``publish``: its shown world, from which its snapshot's
    #: parts can be coded, as the node coded them).
    result: TickResult


def replay_ticks(
    recording: Recording,
    config: MatchConfig,
    validator: HitValidator,
    outcome: ReplayOutcome,
    start: int | None = None,
    stop: int | None = None,
    publish: bool = False,
) -> Iterator[ReplayedTick]:
    """Replay match ``outcome.match`` of ``recording`` from ``start`` to ``stop`` (ticks,
    inclusive), yielding after each tick; what differs from the log goes into ``outcome``.
    The match yielded is the replay's own: read it before the next step. ``publish``: make
    each snapshot tick's shown world, as the node did (slower; what a viewer needs to code
    what each client was sent)."""
    match_index = outcome.match
    lineage = recording.lineage(match_index)
    found = _start_key(recording, match_index, lineage, start)
    if found is None:
        outcome.problems.append(f"match {match_index}: no keyframe to start from")
        return
    (key_epoch, key_tick), key = found
    match = Match(config, epoch=key_epoch, validator=validator)
    try:
        install_match(match, state_from_keyframe(key), key_epoch)
    except (ReplicationGap, HashMismatch) as error:
        outcome.problems.append(f"match {match_index}: keyframe of tick {key_tick}: {error}")
        return
    keys = recording.keys.get(match_index, {})
    for tick in lineage:
        if tick.tick <= match.tick_number:  # (before the keyframe it started or went on from)
            continue
        if stop is not None and tick.tick > stop:
            break
        if tick.after != match.tick_number:
            if not _bridge(recording, match, tick, outcome):
                break
            continue
        match.combat.traces = []
        result = _replay_tick(match, tick, validator, outcome, publish)
        passed = keys.get((tick.epoch, tick.tick))
        if passed is not None:
            _compare_world(match, state_from_keyframe(passed).world, tick.tick, outcome)
        yield ReplayedTick(tick, match, match.combat.traces, result)


def replay_match(
    recording: Recording,
    config: MatchConfig,
    validator: HitValidator,
    match_index: int = 0,
    start: int | None = None,
    stop: int | None = None,
) -> ReplayOutcome:
    """Replay one match of ``recording`` from ``start`` to ``stop`` (ticks, inclusive)."""
    outcome = ReplayOutcome(match_index)
    for _ in replay_ticks(recording, config, validator, outcome, start, stop):
        pass
    return outcome


def warm_up(config: MatchConfig, validator: HitValidator) -> None:
    """Compile (or load from numba's cache) every kernel a replay runs: its speed is then
    the replay's, with no compiling in it (a cold cache takes many seconds)."""
    validator.warm_up()
    inputs.warm_up()
    movement.warm_up()
    Match(config, validator=validator).codec.shown_positions(np.zeros((1, 3)))


def _bridge(
    recording: Recording, match: Match, tick: entries.TickEntry, outcome: ReplayOutcome
) -> bool:
    """Ticks are missing before ``tick`` (a primary killed with its last block in memory,
    a disk that refused blocks, an operator's pause): go on from the first keyframe its
    node logged at or after it (a promoted standby logs one after its first tick, a node
    whose disk takes writes again or whose recording resumed one a few ticks into its new
    file), leaving the ticks up to it unchecked. Missing ticks a standby received or an
    operator's pause left out are a note; others, a problem. False: no keyframe to go on
    from."""
    last = (match.epoch, match.tick_number)  # the last tick replayed
    missing = range(match.tick_number + 1, tick.after + 1)  # (ticks after it never ran)
    where = f"match {match.index}: ticks {missing.start}..{missing.stop - 1}"
    keys = recording.keys.get(match.index, {})
    later = [at for (epoch, at) in keys if epoch == tick.epoch and at >= tick.tick]
    if not later:
        outcome.problems.append(f"{where} are missing from the log; the replay stops there")
        return False
    resume = min(later)
    try:
        install_match(match, state_from_keyframe(keys[tick.epoch, resume]), tick.epoch)
    except (ReplicationGap, HashMismatch) as error:
        outcome.problems.append(f"{where}: the keyframe after them does not load: {error}")
        return False
    if last in recording.paused.get(match.index, set()):
        outcome.notes.append(
            f"{where} were not recorded (an operator paused the recording); the replay goes "
            f"on from the keyframe of tick {resume}"
        )
        return True
    received = {t for (_, t) in recording.received.get(match.index, {})}
    held = sum(t in received for t in missing)
    head = f"{where} are missing from the computed log, {held} of {len(missing)} held by a "
    line = head + (
        f"standby's log (a primary killed before writing them); the replay goes on from the "
        f"keyframe of tick {tick.tick}, its successor's first"
        if resume == tick.tick
        else f"standby's log; ticks {tick.tick}..{resume} go unchecked, and the replay goes on "
        f"from the keyframe of tick {resume}"
    )
    (outcome.notes if held == len(missing) else outcome.problems).append(line)
    return True


def _replay_tick(
    match: Match,
    tick: entries.TickEntry,
    validator: HitValidator,
    outcome: ReplayOutcome,
    publish: bool = False,
) -> TickResult:
    match.epoch = tick.epoch
    _apply_seats(match, tick, outcome)
    for slot, rtt, spread in tick.rtt:
        match.probes.assume(int(slot), LinkEstimate(rtt, spread) if rtt >= 0 else None)
    batch = match.advance(tick.tick, tick.inputs)
    if not batch.empty:
        judge([batch], match.history_view(), validator)
    result = match.finish(batch, publish=publish)
    outcome.ticks += 1
    outcome.first_tick = tick.tick if outcome.first_tick < 0 else outcome.first_tick
    outcome.last_tick = tick.tick
    digest = result.state_hash or match.world.state_hash()
    if digest != tick.hash:
        outcome.hash_mismatches += 1
        outcome.note(Mismatch(tick.tick, "hash", f"world hash {digest} (logged {tick.hash})"))
    # (through msgpack, as the log holds them: a tuple comes back a list)
    shots = entries.as_logged([encode_event(e) for e in result.events if type(e) is ShotEvent])
    outcome.shots += len(tick.shots)
    for replayed, logged in _pairs(shots, tick.shots):
        if replayed != logged:
            outcome.verdict_mismatches += 1
            outcome.note(Mismatch(tick.tick, "verdict", _describe_shot(replayed, logged)))
    return result


def _pairs(replayed: list[Any], logged: list[Any]) -> list[tuple[Any, Any]]:
    n = max(len(replayed), len(logged))
    return [
        (replayed[i] if i < len(replayed) else None, logged[i] if i < len(logged) else None)
        for i in range(n)
    ]


def _describe_shot(replayed: dict[str, Any] | None, logged: dict[str, Any] | None) -> str:
    def verdict(shot: dict[str, Any] | None) -> str:
        if shot is None:
            return "no shot"
        return ", ".join(f"{k}={shot.get(k)}" for k in _SHOT_KEYS)

    shot = logged or replayed or {}
    who = f"shot of slot {shot.get('shooter')} seq {shot.get('seq')}"
    if replayed and logged and all(replayed.get(k) == logged.get(k) for k in _SHOT_KEYS):
        fields = [k for k in logged if replayed.get(k) != logged.get(k)]
        return f"{who}: same verdict, {', '.join(fields)} differ"
    return f"{who}: replayed {verdict(replayed)}; logged {verdict(logged)}"


def _apply_seats(match: Match, tick: entries.TickEntry, outcome: ReplayOutcome) -> None:
    for kind, slot, seat_id, name, interp in tick.seats:
        if kind == SEAT_JOIN:
            try:
                seat = match.join(str(name), float(interp))
            except MatchFull:
                seat = None
            if seat is None or (seat.slot, seat.seat_id) != (slot, seat_id):
                got = "no seat" if seat is None else f"slot {seat.slot} seat {seat.seat_id}"
                outcome.seat_mismatches += 1
                outcome.note(
                    Mismatch(
                        tick.tick,
                        "seat",
                        f"join of {name!r}: {got}, logged slot {slot} seat {seat_id}",
                    )
                )
        elif kind == SEAT_LEAVE:
            held = match.seats.get(int(slot))
            if held is None or held.seat_id != seat_id:
                outcome.seat_mismatches += 1
                outcome.note(
                    Mismatch(
                        tick.tick,
                        "seat",
                        f"leave of slot {slot} seat {seat_id}: not seated in the replay",
                    )
                )
            match.leave(int(slot))


def _compare_world(match: Match, logged: Any, tick: int, outcome: ReplayOutcome) -> None:
    """Seat by seat, the replayed world against a keyframe's."""
    world = match.world
    differing: list[str] = []
    if not isinstance(logged, dict) or "active" not in logged:
        return
    seated = world.active | np.frombuffer(logged["active"], dtype=bool)
    for name in world.REPLICATED:
        mine = getattr(world, name)
        raw = logged.get(name)
        if raw is None:
            continue
        theirs = np.frombuffer(raw, dtype=mine.dtype).reshape(mine.shape)
        rows = (mine != theirs).reshape(len(mine), -1).any(axis=1) & seated
        for slot in np.flatnonzero(rows)[:3].tolist():
            differing.append(
                f"slot {slot} {name} {np.asarray(mine[slot]).tolist()} "
                f"(logged {np.asarray(theirs[slot]).tolist()})"
            )
    if differing:
        outcome.world_mismatches += 1
        outcome.note(Mismatch(tick, "world", "; ".join(differing[:4])))
