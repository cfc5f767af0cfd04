"""The commit set's books (sans-I/O): who a tick waits for, until when it may be shown."""

from __future__ import annotations

import math

import pytest

from server.replication.commit import LEASE_SHARE, CommitSet, MemberState, Verdict

LEASE, BOUND = 0.15, 0.1


def books(min_standbys: int = 0) -> CommitSet:
    return CommitSet(lease=LEASE, ack_timeout=BOUND, min_standbys=min_standbys)


def in_sync(commit: CommitSet, node: str, tick: int, now: float = 0.0) -> None:
    """``node`` joins, catches up with the ticks sent so far and is admitted at ``tick``."""
    commit.join(node)
    commit.acked(node, commit.last_sent_tick)
    assert commit.admissions(tick) == [node]


def test_without_a_standby_a_tick_is_shown_at_once_and_degraded() -> None:
    commit = books()
    commit.sent(1, 0.0)
    decision = commit.decide(1, 0.0)
    assert decision.verdict is Verdict.PUBLISH and decision.deadline is None
    assert commit.degraded and not decision.synced


def test_a_catching_up_standby_is_not_waited_for_until_admitted() -> None:
    commit = books()
    commit.join("b")
    commit.sent(1, 0.0)
    assert commit.decide(1, 0.0).verdict is Verdict.PUBLISH  # not in the set yet
    assert commit.admissions(2) == []  # it has acknowledged nothing
    commit.acked("b", 0)
    assert commit.admissions(2) == []  # not every tick sent so far
    commit.acked("b", 1)
    assert commit.admissions(2) == ["b"]
    commit.sent(2, 1.0)
    assert commit.decide(2, 1.0).verdict is Verdict.WAIT


def test_a_member_holds_the_tick_before_it_is_shown_and_the_lease_runs_from_the_send() -> None:
    commit = books()
    commit.sent(4, 0.0)
    in_sync(commit, "b", 5)
    commit.sent(5, 10.0)
    waiting = commit.decide(5, 10.01)
    assert waiting.verdict is Verdict.WAIT and waiting.wake_at == pytest.approx(10.0 + BOUND)
    commit.acked("b", 5)
    shown = commit.decide(5, 10.02)
    assert shown.verdict is Verdict.PUBLISH and shown.synced
    assert shown.deadline == pytest.approx(10.0 + LEASE)
    # Acknowledged, but after the lease ran out: not shown (the standby may promote soon).
    commit.sent(6, 20.0)
    commit.acked("b", 6)
    assert commit.decide(6, 20.0 + LEASE).verdict is Verdict.LEASE_EXPIRED


def test_a_late_member_is_told_once_and_waited_for_until_it_answers() -> None:
    commit = books()
    commit.sent(1, 0.0)
    in_sync(commit, "b", 2)
    commit.sent(2, 1.0)
    late = commit.decide(2, 1.0 + BOUND)
    assert late.verdict is Verdict.WAIT and late.late == ("b",) and late.wake_at is None
    assert commit.members["b"].state is MemberState.LEAVING and commit.members["b"].drops == 1
    again = commit.decide(2, 5.0)  # still waiting, nobody told twice
    assert again.verdict is Verdict.WAIT and again.late == ()
    assert not commit.degraded
    commit.resynced("b")  # it answered: it knows it is out, and is no longer eligible
    assert commit.decide(2, 5.0).verdict is Verdict.PUBLISH
    assert commit.degraded


def test_a_leaving_member_that_acknowledges_after_all_lets_the_tick_through() -> None:
    commit = books()
    commit.sent(1, 0.0)
    in_sync(commit, "b", 2)
    commit.sent(2, 1.0)
    assert commit.decide(2, 1.0 + BOUND).late == ("b",)
    commit.acked("b", 2)
    decision = commit.decide(2, 1.0 + BOUND)
    assert decision.verdict is Verdict.PUBLISH and decision.synced
    commit.sent(3, 1.2)
    assert commit.decide(3, 1.2).verdict is Verdict.WAIT  # and the next one waits again


def test_a_member_whose_link_ended_is_not_waited_for() -> None:
    commit = books()
    commit.sent(1, 0.0)
    in_sync(commit, "b", 2)
    commit.sent(2, 1.0)
    commit.leave("b")
    assert commit.decide(2, 1.0).verdict is Verdict.PUBLISH


def test_min_standbys_halts_until_enough_are_in_sync() -> None:
    commit = books(min_standbys=1)
    commit.sent(1, 0.0)
    assert commit.decide(1, 0.0).verdict is Verdict.HALTED
    in_sync(commit, "b", 2)
    commit.sent(2, 0.1)
    commit.acked("b", 2)
    assert commit.decide(2, 0.1).verdict is Verdict.PUBLISH


def test_the_lease_is_the_shortest_a_member_grants() -> None:
    commit = books()
    commit.sent(0, 0.0)
    commit.join("b", promise=0.1)  # a standby that campaigns after 100 ms of silence
    commit.acked("b", 0)
    assert commit.admissions(1) == ["b"]
    assert commit.members["b"].lease == pytest.approx(LEASE_SHARE * 0.1)
    commit.sent(1, 0.0)
    commit.acked("b", 1)
    assert commit.decide(1, 0.01).deadline == pytest.approx(LEASE_SHARE * 0.1)
    commit.join("c", promise=60.0)  # a longer promise never stretches our own lease
    assert commit.members["c"].lease == LEASE


def test_asynchronous_replication_never_waits() -> None:
    commit = books()
    commit.sent(1, 0.0)
    in_sync(commit, "b", 2)
    commit.sent(2, 0.0)
    decision = commit.decide(2, 100.0, wait=False)
    assert decision.verdict is Verdict.PUBLISH and decision.deadline is None


@pytest.mark.parametrize(
    ("lease", "bound", "minimum"),
    [(0.0, 0.01, 0), (math.inf, 0.1, 0), (0.1, 0.1, 0), (0.1, 0.05, -1)],
)
def test_bad_settings_are_refused(lease: float, bound: float, minimum: int) -> None:
    with pytest.raises(ValueError):
        CommitSet(lease=lease, ack_timeout=bound, min_standbys=minimum)
