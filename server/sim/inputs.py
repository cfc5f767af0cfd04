"""Untrusted player inputs: sanitising, the jitter buffers and the RTT windows (sans-I/O).

The server never takes a position, velocity or health from a client. What a client may
say is what it pressed; this module decides which of those claims are usable:

* :func:`sanitize` clamps a move vector longer than 1 back onto the unit circle and
  rejects view angles outside their range (the codec has already rejected NaN and wrong
  types); a queued input keeps its move and angles to the protocol's whole steps
  (:func:`~shared.protocol.inputs.quantize_move`, :func:`~shared.protocol.inputs.quantize_angle`).
* :class:`InputQueues` holds every seat's jitter buffer: it orders a player's inputs by
  sequence number and releases one per tick, so network jitter does not turn into jerky
  movement. When a player's inputs stop arriving the last one repeats, for at most
  ``max_guesses`` ticks (the usual server behaviour, it keeps a running player running);
  but a repeat is only a guess: the tick that next releases a real input first undoes the
  guesses (the match puts the player back where its last real input left it), so every
  input a client sent moves its player exactly once, from where the client predicted it,
  and a shot fires from where its shooter was. When inputs pile up beyond ``max_depth`` (a
  burst after a stall), the surplus is applied in the same tick so the player catches up
  instead of lagging further behind; but only as far as time allows. Each seat earns one
  input per tick that passes (a stall's skipped ticks included) and banks what it did not
  use (the ticks it was starved, whose guesses are undone), at most ``max_catch_up``: so
  a seat never applies more inputs than ticks have passed for it, and a resumed seat banks
  nothing of the time its player was away (:meth:`InputQueues.resume`). What time does
  not allow is dropped, the oldest first (the newest are applied), so that a buffer never
  holds more than ``max_depth - 1`` inputs after a tick: held instead, a backlog would
  wait behind every input its client sends from then on, one tick at a time, and add its
  length to the seat's input delay for the rest of the match (after a 3 s node stall, 45
  ticks for every player). A client sending inputs faster than the tick rate has its surplus
  dropped the same way instead of simulated. A buffer holds at most ``capacity`` inputs
  between two ticks.

Every seat's state is a row of arrays and a tick's inputs go through three serial numba
kernels: one sanitises and queues them, one releases them, one sets them in the world. At
300 players a Python object per buffer, deque and estimator cost more than the rest of the
input path together; and on a node with few players, where a tick's cost is mostly the
memory it touches after the sleep between ticks, each NumPy call the kernels replaced
cost several microseconds. The kernels copy rows element by element rather than by slice
assignment: numba's array expressions took two thirds of their cold compile (2.6 s of CPU
against 0.9 s).
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

import numba
import numpy as np
from numba.extending import register_jitable

from server.sim.world import World
from shared.protocol import InputMessage
from shared.protocol.inputs import (
    ACK_TICK,
    BUTTONS,
    FLOAT_COLUMNS,
    INT_COLUMNS,
    MOVE_X,
    MOVE_Y,
    PITCH,
    SEQ,
    TICK,
    VIEW_TIME,
    YAW,
    quantize_angle,
    quantize_move,
)

__all__ = [
    "FIRST_SEQ_MAX",
    "InputQueues",
    "InputVerdict",
    "ReleasedInputs",
    "SeatInputs",
    "sanitize",
    "to_microseconds",
    "warm_up",
]

HALF_PI = math.pi / 2.0
#: The highest ``seq`` a seat's first input may have (a bot that took a new seat goes on
#: numbering from where it was): far below the codec's 2**31 - 1, so no client can start a
#: seat so high that it runs out of numbers.
FIRST_SEQ_MAX = 2**24


class InputVerdict(enum.Enum):
    ACCEPTED = "accepted"
    CLAMPED = "clamped"
    STALE = "stale"  # a sequence number already received: a duplicate or a replay
    TOO_FAR_AHEAD = "too_far_ahead"
    BAD_ANGLE = "bad_angle"
    OVERFLOW = "overflow"  # the player's buffer is full (thousands of inputs a second)

    @property
    def usable(self) -> bool:
        return self in (InputVerdict.ACCEPTED, InputVerdict.CLAMPED)


# Each seat's row of ``InputQueues._state``; _GUESSED: ticks guessed since its last input;
# _CREDIT: ticks banked for catch-up (passed with no input applied), at most max_catch_up;
# _RESUMED: 1 from a resume until the seat's first input back is applied (nothing banked);
# _SURPLUS: ticks left during which the seat neither spends nor banks credit, since it last
# queued more inputs than time allowed (some dropped).
_LAST_RECEIVED, _ACKED, _STARVED, _HEAD, _COUNT, _GUESSED, _CREDIT, _RESUMED, _SURPLUS = range(9)

#: What a tick did with each seat, beside the inputs it released (``ReleasedInputs.guess``).
NO_GUESS, FIRST_GUESS, GUESS, UNDO_GUESSES = range(4)
# Each queued input: the decoded columns (shared.protocol.inputs), plus its arrival.
ARRIVAL = len(FLOAT_COLUMNS)

#: The kernels' verdict codes: an index into this tuple.
VERDICTS = tuple(InputVerdict)
_ACCEPTED, _CLAMPED, _STALE, _TOO_FAR_AHEAD, _BAD_ANGLE, _OVERFLOW = range(len(VERDICTS))


#: How far past 1 a move's length may lie from rounding alone (a few float64 ulps).
MOVE_ROUNDING = 1e-12


@register_jitable
def sanitize(
    move_x: float, move_y: float, yaw: float, pitch: float
) -> tuple[bool, bool, float, float]:
    """Clamp what can be clamped, reject what cannot; never trust the client. For one
    input: ``(bad_angle, clamped, move_x, move_y)``, the move clamped onto the unit circle
    (each component divided by the vector's length) when ``clamped``. A move within
    rounding of the circle is left alone, so that a clamped move offered again (a standby
    taking over resends) is kept bit for bit. (NaN angles are bad: no comparison holds.)"""
    bad_angle = not (-math.pi <= yaw <= math.pi and -HALF_PI <= pitch <= HALF_PI)
    length = math.sqrt(move_x * move_x + move_y * move_y)
    clamped = length > 1.0 + MOVE_ROUNDING and not bad_angle
    if clamped:
        return bad_angle, clamped, move_x / length, move_y / length
    return bad_angle, clamped, move_x, move_y


@numba.njit(cache=True, nogil=True)
def _offer(
    state: np.ndarray,
    pending_ints: np.ndarray,
    pending_floats: np.ndarray,
    future_window: int,
    slots: np.ndarray,
    ints: np.ndarray,
    floats: np.ndarray,
    arrivals: np.ndarray,
    verdicts: np.ndarray,
) -> None:
    """Queue each row's input (in row order), sanitised; ``verdicts[i]`` is the row's
    verdict code. ``state`` columns: last received, acked, starved, head, count, guessed,
    credit."""
    capacity = pending_ints.shape[1]
    for i in range(len(slots)):
        s = slots[i]
        bad_angle, clamped, move_x, move_y = sanitize(
            floats[i, MOVE_X], floats[i, MOVE_Y], floats[i, YAW], floats[i, PITCH]
        )
        if bad_angle:
            verdicts[i] = _BAD_ANGLE
            continue
        seq, last = ints[i, SEQ], state[s, _LAST_RECEIVED]
        if seq <= last:
            verdicts[i] = _STALE
        elif seq > (last + future_window if last >= 0 else FIRST_SEQ_MAX):
            verdicts[i] = _TOO_FAR_AHEAD
        elif state[s, _COUNT] == capacity:
            verdicts[i] = _OVERFLOW
        else:
            state[s, _LAST_RECEIVED] = seq
            at = (state[s, _HEAD] + state[s, _COUNT]) % capacity
            state[s, _COUNT] += 1
            for c in range(ints.shape[1]):
                pending_ints[s, at, c] = ints[i, c]
            for c in range(floats.shape[1]):
                pending_floats[s, at, c] = floats[i, c]
            pending_floats[s, at, MOVE_X] = quantize_move(move_x)
            pending_floats[s, at, MOVE_Y] = quantize_move(move_y)
            pending_floats[s, at, YAW] = quantize_angle(floats[i, YAW], math.pi)
            pending_floats[s, at, PITCH] = quantize_angle(floats[i, PITCH], HALF_PI)
            pending_floats[s, at, ARRIVAL] = arrivals[i]
            verdicts[i] = _CLAMPED if clamped else _ACCEPTED


@numba.njit(cache=True, nogil=True)
def _release(
    state: np.ndarray,
    pending_ints: np.ndarray,
    pending_floats: np.ndarray,
    max_depth: int,
    max_catch_up: int,
    surplus_memory: int,
    elapsed: int,
    slots: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Release this tick's inputs of each seat in ``slots`` (in that order): one, or none
    (the last one repeats, a guess), or all but ``max_depth - 1`` after a burst, as far as
    the ``elapsed`` ticks and the seat's banked credit allow, the oldest of those dropped.
    A seat that had inputs dropped so in the last ``surplus_memory`` ticks neither spends
    nor banks credit: it sends more than one input a tick (a speed hack always has a
    surplus queued), and credit it banked in a pause of its own and spent on its surplus
    would be speed.
    Returns each released input's slot, depth (0: the tick's own input, 1+: catch-up),
    ints, floats; and per seat of ``slots`` its guess code, the ticks guessed in a row and
    the inputs it had no time for (dropped: the oldest it held)."""
    capacity = pending_ints.shape[1]
    taken = np.zeros(len(slots), np.int64)
    guess = np.zeros(len(slots), np.int64)
    guessed = np.zeros(len(slots), np.int64)
    dropped = np.zeros(len(slots), np.int64)
    for k in range(len(slots)):
        s = slots[k]
        count = state[s, _COUNT]
        state[s, _SURPLUS] = max(state[s, _SURPLUS] - elapsed, 0)
        allowed = state[s, _CREDIT] + elapsed  # >= 1: one input per tick is always due
        if count == 0:
            state[s, _STARVED] += 1  # starved: the last input repeats, as a guess
            guess[k] = FIRST_GUESS if state[s, _GUESSED] == 0 else GUESS
            state[s, _GUESSED] += 1
            guessed[k] = state[s, _GUESSED]
        else:
            wanted = 1 if count == 1 else max(1, count - max_depth + 1)
            taken[k] = min(wanted, allowed)
            # What time does not allow, the oldest: never applied (the inputs released
            # after them acknowledge past them, and their client's reconciliation replays
            # what the server did).
            dropped[k] = wanted - taken[k]
            if dropped[k] > 0:
                state[s, _SURPLUS] = surplus_memory
            state[s, _HEAD] = (state[s, _HEAD] + dropped[k]) % capacity
            state[s, _COUNT] -= dropped[k]
            if state[s, _GUESSED] > 0:
                guess[k] = UNDO_GUESSES
                state[s, _GUESSED] = 0
        if state[s, _RESUMED] == 0 and state[s, _SURPLUS] == 0:
            state[s, _CREDIT] = min(allowed - taken[k], max_catch_up)
        else:  # a surplus lately (its drop spent all), or no input applied since a resume
            state[s, _CREDIT] = 0
        if taken[k] > 0:
            state[s, _RESUMED] = 0
    total = 0
    for k in range(len(slots)):
        total += taken[k]
    out_slot = np.empty(total, np.int64)
    out_depth = np.empty(total, np.int64)
    out_ints = np.empty((total, pending_ints.shape[2]), np.int64)
    out_floats = np.empty((total, pending_floats.shape[2]), np.float64)
    row = 0
    for k in range(len(slots)):
        s = slots[k]
        for depth in range(taken[k]):
            head = state[s, _HEAD]
            out_slot[row], out_depth[row] = s, depth
            for c in range(pending_ints.shape[2]):
                out_ints[row, c] = pending_ints[s, head, c]
            for c in range(pending_floats.shape[2]):
                out_floats[row, c] = pending_floats[s, head, c]
            state[s, _HEAD] = (head + 1) % capacity
            state[s, _COUNT] -= 1
            state[s, _ACKED] = out_ints[row, SEQ]  # acknowledged: applied to the world
            row += 1
    return out_slot, out_depth, out_ints, out_floats, guess, guessed, dropped


@numba.njit(cache=True, nogil=True)
def _apply(
    seated: np.ndarray,
    slot: np.ndarray,
    depth: np.ndarray,
    ints: np.ndarray,
    floats: np.ndarray,
    guess: np.ndarray,
    guessed: np.ndarray,
    max_guesses: int,
    before_guesses: np.ndarray,
    alive: np.ndarray,
    pos: np.ndarray,
    vel: np.ndarray,
    move: np.ndarray,
    yaw: np.ndarray,
    pitch: np.ndarray,
    buttons: np.ndarray,
) -> tuple[int, int]:
    """:meth:`ReleasedInputs.apply`'s work, in one pass over the seats and one over the
    released rows; returns (seats whose guesses were undone, seats given their own input)."""
    undone = 0
    for k in range(len(seated)):
        s = seated[k]
        if guess[k] == FIRST_GUESS:
            for c in range(3):
                before_guesses[s, c] = pos[s, c]
                before_guesses[s, 3 + c] = vel[s, c]
        elif guess[k] == UNDO_GUESSES and alive[s]:  # (killed meanwhile: stays where it fell)
            for c in range(3):
                pos[s, c] = before_guesses[s, c]
                vel[s, c] = before_guesses[s, 3 + c]
            undone += 1
        if guessed[k] > max_guesses:
            move[s, 0] = move[s, 1] = 0.0
            buttons[s] = 0
    own = 0
    for row in range(len(slot)):
        if depth[row] == 0:
            s = slot[row]
            move[s, 0], move[s, 1] = floats[row, MOVE_X], floats[row, MOVE_Y]
            yaw[s], pitch[s] = floats[row, YAW], floats[row, PITCH]
            buttons[s] = ints[row, BUTTONS]
            own += 1
    return undone, own


@dataclass(frozen=True, slots=True)
class ReleasedInputs:
    """A tick's released inputs, in slot order and each seat's in sequence order.
    ``ints``: seq, tick, ack_tick, buttons; ``floats``: move x, move y, yaw, pitch,
    view_time, arrival (server time). ``guess`` and ``guessed`` are per seat released
    for (in the order asked): :data:`NO_GUESS`, :data:`FIRST_GUESS` (starved: save the
    player's state before this tick moves it), :data:`GUESS` (starved again),
    :data:`UNDO_GUESSES` (inputs again: restore the saved state first); how many ticks in
    a row it has been guessed; and how many inputs it had no time to catch up on (dropped
    from its buffer)."""

    slot: np.ndarray
    depth: np.ndarray  # 0: the seat's input for this tick; 1, 2...: catch-up after a burst
    ints: np.ndarray
    floats: np.ndarray
    guess: np.ndarray
    guessed: np.ndarray
    dropped: np.ndarray

    def apply(
        self,
        seated: np.ndarray,
        max_guesses: int,
        before_guesses: np.ndarray,
        world: World,
    ) -> tuple[int, int]:
        """Set each seat's input for this tick in the world (``seated``: the seats it was
        released for). A starved seat's guesses start from a state saved in
        ``before_guesses``, a seat whose inputs are back goes back to it before they move
        it (unless killed meanwhile), and one guessed more than ``max_guesses`` ticks is
        held still. Returns (seats whose guesses were undone, seats given their own input
        for this tick)."""
        return _apply(
            seated, self.slot, self.depth, self.ints, self.floats, self.guess, self.guessed,
            max_guesses, before_guesses, world.alive, world.pos, world.vel, world.move,
            world.yaw, world.pitch, world.buttons,
        )  # fmt: skip


class InputQueues:
    """Every seat's jitter buffer and RTT window, as arrays indexed by slot."""

    def __init__(
        self,
        slots: int,
        max_depth: int = 4,
        future_window: int = 120,  # two seconds of inputs at 60 Hz; further ahead is a lie
        capacity: int = 64,  # a second of inputs at 60 Hz, after a stall
        max_catch_up: int = 8,  # ticks of unused time a seat may bank for catch-up
        surplus_memory: int = 60,  # ticks a seat that had inputs dropped banks no credit
    ) -> None:
        if max_catch_up < 0 or surplus_memory < 0:
            raise ValueError("max_catch_up and surplus_memory must not be negative")
        self.max_depth = max_depth
        self.future_window = future_window
        self.max_catch_up = max_catch_up
        self.surplus_memory = surplus_memory
        # Per slot: last received seq, acked seq, starved ticks, ring head, ring count,
        # ticks guessed in a row, ticks of catch-up credit, resumed, surplus ticks left.
        self._state = np.zeros((slots, 9), dtype=np.int64)
        self._pending_ints = np.zeros((slots, capacity, len(INT_COLUMNS)), dtype=np.int64)
        self._pending_floats = np.zeros((slots, capacity, ARRIVAL + 1), dtype=np.float64)
        #: Per slot, position and velocity before its first guessed tick (the match's).
        self.before_guesses = np.zeros((slots, 6), dtype=np.float64)
        for slot in range(slots):
            self.reset(slot)

    @property
    def acked(self) -> np.ndarray:
        """Per slot, the highest sequence number applied to the world (-1 before the
        first); read-only."""
        view = self._state[:, _ACKED]
        view.flags.writeable = False
        return view

    def told(self, slots: np.ndarray, world: World) -> tuple[np.ndarray, np.ndarray]:
        """What each of ``slots``' snapshot head tells its client: the highest input
        applied, and the position and velocity it left ``(N, 6)``; for a living player
        whose last ticks were guesses, where it stood before them (they will be undone,
        and its client replays its unacknowledged inputs from there). One kernel pass."""
        acks = np.empty(len(slots), dtype=np.int64)
        states = np.empty((len(slots), 6))
        _told(
            slots, self._state, self.before_guesses, world.pos, world.vel, world.alive,
            acks, states,
        )  # fmt: skip
        return acks, states

    def reset(self, slot: int) -> None:
        """A new player in ``slot``: nothing received or applied yet."""
        self._state[slot] = (-1, -1, 0, 0, 0, 0, 0, 0, 0)  # (_LAST_RECEIVED ... _SURPLUS)

    def restore(self, slot: int, acked: int) -> None:
        """Continue a seat another node served: inputs up to ``acked`` were applied there;
        what is queued here is dropped (its clients resend what was not applied)."""
        self._state[slot, [_LAST_RECEIVED, _ACKED, _HEAD, _COUNT]] = (acked, acked, 0, 0)

    def guesses(self, slot: int) -> tuple[int, list[float]]:
        """Ticks guessed in a row and the state they started from, for a standby."""
        return int(self._state[slot, _GUESSED]), self.before_guesses[slot].tolist()

    def restore_guesses(self, slot: int, guessed: int, before: list[float]) -> None:
        """Hold the guesses another node made, so that their undo here matches its own."""
        self._state[slot, _GUESSED] = guessed
        self.before_guesses[slot] = before

    def credit(self, slot: int) -> int:
        """Ticks of catch-up the seat has banked (time it had and applied no input in)."""
        return int(self._state[slot, _CREDIT])

    def surplus(self, slot: int) -> int:
        """Ticks left during which the seat banks no credit, since it last had inputs
        dropped for lack of time (0: none lately)."""
        return int(self._state[slot, _SURPLUS])

    def restore_credit(self, slot: int, credit: int, surplus: int) -> None:
        """Hold the credit and surplus ticks another node counted, so that catch-up here
        matches its own."""
        self._state[slot, _CREDIT] = min(max(credit, 0), self.max_catch_up)
        self._state[slot, _SURPLUS] = min(max(surplus, 0), self.surplus_memory)

    def resume(self, slot: int) -> None:
        """The seat's player is back on a new connection (a resume, on this node or after
        a failover): nothing is banked from its last applied input until its first input
        back is applied, neither the time it was away nor the round trip of its comeback.
        Catch-up is for inputs delayed on a live connection (a lost packet's
        retransmission); a seat that banked that time would spend it on its first inputs
        back and outrun walking speed over the second after the resume, a profit from
        every reconnect. Once its first input is applied it banks as any seat."""
        self._state[slot, [_CREDIT, _RESUMED]] = (0, 1)

    def keep_guesses(self, slot: int) -> None:
        """The player was moved by the game (a respawn): its guessed ticks stand, and the
        time they took is spent."""
        self._state[slot, [_GUESSED, _CREDIT]] = 0

    def offer(
        self,
        slots: np.ndarray,
        ints: np.ndarray,
        floats: np.ndarray,
        arrivals: np.ndarray,
    ) -> np.ndarray:
        """Queue inputs, rows in arrival order: ``ints`` seq, tick, ack_tick, buttons;
        ``floats`` move x, move y, yaw, pitch, view_time; each with the server time it
        arrived at (lag compensation judges a shot by when it arrived, not by when the
        buffer released it). Returns each row's verdict code (an index into
        :data:`VERDICTS`)."""
        verdicts = np.empty(len(slots), dtype=np.int64)
        floats = np.array(floats, dtype=np.float64, order="C")  # (a copy: rounded below)
        floats[:, VIEW_TIME] = to_microseconds(floats[:, VIEW_TIME])
        _offer(
            self._state,
            self._pending_ints,
            self._pending_floats,
            self.future_window,
            np.ascontiguousarray(slots, dtype=np.int64),
            np.ascontiguousarray(ints, dtype=np.int64),
            floats,
            to_microseconds(np.asarray(arrivals, dtype=np.float64)),
            verdicts,
        )
        return verdicts

    def release(self, slots: np.ndarray, elapsed: int = 1) -> ReleasedInputs:
        """This tick's inputs of the seats in ``slots`` (ascending: replicas must agree);
        ``elapsed``: the ticks since the last release (more than 1 after skipped ticks)."""
        if elapsed < 1:
            raise ValueError(f"a release follows at least one tick, not {elapsed}")
        return ReleasedInputs(
            *_release(
                self._state,
                self._pending_ints,
                self._pending_floats,
                self.max_depth,
                self.max_catch_up,
                self.surplus_memory,
                elapsed,
                np.ascontiguousarray(slots, dtype=np.int64),
            )
        )

    def seat(self, slot: int) -> SeatInputs:
        return SeatInputs(self, slot)

    # -- one seat, for the edge and the tests -------------------------------------------------

    def starved_ticks(self, slot: int) -> int:
        return int(self._state[slot, _STARVED])

    def pending(self, slot: int) -> list[tuple[InputMessage, float]]:
        """The seat's queued inputs, oldest first, each with its arrival time."""
        head, count = int(self._state[slot, _HEAD]), int(self._state[slot, _COUNT])
        capacity = self._pending_ints.shape[1]
        held = []
        for k in range(count):
            ints = self._pending_ints[slot, (head + k) % capacity].tolist()
            floats = self._pending_floats[slot, (head + k) % capacity].tolist()
            message = InputMessage(
                seq=ints[SEQ],
                tick=ints[TICK],
                move=(floats[MOVE_X], floats[MOVE_Y]),
                yaw=floats[YAW],
                pitch=floats[PITCH],
                buttons=ints[BUTTONS],
                view_time=floats[VIEW_TIME],
                ack_tick=ints[ACK_TICK],
            )
            held.append((message, floats[ARRIVAL]))
        return held


@numba.njit(cache=True)
def _told(
    slots: np.ndarray,
    state: np.ndarray,
    before_guesses: np.ndarray,
    pos: np.ndarray,
    vel: np.ndarray,
    alive: np.ndarray,
    acks: np.ndarray,
    states: np.ndarray,
) -> None:
    """:meth:`InputQueues.told`, seat by seat."""
    for i in range(len(slots)):
        s = slots[i]
        acks[i] = state[s, _ACKED]
        if state[s, _GUESSED] > 0 and alive[s]:
            for c in range(6):
                states[i, c] = before_guesses[s, c]
        else:
            for c in range(3):
                states[i, c] = pos[s, c]
                states[i, 3 + c] = vel[s, c]


#: Times beyond this many seconds are left as they are (far outside any window: refused).
_ROUNDED_UP_TO_S = 2.0**32


def to_microseconds(seconds: np.ndarray) -> np.ndarray:
    """Times as the queues keep them, to the whole microsecond: finer means nothing to a
    tick of milliseconds, and a whole microsecond is two bytes in a match log
    (:mod:`server.record.columns`) where a full double's noisy low bits took six."""
    return np.where(np.abs(seconds) < _ROUNDED_UP_TO_S, np.rint(seconds * 1e6) / 1e6, seconds)


def warm_up() -> None:
    """Compile (or load from numba's cache) the queue kernels, before the first tick."""
    queues = InputQueues(1)
    queues.offer(
        np.zeros(1, np.int64),
        np.zeros((1, 4), np.int64),
        np.zeros((1, 5)),
        np.zeros(1),
    )
    seated = np.zeros(1, np.int64)
    queues.release(seated).apply(seated, 1, queues.before_guesses, World(1))
    queues.told(seated, World(1))


@dataclass(frozen=True, slots=True)
class SeatInputs:
    """One seat's view of its match's :class:`InputQueues`."""

    queues: InputQueues
    slot: int

    @property
    def acked(self) -> int:
        """Highest sequence number applied to the world (-1 before the first)."""
        return int(self.queues.acked[self.slot])

    @property
    def starved_ticks(self) -> int:
        return self.queues.starved_ticks(self.slot)

    @property
    def pending(self) -> list[tuple[InputMessage, float]]:
        return self.queues.pending(self.slot)

    def restore(self, acked: int) -> None:
        self.queues.restore(self.slot, acked)

    def resume(self) -> None:
        self.queues.resume(self.slot)
