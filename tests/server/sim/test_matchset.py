"""Several matches on one node: seats fill in order, one tick runs them all, and every
match's shots go to the kernels in one call per weapon kind."""

from __future__ import annotations

import math
from typing import Any

import pytest

from server.replication import messages, state
from server.sim.hitreg import make_validator
from server.sim.match import MatchConfig, MatchFull
from server.sim.matchset import MatchSet
from shared.arena_map import default_map
from shared.movement import BUTTON_FIRE
from shared.protocol import InputMessage


def matchset(count: int = 2, players: int = 2) -> MatchSet:
    arena = default_map()
    validator = make_validator("cpu", box_min=arena.box_min, box_max=arena.box_max)
    return MatchSet(MatchConfig(arena, max_players=players), count, validator)


def test_a_full_match_opens_the_next_one_and_then_the_node_is_full() -> None:
    matches = matchset(count=2, players=2)
    placed = [matches.join(f"p{i}", 0.1)[0] for i in range(4)]
    assert placed == [0, 0, 1, 1]
    assert matches.player_count == 4 and matches.capacity == 4
    with pytest.raises(MatchFull):
        matches.join("late", 0.1)


def test_one_tick_advances_every_match_and_keeps_their_worlds_apart() -> None:
    matches = matchset(count=2, players=1)
    _, a = matches.join("a", 0.1)
    _, b = matches.join("b", 0.1)
    matches[0].receive_input(a.slot, InputMessage(0, 0, (1.0, 0.0), 0.0, 0.0, 0, 0.0, -1), 0.0)
    results = matches.tick(1)
    assert [r.tick for r in results] == [1, 1]
    assert matches[0].world.vel[a.slot][0] > 0.0
    assert matches[1].world.vel[b.slot][0] == 0.0
    assert matches[0].history.count == matches[1].history.count == 1


def test_shots_of_every_match_are_judged_in_one_kernel_call(monkeypatch) -> None:
    matches = matchset(count=2, players=2)
    calls: list[list[int]] = []
    real = matches.validator.resolve_hitscan

    def spy(history, shots, *args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(sorted(set(shots.match.tolist())))
        return real(history, shots, *args, **kwargs)

    monkeypatch.setattr(matches.validator, "resolve_hitscan", spy)
    shooters = []
    for index in range(2):
        matches.join(f"shooter{index}", 0.1)
        matches.join(f"target{index}", 0.1)
        shooters.append(matches[index].seats[0])
    matches.tick(1)
    for index, seat in enumerate(shooters):
        target = matches[index].world.pos[1] - matches[index].world.pos[0]
        yaw = math.atan2(target[1], target[0])
        fire = InputMessage(1, 1, (0.0, 0.0), yaw, 0.0, BUTTON_FIRE, 1 / 60, -1)
        matches[index].receive_input(seat.slot, fire, 1 / 60)
    matches.tick(2)
    assert calls == [[0, 1]]


def test_a_node_record_carries_every_match_to_a_standby() -> None:
    primary, standby = matchset(count=3, players=2), matchset(count=3, players=2)
    for i in range(5):
        primary.join(f"p{i}", 0.1)
    primary.tick(1)
    state.apply(standby, over_the_wire(state.capture_full(primary, 1)))
    for tick in range(2, 6):
        results = primary.tick(tick)
        state.apply(
            standby, over_the_wire(state.capture_tick(primary, [r.events for r in results], 1))
        )
    for mine, theirs in zip(primary.matches, standby.matches, strict=True):
        assert mine.world.state_hash() == theirs.world.state_hash()
        assert sorted(mine.seats) == sorted(theirs.seats)
    assert state.config_fingerprint(primary) == state.config_fingerprint(standby)
    assert state.config_fingerprint(primary) != state.config_fingerprint(matchset(count=2))


def over_the_wire(record: messages.TickRecord | messages.FullState) -> Any:
    return messages.decode(messages.encode(record))
