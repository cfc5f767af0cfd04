"""A recording: the entries of every log file of a match, read as one (sans-I/O).

Files from several nodes (a primary, its standby, the standby once promoted) hold the same
match under rising epochs. Each tick is keyed by (match, epoch, tick); the lineage a replay
follows is the primary-computed ticks, a higher epoch replacing whatever a lower one logged
after the tick it took over from (a deposed primary's last ticks, never shown). What a
standby received is kept apart, for :mod:`server.record.compare`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from server.record import entries
from server.record.blocks import LogCorrupt, read_blocks
from server.record.entries import TickEntry

__all__ = ["Recording", "read_recording"]


@dataclass(slots=True)
class Recording:
    config: dict[str, Any] | None = None
    #: Per match: the ticks computed by a primary (inputs logged), keyed (epoch, tick).
    computed: dict[int, dict[tuple[int, int], TickEntry]] = field(default_factory=dict)
    #: Per match: the ticks a standby received, keyed (epoch, tick).
    received: dict[int, dict[tuple[int, int], TickEntry]] = field(default_factory=dict)
    #: Per match: keyframes, keyed (epoch, tick).
    keys: dict[int, dict[tuple[int, int], dict[str, Any]]] = field(default_factory=dict)
    #: Per match: where an operator paused the recording, (epoch, the last tick logged).
    paused: dict[int, set[tuple[int, int]]] = field(default_factory=dict)
    #: Blocks that could not be read: one line each (file, block, ticks, why).
    damaged: list[str] = field(default_factory=list)

    def add(self, entry: dict[str, Any]) -> None:
        """One entry of a block, as :func:`~server.record.entries.decode_block` gives it."""
        kind = entry["k"]
        if kind == entries.KIND_CONFIG:
            if self.config is None:
                self.config = entry
            elif _fingerprint(entry) != _fingerprint(self.config):
                raise entries.LogEntryError("the files hold matches of different configurations")
            return
        try:
            where = (int(entry["e"]), int(entry["t"]))
            match = int(entry["m"])
        except (KeyError, TypeError, ValueError):
            raise entries.LogEntryError("an entry without its match, epoch and tick") from None
        if kind == entries.KIND_KEY:
            self.keys.setdefault(match, {})[where] = entry
            return
        if kind == entries.KIND_PAUSE:
            self.paused.setdefault(match, set()).add(where)
            return
        if self.config is None:
            raise entries.LogEntryError("a tick before the log's configuration")
        tick = TickEntry.from_entry(entry)
        book = self.computed if tick.source == "p" else self.received
        book.setdefault(match, {})[where] = tick

    def lineage(self, match: int) -> list[TickEntry]:
        """The ticks the match went through, in order: each epoch's ticks, cut back by the
        next epoch's to the tick it took over from."""
        chosen: list[TickEntry] = []
        by_epoch: dict[int, list[TickEntry]] = {}
        for tick in self.computed.get(match, {}).values():
            by_epoch.setdefault(tick.epoch, []).append(tick)
        for epoch in sorted(by_epoch):
            ticks = sorted(by_epoch[epoch], key=lambda t: t.tick)
            took_over_after = ticks[0].after
            chosen = [t for t in chosen if t.tick <= took_over_after] + ticks
        return chosen

    @property
    def matches(self) -> list[int]:
        return sorted(set(self.computed) | set(self.received) | set(self.keys))


def _fingerprint(config: dict[str, Any]) -> tuple[Any, ...]:
    return (config.get("settings"), config.get("map"), config.get("matches"))


def read_recording(files: Iterable[tuple[str, bytes]]) -> Recording:
    """Every readable entry of ``files`` ((name, bytes), any order). A damaged block ends
    its file's reading and is noted in ``damaged``; an incompatible file raises
    :class:`~server.record.blocks.LogIncompatible`, an undecodable entry
    :class:`~server.record.entries.LogEntryError`."""
    recording = Recording()
    for name, data in files:
        try:
            for block in read_blocks(data):
                for entry in entries.decode_block(block.planes):
                    recording.add(entry)
        except LogCorrupt as damage:
            recording.damaged.append(f"{name}: {damage}")
        except entries.LogEntryError as error:
            raise entries.LogEntryError(f"{name}: {error}") from None
    return recording
