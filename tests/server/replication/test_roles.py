"""The role machine: exactly the transitions of its table, and nothing else."""

from __future__ import annotations

import itertools

import pytest

from server.replication.roles import TRANSITIONS, Role, RoleError, RoleEvent, RoleMachine


def machine_in(role: Role) -> RoleMachine:
    machine = RoleMachine()
    machine.role = role
    return machine


def test_a_node_starts_starting_and_claims_or_follows() -> None:
    assert RoleMachine().role is Role.STARTING
    claimed, followed = RoleMachine(), RoleMachine()
    assert claimed.apply(RoleEvent.CLAIM) is Role.PRIMARY and claimed.primary
    assert followed.apply(RoleEvent.FOLLOW) is Role.STANDBY and not followed.primary


def test_a_standby_is_promoted_and_a_primary_steps_down_as_often_as_it_happens() -> None:
    machine = machine_in(Role.STANDBY)
    for _ in range(3):
        assert machine.apply(RoleEvent.PROMOTE) is Role.PRIMARY
        assert machine.apply(RoleEvent.STEP_DOWN) is Role.STANDBY


@pytest.mark.parametrize(("role", "event"), list(itertools.product(Role, RoleEvent)))
def test_every_pair_outside_the_table_is_refused_and_changes_nothing(
    role: Role, event: RoleEvent
) -> None:
    machine = machine_in(role)
    if (role, event) in TRANSITIONS:
        assert machine.apply(event) is TRANSITIONS[role, event]
        return
    with pytest.raises(RoleError, match=f"{event.value} is not expected in role {role.value}"):
        machine.apply(event)
    assert machine.role is role


def test_the_health_words_are_the_role_values() -> None:
    assert [role.value for role in Role] == ["starting", "primary", "standby"]
