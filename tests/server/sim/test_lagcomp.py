"""The view-time rule of lag compensation: believe, replace or clamp a client's claim.

The figures below are binary fractions (quarters, eighths), so every sum the rule computes
is exact in float64 and the expectations can be exact.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from server.sim.lagcomp import LagCompensation, ViewTimeVerdict

# arrival 10, rtt 0.5 (one way 0.25), interpolation delay 0.25: the server expects 9.5.
RULES = LagCompensation(max_rewind=1.0, tolerance=0.25)
ARRIVAL, RTT, INTERP, PRESENT = 10.0, 0.5, 0.25, 10.0
EXPECTED = 9.5


def judge(claim: float, rules: LagCompensation = RULES, rtt: float | None = RTT, **kw: float):
    args = {"arrival": ARRIVAL, "interp_delay": INTERP, "present": PRESENT, **kw}
    return rules.view_time(claim, rtt=rtt, **args)


def test_defaults_follow_the_field() -> None:
    rules = LagCompensation()
    assert (rules.max_rewind, rules.tolerance, rules.trade_window) == (0.2, 0.05, 0.0)


@pytest.mark.parametrize("claim", [9.5, 9.625, 9.375, 9.75, 9.25])
def test_a_claim_within_tolerance_of_the_estimate_is_kept(claim: float) -> None:
    assert judge(claim) == (claim, ViewTimeVerdict.ACCEPTED)


@pytest.mark.parametrize("claim", [9.875, 9.125, 9.2499, 9.7501, 10.0])
def test_a_claim_beyond_tolerance_is_replaced_by_the_estimate(claim: float) -> None:
    assert judge(claim) == (EXPECTED, ViewTimeVerdict.REPLACED)


def test_the_estimate_uses_half_the_rtt_and_the_interpolation_delay() -> None:
    rules = LagCompensation(max_rewind=1.0, tolerance=0.0)
    # A zero tolerance replaces every claim but the estimate itself: the result shows it.
    assert judge(0.0, rules, rtt=0.25, interp_delay=0.125) == (9.75, ViewTimeVerdict.REPLACED)
    assert judge(9.75, rules, rtt=0.25, interp_delay=0.125) == (9.75, ViewTimeVerdict.ACCEPTED)


def test_a_claim_older_than_the_cap_is_clamped_to_it() -> None:
    assert judge(8.0, rtt=None) == (9.0, ViewTimeVerdict.CLAMPED)


def test_a_claim_exactly_at_the_cap_is_accepted() -> None:
    assert judge(9.0, rtt=None) == (9.0, ViewTimeVerdict.ACCEPTED)


def test_a_replaced_claim_whose_estimate_is_too_old_is_clamped() -> None:
    # rtt 2 s: the estimate 10 - 1 - 0.25 = 8.75 lies beyond the 1 s cap.
    assert judge(8.75 + 0.5, rtt=2.0) == (9.0, ViewTimeVerdict.CLAMPED)


def test_an_accepted_claim_that_is_too_old_is_still_clamped() -> None:
    # The claim agrees with the (old) estimate but the cap wins.
    assert judge(8.75, rtt=2.0) == (9.0, ViewTimeVerdict.CLAMPED)


def test_a_claim_in_the_future_is_cut_to_the_present_and_counted() -> None:
    assert judge(12.0, rtt=None) == (PRESENT, ViewTimeVerdict.CLAMPED)
    # Within tolerance of an estimate that is itself in the future (arrival after present).
    assert judge(10.125, arrival=10.5) == (PRESENT, ViewTimeVerdict.CLAMPED)


@pytest.mark.parametrize("claim", [9.0, 9.25, 9.875, 10.0])
def test_without_an_rtt_the_claim_is_taken_subject_to_the_cap(claim: float) -> None:
    assert judge(claim, rtt=None) == (claim, ViewTimeVerdict.ACCEPTED)


times = st.floats(-1e4, 1e4, allow_nan=False)


@given(
    claim=times,
    arrival=times,
    rtt=st.none() | st.floats(0.0, 5.0),
    interp=st.floats(0.0, 1.0),
    present=st.floats(0.0, 1e4),
    max_rewind=st.floats(0.0, 2.0),
    tolerance=st.floats(0.0, 1.0),
)
def test_the_result_always_lies_between_the_cap_and_the_present(
    claim: float,
    arrival: float,
    rtt: float | None,
    interp: float,
    present: float,
    max_rewind: float,
    tolerance: float,
) -> None:
    rules = LagCompensation(max_rewind=max_rewind, tolerance=tolerance)
    time, verdict = rules.view_time(claim, arrival, rtt, interp, present)
    assert present - max_rewind <= time <= present
    if verdict is ViewTimeVerdict.CLAMPED:
        assert time in (present - max_rewind, present)
    elif verdict is ViewTimeVerdict.REPLACED:
        assert rtt is not None
        expected = arrival - rtt / 2.0 - interp
        assert abs(claim - expected) > tolerance
        assert time == min(expected, present)
    else:
        if rtt is not None:
            assert abs(claim - (arrival - rtt / 2.0 - interp)) <= tolerance
        assert time == min(claim, present)


def test_a_living_shooter_may_always_fire() -> None:
    assert LagCompensation().may_fire(123.0, None)


def test_without_a_trade_window_a_shot_seen_after_death_is_refused() -> None:
    rules = LagCompensation(trade_window=0.0)
    assert rules.may_fire(1.875, 2.0)
    assert rules.may_fire(2.0, 2.0)  # seen at the very moment of death: still counts
    assert not rules.may_fire(2.0 + 1e-9, 2.0)


def test_a_trade_window_lets_shots_seen_shortly_after_death_count() -> None:
    rules = LagCompensation(trade_window=0.25)
    assert rules.may_fire(2.125, 2.0)
    assert rules.may_fire(2.25, 2.0)
    assert not rules.may_fire(2.25 + 1e-9, 2.0)
