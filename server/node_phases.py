"""A node's lifecycle and its tenure as primary, as tables (sans-I/O).

**Lifecycle** (:data:`LIFECYCLE`): a node warms its kernels, then serves in whatever role it
has, until it stops. It may be told to stop before it is warm, and a warm-up already under
way may still finish then: the node stays stopping, but is warm (it answers what a warm
node answers, and refuses what a stopping one refuses).

===============  ======  ===============
from             event   to
===============  ======  ===============
warming_up       warmed  warm
warming_up       stop    stopping_cold
warm             stop    stopping
stopping_cold    warmed  stopping
===============  ======  ===============

What ``/health`` says beside ``ready`` follows from the lifecycle and the role
(:func:`node_status`): ``warming_up``, ``starting`` (warm, role not decided), ``ready`` or
``stopping``.

**Tenure** (:data:`TENURE`): the primary's time in office. It leads until it must stop
(its lease or leadership lost: stepping down; a higher epoch seen: superseded, its state
is no longer the region's), then leaves. A node that does not lead may hear either
(a standby sees a higher epoch): that changes nothing, the next tenure starts afresh.

==============  ==============  ==============
from            event           to
==============  ==============  ==============
not_leading     lead            leading
not_leading     step_down       not_leading
not_leading     successor_seen  not_leading
leading         step_down       stepping_down
leading         successor_seen  superseded
stepping_down   step_down       stepping_down
stepping_down   successor_seen  superseded
superseded      step_down       superseded
superseded      successor_seen  superseded
stepping_down   left            not_leading
superseded      left            not_leading
==============  ==============  ==============
"""

from __future__ import annotations

import enum

from server.replication.roles import Role
from server.transitions import Machine

__all__ = [
    "LIFECYCLE",
    "TENURE",
    "Lifecycle",
    "LifecycleEvent",
    "Tenure",
    "TenureEvent",
    "is_ready",
    "lifecycle",
    "node_status",
    "tenure",
]


class Lifecycle(enum.Enum):
    WARMING_UP = "warming_up"
    WARM = "warm"
    #: Told to stop before its kernels were warm.
    STOPPING_COLD = "stopping_cold"
    STOPPING = "stopping"

    @property
    def warm(self) -> bool:
        return self in (Lifecycle.WARM, Lifecycle.STOPPING)

    @property
    def stopping(self) -> bool:
        return self in (Lifecycle.STOPPING_COLD, Lifecycle.STOPPING)


class LifecycleEvent(enum.Enum):
    WARMED = "warmed"
    STOP = "stop"


LIFECYCLE: dict[tuple[Lifecycle, LifecycleEvent], Lifecycle] = {
    (Lifecycle.WARMING_UP, LifecycleEvent.WARMED): Lifecycle.WARM,
    (Lifecycle.WARMING_UP, LifecycleEvent.STOP): Lifecycle.STOPPING_COLD,
    (Lifecycle.WARM, LifecycleEvent.STOP): Lifecycle.STOPPING,
    (Lifecycle.STOPPING_COLD, LifecycleEvent.WARMED): Lifecycle.STOPPING,
}


class Tenure(enum.Enum):
    NOT_LEADING = "not_leading"
    LEADING = "leading"
    #: Must stop leading; no higher epoch known, so it still holds every tick it showed.
    STEPPING_DOWN = "stepping_down"
    #: Must stop leading: a higher epoch exists (a successor's state is the region's).
    SUPERSEDED = "superseded"

    @property
    def leading(self) -> bool:
        """In office (parked joins wait for this), stepping down included."""
        return self is not Tenure.NOT_LEADING

    @property
    def stepping_down(self) -> bool:
        """Publishing nothing more: the lead loop ends."""
        return self in (Tenure.STEPPING_DOWN, Tenure.SUPERSEDED)


class TenureEvent(enum.Enum):
    LEAD = "lead"
    STEP_DOWN = "step_down"
    SUCCESSOR_SEEN = "successor_seen"
    LEFT = "left"


_ASKED = (TenureEvent.STEP_DOWN, TenureEvent.SUCCESSOR_SEEN)

TENURE: dict[tuple[Tenure, TenureEvent], Tenure] = {
    (Tenure.NOT_LEADING, TenureEvent.LEAD): Tenure.LEADING,
    **{(Tenure.NOT_LEADING, event): Tenure.NOT_LEADING for event in _ASKED},
    (Tenure.LEADING, TenureEvent.STEP_DOWN): Tenure.STEPPING_DOWN,
    (Tenure.LEADING, TenureEvent.SUCCESSOR_SEEN): Tenure.SUPERSEDED,
    (Tenure.STEPPING_DOWN, TenureEvent.STEP_DOWN): Tenure.STEPPING_DOWN,
    (Tenure.STEPPING_DOWN, TenureEvent.SUCCESSOR_SEEN): Tenure.SUPERSEDED,
    **{(Tenure.SUPERSEDED, event): Tenure.SUPERSEDED for event in _ASKED},
    (Tenure.STEPPING_DOWN, TenureEvent.LEFT): Tenure.NOT_LEADING,
    (Tenure.SUPERSEDED, TenureEvent.LEFT): Tenure.NOT_LEADING,
}


def lifecycle() -> Machine[Lifecycle, LifecycleEvent]:
    """A node's lifecycle, warming up."""
    return Machine("lifecycle", LIFECYCLE, Lifecycle.WARMING_UP)


def tenure() -> Machine[Tenure, TenureEvent]:
    """A node's tenure as primary, not leading."""
    return Machine("tenure", TENURE, Tenure.NOT_LEADING)


def is_ready(phase: Lifecycle, role: Role) -> bool:
    """Ready to serve in its role: kernels warm, role decided, not stopping (what
    ``/health`` answers 200 for; launchers and load balancers wait for it)."""
    return phase is Lifecycle.WARM and role is not Role.STARTING


def node_status(phase: Lifecycle, role: Role) -> str:
    """``warming_up``, ``starting`` (warm, role not decided yet), ``ready`` or ``stopping``:
    the word beside ``ready`` in ``/health``."""
    if phase.stopping:
        return "stopping"
    if not phase.warm:
        return "warming_up"
    return "ready" if is_ready(phase, role) else "starting"
