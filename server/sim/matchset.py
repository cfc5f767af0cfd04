"""The matches of one node, run by one tick (sans-I/O).

A node hosts ``K`` matches, each with its own players and world. A join goes to the first
match with a free seat, so a full match opens the next one. Every tick advances all of them,
then judges every match's shots in one kernel call per weapon kind (their history rings
live in one :class:`~server.sim.history.HistoryStore`), then encodes each match's snapshot once.
"""

from __future__ import annotations

import numpy as np

from server.sim.combat import judge
from server.sim.history import HistoryStore
from server.sim.hitreg.backend import History, HitValidator
from server.sim.match import Match, MatchConfig, MatchFull, PlayerSeat, TickResult

__all__ = ["MatchSet"]


class MatchSet:
    def __init__(self, config: MatchConfig, count: int, validator: HitValidator) -> None:
        if count < 1:
            raise ValueError("a node hosts at least one match")
        self.config = config
        self.validator = validator
        self.store = HistoryStore(count, config.history_snapshots, config.max_players)
        self.matches = [
            Match(config, validator=validator, history=self.store, index=k) for k in range(count)
        ]

    def __len__(self) -> int:
        return len(self.matches)

    def __getitem__(self, index: int) -> Match:
        return self.matches[index]

    @property
    def epoch(self) -> int:
        return self.matches[0].epoch

    @epoch.setter
    def epoch(self, value: int) -> None:
        for match in self.matches:
            match.epoch = value

    @property
    def tick_number(self) -> int:
        return self.matches[0].tick_number

    @property
    def server_time(self) -> float:
        return self.matches[0].server_time

    @property
    def player_count(self) -> int:
        return sum(match.world.player_count for match in self.matches)

    @property
    def capacity(self) -> int:
        return self.config.max_players * len(self.matches)

    def join(self, name: str, interp_delay: float) -> tuple[int, PlayerSeat]:
        """A seat in the first match with room; raises MatchFull when every match is full."""
        for match in self.matches:
            if match.world.free_slot() is not None:
                return match.index, match.join(name, interp_delay)
        raise MatchFull(f"every match is full ({len(self.matches)} x {self.config.max_players})")

    def history(self) -> History:
        """All the matches' rings as the kernels' history (views, no copy)."""
        rings = [match.history for match in self.matches]
        return History(
            times=self.store.times,
            positions=self.store.positions,
            alive=self.store.alive,
            start=np.array([ring.start for ring in rings], dtype=np.int64),
            count=np.array([ring.count for ring in rings], dtype=np.int64),
            values_checked=True,
        )

    def tick(self, tick: int) -> list[TickResult]:
        """One tick of every match, their shots judged together."""
        batches = [match.advance(tick) for match in self.matches]
        pending = [batch for batch in batches if not batch.empty]
        if pending:
            judge(pending, self.history(), self.validator)
        return [match.finish(batch) for match, batch in zip(self.matches, batches, strict=True)]
