"""A node's role in its region, as a state machine with its transitions as data (sans-I/O).

h11's way: the roles are an enum, what can happen is an enum, and which role each event
leads to from each role is a table. Failover work changes the table (and its tests); the
edge applies transitions and never assigns a role by hand. An event a role does not
expect is a bug on our side, raised as :class:`RoleError`.

============  ==============  ===========  ================================================
from          event           to           when
============  ==============  ===========  ================================================
starting      claim           primary      ``--role primary`` won its initial claim
starting      follow          standby      ``--role standby``: follow the region's primary
standby       claim           primary      ``--role primary`` found its region taken at
                                           start, then found it empty (every node had died)
standby       promote         primary      the primary fell silent and this node won
primary       step_down       standby      a higher epoch exists, or leadership is lost
============  ==============  ===========  ================================================
"""

from __future__ import annotations

import enum

__all__ = ["TRANSITIONS", "Role", "RoleError", "RoleEvent", "RoleMachine"]


class Role(enum.Enum):
    """The word ``/health`` and the logs use for each role."""

    STARTING = "starting"
    PRIMARY = "primary"
    STANDBY = "standby"


class RoleEvent(enum.Enum):
    CLAIM = "claim"
    FOLLOW = "follow"
    PROMOTE = "promote"
    STEP_DOWN = "step_down"


TRANSITIONS: dict[tuple[Role, RoleEvent], Role] = {
    (Role.STARTING, RoleEvent.CLAIM): Role.PRIMARY,
    (Role.STARTING, RoleEvent.FOLLOW): Role.STANDBY,
    (Role.STANDBY, RoleEvent.CLAIM): Role.PRIMARY,
    (Role.STANDBY, RoleEvent.PROMOTE): Role.PRIMARY,
    (Role.PRIMARY, RoleEvent.STEP_DOWN): Role.STANDBY,
}


class RoleError(RuntimeError):
    """An event its role does not expect (a bug in the caller, not a peer's fault)."""


class RoleMachine:
    """The node's current role; :meth:`apply` moves it along :data:`TRANSITIONS`."""

    def __init__(self) -> None:
        self.role = Role.STARTING

    def __repr__(self) -> str:
        return f"RoleMachine({self.role.value})"

    @property
    def primary(self) -> bool:
        return self.role is Role.PRIMARY

    def apply(self, event: RoleEvent) -> Role:
        """Take ``event``; the new role. :class:`RoleError` if the role does not expect it."""
        try:
            self.role = TRANSITIONS[self.role, event]
        except KeyError:
            raise RoleError(f"{event.value} is not expected in role {self.role.value}") from None
        return self.role
