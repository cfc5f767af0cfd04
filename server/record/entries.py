"""The match log's entries: what one tick, one seat change or one match's set-up is, as
msgpack maps (sans-I/O).

Five kinds, each a map whose ``k`` names it:

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
- ``pause``: an operator paused the recording after this match's tick ``t``: the ticks up
  to the keyframe logged when it was resumed are missing on purpose, not lost.
- nothing else: a reader refuses unknown kinds as from an incompatible version.

A block's entries are packed back to back in its first plane; its ticks' inputs are not in
them (an entry says how many rows and seats it holds) but in columns of byte planes after
them (:mod:`server.record.columns`), which is what lets each plane's deflate shrink them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any, Protocol

import msgpack

from server.record import columns
from server.sim.inputs import ReleasedInputs
from server.sim.interest import InterestConfig
from server.sim.lagcomp import LagCompensation
from server.sim.match import MatchConfig
from shared.arena_map import ArenaMap, MapError, parse_map
from shared.movement import MovementParams

__all__ = [
    "LogEntryError",
    "Loggable",
    "TickEntry",
    "as_logged",
    "config_entry",
    "config_from_entry",
    "decode_block",
    "encode_block",
    "pack",
    "pause_entry",
]

KIND_CONFIG, KIND_KEY, KIND_TICK, KIND_PAUSE = "config", "key", "tick", "pause"
_KINDS = (KIND_CONFIG, KIND_KEY, KIND_TICK, KIND_PAUSE)
_NESTED: dict[str, type[Any]] = {
    "movement": MovementParams,
    "lag_compensation": LagCompensation,
    "interest": InterestConfig,
}


class LogEntryError(ValueError):
    """An entry that does not decode as this version's (corruption that passed the CRC,
    or another version's log)."""


def pack(entry: Any) -> bytes:
    return msgpack.packb(entry, use_bin_type=True)


def as_logged(value: Any) -> Any:
    """``value`` as reading it back from a log gives it (msgpack's types)."""
    return msgpack.unpackb(pack(value), raw=False, strict_map_key=False)


class Loggable(Protocol):
    """An entry held as the tick left it, made into its map on the writer thread."""

    def to_entry(self) -> dict[str, Any]: ...


def encode_block(items: Sequence[dict[str, Any] | Loggable]) -> tuple[bytes, ...]:
    """A block's planes: its entries (a tick's inputs replaced by how many rows and seats
    they hold), the widths of its inputs' columns per match, then those columns' byte
    planes (:mod:`server.record.columns`), match by match. The writer thread's work: the
    tick only hands over the entries and the arrays they refer to."""
    packed: list[bytes] = []
    inputs: dict[int, list[ReleasedInputs]] = {}
    for item in items:
        entry = item if isinstance(item, dict) else item.to_entry()
        released = entry.get("in") if entry["k"] == KIND_TICK else None
        if released is not None:
            inputs.setdefault(entry["m"], []).append(released)
            entry = {**entry, "in": [len(released.slot), len(released.guess)]}
        packed.append(pack(entry))
    directory, planes = [], []
    for match, ticks in inputs.items():
        widths, match_planes = columns.encode_inputs(ticks)
        directory.append([match, widths])
        planes += match_planes
    return (b"".join(packed), pack(directory), *planes)


def decode_block(planes: Sequence[bytes]) -> list[dict[str, Any]]:
    """A block's entries, in order, each tick's ``in`` its inputs again
    (:class:`~server.sim.inputs.ReleasedInputs`, or None)."""
    if len(planes) < 2:
        raise LogEntryError("a block without its entries and columns")
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False)
    unpacker.feed(planes[0])
    try:
        entries = list(unpacker)
        directory = msgpack.unpackb(planes[1], raw=False, strict_map_key=False)
    except Exception as error:  # (msgpack raises several kinds)
        raise LogEntryError(f"an entry does not decode: {error}") from None
    for entry in entries:
        if not isinstance(entry, dict) or entry.get("k") not in _KINDS:
            raise LogEntryError("an entry of a kind this version does not know")
    at = 2
    try:
        for match, widths in directory:
            ticks = [e for e in entries if e["k"] == KIND_TICK and e["m"] == match and e["in"]]
            rows, seats = zip(*(e["in"] for e in ticks), strict=True) if ticks else ((), ())
            count = sum(widths)
            decoded = columns.decode_inputs(rows, seats, widths, planes[at : at + count])
            at += count
            for entry, released in zip(ticks, decoded, strict=True):
                entry["in"] = released
    except (KeyError, TypeError, ValueError) as error:
        raise LogEntryError(f"a tick's inputs do not decode: {error}") from None
    if at != len(planes) or any(
        e["k"] == KIND_TICK and not (e.get("in") is None or isinstance(e["in"], ReleasedInputs))
        for e in entries
    ):
        raise LogEntryError("a block's inputs and its columns do not match")
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


def pause_entry(match: int, epoch: int, tick: int) -> dict[str, Any]:
    """The recording of match ``match`` paused after its tick ``tick`` of ``epoch``."""
    return {"k": KIND_PAUSE, "m": match, "e": epoch, "t": tick}


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

    def to_entry(self) -> dict[str, Any]:
        """The entry as :func:`encode_block` takes it (``in``: the inputs themselves)."""
        return {
            "k": KIND_TICK, "m": self.match, "e": self.epoch, "t": self.tick, "a": self.after,
            "seats": self.seats, "rtt": self.rtt, "in": self.inputs, "shots": self.shots,
            "h": self.hash, "src": self.source,
        }  # fmt: skip

    @classmethod
    def from_entry(cls, entry: dict[str, Any]) -> TickEntry:
        """A tick entry as :func:`decode_block` gives it."""
        try:
            return cls(
                int(entry["m"]), int(entry["e"]), int(entry["t"]), int(entry["a"]),
                list(entry["seats"]), list(entry["rtt"]), entry["in"], list(entry["shots"]),
                str(entry["h"]), str(entry["src"]),
            )  # fmt: skip
        except (KeyError, TypeError, ValueError) as error:
            raise LogEntryError(f"a tick entry does not decode: {error}") from None
