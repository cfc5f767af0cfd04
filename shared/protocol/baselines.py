"""What one client holds of the other players, snapshot by snapshot: the baselines its
snapshots' deltas are decoded against.

A snapshot of tick T coded against base B changes the players the client held at B: a
delta or full record sets a player, a gone record forgets one, and every player not named
is held as it was at B (it was not sent this time, as interest management decides). So
the client keeps what it held at each of its newest snapshots (the tick of each value;
the values themselves once per process, :class:`~shared.protocol.deltas.PlayerValues`);
the server keeps the same account of it and codes against the newest one the client
acknowledged.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from shared.protocol.deltas import (
    KIND_DELTA,
    KIND_FULL,
    EntityCodec,
    MissingBaseline,
    PlayerValues,
    encode_records,
)

__all__ = ["BASELINES_KEPT", "EntityBaselines", "MissingBaseline", "warm_up"]

#: Snapshots a client keeps: the server codes against no older acknowledged one than this
#: many snapshot intervals back (see ``server.sim.deltas``), so it always holds the base.
BASELINES_KEPT = 16


class EntityBaselines:
    """One client's players at each of its newest :data:`BASELINES_KEPT` snapshots: per
    snapshot, the tick of the value it holds for each player id (-1 none); the values
    live in a :class:`~shared.protocol.deltas.PlayerValues` of the client's world."""

    def __init__(self, kept: int = BASELINES_KEPT) -> None:
        self._kept = kept
        self._held: OrderedDict[int, np.ndarray] = OrderedDict()
        self._epoch = -1
        self._none = np.empty(0, dtype=np.int64)

    def apply(
        self, epoch: int, tick: int, base: int, entities: bytes, values: PlayerValues
    ) -> np.ndarray:
        """Decode snapshot ``tick``'s players (coded against ``base``, with the values of
        its world, ``values``) and keep what the client holds after it. Returns the
        records of the players this snapshot shows
        (:data:`~shared.protocol.snapshots.ENTITY_DTYPE`, ascending by id).

        A new epoch (another primary) starts afresh: its snapshots name no base of the old
        one. MissingBaseline when ``base`` is not held; InvalidField for a bad blob."""
        if epoch != self._epoch:
            self._held.clear()
            self._epoch = epoch
        if base < 0:
            held = self._none
        elif base >= tick or (held := self._held.get(base)) is None:  # type: ignore[assignment]
            raise MissingBaseline(f"snapshot {tick}: base {base} is not held")
        after, records = values.decode(tick, held, entities)
        self._held[tick] = after
        self._held.move_to_end(tick)
        while len(self._held) > self._kept:
            self._held.popitem(last=False)
        return records

    def held(self, tick: int) -> np.ndarray | None:
        """Per player id, the tick of the value held after snapshot ``tick`` (-1 none)."""
        return self._held.get(tick)


def warm_up() -> None:
    """Compile (or load from the cache) the decoder's kernel: a swarm calls this before
    its bots connect, so no bot's first snapshot waits for a compile."""
    from shared.arena_map import default_map

    arena = default_map()
    codec = EntityCodec.for_bounds(arena.bounds_min, arena.bounds_max)
    values = np.zeros((1, len(codec.bits)), dtype=np.int32)
    out = np.zeros(codec.max_record_bytes(), dtype=np.uint8)
    ids = np.zeros(1, dtype=np.int64)
    size = encode_records(ids, np.full(1, KIND_FULL), values, values, codec.bits, out)
    store, baselines = PlayerValues(codec, 1), EntityBaselines()
    baselines.apply(0, 1, -1, out[:size].tobytes(), store)
    out[:] = 0
    size = encode_records(ids, np.full(1, KIND_DELTA), values, values, codec.bits, out)
    baselines.apply(0, 2, 1, out[:size].tobytes(), store)
