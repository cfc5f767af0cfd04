"""The commit set: which standbys a tick must reach before any player sees it (sans-I/O).

Kafka's in-sync replicas, with Raft's leader lease, for a primary and its standbys:

* A standby **joins** the set once it has caught up (acknowledged every tick sent to it);
  the primary waits for it from the next tick on and tells it so (``InSync``). From then
  on the standby holds every tick ever shown, so it is *eligible* for promotion.
* A tick is shown only when every member acknowledged it, and only while the primary's
  **lease** holds: until ``sent + lease`` of that tick. A member promises, with each
  acknowledgement, not to campaign before ``its ack + its failover timeout`` (its hello
  says how long); the lease it grants is :data:`LEASE_SHARE` of that: a primary that is
  paused, partitioned or deposed has gone silent by itself before a standby may take over.
* A member that is late by more than ``ack_timeout`` is told it is out (``OutOfSync``),
  but it **stays in the set until it has answered** (it asks for a full state, and knows
  that it may not be promoted) or its link ended. Until then the ticks stall, counted.
  Never a silent fallback: a standby that may still be promoted is waited for.
* With fewer than ``min_standbys`` members in sync nothing is shown (``halted``); with
  none the primary is *degraded*: it shows ticks no standby holds, which is safe only
  because no standby is eligible to take over from it.

The edge (:mod:`server.replication.net.hub`) sends the messages and the records; this
class only keeps the books and answers, per tick, whether it may be shown and until when.
"""

from __future__ import annotations

import enum
import math
from collections import OrderedDict
from dataclasses import dataclass

__all__ = ["LEASE_SHARE", "CommitSet", "Decision", "Member", "MemberState", "Verdict"]

#: The lease a standby grants, as a share of its promise (the rest is margin for the
#: write path and for clocks that do not run at quite the same rate).
LEASE_SHARE = 0.75

#: Send times kept: enough for every tick a member can still be acknowledging.
SENT_TIMES_KEPT = 4096


class MemberState(enum.Enum):
    CATCHING_UP = "catching_up"  # receiving a full state and records; not waited for
    IN_SYNC = "in_sync"  # waited for; eligible for promotion
    LEAVING = "leaving"  # told it is out; waited for until it answers or its link ends


class Verdict(enum.Enum):
    PUBLISH = "publish"  # show the tick (until ``Decision.deadline``)
    WAIT = "wait"  # a member has not acknowledged it yet
    HALTED = "halted"  # fewer than ``min_standbys`` members in sync
    LEASE_EXPIRED = "lease_expired"  # acknowledged, but too late to show it safely
    STOPPING = "stopping"  # the primary stops: it shows nothing more, and waits for nobody


@dataclass(slots=True)
class Member:
    node: str
    state: MemberState = MemberState.CATCHING_UP
    acked_tick: int = -1
    since_tick: int = 0  # waited for from this tick on
    drops: int = 0  # times it was told it is out
    lease: float = math.inf  # how long after a tick it acknowledged it lets us show it

    @property
    def counted(self) -> bool:
        """Whether ticks wait for it (in sync, or told it is out but not yet answered)."""
        return self.state is not MemberState.CATCHING_UP


@dataclass(frozen=True, slots=True)
class Decision:
    verdict: Verdict
    #: PUBLISH: players may be sent the tick until this time (the lease); None when no
    #: standby is in the set (degraded: nobody could take over, so nobody fences us).
    deadline: float | None = None
    #: WAIT: decide again at this time at the latest (None: only when something arrives).
    wake_at: float | None = None
    #: Members that just missed the bound: tell each it is out of sync.
    late: tuple[str, ...] = ()
    synced: bool = False  # every member of the set holds the tick (and there is one)


class CommitSet:
    """The books of one primary's commit set (see the module)."""

    def __init__(self, *, lease: float, ack_timeout: float, min_standbys: int = 0) -> None:
        if not (math.isfinite(lease) and lease > 0):
            raise ValueError("the lease must be a positive number of seconds")
        if not (math.isfinite(ack_timeout) and 0 < ack_timeout < lease):
            raise ValueError("the acknowledgement bound must be positive and below the lease")
        if type(min_standbys) is not int or min_standbys < 0:
            raise ValueError("min standbys must be a whole number >= 0")
        self.lease = lease
        self.ack_timeout = ack_timeout
        self.min_standbys = min_standbys
        self.members: dict[str, Member] = {}
        self._sent: OrderedDict[int, float] = OrderedDict()
        self.last_sent_tick = -1

    # -- what happened on the links --------------------------------------------------------

    def join(self, node: str, promise: float = 0.0) -> Member:
        """A link opened: the standby catches up from a full state (not waited for).
        ``promise``: it campaigns only after this long without a record (0: unknown, the
        primary's own lease applies)."""
        lease = LEASE_SHARE * promise if promise > 0 else self.lease
        member = Member(node, lease=min(lease, self.lease))
        self.members[node] = member
        return member

    def leave(self, node: str) -> None:
        """Its link ended: the standby's process is gone or it gave up following."""
        self.members.pop(node, None)

    def resynced(self, node: str) -> None:
        """It asked for a full state: it knows it is out, and no longer eligible."""
        member = self.members.get(node)
        if member is not None:
            member.state = MemberState.CATCHING_UP
            member.acked_tick = -1

    def acked(self, node: str, tick: int) -> None:
        member = self.members.get(node)
        if member is not None:
            member.acked_tick = max(member.acked_tick, tick)

    def sent(self, tick: int, now: float) -> None:
        """Tick ``tick``'s record went to every link at ``now``."""
        self._sent[tick] = now
        self.last_sent_tick = max(self.last_sent_tick, tick)
        while len(self._sent) > SENT_TIMES_KEPT:
            self._sent.popitem(last=False)

    def admissions(self, tick: int) -> list[str]:
        """Catching-up members that acknowledged every tick sent so far: waited for from
        ``tick`` on (call before sending ``tick``; tell each ``InSync(tick)``)."""
        admitted = []
        for member in self.members.values():
            if (
                member.state is MemberState.CATCHING_UP
                and member.acked_tick >= 0
                and member.acked_tick >= self.last_sent_tick
            ):
                member.state = MemberState.IN_SYNC
                member.since_tick = tick
                admitted.append(member.node)
        return admitted

    # -- the verdict -----------------------------------------------------------------------

    @property
    def in_sync(self) -> list[Member]:
        return [m for m in self.members.values() if m.state is MemberState.IN_SYNC]

    @property
    def degraded(self) -> bool:
        """No standby holds what is shown (and none may take over)."""
        return not any(m.counted for m in self.members.values())

    def decide(self, tick: int, now: float, *, wait: bool = True) -> Decision:
        """May tick ``tick`` (sent already) be shown at ``now``? ``wait=False`` is
        asynchronous replication: never wait, never fence."""
        if not wait:
            return Decision(Verdict.PUBLISH)
        counted = [m for m in self.members.values() if m.counted and m.since_tick <= tick]
        if len(self.in_sync) < self.min_standbys:
            return Decision(Verdict.HALTED)
        pending = [m for m in counted if m.acked_tick < tick]
        sent_at = self._sent.get(tick, now)
        if pending:
            bound = sent_at + self.ack_timeout
            if now < bound:
                return Decision(Verdict.WAIT, wake_at=bound)
            late = []
            for member in pending:
                if member.state is MemberState.IN_SYNC:
                    member.state = MemberState.LEAVING
                    member.drops += 1
                    late.append(member.node)
            return Decision(Verdict.WAIT, late=tuple(late))
        if not counted:
            return Decision(Verdict.PUBLISH)
        deadline = sent_at + min(m.lease for m in counted)
        if now >= deadline:
            return Decision(Verdict.LEASE_EXPIRED)
        return Decision(Verdict.PUBLISH, deadline=deadline, synced=True)

    def describe(self) -> list[dict[str, object]]:
        return [
            {
                "node": m.node,
                "state": m.state.value,
                "acked_tick": m.acked_tick,
                "drops": m.drops,
            }
            for m in self.members.values()
        ]
