"""The match log's round-trip rows: each tick logs the estimates set since the last that
changed, the joining seats', and every seat's at a new epoch; nothing when none did."""

from __future__ import annotations

from server.record.blocks import BlockWriter
from server.record.capture import MatchLog
from server.sim.hitreg.backend import make_validator
from server.sim.lagcomp import LinkEstimate
from server.sim.match import MatchConfig
from server.sim.matchset import MatchSet
from shared.arena_map import default_map


def _logged() -> tuple[MatchSet, MatchLog]:
    config = MatchConfig(arena=default_map(), tick_rate=60, max_players=8)
    matches = MatchSet(config, 1, make_validator("reference"))
    log = MatchLog(
        matches, backend="reference", region="test", node="a", started=0.0,
        blocks=BlockWriter(30),
    )  # fmt: skip
    return matches, log


def _rows(matches: MatchSet, log: MatchLog) -> list[list[float]]:
    log.before_tick()
    rows = log._rtt[0]
    log.after_tick(matches.tick(matches[0].tick_number + 1))
    return rows


def test_only_changed_estimates_and_joining_seats_are_logged() -> None:
    matches, log = _logged()
    match = matches[0]
    first = match.join("a", 0.1).slot
    assert _rows(matches, log) == [[first, -1.0, -1.0]]  # the start: every active seat
    assert _rows(matches, log) == []
    match.probes.assume(first, LinkEstimate(0.05, 0.01))
    assert _rows(matches, log) == [[first, 0.05, 0.01]]
    match.probes.assume(first, LinkEstimate(0.05, 0.01))  # set again, the same bits
    assert _rows(matches, log) == []
    second = match.join("b", 0.1).slot
    assert _rows(matches, log) == [[second, -1.0, -1.0]]
    match.leave(first)  # its estimate forgotten: logged unknown
    assert [row[0] for row in _rows(matches, log)] == [first]
    match.epoch += 1  # a promotion: every active seat again
    assert _rows(matches, log) == [[second, -1.0, -1.0]]
