"""Hostile clients as code: one coroutine per attack class of the threat model
(docs/protocol.md, "Threat model").

Each attack takes a node's ``ws://`` URL (loopback), a duration and a size, plays its
attack with hand-made WebSocket connections (:class:`launch.wire.Wire`: its own upgrade,
frames written in whatever runs of bytes the attack likes), closes everything it opened,
and returns what it achieved as a JSON-ready dict, measured from what the node sent back:
the close codes and errors it drew, the speed of its own player (the snapshots' ``you``),
the shots the server judged for it, the rewind the server granted, the seats it still
holds. ``tests/integration/test_hostile.py`` asserts the outcomes; ``bench/adversary.py``
runs each class beside 20 honest bots.

Nothing here is clever about evasion: these are the attacks an independent client writer
measured against the node, made repeatable. Every attack is bounded in
connections, frames and time.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import math
import random
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any
from urllib.parse import urlsplit

import msgpack
import numpy as np

from launch.fuzzing import FUZZ_KINDS, fuzz_frame
from launch.wire import (
    DEFAULT_TICK_RATE,
    OPEN_TIMEOUT_S,
    HandshakeRefused,
    Wire,
    connect,
    first_of,
    node_up,
    open_tcp,
)
from shared import eventloop, protocol
from shared.arena_map import ArenaMap, default_map
from shared.movement import BUTTON_FIRE, MovementParams, step
from shared.weapons import RIFLE
from shared.wsframe import OP_BINARY, OP_TEXT, frame

__all__ = [
    "ATTACKS",
    "DOCUMENTED_CLOSES",
    "DOCUMENTED_ERRORS",
    "FUZZ_KINDS",
    "LIES",
    "compact_honest",
    "fire_rate_hack",
    "first_frame",
    "fuzz",
    "input_flood",
    "rewind_abuse",
    "run_attack",
    "seat_squat",
    "slowloris",
    "speed_hack",
    "speed_over_windows",
    "window_speeds",
]

#: Every error code of docs/protocol.md ("error"): anything else a node sends is a finding.
DOCUMENTED_ERRORS = frozenset(
    {
        "malformed_frame", "frame_too_large", "unknown_type", "invalid_field",
        "version_mismatch", "join_first", "join_timeout", "server_full", "invalid_token",
        "seat_in_use", "not_primary", "invalid_reservation", "shutdown", "rate_limited",
        "reservation_required", "address_limit", "idle_kick", "held_off",
    }
)  # fmt: skip
#: The close codes a hostile client may be answered with (docs/protocol.md, "Close codes");
#: 1007 is a text frame that is not UTF-8 (RFC 6455 §8.1).
DOCUMENTED_CLOSES = frozenset({1000, 1001, 1002, 1007, 1008, 1009, 1013})

ANSWER_WAIT_S = 2.0  # how long a frame may take to draw its error or close
CLOSE_WAIT_S = 3.0  # how long a connection given a fatal frame may take to be closed
WINDOW_S = 1.0  # speed is judged over every window of server time this long

Attack = Callable[..., Coroutine[Any, Any, dict[str, Any]]]


def _counts(counter: collections.Counter[Any]) -> dict[str, int]:
    return {str(key): count for key, count in sorted(counter.items(), key=lambda kv: str(kv[0]))}


# -- a seated attacker that plays every tick -------------------------------------------------


async def _play(
    url: str,
    seconds: float,
    name: str,
    each_tick: Callable[[Wire, int], None],
    *,
    interp_delay: float = 0.1,
    on_seat: Callable[[Wire], None] | None = None,
    ping_every_s: float = 0.5,
    resume: bool = False,
    reconnect_after: float = 0.0,
) -> dict[str, Any]:
    """Seat a player and call ``each_tick(wire, tick)`` once a tick until ``seconds`` are
    over, taking a new seat whenever the node closes this one (a persistent attacker), or
    with ``resume`` coming back to the same seat with its token (keeping its position), as
    fast as it can: a resume refused for a while (``held_off``) is tried again 0.2 s later
    all the same. ``reconnect_after``: the pause before coming back after a close (the
    time a lag switch hopes to have banked). Returns the connections' outcomes: close
    codes, error codes, refusals, seats taken and resumed."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    closes: collections.Counter[int | None] = collections.Counter()
    errors: collections.Counter[str] = collections.Counter()
    refused: collections.Counter[str] = collections.Counter()
    first_close: int | None = None
    lifetimes: list[float] = []
    seats = resumes = 0
    token: str | None = None
    while loop.time() < deadline - 0.1:
        try:
            async with connect(url) as wire:
                if not await wire.join(name, interp_delay, token=token if resume else None):
                    code = wire.errors[-1] if wire.errors else "no_answer"
                    refused[code] += 1
                    if code == "invalid_token":
                        token = None  # the seat is gone: a new one
                    await asyncio.sleep(0.2)
                    continue
                seats += not wire.resuming
                resumes += wire.resuming
                if on_seat is not None:
                    on_seat(wire)
                seated_at, next_ping, tick = loop.time(), 0.0, 0
                while not wire.closed.is_set() and (now := loop.time()) < deadline:
                    if now >= next_ping:
                        wire.ping()
                        next_ping = now + (0.1 if len(wire.rtts) < 3 else ping_every_s)
                    each_tick(wire, tick)
                    tick += 1
                    await wire.drain()
                    # Paced by the node's tick rate on this client's clock (drift-free).
                    await asyncio.sleep(max(0.0, seated_at + tick / wire.tick_rate - loop.time()))
                if wire.closed.is_set():
                    lifetimes.append(round(loop.time() - seated_at, 3))
                    if first_close is None:
                        first_close = wire.close_code
                closes[wire.close_code if wire.closed.is_set() else None] += 1
                errors.update(wire.errors)
                token = wire.token
            if reconnect_after > 0:
                await asyncio.sleep(reconnect_after)
        except (OSError, HandshakeRefused) as error:
            refused[type(error).__name__] += 1
            await asyncio.sleep(0.2)
    return {
        "seats": seats,
        "resumes": resumes,
        "closed_with": first_close,
        "closes": _counts(closes),  # "None": still open when the attack ended
        "seconds_to_close": lifetimes,
        "errors": _counts(errors),
        "refused": _counts(refused),
    }


# -- input flood -----------------------------------------------------------------------------

#: Inputs a reconnecting flooder writes at a time (about 11 KiB: a write the socket takes).
FLOOD_BLOCK = 100


async def input_flood(
    url: str, seconds: float = 6.0, per_tick: int = 200, reconnecting: bool = False
) -> dict[str, Any]:
    """One client writes ``per_tick`` inputs in one write every tick (such a client was
    measured at 11-14.5k inputs/s): the node must drop the surplus over budget and close
    it with 1008.
    ``reconnecting``: it writes inputs as fast as its socket takes them instead (a client
    written from the docs sent 120k/s), and takes a new seat at once whenever it is closed
    or refused: what refusing costs the node is then reading, splitting and handshakes."""
    if reconnecting:
        return await _reconnecting_flood(url, seconds)
    sent = 0

    def flood(wire: Wire, tick: int) -> None:
        nonlocal sent
        first = tick * per_tick
        wire.write(b"".join(wire.input_frame(first + i, move=(1.0, 0.0)) for i in range(per_tick)))
        sent += per_tick

    outcome = await _play(url, seconds, "flood", flood)
    return {"attack": "input_flood", "per_tick": per_tick, "sent": sent, **outcome}


async def _reconnecting_flood(url: str, seconds: float) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    started = loop.time()
    deadline = started + seconds
    closes: collections.Counter[int | str | None] = collections.Counter()
    errors: collections.Counter[str] = collections.Counter()
    refused: collections.Counter[str] = collections.Counter()
    lifetimes: list[float] = []
    sent = seats = connections = 0
    while loop.time() < deadline - 0.1:
        connections += 1
        try:
            async with connect(url) as wire:
                within = max(0.1, min(OPEN_TIMEOUT_S, deadline - loop.time()))
                if not await wire.join("flood", within=within):
                    refused[wire.errors[-1] if wire.errors else "no_answer"] += 1
                    continue  # (at once: as fast as it can)
                seats += 1
                block = b"".join(
                    wire.input_frame(seq, move=(1.0, 0.0)) for seq in range(1, FLOOD_BLOCK + 1)
                )  # (the same inputs again and again: the node drops them unread anyway)
                seated_at = loop.time()
                while not wire.closed.is_set() and loop.time() < deadline:
                    wire.write(block)
                    sent += FLOOD_BLOCK
                    await wire.drain()
                    # (a drain that need not wait does not yield: the reader must see a
                    # close at once, or writes to a lost socket would be counted as sent)
                    await asyncio.sleep(0)
                if wire.closed.is_set():
                    lifetimes.append(round(loop.time() - seated_at, 3))
                    # (a close frame can be lost: the node closes a socket it left unread,
                    # so its kernel resets it, and a reset may overtake the frame)
                    closes["dropped" if wire.close_code is None else wire.close_code] += 1
                else:
                    closes[None] += 1
                errors.update(wire.errors)
        except (OSError, HandshakeRefused) as error:
            refused[type(error).__name__] += 1
            await asyncio.sleep(0.05)
    elapsed = loop.time() - started
    return {
        "attack": "input_flood",
        "reconnecting": True,
        "sent": sent,
        "inputs_per_s": round(sent / elapsed),
        "connections": connections,
        "seats": seats,
        "closed_with": next((code for code in closes if isinstance(code, int)), None),
        # "None": still open when the attack ended; "dropped": closed without a close code
        "closes": _counts(closes),
        "seconds_to_close": lifetimes,
        "errors": _counts(errors),
        "refused": _counts(refused),
    }


# -- the compact honest client -----------------------------------------------------------------

#: A keyboard's four directions, one a second: every component a whole number.
_KEYS = ((1, 0), (0, 1), (-1, 0), (0, -1))


def _whole(value: float) -> float | int:
    """A number as a compact client writes it: an integer when it is one (msgpack then
    takes its shortest encoding), else the float."""
    return int(value) if float(value).is_integer() and abs(value) <= 2**53 else value


async def compact_honest(url: str, seconds: float = 60.0) -> dict[str, Any]:
    """An honest client written from the docs alone that writes every whole number as a
    msgpack integer (its inputs are 73-90 bytes): 60 inputs a second, walking a keyboard's
    directions, and its pings (10 a second until its clock is synced, 2 after) and probe
    echoes. The protocol takes an integer wherever it documents a number, so it must play
    the whole run on one seat, with no error and no close."""
    sizes: list[int] = []

    def play(wire: Wire, tick: int) -> None:
        now = wire.server_now()
        granted = wire.welcome.interp_delay if wire.welcome is not None else 0.1
        fields = {
            "type": "input",
            "seq": tick + 1,
            "tick": max(0, int(now * wire.tick_rate)),
            "ack_tick": wire.latest_tick,
            "move": [_whole(v) for v in _KEYS[tick // wire.tick_rate % len(_KEYS)]],
            "yaw": _whole(0.0),
            "pitch": _whole(0.0),
            "buttons": 0,
            "view_time": _whole(max(0.0, now - granted)),
        }
        payload = msgpack.packb(fields)
        sizes.append(len(payload))
        wire.write(frame(OP_BINARY, payload, masked=True))

    outcome = await _play(url, seconds, "compact", play)
    return {
        "attack": "compact_honest",
        "inputs": len(sizes),
        "input_bytes": [min(sizes, default=0), max(sizes, default=0)],
        "stayed_seated": outcome["seats"] == 1 and outcome["closes"] == {"None": 1},
        **outcome,
    }


# -- speed hack ------------------------------------------------------------------------------

_DIRECTIONS = np.array([(math.cos(a), math.sin(a)) for a in np.arange(8) * math.pi / 4])


def _open_direction(arena: ArenaMap, x: float, y: float, tick_rate: int) -> tuple[float, float]:
    """The direction (of eight) a player at (x, y) can run furthest in for a second, by
    the movement model itself: so the speed measured is the model's, not a wall's."""
    n = len(_DIRECTIONS)
    pos = np.tile(np.array([x, y, 0.0]), (n, 1))
    vel = np.zeros((n, 3))
    for _ in range(tick_rate):
        pos, vel = step(pos, vel, _DIRECTIONS, np.zeros(n, np.int64), 1.0 / tick_rate, arena)
    run = np.hypot(pos[:, 0] - x, pos[:, 1] - y)
    best = _DIRECTIONS[int(np.argmax(run))]
    return float(best[0]), float(best[1])


def window_speeds(
    track: list[tuple[float, float, float]], window: float = WINDOW_S
) -> list[tuple[float, float]]:
    """Every window of ``track`` (server time, x, y): from each sample to the first at
    least ``window`` seconds of server time later, as (its start, its horizontal speed in
    m/s); none for a track shorter than a window."""
    speeds, j = [], 0
    for i, (t0, x0, y0) in enumerate(track):
        j = max(j, i + 1)
        while j < len(track) and track[j][0] - t0 < window:
            j += 1
        if j == len(track):
            break
        t1, x1, y1 = track[j]
        speeds.append((t0, math.hypot(x1 - x0, y1 - y0) / (t1 - t0)))
    return speeds


def speed_over_windows(track: list[tuple[float, float, float]], window: float = WINDOW_S) -> float:
    """The highest horizontal speed over any stretch of at least ``window`` seconds of
    server time in ``track`` (server time, x, y), m/s; 0 for a shorter track."""
    return max((speed for _, speed in window_speeds(track, window)), default=0.0)


def _beyond_reach(before: tuple[float, float, float], after: tuple[float, float, float]) -> bool:
    """Whether ``after`` (server time, x, y) lies further from ``before`` than walking
    speed covers in the time between (and a step of slack)."""
    reach = MovementParams().max_speed * (after[0] - before[0]) + 0.5
    return math.hypot(after[1] - before[1], after[2] - before[2]) > reach


async def speed_hack(
    url: str,
    seconds: float = 3.0,
    per_tick: int = 3,
    arena: ArenaMap | None = None,
    reconnect_after: float = 0.2,
) -> dict[str, Any]:
    """``per_tick`` full-speed inputs a tick from an attacker that resumes its seat (its
    token) ``reconnect_after`` seconds after the node closes it (0.2 s: the 12 ticks a
    seat could bank for catch-up), as fast as it can when refused, flooding again from
    its first snapshot back (where the resume found it). Measured: its own speed from
    the snapshots' ``you`` (from its first acknowledged input on; one track per seat
    through its resumes, a respawn or death starting a new one), as the max over every
    1-s window, those across a reconnect's gap and those that start in the second after
    a resume included (the latter also apart), against the model's max speed; and how
    many resumes the node refused for the seat's hold-off (``held_off``)."""
    arena = arena or default_map()
    tracks: list[list[tuple[float, float, float]]] = []
    resumed_at: list[tuple[int, float]] = []  # (track, server time of the resume's welcome)
    moved_away = [0]  # resumes that found the player respawned elsewhere (a new track)
    sent = [0]
    seq = [0]
    direction = [(1.0, 0.0)]
    leg_ticks = [0]  # when the current leg ends (in ticks played, through resumes)
    played = [0]
    # Back in its seat and not shown it yet: it sends nothing until its first snapshot back,
    # so that the second after the resume is measured from where the resume found it.
    placing = [False]

    def on_seat(wire: Wire) -> None:
        assert wire.welcome is not None
        if wire.resuming and tracks:
            resumed_at.append((len(tracks) - 1, wire.welcome.server_time))
        else:
            tracks.append([])
        seq[0] = wire.welcome.ack + 1  # a resumed seat numbers on from what it had applied
        placing[0] = wire.resuming
        if not wire.resuming:
            leg_ticks[0] = played[0]  # a new seat: a new leg; a resumed one runs on

        def seen(snapshot: protocol.SnapshotMessage) -> None:
            me = wire.player
            broken = any(
                isinstance(e, protocol.RespawnEvent) and e.player == me for e in snapshot.events
            )
            records = wire.records
            mine = records[records["id"] == me]
            alive = bool(len(mine) and mine["flags"][0] & protocol.ENTITY_FLAG_ALIVE)
            if broken or not alive:
                if tracks[-1]:
                    tracks.append([])
                return
            if snapshot.ack >= 0:
                sample = (snapshot.server_time, snapshot.you[0], snapshot.you[1])
                if placing[0] and tracks[-1] and _beyond_reach(tracks[-1][-1], sample):
                    # Killed and respawned while away (its events were not sent to it):
                    # the game moved it, so the seat's track starts again here.
                    moved_away[0] += 1
                    resumed_at[-1] = (len(tracks), resumed_at[-1][1])
                    tracks.append([])
                tracks[-1].append(sample)
                placing[0] = False

        wire.on_snapshot = seen

    def run(wire: Wire, tick: int) -> None:
        if placing[0]:
            return
        played[0] += 1
        if played[0] >= leg_ticks[0] and tracks[-1]:  # a new leg: the longest free run
            _, x, y = tracks[-1][-1]
            direction[0] = _open_direction(arena, x, y, wire.tick_rate)
            leg_ticks[0] = played[0] + wire.tick_rate * 3 // 2
        first = seq[0]
        frames = (wire.input_frame(first + i, move=direction[0]) for i in range(per_tick))
        wire.write(b"".join(frames))
        seq[0] += per_tick
        sent[0] += per_tick

    outcome = await _play(
        url, seconds, "speedy", run, on_seat=on_seat, resume=True, reconnect_after=reconnect_after
    )
    windows = [window_speeds(track) for track in tracks]
    speed = max((s for track in windows for _, s in track), default=0.0)
    after_resume = max(
        (s for k, at in resumed_at for t0, s in windows[k] if at <= t0 < at + WINDOW_S),
        default=0.0,
    )
    return {
        "attack": "speed_hack",
        "per_tick": per_tick,
        "reconnect_after_s": reconnect_after,
        "speed_mps": round(speed, 4),
        "speed_after_resume_mps": round(after_resume, 4),
        "max_speed_mps": MovementParams().max_speed,
        "window_s": WINDOW_S,
        "windows": sum(len(track) for track in windows),
        "resumes_refused_held_off": outcome["refused"].get("held_off", 0),
        "resumes_respawned_away": moved_away[0],
        "samples": sum(len(track) for track in tracks),
        "sent": sent[0],
        **outcome,
    }


# -- fire-rate hack --------------------------------------------------------------------------


async def fire_rate_hack(url: str, seconds: float = 3.0, per_tick: int = 4) -> dict[str, Any]:
    """Fire the rifle on every input, ``per_tick`` inputs a tick: the shots the server
    judged for the attacker (its shot events) per second of server time, against the
    rifle's rate. Per seat: the server time its snapshots span and the shots in them."""
    seats: list[dict[str, Any]] = []
    sent = [0]

    def on_seat(wire: Wire) -> None:
        seat: dict[str, Any] = {"first": math.nan, "last": math.nan, "snapshots": 0, "shots": []}
        seats.append(seat)

        def seen(snapshot: protocol.SnapshotMessage) -> None:
            if math.isnan(seat["first"]):
                seat["first"] = snapshot.server_time
            seat["last"] = snapshot.server_time
            seat["snapshots"] += 1
            for event in snapshot.events:
                if (
                    isinstance(event, protocol.ShotEvent)
                    and event.shooter == wire.player
                    and event.weapon == RIFLE.id
                ):
                    seat["shots"].append(snapshot.server_time)

        wire.on_snapshot = seen

    def fire(wire: Wire, tick: int) -> None:
        first = tick * per_tick
        yaw = (tick % 360) * math.pi / 180 - math.pi  # sweeping: some shots hit somebody
        frames = (
            wire.input_frame(first + i, yaw=yaw, buttons=BUTTON_FIRE) for i in range(per_tick)
        )
        wire.write(b"".join(frames))
        sent[0] += per_tick

    outcome = await _play(url, seconds, "trigger", fire, on_seat=on_seat)
    seen = [seat for seat in seats if seat["snapshots"]]
    span = sum(seat["last"] - seat["first"] for seat in seen)
    shots = sum(len(seat["shots"]) for seat in seen)
    gaps = [b - a for seat in seen for a, b in itertools.pairwise(seat["shots"])]
    ticks_spanned = sum(round((s["last"] - s["first"]) * DEFAULT_TICK_RATE) + 1 for s in seen)
    return {
        "attack": "fire_rate_hack",
        "per_tick": per_tick,
        "sent": sent[0],
        "shots": shots,
        "span_s": round(span, 4),
        "seats_shooting": len(seen),
        "shots_per_s": round(shots / span, 3) if span > 0 else 0.0,
        "weapon_rate_per_s": round(1.0 / RIFLE.fire_interval, 3),
        "min_interval_s": round(min(gaps), 4) if gaps else None,
        "snapshots_missed": ticks_spanned - sum(seat["snapshots"] for seat in seen),
        **outcome,
    }


# -- rewind abuse ----------------------------------------------------------------------------

#: How a liar stamps a shot, from (estimated server time now, newest snapshot's time) to
#: (view time, how many ticks older than its newest snapshot it says its ack is).
LIES: dict[str, Callable[[float, float], tuple[float, int]]] = {
    "interp_1s": lambda now, newest: (now - 1.0, 0),  # renders by the 1 s it asked for
    "backdated": lambda now, newest: (now - 0.5, 0),
    "old_ack": lambda now, newest: (newest - 0.8, 48),  # "my snapshots are 0.8 s late"
}
#: The bound's allowance for this measurement itself: the attacker's estimate of when its
#: input arrived (its send time on its clock estimate, plus half its RTT) is good to about
#: a tick on a loaded loopback.
MEASURE_SLACK_S = 1.0 / DEFAULT_TICK_RATE


async def rewind_abuse(url: str, seconds: float = 4.0) -> dict[str, Any]:
    """Join asking for a 1 s interpolation delay, then fire with backdated view times and
    old ``ack_tick``s (docs/lag-compensation.md, "No fake lag"). For each shot the server
    judged: the rewind it granted, ``arrival - view_time`` (arrival estimated as the send
    time plus half this client's RTT), against the bound ``max(rtt, rtt/2 + interp) +
    slack``, with the node's RTT of this link (the shot event's ``shooter_rtt``, or ours
    if larger), the granted interpolation and slack of one snapshot interval plus the RTT
    spread plus :data:`MEASURE_SLACK_S`."""
    fired: dict[tuple[int, int], tuple[str, float]] = {}  # (seat, seq) -> (lie, sent at)
    judged: list[dict[str, Any]] = []
    seat = [0]
    granted = [math.nan]
    snapshot_rate = [DEFAULT_TICK_RATE]
    lies = list(LIES)

    def on_seat(wire: Wire) -> None:
        seat[0] += 1
        number = seat[0]
        if wire.welcome is not None:
            granted[0] = wire.welcome.interp_delay
            snapshot_rate[0] = wire.welcome.snapshot_rate

        def seen(snapshot: protocol.SnapshotMessage) -> None:
            for event in snapshot.events:
                if not isinstance(event, protocol.ShotEvent) or event.shooter != wire.player:
                    continue
                shot = fired.pop((number, event.seq), None)
                if shot is None:
                    continue
                lie, sent_at = shot
                judged.append(
                    {
                        "lie": lie,
                        "sent_at": sent_at,
                        "view_time": event.view_time,
                        "shown_at": snapshot.server_time,
                        "judged": event.judged,
                        "server_rtt": event.shooter_rtt,
                        "rtts": list(wire.rtts[-16:]),
                    }
                )

        wire.on_snapshot = seen

    def lie(wire: Wire, tick: int) -> None:
        rate = wire.tick_rate
        interval = RIFLE.interval_inputs(rate) + 2  # one a cooldown and some: each one fires
        # A second of honest play first: the node's RTT estimate of this link settles.
        if tick < rate or tick % interval:
            wire.write(wire.input_frame(tick))
            return
        how = lies[(tick // interval) % len(lies)]
        now = wire.server_now()
        view_time, ack_back = LIES[how](now, wire.latest_time)
        ack = max(-1, wire.latest_tick - ack_back)
        wire.write(wire.input_frame(tick, buttons=BUTTON_FIRE, view_time=view_time, ack_tick=ack))
        fired[(seat[0], tick)] = (how, now)

    outcome = await _play(url, seconds, "liar", lie, interp_delay=1.0, on_seat=on_seat)
    worst_excess, rewinds, by_tick, bounds = -math.inf, [], [], []
    for shot in judged:
        rtts = sorted(shot["rtts"]) or [0.0]
        rtt = max(shot["server_rtt"], float(np.percentile(rtts, 50)))
        spread = float(np.percentile(rtts, 95) - np.percentile(rtts, 10))
        slack = 1.0 / snapshot_rate[0] + spread + MEASURE_SLACK_S
        bound = max(rtt, rtt / 2 + granted[0]) + slack
        rewind = shot["sent_at"] + float(np.percentile(rtts, 50)) / 2 - shot["view_time"]
        rewinds.append(rewind)
        bounds.append(bound)
        by_tick.append(shot["shown_at"] - shot["view_time"])
        worst_excess = max(worst_excess, rewind - bound)
    how_judged = collections.Counter(shot["judged"] for shot in judged)
    return {
        "attack": "rewind_abuse",
        "asked_interp_s": 1.0,
        "granted_interp_s": granted[0],
        "shots": len(judged),
        "lies": _counts(collections.Counter(shot["lie"] for shot in judged)),
        "judged": _counts(how_judged),
        "rewind_ms_max": round(max(rewinds) * 1000, 2) if rewinds else None,
        "rewind_by_tick_ms_max": round(max(by_tick) * 1000, 2) if by_tick else None,
        "bound_ms_min": round(min(bounds) * 1000, 2) if bounds else None,
        "worst_excess_ms": round(worst_excess * 1000, 2) if judged else None,
        "within_bound": bool(judged) and worst_excess <= 0.0,
        **outcome,
    }


# -- seat squatting --------------------------------------------------------------------------


async def seat_squat(url: str, seconds: float = 5.0, connections: int = 20) -> dict[str, Any]:
    """``connections`` joins from this one address that then never send an input (they
    answer probes and ping, which must keep nobody seated): how many were seated, refused
    (and why), kicked for idleness, and how many still hold a seat when ``seconds`` end."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    outcomes: list[tuple[str, float | None]] = []  # (what happened, seconds seated)

    async def squat(index: int) -> None:
        try:
            async with connect(url) as wire:
                if not await wire.join(f"squat{index}"):
                    outcomes.append((wire.errors[-1] if wire.errors else "no_answer", None))
                    return
                seated = loop.time()
                while not wire.closed.is_set() and loop.time() < deadline:
                    wire.ping()
                    await wire.until_closed(min(0.5, max(0.0, deadline - loop.time())))
                if wire.closed.is_set():
                    why = "idle_kick" if "idle_kick" in wire.errors else f"closed:{wire.close_code}"
                    outcomes.append((why, round(loop.time() - seated, 3)))
                else:
                    outcomes.append(("still_seated", round(loop.time() - seated, 3)))
        except (OSError, HandshakeRefused) as error:
            outcomes.append((type(error).__name__, None))

    async with asyncio.TaskGroup() as group:
        for index in range(connections):
            group.create_task(squat(index))
    what = collections.Counter(why for why, _ in outcomes)
    kicked_after = [held for why, held in outcomes if why == "idle_kick" and held is not None]
    return {
        "attack": "seat_squat",
        "connections": connections,
        "seated": sum(held is not None for _, held in outcomes),
        "refused": _counts(collections.Counter(why for why, held in outcomes if held is None)),
        "kicked": what["idle_kick"],
        "seconds_to_kick_max": max(kicked_after) if kicked_after else None,
        "seats_held_at_end": what["still_seated"],
        "outcomes": _counts(what),
    }


# -- slowloris -------------------------------------------------------------------------------


async def slowloris(
    url: str,
    seconds: float = 3.0,
    connections: int = 50,
    limit_s: float | None = None,
    reopen: bool = False,
) -> dict[str, Any]:
    """``connections`` raw TCP connections that trickle an HTTP request head, a byte every
    0.25 s, never finishing it (``reopen``: open another whenever the node closes one):
    how many the node closed, how many outlived ``limit_s`` (plus a second for the node's
    check), and the longest any stayed open."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    lifetimes: list[tuple[float, bool]] = []  # (seconds open, closed by the node)
    host = urlsplit(url).netloc

    async def trickle() -> None:
        while True:
            try:
                reader, writer = await open_tcp(url)
            except OSError:
                lifetimes.append((0.0, True))
                return
            opened = loop.time()
            closed = False
            try:
                writer.write(f"GET /ws HTTP/1.1\r\nHost: {host}\r\nX-Slow: ".encode())
                while loop.time() < deadline:
                    try:
                        async with asyncio.timeout(0.25):
                            if not await reader.read(4096):
                                closed = True  # (anything it answered, then its close)
                                break
                    except TimeoutError:
                        writer.write(b"x")
            except (ConnectionError, OSError):
                closed = True
            finally:
                lifetimes.append((loop.time() - opened, closed))
                writer.close()
                with contextlib.suppress(ConnectionError, OSError):
                    await writer.wait_closed()
            if not (reopen and closed and loop.time() < deadline - 0.1):
                return

    async with asyncio.TaskGroup() as group:
        for _ in range(connections):
            group.create_task(trickle())
    outlived = (
        sum(lasted > limit_s + 1.0 for lasted, _ in lifetimes) if limit_s is not None else None
    )
    return {
        "attack": "slowloris",
        "connections": connections,
        "opened": len(lifetimes),
        "closed_by_node": sum(closed for _, closed in lifetimes),
        "still_open_at_end": sum(not closed for _, closed in lifetimes),
        "limit_s": limit_s,
        "outlived_limit": outlived,
        "max_open_s": round(max((lasted for lasted, _ in lifetimes), default=0.0), 3),
    }


# -- first-frame conformance -----------------------------------------------------------------


async def _text_first(url: str) -> dict[str, Any]:
    async with connect(url) as wire:
        wire.send(b'{"type": "join", "v": 1}', OP_TEXT)
        await wire.until_closed(CLOSE_WAIT_S)
        return _answer(wire)


async def _unmasked_first(url: str) -> dict[str, Any]:
    async with connect(url) as wire:
        wire.send(
            protocol.encode(protocol.JoinMessage(protocol.PROTOCOL_VERSION, "bare")), masked=False
        )
        await wire.until_closed(CLOSE_WAIT_S)
        return _answer(wire)


async def _seq_beyond_max(url: str) -> dict[str, Any]:
    """Join, send a first input with ``seq`` 2^31, then honest inputs from 0: the bad one
    must be refused (``invalid_field``) and the seat still take the honest ones."""
    async with connect(url) as wire:
        if not await wire.join("seqhi"):
            return _answer(wire)
        acked = [-1]
        applied = asyncio.Event()

        def seen(snapshot: protocol.SnapshotMessage) -> None:
            acked[0] = snapshot.ack
            if snapshot.ack >= 0:
                applied.set()

        wire.on_snapshot = seen
        wire.answered.clear()
        wire.write(wire.input_frame(protocol.MAX_SEQ + 1))
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(ANSWER_WAIT_S):
                await wire.answered.wait()
        for seq in range(30):
            wire.write(wire.input_frame(seq))
            await asyncio.sleep(1 / wire.tick_rate)
        await first_of(applied.wait(), wire.closed.wait(), asyncio.sleep(ANSWER_WAIT_S))
        return {**_answer(wire), "acked_after": acked[0]}


def _answer(wire: Wire) -> dict[str, Any]:
    return {
        "welcomed": wire.welcome is not None,
        "errors": list(wire.errors),
        "close": wire.close_code if wire.closed.is_set() else None,
        "closed": wire.closed.is_set(),
    }


def _signature(answer: dict[str, Any]) -> str:
    """An answer without what may differ between honest rounds (how many inputs were
    applied: whether any was is the answer)."""
    kept = {k: v for k, v in answer.items() if k != "acked_after"}
    if "acked_after" in answer:
        kept["acked"] = answer["acked_after"] >= 0
    return repr(sorted(kept.items(), key=lambda kv: kv[0]))


_FIRST_FRAME_CASES: dict[str, Callable[[str], Awaitable[dict[str, Any]]]] = {
    "text": _text_first,
    "unmasked": _unmasked_first,
    "seq_2_31": _seq_beyond_max,
}


async def first_frame(url: str, seconds: float = 0.0, rounds: int = 1) -> dict[str, Any]:
    """Each first-frame case (a text first frame, an unmasked first frame, a first input
    ``seq`` of 2^31) ``rounds`` times, or as many rounds as fit in ``seconds``: per case the
    last answer (error codes, close code) and how many distinct answers it drew."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    cases: dict[str, dict[str, Any]] = {}
    distinct: dict[str, set[str]] = collections.defaultdict(set)
    done = 0
    while done < rounds or loop.time() < deadline:
        for case, attack in _FIRST_FRAME_CASES.items():
            try:
                cases[case] = await attack(url)
            except (OSError, HandshakeRefused) as error:
                cases[case] = {"refused": type(error).__name__}
            distinct[case].add(_signature(cases[case]))
        done += 1
    return {
        "attack": "first_frame",
        "rounds": done,
        "cases": cases,
        "distinct_answers": {case: len(answers) for case, answers in distinct.items()},
    }


# -- fuzzing ---------------------------------------------------------------------------------


class _FuzzTally:
    def __init__(self) -> None:
        self.frames = 0
        self.connections = 0
        self.kinds: collections.Counter[str] = collections.Counter()
        self.errors: collections.Counter[str] = collections.Counter()
        #: Close codes; "dropped": the TCP connection ended with no close frame (the node
        #: closed while a burst was still arriving: its kernel resets the connection).
        self.closes: collections.Counter[int | str | None] = collections.Counter()
        self.unanswered: collections.Counter[str] = collections.Counter()
        self.welcomed = 0  # a fuzzed first frame that got a seat (a finding)
        self.faults: list[str] = []
        self.refused: collections.Counter[str] = collections.Counter()

    def ended(self, wire: Wire) -> None:
        self.errors.update(wire.errors)
        if not wire.closed.is_set():
            self.closes[None] += 1
        else:
            self.closes["dropped" if wire.close_code is None else wire.close_code] += 1
        if wire.fault:
            self.faults.append(wire.fault)


async def _fuzz_first(url: str, rng: random.Random, tally: _FuzzTally) -> None:
    """One fuzzed message as the connection's first frame: an error and a close, or a close."""
    kind, opcode, payload = fuzz_frame(rng, giant=True)
    async with connect(url) as wire:
        tally.connections += 1
        tally.frames += 1
        tally.kinds[kind] += 1
        wire.send(payload, opcode)
        if not await wire.until_closed(CLOSE_WAIT_S):
            tally.unanswered[kind] += 1
        tally.welcomed += wire.welcome is not None
        tally.ended(wire)


async def _fuzz_seated(url: str, rng: random.Random, tally: _FuzzTally, burst: int) -> None:
    """Join, then fuzzed messages: one at a time, each waiting for its error or the close
    (``burst`` 0), or ``burst`` of them in one write, waiting for the close."""
    async with connect(url) as wire:
        tally.connections += 1
        if not await wire.join("fuzz"):
            tally.refused[wire.errors[-1] if wire.errors else "no_answer"] += 1
            tally.ended(wire)
            return
        if burst:
            frames = [fuzz_frame(rng) for _ in range(burst)]
            tally.frames += burst
            tally.kinds.update(kind for kind, *_ in frames)
            wire.write(b"".join(frame(op, payload, masked=True) for _, op, payload in frames))
            await wire.drain()
            if not await wire.until_closed(CLOSE_WAIT_S):
                tally.unanswered["burst"] += 1
        else:
            while not wire.closed.is_set():
                kind, opcode, payload = fuzz_frame(rng, giant=True)
                tally.frames += 1
                tally.kinds[kind] += 1
                wire.answered.clear()
                before = len(wire.errors)
                wire.send(payload, opcode)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(ANSWER_WAIT_S):
                        while len(wire.errors) == before and not wire.closed.is_set():
                            wire.answered.clear()
                            await wire.answered.wait()
                if len(wire.errors) == before and not wire.closed.is_set():
                    tally.unanswered[kind] += 1
                    break
            if not wire.closed.is_set() and not await wire.until_closed(CLOSE_WAIT_S):
                tally.unanswered["no_close_after_offences"] += 1
        tally.ended(wire)


async def fuzz(
    url: str,
    seconds: float = 3.0,
    frames: int = 200,
    burst: int = 0,
    seed: int = 15,
    parallel: int = 2,
    spread: bool = False,
) -> dict[str, Any]:
    """Malformed messages of every kind (:data:`FUZZ_KINDS`, and messages over 64 KiB) as
    the first frame of a connection and after a valid join, until ``frames`` were sent or
    ``seconds`` are over, ``parallel`` connections at a time. A seated connection sends its
    messages one at a time, each of which must draw an error or the close; with ``burst``,
    every other one writes ``burst`` messages at once and must be closed. ``spread``: paced
    to send ``frames`` evenly over ``seconds``, not as fast as the node answers. Then
    whether the node still answers /health."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    deadline = start + seconds
    tally = _FuzzTally()
    began = time.monotonic()

    modes = ("first", "one_by_one", "burst") if burst else ("first", "one_by_one")

    async def worker(index: int) -> None:
        rng = random.Random(seed * 1000 + index)
        turn = 0
        while tally.frames < frames and (now := loop.time()) < deadline:
            if spread and tally.frames >= frames * (now - start) / seconds:
                await asyncio.sleep(0.01)
                continue
            mode = modes[turn % len(modes)]
            try:
                if mode == "first":
                    await _fuzz_first(url, rng, tally)
                else:
                    await _fuzz_seated(url, rng, tally, burst if mode == "burst" else 0)
            except (OSError, HandshakeRefused) as error:
                tally.refused[type(error).__name__] += 1
                await asyncio.sleep(0.1)
            turn += 1

    async with asyncio.TaskGroup() as group:
        for index in range(parallel):
            group.create_task(worker(index))
    unexpected_errors = {
        code: n for code, n in tally.errors.items() if code not in DOCUMENTED_ERRORS
    }
    unexpected_closes = {
        str(code): n
        for code, n in tally.closes.items()
        if code != "dropped" and code not in DOCUMENTED_CLOSES
    }
    return {
        "attack": "fuzz",
        "frames_sent": tally.frames,
        "connections": tally.connections,
        "burst": burst,
        "seconds": round(time.monotonic() - began, 2),
        "kinds": _counts(tally.kinds),
        "errors": _counts(tally.errors),
        "closes": _counts(tally.closes),
        "unanswered": _counts(tally.unanswered),
        "unexpected_errors": unexpected_errors,
        "unexpected_closes": unexpected_closes,
        "welcomed_by_fuzz": tally.welcomed,
        "node_faults": tally.faults[:5],
        "refused": _counts(tally.refused),
        "node_up": await node_up(url),
    }


# -- by name, for the bench's worker process -------------------------------------------------

ATTACKS: dict[str, Attack] = {
    "input_flood": input_flood,
    "compact_honest": compact_honest,
    "speed_hack": speed_hack,
    "fire_rate_hack": fire_rate_hack,
    "rewind_abuse": rewind_abuse,
    "seat_squat": seat_squat,
    "slowloris": slowloris,
    "first_frame": first_frame,
    "fuzz": fuzz,
}


def run_attack(name: str, url: str, seconds: float, options: dict[str, Any]) -> dict[str, Any]:
    """Run attack ``name`` to its end in a fresh event loop (a worker process's entry)."""
    return eventloop.run(ATTACKS[name](url, seconds, **options))
