"""Per-connection budgets: a token bucket refilled by server time only (never by a clock
that stands still or runs back), and the watch that makes a sustained flood an offence
while a single burst is not one."""

from __future__ import annotations

import pytest

from server.sim.input_budget import (
    PING_ALLOWANCE,
    Allowance,
    Budget,
    TokenBucket,
    input_allowance,
)

TICK = 1 / 60


def test_a_bucket_starts_full_and_grants_at_most_its_burst() -> None:
    bucket = TokenBucket(Allowance(60.0, 60), now=5.0)
    assert bucket.take(100, 5.0) == 60
    assert bucket.take(1, 5.0) == 0


def test_a_bucket_refills_at_its_rate_in_server_time() -> None:
    bucket = TokenBucket(Allowance(60.0, 60), now=0.0)
    bucket.take(60, 0.0)
    assert bucket.take(100, 0.5) == 30
    assert bucket.take(1, 0.5 + TICK / 2) == 0  # half a token is no token...
    assert bucket.take(1, 0.5 + TICK) == 1  # ...until the other half comes


def test_a_bucket_saves_up_no_more_than_its_burst() -> None:
    bucket = TokenBucket(Allowance(60.0, 60), now=0.0)
    bucket.take(60, 0.0)
    assert bucket.take(1000, 3600.0) == 60


def test_time_that_stands_still_refills_nothing() -> None:
    bucket = TokenBucket(Allowance(60.0, 4), now=1.0)
    assert [bucket.take(1, 1.0) for _ in range(6)] == [1, 1, 1, 1, 0, 0]


def test_time_that_goes_backwards_refills_nothing_and_is_not_counted_twice() -> None:
    bucket = TokenBucket(Allowance(10.0, 10), now=2.0)
    bucket.take(10, 2.0)
    assert bucket.take(5, 1.0) == 0  # a second back: nothing
    assert bucket.last == 2.0
    assert bucket.take(5, 1.5) == 0  # forward again, but still before 2.0: nothing
    assert bucket.take(10, 2.5) == 5  # half a second after the latest time seen


@pytest.mark.parametrize(("rate", "burst"), [(0.0, 1), (-1.0, 1), (float("inf"), 1), (1.0, 0)])
def test_an_allowance_is_positive(rate: float, burst: int) -> None:
    with pytest.raises(ValueError, match="budget"):
        Allowance(rate, burst)


def test_the_allowances_follow_the_tick_rate_and_leave_room_for_pings() -> None:
    assert input_allowance(60) == Allowance(60.0, 60)
    assert input_allowance(128) == Allowance(128.0, 128)
    # A client pings 10/s until its clock is synced and echoes 4 probes a second.
    assert PING_ALLOWANCE.rate >= 14 and PING_ALLOWANCE.burst >= 10


def flood(budget: Budget, per_tick: int, seconds: float, start: float = 0.0) -> list[float]:
    """Send ``per_tick`` frames every tick for ``seconds``: the times offences came at."""
    return [
        start + k * TICK
        for k in range(round(seconds * 60))
        if budget.admit(per_tick, start + k * TICK)[1]
    ]


def test_an_honest_client_is_never_dropped() -> None:
    budget = Budget(input_allowance(60), 0.0)
    assert all(budget.admit(1, k * TICK) == (1, False) for k in range(60 * 30))


def test_a_sustained_flood_is_one_offence_a_second_from_its_second_second_on() -> None:
    budget = Budget(input_allowance(60), 0.0)
    offences = flood(budget, 20, 4.0)
    assert [int(t) for t in offences] == [1, 2, 3]


def test_a_flood_gets_the_burst_and_the_rate_no_more() -> None:
    budget = Budget(input_allowance(60), 0.0)
    granted = sum(budget.admit(20, k * TICK)[0] for k in range(60 * 4))
    assert 60 + 60 * 4 - 2 <= granted <= 60 + 60 * 4


def test_a_burst_is_dropped_beyond_the_budget_but_is_no_offence() -> None:
    budget = Budget(input_allowance(60), 0.0)
    granted, offence = budget.admit(600, 0.0)  # ten seconds' worth at once
    assert (granted, offence) == (60, False)
    assert flood(budget, 1, 10.0, start=TICK) == []
    assert budget.admit(600, 20.0) == (60, False)  # and again, once it has saved up


def test_a_flood_that_pauses_for_a_second_starts_over() -> None:
    budget = Budget(input_allowance(60), 0.0)
    assert flood(budget, 20, 1.0) == []  # second 0: flooded, but alone
    assert flood(budget, 20, 1.0, start=2.0) == []  # second 1 was quiet: alone again
    assert len(flood(budget, 20, 1.0, start=3.0)) == 1  # follows second 2: an offence


def test_sending_somewhat_over_budget_drops_the_surplus_without_offence() -> None:
    budget = Budget(input_allowance(60), 0.0)
    granted = dropped = 0
    for k in range(60 * 10):  # three inputs every two ticks: 90 a second
        wanted = 1 + k % 2
        got, offence = budget.admit(wanted, k * TICK)
        assert not offence
        granted, dropped = granted + got, dropped + wanted - got
    assert granted <= 60 + 60 * 10 and dropped >= 240


def test_pings_have_their_own_budget_with_the_same_rule() -> None:
    budget = Budget(PING_ALLOWANCE, 0.0)
    assert budget.admit(1000, 0.0) == (20, False)
    offences = [budget.admit(100, 1.0 + k / 10)[1] for k in range(20)]
    assert offences.count(True) == 2  # seconds 1 and 2, each following a flooded one


def test_a_flood_is_ten_seconds_of_drops_in_one_and_a_forfeit_earns_nothing() -> None:
    budget = Budget(Allowance(60.0, 60), 0.0)
    assert budget.admit(60 + 600, 0.5) == (60, False) and not budget.flooding  # 600 dropped
    budget.admit(1, 0.5)
    assert budget.flooding  # 601 dropped within the second
    budget.forfeit(3.0)
    assert budget.admit(1, 3.0) == (0, False)  # nothing earned from 0.5 to 3.0
    assert budget.admit(1, 3.1)[0] == 1 and not budget.flooding  # (a new second)
