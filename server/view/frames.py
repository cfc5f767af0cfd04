"""The live view's JSON messages, built from the node's state (sans-I/O).

Two kinds go down the feed: one ``hello`` when a viewer connects (the map, the hitbox
shapes, the rates: what does not change) and then ``frame`` a few times a second (every
match's players, the shots judged since the last frame, the ticks' durations, the role and
epoch). Coordinates are metres rounded to the centimetre, times server seconds rounded to
the microsecond: a frame of 300 players stays a few tens of kilobytes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from server.sim.combat import ShotTrace
from server.sim.world import World
from server.view.shotlog import ViewedShot
from shared.arena_map import ArenaMap
from shared.hitbox import HITBOX_NAMES, HITBOXES
from shared.weapons import EYE_HEIGHT, WEAPONS

__all__ = ["NodeView", "frame", "hello", "player_rows", "shot_record"]


@dataclass(frozen=True, slots=True)
class NodeView:
    """Who the node is right now, as a frame's header tells it."""

    region: str
    node: str
    role: str
    epoch: int
    tick: int
    time: float  # server time of ``tick``
    max_rewind_ms: float


def _xyz(values: Iterable[float]) -> list[float]:
    return [round(float(v), 2) for v in values]


def hello(arena: ArenaMap, tick_rate: int, feed_rate: float, view: NodeView) -> dict[str, Any]:
    """What a viewer needs once: the map from above, the hitboxes, the rates."""
    return {
        "type": "hello",
        "region": view.region,
        "node": view.node,
        "tick_rate": tick_rate,
        "feed_rate": feed_rate,
        "max_rewind_ms": view.max_rewind_ms,
        "map": {
            "name": arena.name,
            "min": _xyz(arena.bounds_min),
            "max": _xyz(arena.bounds_max),
            "boxes": [
                {"min": _xyz(low), "max": _xyz(high), "kind": kind}
                for low, high, kind in zip(
                    arena.box_min, arena.box_max, arena.box_kind, strict=True
                )
            ],
        },
        "eye_height": EYE_HEIGHT,
        "hitboxes": [
            {"name": h.name, "bottom": h.bottom[2], "top": h.top[2], "radius": h.radius}
            for h in HITBOXES
        ],
        "weapons": [w.name for w in WEAPONS],
    }


def _players(match: int, world: World, names: dict[int, str]) -> list[dict[str, Any]]:
    slots = np.flatnonzero(world.active)
    return player_rows(
        match, slots, world.pos[slots], world.yaw[slots], world.health[slots],
        world.alive[slots], names,
    )  # fmt: skip


def player_rows(
    match: int,
    slots: np.ndarray,
    pos: np.ndarray,
    yaw: np.ndarray,
    health: np.ndarray,
    alive: np.ndarray,
    names: dict[int, str],
) -> list[dict[str, Any]]:
    """The players of a frame, one row each (the live world's or a replay's kept copy)."""
    rows = zip(
        slots.tolist(), np.round(pos, 2).tolist(), np.round(yaw, 3).tolist(),
        health.tolist(), alive.tolist(), strict=True,
    )  # fmt: skip
    return [
        {"m": match, "id": slot, "name": names.get(slot, ""), "pos": p, "yaw": y, "hp": hp,
         "alive": a}
        for slot, p, y, hp, a in rows
    ]  # fmt: skip


def traced_shot_fields(trace: ShotTrace) -> dict[str, Any]:
    """What the live view and the replay's viewer both show of a judged shot: who, the
    verdict, its line and when it was judged against."""
    event = trace.event
    return {
        "tick": trace.tick,
        "shooter": event.shooter,
        "seq": event.seq,
        "weapon": WEAPONS[event.weapon].name if event.weapon < len(WEAPONS) else event.weapon,
        "result": event.result,
        "victim": event.victim,
        "hitbox": HITBOX_NAMES[event.hitbox] if event.hitbox < len(HITBOX_NAMES) else "",
        "damage": event.damage,
        "kill": event.kill,
        "origin": _xyz(event.origin),
        "direction": [round(float(v), 4) for v in trace.direction],
        "end": _xyz(trace.end),
        "view_time": round(event.view_time, 6),
        "rewind_ms": round((trace.time - event.view_time) * 1000.0, 1),
        "judged": event.judged,
        "shooter_rtt_ms": None if event.shooter_rtt < 0 else round(event.shooter_rtt * 1000.0, 1),
    }


def shot_record(shot: ViewedShot) -> dict[str, Any]:
    """One shot for the page: its line, verdict, moment and the two boxes of its target."""
    offset = shot.offset
    return {
        "id": shot.id,
        "m": shot.match,
        **traced_shot_fields(shot.trace),
        "target": shot.target,
        "server_feet": None if shot.server_feet is None else _xyz(shot.server_feet),
        "seen_feet": None if shot.seen_feet is None else _xyz(shot.seen_feet),
        "offset_cm": None if offset is None else round(offset * 100.0, 1),
    }


def frame(
    view: NodeView,
    worlds: Sequence[World],
    names: Sequence[dict[int, str]],
    shots: Sequence[ViewedShot],
    tick_ms: Sequence[float],
    budget_ms: float,
) -> dict[str, Any]:
    """The node now: every match's players, the shots new since the last frame, the ticks'
    durations since then. Shared by every viewer; each one's count of frames it missed is
    added on its way out (:mod:`server.view.net.feed`)."""
    return {
        "type": "frame",
        "region": view.region,
        "node": view.node,
        "role": view.role,
        "epoch": view.epoch,
        "tick": view.tick,
        "time": round(view.time, 6),
        "players": [
            player
            for match, (world, seats) in enumerate(zip(worlds, names, strict=True))
            for player in _players(match, world, seats)
        ],
        "shots": [shot_record(shot) for shot in shots],
        "tick_ms": [round(ms, 3) for ms in tick_ms],
        "budget_ms": round(budget_ms, 3),
    }
