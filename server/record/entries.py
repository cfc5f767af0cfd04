"""The match log's entries: what one tick, one seat change or one match's set-up is, as
msgpack maps (sans-I/O).

Four kinds, each a map whose ``k`` names it:

- ``config``: what a fresh :class:`~server.sim.match.MatchConfig` needs to be rebuilt
  identically (the map itself, not its name: a node may run a map file), the node, its
  region, its hit backend. The first entry of every file, so each file stands alone.
- ``key``: a keyframe, one match's whole state (:func:`server.replication.state.capture_match`
  with its history): where a replay may start (the first recorded tick, ``--from``, a
  promoted standby's first tick) and where it can tell which seat drifted.
- ``tick``: one match's tick: the seat changes before it, the round-trip estimates that
  changed, the inputs it applied (:class:`~server.sim.inputs.ReleasedInputs`, arrival
  times included), the shots it judged and the world's hash after it. ``src`` says whether
  the node computed it (``p``) or received it from its primary (``s``, no inputs).
- nothing else: a reader refuses unknown kinds as from an incompatible version.

Arrays are stored as their shape, type and bytes, small integers narrowed; a tick's inputs as
each seat's difference from its previous one (:class:`InputCoder`), which is what lets a
block's zlib shrink them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

import msgpack
import numpy as np

from server.record.seatdeltas import SeatDeltas
from server.sim.inputs import ARRIVAL, ReleasedInputs
from server.sim.interest import InterestConfig
from server.sim.lagcomp import LagCompensation
from server.sim.match import MatchConfig
from shared.arena_map import ArenaMap, MapError, parse_map
from shared.movement import MovementParams
from shared.protocol.inputs import INT_COLUMNS

__all__ = [
    "InputCoder",
    "LogEntryError",
    "TickEntry",
    "array_from_wire",
    "array_to_wire",
    "as_logged",
    "config_entry",
    "config_from_entry",
    "pack",
    "unpack_entries",
]

KIND_CONFIG, KIND_KEY, KIND_TICK = "config", "key", "tick"
_NESTED: dict[str, type[Any]] = {
    "movement": MovementParams,
    "lag_compensation": LagCompensation,
    "interest": InterestConfig,
}
_RELEASED = {
    "slot": np.int64, "depth": np.int64, "ints": np.int64, "floats": np.float64,
    "guess": np.int64, "guessed": np.int64, "dropped": np.int64,
}  # fmt: skip
#: How each is stored: slots and depths fit 16 bits (a match's seats, an input buffer),
#: the counts 32 (ticks); rows are 64-bit words (:class:`SeatDeltas`).
_STORED = {
    "slot": np.uint16, "depth": np.int16, "ints": None, "floats": None,
    "guess": np.int8, "guessed": np.int32, "dropped": np.int32,
}  # fmt: skip


class LogEntryError(ValueError):
    """An entry that does not decode as this version's (corruption that passed the CRC,
    or another version's log)."""


def pack(entry: dict[str, Any]) -> bytes:
    return msgpack.packb(entry, use_bin_type=True)


def as_logged(value: Any) -> Any:
    """``value`` as reading it back from a log gives it (msgpack's types)."""
    return msgpack.unpackb(pack(value), raw=False, strict_map_key=False)


def unpack_entries(payload: bytes) -> list[dict[str, Any]]:
    """A block's entries, in order."""
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False)
    unpacker.feed(payload)
    try:
        entries = list(unpacker)
    except Exception as error:  # (msgpack raises several kinds)
        raise LogEntryError(f"an entry does not decode: {error}") from None
    for entry in entries:
        if not isinstance(entry, dict) or entry.get("k") not in (KIND_CONFIG, KIND_KEY, KIND_TICK):
            raise LogEntryError("an entry of a kind this version does not know")
    return entries


def _map_document(arena: ArenaMap) -> dict[str, Any]:
    return {
        "name": arena.name,
        "bounds": {"min": arena.bounds_min.tolist(), "max": arena.bounds_max.tolist()},
        "boxes": [
            {"kind": kind, "min": lo, "max": hi}
            for kind, lo, hi in zip(
                arena.box_kind, arena.box_min.tolist(), arena.box_max.tolist(), strict=True
            )
        ],
        "spawns": arena.spawns.tolist(),
    }


def config_entry(
    config: MatchConfig, matches: int, backend: str, region: str, node: str, started: float
) -> dict[str, Any]:
    """The ``config`` entry of a node's matches (``started``: the wall clock, to name
    the recording; nothing replays by it)."""
    settings = {
        f.name: asdict(getattr(config, f.name)) if f.name in _NESTED else getattr(config, f.name)
        for f in fields(config)
        if f.name != "arena"
    }
    return {
        "k": KIND_CONFIG, "region": region, "node": node, "matches": matches,
        "backend": backend, "started": started, "settings": settings,
        "map": _map_document(config.arena),
    }  # fmt: skip


def config_from_entry(entry: dict[str, Any]) -> MatchConfig:
    """The match configuration a ``config`` entry describes; :class:`LogEntryError` when
    it does not describe one this version can build."""
    try:
        settings = dict(entry["settings"])
        for name, cls in _NESTED.items():
            settings[name] = cls(**settings[name])
        return MatchConfig(arena=parse_map(entry["map"]), **settings)
    except (KeyError, TypeError, ValueError, MapError) as error:
        raise LogEntryError(f"the recorded configuration does not build: {error}") from None


def array_to_wire(array: np.ndarray, dtype: type[Any] | None = None) -> list[Any]:
    """``[shape, dtype, bytes]``, in ``dtype`` when given (one that holds the values)."""
    if dtype is not None:
        array = array.astype(dtype)
    return [list(array.shape), array.dtype.str, np.ascontiguousarray(array).tobytes()]


def array_from_wire(wire: Any, dtype: type[Any]) -> np.ndarray:
    shape, stored, raw = wire
    kind = np.dtype(stored)
    if kind.kind not in "iuf" or kind.itemsize > 8:
        raise ValueError(f"an array of type {stored!r}")
    return np.frombuffer(raw, dtype=kind).reshape(shape).astype(dtype)


class InputCoder:
    """A match's tick inputs to and from the wire, each row as its difference from its
    seat's previous one in the block (:class:`SeatDeltas`); :meth:`reset` at every block."""

    def __init__(self, capacity: int) -> None:
        self._ints = SeatDeltas(capacity, len(INT_COLUMNS))
        self._floats = SeatDeltas(capacity, ARRIVAL + 1)

    def reset(self) -> None:
        self._ints.reset()
        self._floats.reset()

    def to_wire(self, released: ReleasedInputs) -> dict[str, Any]:
        wire = {name: array_to_wire(getattr(released, name), _STORED[name]) for name in _RELEASED}
        wire["ints"] = array_to_wire(self._ints.encode(released.slot, released.ints))
        wire["floats"] = array_to_wire(self._floats.encode(released.slot, released.floats))
        return wire

    def from_wire(self, wire: dict[str, Any]) -> ReleasedInputs:
        arrays = {}
        try:
            for name, dtype in _RELEASED.items():
                arrays[name] = array_from_wire(wire[name], dtype)
            slots = arrays["slot"]
            if slots.min(initial=0) < 0 or slots.max(initial=0) >= len(self._ints._last):
                raise ValueError("a slot beyond the match")
            arrays["ints"] = self._ints.decode(slots, arrays["ints"])
            arrays["floats"] = self._floats.decode(slots, arrays["floats"])
        except (KeyError, TypeError, ValueError, IndexError) as error:
            raise LogEntryError(f"a tick's inputs do not decode: {error}") from None
        return ReleasedInputs(**arrays)


@dataclass(frozen=True, slots=True)
class TickEntry:
    """One match's tick as logged (``inputs`` None: a follower's, or an empty match's)."""

    match: int
    epoch: int
    tick: int
    after: int
    seats: list[list[Any]]  # [kind, slot, seat_id, name, interp_delay]
    rtt: list[list[float]]  # [slot, rtt, spread]; rtt -1: unknown
    inputs: ReleasedInputs | None
    shots: list[dict[str, Any]]
    hash: str
    source: str  # "p": computed here; "s": received from the primary

    def to_entry(self, coder: InputCoder) -> dict[str, Any]:
        """The entry to pack (``coder``: its match's, in the block it goes to)."""
        inputs = None if self.inputs is None else coder.to_wire(self.inputs)
        return {
            "k": KIND_TICK, "m": self.match, "e": self.epoch, "t": self.tick, "a": self.after,
            "seats": self.seats, "rtt": self.rtt, "in": inputs, "shots": self.shots,
            "h": self.hash, "src": self.source,
        }  # fmt: skip

    @classmethod
    def from_entry(cls, entry: dict[str, Any], coder: InputCoder) -> TickEntry:
        """``coder``: the match's, in the block the entry was read from."""
        try:
            wire = entry["in"]
            return cls(
                int(entry["m"]), int(entry["e"]), int(entry["t"]), int(entry["a"]),
                list(entry["seats"]), list(entry["rtt"]),
                None if wire is None else coder.from_wire(wire), list(entry["shots"]),
                str(entry["h"]), str(entry["src"]),
            )  # fmt: skip
        except (KeyError, TypeError, ValueError) as error:
            raise LogEntryError(f"a tick entry does not decode: {error}") from None
