"""One match: the authoritative tick over its world (sans-I/O).

A tick is: drain the inputs due at T, simulate movement, append snapshot T to history,
resolve the shots (lag-compensated, :mod:`server.sim.combat`) and encode snapshot T once for
everybody. The node's asyncio edge (:mod:`server.net`) feeds inputs in with their arrival
time (through :class:`server.sim.intake.InputIntake`) and sends what the tick returns
(:mod:`server.net.sessions`); nothing else writes the world. Time is a parameter
everywhere: server time is ``tick / tick_rate``.
"""

from __future__ import annotations

import collections
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from server.sim.combat import Combat, ShotBatch, judge
from server.sim.deltas import DeltaEncoder
from server.sim.fog import Fog
from server.sim.history import HistoryRing, HistoryStore
from server.sim.hitreg.backend import History, HitValidator, make_validator
from server.sim.inputs import (
    ARRIVAL,
    VERDICTS,
    InputQueues,
    InputVerdict,
    ReleasedInputs,
    SeatInputs,
)
from server.sim.interest import InterestConfig
from server.sim.lagcomp import LagCompensation, LinkEstimate
from server.sim.rtt import RttProbes
from server.sim.world import World
from shared import protocol
from shared.arena_map import ArenaMap
from shared.movement import MovementParams, step
from shared.protocol import (
    InputMessage,
    JoinEvent,
    LeaveEvent,
    RespawnEvent,
    ShotEvent,
    SnapshotEvent,
)
from shared.protocol.deltas import EntityCodec
from shared.protocol.inputs import (
    ACK_TICK,
    BUTTONS,
    MOVE_X,
    MOVE_Y,
    PITCH,
    SEQ,
    VIEW_TIME,
    YAW,
    input_columns,
)
from shared.weapons import WEAPONS

__all__ = [
    "SEAT_JOIN",
    "SEAT_LEAVE",
    "SEAT_RESUME",
    "Match",
    "MatchConfig",
    "MatchFull",
    "PlayerSeat",
    "SeatChange",
    "TickResult",
]

FIRE_BUTTONS = sum(weapon.button for weapon in WEAPONS)
_EPOCH_BITS, _JOIN_BITS = 2**31 - 1, 2**32 - 1  # a seat id: (epoch, join) in an int64
_COUNTER_OF = {verdict: f"input_{verdict.value}" for verdict in InputVerdict}
SEAT_JOIN, SEAT_LEAVE, SEAT_RESUME = "join", "leave", "resume"
#: (kind, slot, seat id, name, interp delay granted): one entry of :attr:`Match.seat_log`.
SeatChange = tuple[str, int, int, str, float]


class MatchFull(Exception):
    """Every seat is taken; the caller tells the client so."""


@dataclass(frozen=True, slots=True)
class MatchConfig:
    arena: ArenaMap
    tick_rate: int = 60
    max_players: int = 300
    #: Ticks from one snapshot to the next (the tick rate over the snapshot rate): every
    #: tick is simulated and replicated, one in this many is sent to the players, with
    #: the events of the ticks between.
    snapshot_interval: int = 1
    history_seconds: float = 1.0
    input_max_depth: int = 4
    #: Ticks a starved player's last input is repeated for (a guess, undone when its
    #: inputs are back); after that it is held still.
    input_max_guesses: int = 8
    #: Ticks of unused time a seat may bank to catch up on late inputs
    #: (``InputQueues.max_catch_up``; what it has no time for is dropped): one TCP
    #: retransmission's worth, Linux's minimum timeout of 200 ms, so that one lost packet
    #: costs its player no input; more would let a client that withholds its inputs move
    #: that much further in one tick.
    input_max_catch_up: int = 12
    movement: MovementParams = field(default_factory=MovementParams)
    lag_compensation: LagCompensation = field(default_factory=LagCompensation)
    #: Which players each client is sent (what is simulated and judged is unchanged).
    interest: InterestConfig = field(default_factory=InterestConfig)

    def __post_init__(self) -> None:
        if type(self.snapshot_interval) is not int or not 1 <= self.snapshot_interval:
            raise ValueError("the snapshot interval must be a whole number of ticks >= 1")

    @property
    def snapshot_rate(self) -> int:
        return self.tick_rate // self.snapshot_interval

    def is_snapshot_tick(self, tick: int) -> bool:
        """Whether tick ``tick``'s snapshot goes to the players (on every node alike: the
        cadence follows the tick number, so a promoted standby keeps it)."""
        return tick % self.snapshot_interval == 0

    @property
    def history_snapshots(self) -> int:
        """Snapshots the history ring holds: ``history_seconds`` of them, and one more
        (only snapshot ticks are kept, :meth:`Match.record_history`)."""
        return max(2, round(self.history_seconds * self.tick_rate / self.snapshot_interval) + 1)


@dataclass(slots=True)
class PlayerSeat:
    """What the match knows of one connected player beyond the world arrays."""

    slot: int
    name: str
    interp_delay: float  # the delay granted (``LagCompensation.grant_interp_delay``)
    inputs: SeatInputs
    #: Which seating of the slot this is (``World.seat_id``, replicated): the session
    #: token names it, and a standby tells a new player in a known slot by it.
    seat_id: int


@dataclass(frozen=True, slots=True)
class TickResult:
    tick: int
    server_time: float
    #: The shared part of snapshot T, encoded once; empty on a tick whose snapshot is not
    #: sent (``MatchConfig.snapshot_interval``).
    body: bytes
    events: list[SnapshotEvent]  # this tick's own (what standbys are sent)
    #: Who was seated when the tick was computed: the players the body holds, and so the
    #: players this tick's snapshot goes to (see :meth:`Match.snapshot_parts`).
    seats: dict[int, PlayerSeat]
    #: The world's after a snapshot tick (what its body carries, journals keep); empty
    #: on the ticks between, whose world only a standby checks: the node hashes it then,
    #: as it captures the tick (:func:`server.replication.state.capture_match`), and a
    #: node without standbys spends nothing on it.
    state_hash: str = ""
    #: On a snapshot tick, the world the clients' parts are coded from.
    shown: ShownWorld | None = None


@dataclass(frozen=True, slots=True)
class ShownWorld:
    """The world of a snapshot tick as its clients are told it."""

    quantised: np.ndarray  # (capacity, 10) int32, EntityCodec.quantise
    present: np.ndarray  # (capacity,) bool, the seats in play
    pos: np.ndarray  # (capacity, 3) float64
    yaw: np.ndarray  # (capacity,) float64
    #: The events it tells (those of the ticks since the last snapshot), each packed once,
    #: and the players each concerns: (shooter, victim) of a shot, (-1, -1) for an event
    #: everyone is told.
    events: list[bytes]
    parties: np.ndarray  # (E, 2) int64


class Match:
    def __init__(
        self,
        config: MatchConfig,
        epoch: int = 0,
        validator: HitValidator | None = None,
        history: HistoryStore | None = None,
        index: int = 0,
    ) -> None:
        """``history``/``index``: this match's ring inside a node's shared store."""
        self.config = config
        self.epoch = epoch
        self.index = index
        self.world = World(config.max_players)
        self.history = HistoryRing(config.history_snapshots, config.max_players, history, index)
        self.validator = validator or make_validator(
            "reference", box_min=config.arena.box_min, box_max=config.arena.box_max
        )
        self.combat = Combat(
            self.world,
            config.tick_rate,
            config.lag_compensation,
            match_index=index,
            snapshot_interval=config.snapshot_interval,
        )
        self.seats: dict[int, PlayerSeat] = {}
        self.tick_number = 0
        self.previous_tick = -1  # the tick before this one (ticks a stall skipped between)
        self.probes = RttProbes(config.max_players)
        self.inputs = InputQueues(
            config.max_players,
            config.input_max_depth,
            max_catch_up=config.input_max_catch_up,
            surplus_memory=config.tick_rate,  # a second
        )
        self.counters: collections.Counter[str] = collections.Counter()
        self._events: list[SnapshotEvent] = []
        #: Events of the ticks since the last snapshot tick: the next snapshot carries them.
        self.unsent_events: list[SnapshotEvent] = []
        self.joins = 0
        self.codec = EntityCodec.for_bounds(config.arena.bounds_min, config.arena.bounds_max)
        period = config.snapshot_interval / config.tick_rate
        fog = (
            Fog(config.arena, config.movement, period, config.interest.fog_peek_s)
            if config.interest.fog
            else None
        )
        self.deltas = DeltaEncoder(
            self.codec, config.max_players, config.snapshot_interval, config.interest, fog=fog
        )
        # The snapshot being published (snapshot_parts): every seat's head, taken at its
        # tick; the parts of the seats coded so far.
        self._parts_of: TickResult | None = None
        self._heads: dict[int, bytes] = {}
        self._parts: dict[int, bytes] = {}
        #: The clients coded last and the players each was sent (``(C,)`` slots, ``(C,
        #: size)`` bool by slot): what a replay viewer reads of what a shooter was shown.
        self.last_sent: tuple[np.ndarray, np.ndarray] | None = None
        #: The inputs the last tick applied (what a match log keeps of it).
        self.released: ReleasedInputs | None = None
        #: Seat changes since a match log last took them (``None``: nobody records, so
        #: nothing is kept): ``(SEAT_JOIN, slot, seat_id, name, interp_delay)`` or
        #: ``(SEAT_LEAVE, slot, seat_id, "", 0.0)``, in the order they happened.
        self.seat_log: list[SeatChange] | None = None

    @property
    def server_time(self) -> float:
        return self.tick_number / self.config.tick_rate

    # -- seats -------------------------------------------------------------------------

    def join(self, name: str, interp_delay: float) -> PlayerSeat:
        """Seat a player who renders ``interp_delay`` behind (granted up to the bound)."""
        slot = self.world.free_slot()
        if slot is None:
            raise MatchFull(f"the match is full ({self.config.max_players} players)")
        x, y = self.config.arena.spawn_point(self.joins)
        # Unique for the match's whole life: the join counter only grows, and the epoch
        # tells apart seats a deposed primary gave out after its last replicated tick.
        seat_id = (self.epoch & _EPOCH_BITS) << 32 | (self.joins & _JOIN_BITS)
        self.joins += 1
        self.world.seat(slot, x, y)
        self.world.seat_id[slot] = seat_id
        self.combat.seat(slot)
        self.deltas.forget(slot)
        granted = self.config.lag_compensation.grant_interp_delay(interp_delay)
        seat = PlayerSeat(slot, name, granted, self._new_seat_inputs(slot), seat_id)
        self.seats[slot] = seat
        self._events.append(JoinEvent(slot))
        if self.seat_log is not None:
            self.seat_log.append((SEAT_JOIN, slot, seat_id, name, granted))
        return seat

    def _new_seat_inputs(self, slot: int) -> SeatInputs:
        """A new player's buffer and round trips in ``slot``: nothing of the last one's."""
        self.inputs.reset(slot)
        self.probes.reset(slot, self.server_time)
        return self.inputs.seat(slot)

    def seat_state(self) -> list[list[Any]]:
        """Every seat as ``[slot, name, interp_delay, acked, guessed, before_guesses, rtt,
        spread, credit, surplus]`` (rtt -1: not measured yet; credit: the ticks of catch-up
        it has banked; surplus: the ticks left in which it banks none), for a standby."""
        slots = sorted(self.seats)
        links = np.nan_to_num(self.probes.estimates(np.array(slots, dtype=np.int64)), nan=-1.0)
        rows = []
        for slot, link in zip(slots, links.tolist(), strict=True):
            seat = self.seats[slot]
            guessed, before = self.inputs.guesses(slot)
            rows.append([slot, seat.name, seat.interp_delay, seat.inputs.acked, guessed, before,
                         *link, self.inputs.credit(slot), self.inputs.surplus(slot)])  # fmt: skip
        return rows

    def restore_seats(self, rows: list[list[Any]]) -> None:
        """Hold exactly the primary's seats: a seat whose player changed starts afresh (its
        buffer and RTT window are the new player's); every seat's ack is the primary's.
        Call it after the world's arrays are restored: they hold each seat's id."""
        wanted = {
            int(slot): (
                str(name), float(interp), int(acked), int(guessed), before, rtt, spread,
                int(credit), int(surplus),
            )
            for slot, name, interp, acked, guessed, before, rtt, spread, credit, surplus in rows
        }  # fmt: skip
        for slot in list(self.seats):
            if slot not in wanted:
                del self.seats[slot]
                self.probes.forget(slot)
        for slot, row in wanted.items():
            name, interp, acked, guessed, before, rtt, spread, credit, surplus = row
            seat = self.seats.get(slot)
            seat_id = int(self.world.seat_id[slot])
            if (
                seat is None
                or seat.seat_id != seat_id
                or (seat.name, seat.interp_delay) != (name, interp)
            ):
                seat = PlayerSeat(slot, name, interp, self._new_seat_inputs(slot), seat_id)
                self.seats[slot] = seat
            # A follower applies no inputs itself: its view of each seat's ack (and of the
            # ticks it guessed) is the primary's.
            seat.inputs.restore(acked)
            self.inputs.restore_guesses(slot, guessed, before)
            self.inputs.restore_credit(slot, credit, surplus)
            self.probes.assume(slot, LinkEstimate(rtt, spread) if rtt >= 0 else None)

    def leave(self, slot: int) -> None:
        if (seat := self.seats.pop(slot, None)) is not None:
            self.world.vacate(slot)
            self.deltas.forget(slot)
            self.probes.forget(slot)
            self._events.append(LeaveEvent(slot))
            if self.seat_log is not None:
                self.seat_log.append((SEAT_LEAVE, slot, seat.seat_id, "", 0.0))

    def note_resume(self, slot: int) -> None:
        """A player took its seat back with its token (nothing in the world changes; a match
        log keeps it beside the joins and leaves)."""
        seat = self.seats.get(slot)
        if seat is not None and self.seat_log is not None:
            self.seat_log.append((SEAT_RESUME, slot, seat.seat_id, seat.name, seat.interp_delay))

    # -- inputs --------------------------------------------------------------------------

    def receive_input(self, slot: int, message: InputMessage, arrival: float) -> InputVerdict:
        """Queue one decoded input from ``slot`` that arrived at ``arrival`` (server clock)."""
        if slot not in self.seats:
            raise KeyError(f"no player in slot {slot}")
        ints, floats = input_columns(message)
        verdicts, _ = self._queue(
            np.array([slot], dtype=np.int64),
            np.array([ints], dtype=np.int64),
            np.array([floats], dtype=np.float64),
            np.array([arrival], dtype=np.float64),
        )
        return VERDICTS[int(verdicts[0])]

    def receive_decoded(
        self, slots: np.ndarray, ints: np.ndarray, floats: np.ndarray, arrivals: np.ndarray
    ) -> collections.Counter[InputVerdict]:
        """:meth:`receive_input` for many inputs at once (rows in arrival order, columns as
        :func:`server.sim.input_frames.decode_input_frames` gives them); returns how many of
        each verdict."""
        _, counts = self._queue(slots, ints, floats, arrivals)
        return collections.Counter(counts)

    def _queue(
        self, slots: np.ndarray, ints: np.ndarray, floats: np.ndarray, arrivals: np.ndarray
    ) -> tuple[np.ndarray, dict[InputVerdict, int]]:
        """Queue the rows; each row's verdict code, and how many of each verdict."""
        verdicts = self.inputs.offer(slots, ints, floats, arrivals)
        counts = np.bincount(verdicts, minlength=len(VERDICTS)).tolist()
        tally = {VERDICTS[code]: count for code, count in enumerate(counts) if count}
        for verdict, count in tally.items():
            self.counters[_COUNTER_OF[verdict]] += count
        return verdicts, tally

    def _release_inputs(self, replayed: ReleasedInputs | None = None) -> ReleasedInputs:
        """Set each seat's input for this tick; return every input released (the surplus
        of a burst too, to catch up on, as far as the seat's time allows). A starved seat's
        guesses start from a saved state, and a seat whose inputs are back goes back to it
        before they move it. ``replayed``: the inputs a match log says this tick released
        (a replay applies them instead of its own queues')."""
        seated = np.array(sorted(self.seats), dtype=np.int64)  # replicas must agree on order
        released = (
            replayed
            if replayed is not None
            else self.inputs.release(seated, max(1, self.tick_number - self.previous_tick))
        )
        self.released = released
        undone, own = released.apply(
            seated, self.config.input_max_guesses, self.inputs.before_guesses, self.world
        )
        if undone:
            self.counters["input_guesses_undone"] += undone
        if len(released.slot):
            self.counters["input_applied"] += len(released.slot)
        if own < len(seated):
            self.counters["input_repeated"] += len(seated) - own
        self.deltas.note_acks(released.slot, released.ints[:, ACK_TICK])
        if late := int(released.dropped.sum()):
            # Inputs a catch-up had no time for: dropped, so they delay no later input.
            self.counters["input_dropped_late"] += late
        return released

    def _fire(self, released: ReleasedInputs, rows: np.ndarray) -> None:
        """Hand the released inputs ``rows`` that fire to combat (position is post-movement).
        Every input applied in a tick fires at that tick's server time, catch-up included:
        cooldowns run on the server's clock, so inputs sent faster fire no faster."""
        firing = np.flatnonzero(rows & (released.ints[:, BUTTONS] & FIRE_BUTTONS != 0))
        for row in firing.tolist():
            slot = int(released.slot[row])
            ints, floats = released.ints[row].tolist(), released.floats[row].tolist()
            seq, buttons = ints[SEQ], ints[BUTTONS]
            yaw, pitch, view_time = floats[YAW], floats[PITCH], floats[VIEW_TIME]
            arrival = floats[ARRIVAL]
            self.combat.fire(
                slot,
                seq,
                buttons,
                yaw,
                pitch,
                view_time,
                arrival,
                self._ack_time(ints[ACK_TICK], arrival),
                self.probes.estimate(slot),
                self.seats[slot].interp_delay,
                self.server_time,
            )

    def _ack_time(self, ack_tick: int, arrival: float) -> float | None:
        """The time of the newest snapshot an input says its client had, no later than the
        newest tick due by the input's arrival (None before its first snapshot)."""
        if ack_tick < 0:
            return None
        rate = self.config.tick_rate
        return min(ack_tick, math.floor(arrival * rate + 1e-6)) / rate

    # -- the tick ------------------------------------------------------------------------

    def _simulate(self, slots: np.ndarray, move: np.ndarray, buttons: np.ndarray) -> None:
        world, dt = self.world, 1.0 / self.config.tick_rate
        world.pos[slots], world.vel[slots] = step(
            world.pos[slots],
            world.vel[slots],
            move,
            buttons,
            dt,
            self.config.arena,
            self.config.movement,
        )

    def _respawn(self) -> None:
        for slot in self.combat.respawn_due(self.tick_number):
            if self.world.active[slot]:
                x, y = self.config.arena.spawn_point(self.joins)
                self.joins += 1
                self.world.seat(slot, x, y)
                self.inputs.keep_guesses(slot)  # a respawn is no guess to undo
                self._events.append(RespawnEvent(slot))

    def tick(self, tick: int | None = None) -> TickResult:
        """Advance the world one tick and encode the snapshot everyone shares.

        A node with several matches runs the same three steps for all of them, with one
        kernel call for every match's shots in between (:class:`server.sim.matchset.MatchSet`).
        """
        batch = self.advance(tick)
        if not batch.empty:
            judge([batch], self.history_view(), self.validator)
        return self.finish(batch)

    def advance(self, tick: int | None = None, replayed: ReleasedInputs | None = None) -> ShotBatch:
        """Inputs, movement and history for this tick; returns the shots left to judge.
        ``replayed``: this tick's inputs as a match log has them (a replay)."""
        self.previous_tick = self.tick_number
        self.tick_number = self.tick_number + 1 if tick is None else tick
        self.released = None
        if not self.seats:
            # An empty match (every seat left clears its respawn and inputs): nothing to
            # release, move or fire. A node keeps empty matches ticking for their
            # standbys and their next players, so this is its idle cost.
            self.record_history()
            return self.combat.prepare(self.server_time)
        world = self.world
        self._respawn()
        released = self._release_inputs(replayed)
        moving = np.flatnonzero(world.active & world.alive)
        if len(moving):
            self._simulate(moving, world.move[moving], world.buttons[moving])
        self._fire(released, released.depth == 0)
        # Catch-up: a player whose inputs piled up runs its surplus inputs this tick too
        # (no more of them than ticks passed with none applied: the release counted).
        depth = 1
        while (rows := released.depth == depth).any():
            slots = released.slot[rows]
            move = released.floats[rows, MOVE_X : MOVE_Y + 1]
            buttons = released.ints[rows, BUTTONS]
            alive = world.alive[slots]
            self._simulate(slots[alive], move[alive], buttons[alive])
            world.move[slots], world.buttons[slots] = move, buttons
            world.yaw[slots] = released.floats[rows, YAW]
            world.pitch[slots] = released.floats[rows, PITCH]
            self._fire(released, rows)
            depth += 1
        self.record_history()
        return self.combat.prepare(self.server_time)

    def record_history(self) -> None:
        """Keep this tick's world for lag compensation, if it is a snapshot tick.

        A shot is judged in the world its shooter was shown: the snapshots, with the
        players where the client decoded them (quantised), interpolated as the client
        does. The ticks between snapshots are never shown; rewinding through them put
        a target up to a centimetre from where it was drawn, enough to turn a grazing
        miss into a hit.
        """
        if self.config.is_snapshot_tick(self.tick_number):
            world = self.world
            self.history.append(
                self.tick_number,
                self.server_time,
                self.codec.shown_positions(world.pos),
                world.active & world.alive,
            )

    def finish(self, batch: ShotBatch, *, publish: bool = True) -> TickResult:
        """Apply the judged shots and, on a snapshot tick, encode the snapshot everyone
        shares (with the events of the ticks since the last one). ``publish=False`` (a
        replay: no client) leaves the snapshot out and keeps only its hash."""
        world = self.world
        server_time = self.server_time
        if not batch.empty or batch.events:
            self._events.extend(self.combat.conclude(batch, self.tick_number))
            if self.config.is_snapshot_tick(self.tick_number):  # its snapshot shows them
                self.history.mark_newest_alive(world.active & world.alive)
        events, self._events = self._events, []
        self.deltas.note_fights(events, server_time)
        if not self.config.is_snapshot_tick(self.tick_number):
            self.unsent_events.extend(events)
            return TickResult(self.tick_number, server_time, b"", events, dict(self.seats))
        shown, self.unsent_events = self.unsent_events + events, []
        if not publish:
            return TickResult(
                self.tick_number, server_time, b"", events, dict(self.seats), world.state_hash()
            )
        quantised = self.codec.quantise(
            world.pos, world.vel, world.yaw, world.pitch, world.health, world.alive
        )
        parties = np.array(
            [(e.shooter, e.victim) if type(e) is ShotEvent else (-1, -1) for e in shown],
            dtype=np.int64,
        ).reshape(-1, 2)
        seen = ShownWorld(
            quantised,
            world.active.copy(),
            world.pos.copy(),
            world.yaw.copy(),
            [protocol.pack_event(event) for event in shown],
            parties,
        )
        state_hash = world.state_hash()
        body = protocol.encode_snapshot_body(
            self.tick_number, server_time, self.epoch, protocol.state_digest(state_hash)
        )
        result = TickResult(
            self.tick_number, server_time, body, events, dict(self.seats), state_hash, seen
        )
        self._take_heads(result)
        return result

    def history_view(self) -> History:
        """This match's ring as the hit kernels' (single-match) history, without copying."""
        ring = self.history
        return History(
            times=ring.times[None],
            positions=ring.positions[None],
            alive=ring.alive[None],
            start=np.array([ring.start], dtype=np.int64),
            count=np.array([ring.count], dtype=np.int64),
            values_checked=True,
        )

    def snapshot_head(self, result: TickResult, slot: int) -> bytes | None:
        """One client's part of a tick's snapshot (:meth:`snapshot_parts` for one seat;
        the first call codes every seat of ``result`` in one pass)."""
        return self.snapshot_parts(result, result.seats).get(slot)

    def snapshot_parts(self, result: TickResult, slots: Iterable[int]) -> dict[int, bytes]:
        """The ``slots`` clients' parts of a tick's snapshot: each one's ack, its own
        full-precision state and the players it is sent, coded against its acknowledged
        snapshot (a frame is a part + ``result.body``, see :func:`protocol.encode_snapshot`).

        The players of the seats not coded yet are coded in one pass, when asked for: the
        edge decides which seats are sent when (it may spread a snapshot's fan-out over
        several ticks, so that no tick pays for coding all of it); each seat is coded once.
        Every seat's head is taken at the snapshot's own tick, when :meth:`finish` makes it.

        The state is the one its acknowledged input left: a living player whose last ticks
        were guesses is sent where it stood before them (they will be undone), so that the
        client's reconciliation replays its unacknowledged inputs from the right place.

        A player seated after the tick was computed has no part (a node publishes a tick
        after awaiting its standbys, and joins go on meanwhile): its first snapshot is the
        next tick's.
        """
        if result.shown is None:
            return {}
        if self._parts_of is not result:
            self._take_heads(result)
        asked = [slot for slot in slots if slot in result.seats]
        fresh = sorted(slot for slot in asked if slot not in self._parts)
        if fresh:
            self._parts.update(self._code_players(result, fresh))
        seats = self.seats
        return {
            slot: self._parts[slot]
            for slot in asked
            if (seat := seats.get(slot)) is not None and result.seats[slot] is seat
        }

    def _take_heads(self, result: TickResult) -> None:
        """Every seat's ack and own state now (at the snapshot's tick, by :meth:`finish`):
        the snapshot whose players are coded next."""
        self._parts_of, self._parts = result, {}
        self._heads = self._build_heads(result)

    def _build_heads(self, result: TickResult) -> dict[int, bytes]:
        slots = np.array(sorted(result.seats), dtype=np.int64)
        heads = protocol.snapshot_heads(*self.inputs.told(slots, self.world))
        size = protocol.SNAPSHOT_HEAD_BYTES
        return {slot: heads[i * size : (i + 1) * size] for i, slot in enumerate(slots.tolist())}

    def _code_players(self, result: TickResult, seated: list[int]) -> dict[int, bytes]:
        """The ``seated`` slots' parts of ``result``: head, players coded in one pass, the
        events each is told."""
        shown = result.shown
        assert shown is not None
        seats = result.seats
        slots = np.array(seated, dtype=np.int64)
        seat_ids = np.array([seats[s].seat_id for s in seated], dtype=np.int64)
        margins = None
        if self.deltas.fog is not None:  # (each client's round trip, spread included)
            rtt = self.probes.estimates(slots).sum(axis=1)
            interp = np.array([seats[s].interp_delay for s in seated])
            margins = self.deltas.fog.margins(rtt, interp)
        bases, blobs, selected = self.deltas.encode(
            result.tick, result.server_time, slots, seat_ids, shown.present, shown.pos,
            shown.yaw, shown.quantised, margins,
        )  # fmt: skip
        self.last_sent = (slots, selected)
        told = _events_told(shown, selected)
        heads, part = self._heads, protocol.entities_part
        return {
            slot: heads[slot] + part(base, blob) + told[i]
            for i, (slot, base, blob) in enumerate(zip(seated, bases.tolist(), blobs, strict=True))
        }


def _events_told(shown: ShownWorld, selected: np.ndarray) -> list[bytes]:
    """Each client's ``events`` part: every join, leave and respawn, and the shots whose
    shooter or victim it is sent this snapshot (itself included), so that what a client
    is told grows with the players near it, not with the match."""
    if not shown.events:
        return [protocol.events_part([])] * len(selected)
    shooter, victim = shown.parties[:, 0], shown.parties[:, 1]
    widest = int(shown.parties.max()) + 1
    if widest > selected.shape[1]:  # (a player seated and gone between two snapshots)
        selected = np.pad(selected, ((0, 0), (0, widest - selected.shape[1])))
    everyone = shooter < 0
    tells = everyone[None, :] | selected[:, np.maximum(shooter, 0)]
    tells |= (victim >= 0)[None, :] & selected[:, np.maximum(victim, 0)]
    packed = shown.events
    rows, columns = np.nonzero(tells)
    bounds = np.searchsorted(rows, np.arange(len(tells) + 1)).tolist()
    told = columns.tolist()
    parts: dict[tuple[int, ...], bytes] = {}  # clients told the same events share a part
    out = []
    for c in range(len(tells)):
        which = tuple(told[bounds[c] : bounds[c + 1]])
        part = parts.get(which)
        if part is None:
            part = parts[which] = protocol.events_part([packed[i] for i in which])
        out.append(part)
    return out
