"""The node's lifecycle and tenure tables: each legal move, spelled out, and every other
pair refused without changing anything."""

from __future__ import annotations

import itertools

import pytest

from server.node_phases import (
    LIFECYCLE,
    TENURE,
    Lifecycle,
    LifecycleEvent,
    Tenure,
    TenureEvent,
    is_ready,
    lifecycle,
    node_status,
    tenure,
)
from server.replication.roles import Role
from server.transitions import Machine, TransitionError

L, LE = Lifecycle, LifecycleEvent
T, TE = Tenure, TenureEvent

LEGAL_LIFECYCLE = [
    (L.WARMING_UP, LE.WARMED, L.WARM),
    (L.WARMING_UP, LE.STOP, L.STOPPING_COLD),
    (L.WARM, LE.STOP, L.STOPPING),
    (L.STOPPING_COLD, LE.WARMED, L.STOPPING),
]

LEGAL_TENURE = [
    (T.NOT_LEADING, TE.LEAD, T.LEADING),
    (T.NOT_LEADING, TE.STEP_DOWN, T.NOT_LEADING),
    (T.NOT_LEADING, TE.SUCCESSOR_SEEN, T.NOT_LEADING),
    (T.LEADING, TE.STEP_DOWN, T.STEPPING_DOWN),
    (T.LEADING, TE.SUCCESSOR_SEEN, T.SUPERSEDED),
    (T.STEPPING_DOWN, TE.STEP_DOWN, T.STEPPING_DOWN),
    (T.STEPPING_DOWN, TE.SUCCESSOR_SEEN, T.SUPERSEDED),
    (T.SUPERSEDED, TE.STEP_DOWN, T.SUPERSEDED),
    (T.SUPERSEDED, TE.SUCCESSOR_SEEN, T.SUPERSEDED),
    (T.STEPPING_DOWN, TE.LEFT, T.NOT_LEADING),
    (T.SUPERSEDED, TE.LEFT, T.NOT_LEADING),
]


def test_the_tables_hold_exactly_the_moves_listed_here() -> None:
    assert {(a, e): b for a, e, b in LEGAL_LIFECYCLE} == LIFECYCLE
    assert {(a, e): b for a, e, b in LEGAL_TENURE} == TENURE


@pytest.mark.parametrize(("start", "event", "end"), [*LEGAL_LIFECYCLE, *LEGAL_TENURE])
def test_every_legal_move(start: Lifecycle | Tenure, event: LifecycleEvent | TenureEvent,
                          end: Lifecycle | Tenure) -> None:  # fmt: skip
    machine = lifecycle() if isinstance(start, Lifecycle) else tenure()
    machine.state = start
    assert machine.apply(event) is end and machine.state is end  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("machine", "state", "event"),
    [
        *((lifecycle, s, e) for s, e in itertools.product(Lifecycle, LifecycleEvent)
          if (s, e) not in LIFECYCLE),
        *((tenure, s, e) for s, e in itertools.product(Tenure, TenureEvent)
          if (s, e) not in TENURE),
    ],
)  # fmt: skip
def test_an_illegal_move_is_refused_and_changes_nothing(
    machine: object, state: Lifecycle | Tenure, event: LifecycleEvent | TenureEvent
) -> None:
    made: Machine = machine()  # type: ignore[operator]
    made.state = state
    with pytest.raises(TransitionError, match=f"{event.value} is not expected in {state.value}"):
        made.apply(event)
    assert made.state is state


def test_a_node_leads_again_after_leaving_and_stops_once() -> None:
    office = tenure()
    for how in (TE.STEP_DOWN, TE.SUCCESSOR_SEEN):
        office.apply(TE.LEAD)
        office.apply(how)
        assert office.state.leading and office.state.stepping_down
        office.apply(TE.LEFT)
        assert not office.state.leading and not office.state.stepping_down
    with pytest.raises(TransitionError):
        office.apply(TE.LEFT)  # a node that does not lead cannot leave
    life = lifecycle()
    life.apply(LE.WARMED)
    life.apply(LE.STOP)
    with pytest.raises(TransitionError):
        life.apply(LE.STOP)


@pytest.mark.parametrize(
    ("phase", "role", "status", "ready"),
    [
        (L.WARMING_UP, Role.STARTING, "warming_up", False),
        (L.WARMING_UP, Role.PRIMARY, "warming_up", False),
        (L.WARM, Role.STARTING, "starting", False),
        (L.WARM, Role.PRIMARY, "ready", True),
        (L.WARM, Role.STANDBY, "ready", True),
        (L.STOPPING_COLD, Role.STANDBY, "stopping", False),
        (L.STOPPING, Role.PRIMARY, "stopping", False),
    ],
)
def test_the_health_status_follows_the_lifecycle_and_the_role(
    phase: Lifecycle, role: Role, status: str, ready: bool
) -> None:
    assert node_status(phase, role) == status
    assert is_ready(phase, role) is ready


def test_a_node_stopped_before_its_warm_up_ended_is_warm_once_it_ends() -> None:
    life = lifecycle()
    life.apply(LE.STOP)
    assert life.state.stopping and not life.state.warm
    life.apply(LE.WARMED)
    assert life.state.stopping and life.state.warm
