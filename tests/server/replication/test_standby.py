"""The standby's table: each legal move, spelled out, and every other pair refused."""

from __future__ import annotations

import itertools

import pytest

from server.replication.standby import STANDBY, StandbyEvent, StandbySync, standby_sync
from server.transitions import TransitionError

C, S, R = StandbySync.CATCHING_UP, StandbySync.IN_SYNC, StandbySync.RESYNCING
E = StandbyEvent

LEGAL = [
    (C, E.WELCOMED, C), (C, E.TOLD_IN_SYNC, S), (C, E.TOLD_OUT_OF_SYNC, R), (C, E.GAP, R),
    (C, E.APPLIED_TICK, C), (C, E.APPLIED_FULL_STATE, C),
    (S, E.WELCOMED, C), (S, E.TOLD_IN_SYNC, S), (S, E.TOLD_OUT_OF_SYNC, R), (S, E.GAP, R),
    (S, E.APPLIED_TICK, S), (S, E.APPLIED_FULL_STATE, S), (S, E.PROMOTED, C),
    (R, E.WELCOMED, R), (R, E.TOLD_IN_SYNC, R), (R, E.TOLD_OUT_OF_SYNC, R), (R, E.GAP, R),
    (R, E.APPLIED_FULL_STATE, C),
    (C, E.LED_TO_THE_END, S), (S, E.LED_TO_THE_END, S), (R, E.LED_TO_THE_END, S),
    (C, E.SUPERSEDED, C), (S, E.SUPERSEDED, C), (R, E.SUPERSEDED, C),
]  # fmt: skip


def test_the_table_holds_exactly_the_moves_listed_here() -> None:
    assert {(a, e): b for a, e, b in LEGAL} == STANDBY


@pytest.mark.parametrize(("start", "event", "end"), LEGAL)
def test_every_legal_move(start: StandbySync, event: StandbyEvent, end: StandbySync) -> None:
    machine = standby_sync()
    machine.state = start
    assert machine.apply(event) is end
    assert machine.state.eligible is (end is S)


@pytest.mark.parametrize(
    ("state", "event"),
    [pair for pair in itertools.product(StandbySync, StandbyEvent) if pair not in STANDBY],
)
def test_an_illegal_move_is_refused_and_changes_nothing(
    state: StandbySync, event: StandbyEvent
) -> None:
    machine = standby_sync()
    machine.state = state
    with pytest.raises(TransitionError, match=f"standby: {event.value} is not expected"):
        machine.apply(event)
    assert machine.state is state


def test_the_illegal_moves_are_a_tick_applied_while_resyncing_and_an_ineligible_promotion() -> None:
    refused = {pair for pair in itertools.product(StandbySync, StandbyEvent)} - set(STANDBY)
    assert refused == {(R, E.APPLIED_TICK), (C, E.PROMOTED), (R, E.PROMOTED)}


def test_a_standby_resyncs_then_catches_up_then_is_told_in_sync_and_promoted() -> None:
    machine = standby_sync()
    assert not machine.state.eligible
    for event, end in [
        (E.WELCOMED, C), (E.APPLIED_FULL_STATE, C), (E.TOLD_IN_SYNC, S), (E.GAP, R),
        (E.TOLD_IN_SYNC, R), (E.APPLIED_FULL_STATE, C), (E.TOLD_IN_SYNC, S), (E.PROMOTED, C),
    ]:  # fmt: skip
        assert machine.apply(event) is end
