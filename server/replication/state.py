"""A match's state as replication records, and back (sans-I/O).

After every tick the primary captures the resulting state: the world arrays, the combat
bookkeeping (deaths, respawns, fire cooldowns, projectiles in flight), each seat's
acknowledged input, the tick's events and a hash of the world. A standby applies the record
to its own match, appends the same snapshot to its own history ring (so lag compensation
works right after a promotion) and checks the hash. A record carries the full state rather
than a delta: at 300 players it is about 40 KB, trivial on a regional network, and a
standby can never drift.

A *full state* adds the seats' names and the whole history ring, for a standby that joins
late or has missed a record.
"""

from __future__ import annotations

from typing import Any

import msgpack
import numpy as np

from server.sim.combat import _Projectile
from server.sim.match import Match, PlayerSeat
from server.sim.matchset import MatchSet
from shared.weapons import WEAPONS

__all__ = [
    "HashMismatch",
    "ReplicationGap",
    "apply_node_record",
    "apply_record",
    "config_fingerprint",
    "decode",
    "encode_full_state",
    "encode_node_full",
    "encode_node_tick",
    "encode_tick_record",
    "install_full_state",
]

_WORLD = ("active", "alive", "pos", "vel", "yaw", "pitch", "health", "move", "buttons")
_COMBAT = ("death_time", "respawn_tick", "last_fired_seq")
_HISTORY = ("times", "ticks", "positions", "alive")


class ReplicationGap(Exception):
    """A record does not follow the state this standby holds: it needs a full state."""


class HashMismatch(Exception):
    """After applying a record the world differs from the primary's: full state needed."""


def config_fingerprint(match: Match | MatchSet) -> dict[str, Any]:
    """What two nodes must share for one to replicate the other."""
    config = match.config
    return {
        "matches": len(match) if isinstance(match, MatchSet) else 1,
        "tick_rate": config.tick_rate,
        "max_players": config.max_players,
        "history_ticks": config.history_ticks,
        "map": config.arena.name,
    }


def _arrays(owner: object, names: tuple[str, ...]) -> dict[str, bytes]:
    return {name: np.ascontiguousarray(getattr(owner, name)).tobytes() for name in names}


def _load(owner: object, blobs: dict[str, bytes]) -> None:
    for name, blob in blobs.items():
        target = getattr(owner, name)
        target[...] = np.frombuffer(blob, dtype=target.dtype).reshape(target.shape)


def _seats(match: Match) -> list[list[Any]]:
    return [
        [slot, seat.name, seat.interp_delay, seat.inputs.acked]
        for slot, seat in sorted(match.seats.items())
    ]


def _flying(match: Match) -> list[list[Any]]:
    return [
        [
            p.slot,
            p.seq,
            p.weapon.id,
            p.position.tobytes(),
            p.velocity.tobytes(),
            p.time,
            p.expire_time,
            p.view_time,
        ]
        for p in match.combat.flying
    ]


def _tick_fields(match: Match, events: list[dict[str, Any]], epoch: int) -> dict[str, Any]:
    return {
        "type": "tick",
        "epoch": epoch,
        "tick": match.tick_number,
        "world": _arrays(match.world, _WORLD),
        "combat": _arrays(match.combat, _COMBAT),
        "seats": _seats(match),
        "flying": _flying(match),
        "joins": match.joins,
        "events": events,
        "hash": match.world.state_hash(),
    }


def _full_fields(match: Match, epoch: int) -> dict[str, Any]:
    ring = match.history
    return {
        **_tick_fields(match, [], epoch),
        "type": "full",
        "history": {**_arrays(ring, _HISTORY), "start": ring.start, "count": ring.count},
    }


def encode_tick_record(match: Match, events: list[dict[str, Any]], epoch: int) -> bytes:
    """The state after ``match``'s latest tick, for the standbys."""
    return msgpack.packb(_tick_fields(match, events, epoch), use_bin_type=True)


def encode_full_state(match: Match, epoch: int) -> bytes:
    """Everything a standby needs to start following: the latest record plus history."""
    return msgpack.packb(_full_fields(match, epoch), use_bin_type=True)


def encode_node_tick(matches: MatchSet, events: list[list[dict[str, Any]]], epoch: int) -> bytes:
    """One tick of every match of a node, as one record."""
    return msgpack.packb(
        {
            "type": "ticks",
            "epoch": epoch,
            "tick": matches.tick_number,
            "matches": [
                _tick_fields(match, match_events, epoch)
                for match, match_events in zip(matches.matches, events, strict=True)
            ],
        },
        use_bin_type=True,
    )


def encode_node_full(matches: MatchSet, epoch: int) -> bytes:
    """Every match of a node, with history: what a joining standby starts from."""
    return msgpack.packb(
        {
            "type": "fulls",
            "epoch": epoch,
            "tick": matches.tick_number,
            "matches": [_full_fields(match, epoch) for match in matches.matches],
        },
        use_bin_type=True,
    )


def apply_node_record(matches: MatchSet, record: dict[str, Any]) -> None:
    """Apply a node-level record (``ticks`` or ``fulls``) to every match."""
    if len(record["matches"]) != len(matches):
        raise ReplicationGap("the record holds another number of matches")
    for match, fields in zip(matches.matches, record["matches"], strict=True):
        if record["type"] == "fulls":
            install_full_state(match, fields)
        else:
            apply_record(match, fields)


def decode(data: bytes) -> dict[str, Any]:
    record = msgpack.unpackb(data, raw=False)
    if not isinstance(record, dict) or record.get("type") not in ("tick", "full", "ticks", "fulls"):
        raise ValueError("not a replication record")
    return record


def _restore_seats(match: Match, seats: list[list[Any]]) -> None:
    wanted = {
        int(slot): (str(name), float(interp), int(acked)) for slot, name, interp, acked in seats
    }
    for slot in list(match.seats):
        if slot not in wanted:
            del match.seats[slot]
    for slot, (name, interp, acked) in wanted.items():
        seat = match.seats.get(slot)
        if seat is None or seat.name != name or seat.interp_delay != interp:
            seat = PlayerSeat(slot, name, interp, match.new_seat_inputs(slot))
            match.seats[slot] = seat
        # A follower applies no inputs itself: its view of each seat's ack is the primary's.
        seat.inputs.restore(acked)


def _restore_common(match: Match, record: dict[str, Any]) -> None:
    _load(match.world, record["world"])
    _load(match.combat, record["combat"])
    _restore_seats(match, record["seats"])
    match.combat.flying = [
        _Projectile(
            int(slot),
            int(seq),
            WEAPONS[int(weapon)],
            np.frombuffer(position).copy(),
            np.frombuffer(velocity).copy(),
            float(time),
            float(expire),
            float(view),
        )
        for slot, seq, weapon, position, velocity, time, expire, view in record["flying"]
    ]
    match.combat.pending = []
    match.joins = int(record["joins"])
    match.tick_number = int(record["tick"])
    match.epoch = max(match.epoch, int(record["epoch"]))


def apply_record(match: Match, record: dict[str, Any]) -> None:
    """Follow the primary by one tick; raises if this standby cannot (gap, hash)."""
    if record["type"] != "tick":
        raise ValueError("apply_record takes tick records")
    if match.history.count and int(record["tick"]) <= match.history.newest_tick:
        return  # already held (a resend after a reconnect)
    if int(record["tick"]) != match.tick_number + 1:
        raise ReplicationGap(f"record of tick {record['tick']} after tick {match.tick_number}")
    _restore_common(match, record)
    world = match.world
    match.history.append(
        match.tick_number, match.server_time, world.pos, world.active & world.alive
    )
    if world.state_hash() != record["hash"]:
        raise HashMismatch(f"state hash differs at tick {match.tick_number}")


def install_full_state(match: Match, record: dict[str, Any]) -> None:
    """Replace this node's match with the primary's (a late join or a repair)."""
    if record["type"] != "full":
        raise ValueError("install_full_state takes full states")
    _restore_common(match, record)
    history = record["history"]
    ring = match.history
    _load(ring, {name: history[name] for name in _HISTORY})
    ring.start, ring.count = int(history["start"]), int(history["count"])
    if match.world.state_hash() != record["hash"]:
        raise HashMismatch("state hash differs after a full transfer")
