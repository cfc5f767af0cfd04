"""The view-time rule of lag compensation: take, clamp or cap a client's claim.

The figures below are binary fractions (quarters, eighths), so every sum the rule computes
is exact in float64 and the expectations can be exact.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from server.sim.lagcomp import LagCompensation, LinkEstimate, ViewTimeVerdict

# Input arrives at 10; its client held the snapshot of 9.75; the link: rtt 0.5, no spread;
# interp 0.25; one tick 0.125. Earliest: max(9.75 - 0.25, 10 - 0.25 - 0.25) - 0.125.
RULES = LagCompensation(max_rewind=1.0, max_interp_delay=0.5)
ARRIVAL, ACK, LINK, INTERP, PERIOD = 10.0, 9.75, LinkEstimate(0.5, 0.0), 0.25, 0.125
EARLIEST, LATEST = 9.375, 9.75


def judge(
    claim: float,
    rules: LagCompensation = RULES,
    ack_time: float | None = ACK,
    link: LinkEstimate | None = LINK,
    **kw: float,
) -> tuple[float, ViewTimeVerdict]:
    args = {"arrival": ARRIVAL, "interp_delay": INTERP, "period": PERIOD, **kw}
    return rules.view_time(claim, ack_time=ack_time, link=link, **args)


def test_defaults_follow_the_field() -> None:
    rules = LagCompensation()
    assert (rules.max_rewind, rules.trade_window, rules.max_interp_delay) == (0.2, 0.0, 0.1)


def test_the_interpolation_delay_granted_is_bounded() -> None:
    rules = LagCompensation(max_interp_delay=0.125)
    assert rules.grant_interp_delay(0.05) == 0.05
    assert rules.grant_interp_delay(1.0) == 0.125


def test_the_window_runs_from_what_the_client_must_have_held_to_its_newest_snapshot() -> None:
    assert RULES.window(ARRIVAL, ACK, LINK, INTERP, PERIOD) == (EARLIEST, LATEST)


@pytest.mark.parametrize("claim", [EARLIEST, 9.5, 9.625, LATEST])
def test_a_claim_inside_the_window_is_taken_as_it_is(claim: float) -> None:
    assert judge(claim) == (claim, ViewTimeVerdict.CLAIMED)


@pytest.mark.parametrize(
    ("claim", "clamped"), [(9.25, EARLIEST), (9.0, EARLIEST), (9.875, LATEST), (12.0, LATEST)]
)
def test_a_claim_outside_the_window_is_clamped_into_it(claim: float, clamped: float) -> None:
    assert judge(claim) == (clamped, ViewTimeVerdict.CLAMPED)


def test_the_spread_the_probes_measured_widens_the_slack() -> None:
    jittery = LinkEstimate(0.5, 0.125)
    assert judge(9.25) == (EARLIEST, ViewTimeVerdict.CLAMPED)
    assert judge(9.25, link=jittery) == (9.25, ViewTimeVerdict.CLAIMED)


def test_an_old_ack_does_not_buy_rewind_the_measured_link_does_not_allow() -> None:
    # The client says its newest snapshot is 2 s old: the probes say its link is 0.5 s.
    assert judge(8.0, ack_time=8.0) == (EARLIEST, ViewTimeVerdict.CLAMPED)


def test_a_slow_link_with_a_fresh_ack_is_bounded_by_the_ack() -> None:
    # rtt 1 s but the ack is recent: the ack bound (9.75 - 0.25 - slack) is the later one.
    assert RULES.window(ARRIVAL, ACK, LinkEstimate(1.0, 0.0), INTERP, PERIOD) == (9.375, 9.75)
    assert RULES.window(ARRIVAL, 9.0, LinkEstimate(1.0, 0.0), INTERP, PERIOD) == (8.875, 9.0)


def test_before_any_probe_the_client_is_judged_as_if_it_had_no_latency() -> None:
    # Not answering probes earns nothing: earliest = arrival - interp - one tick.
    assert RULES.window(ARRIVAL, None, None, INTERP, PERIOD) == (9.625, ARRIVAL)
    assert judge(9.625, link=None) == (9.625, ViewTimeVerdict.CLAIMED)
    assert judge(9.5, link=None) == (9.625, ViewTimeVerdict.CLAMPED)
    assert judge(8.5, ack_time=8.5, link=None) == (9.625, ViewTimeVerdict.CLAMPED)


def test_the_cap_counts_from_the_arrival() -> None:
    rules = LagCompensation(max_rewind=0.5)
    assert judge(9.5, rules) == (9.5, ViewTimeVerdict.CLAIMED)  # exactly at the cap
    assert judge(9.375, rules) == (9.5, ViewTimeVerdict.CAPPED)
    assert judge(9.0, rules) == (9.5, ViewTimeVerdict.CAPPED)  # clamped, then capped


times = st.floats(-1e4, 1e4, allow_nan=False)
spans = st.floats(0.0, 2.0, allow_nan=False)


@given(
    claim=times,
    arrival=times,
    ack_back=st.none() | spans,
    link=st.none() | st.builds(LinkEstimate, spans, st.floats(0.0, 0.5)),
    interp=st.floats(0.0, 5.0),
    max_rewind=spans,
    max_interp=st.floats(0.0, 0.25),
    period=st.floats(1 / 128, 1 / 10),
)
def test_no_claim_is_judged_further_back_than_the_link_and_the_rules_allow(
    claim: float,
    arrival: float,
    ack_back: float | None,
    link: LinkEstimate | None,
    interp: float,
    max_rewind: float,
    max_interp: float,
    period: float,
) -> None:
    """Whatever the client says (any claim, any ack, any interpolation delay asked), the
    judged time is no older than the cap allows, nor older than the measured link plus the
    granted interpolation and the slack; and a claim inside the window stands."""
    rules = LagCompensation(max_rewind=max_rewind, max_interp_delay=max_interp)
    granted = rules.grant_interp_delay(interp)
    ack_time = None if ack_back is None else arrival - ack_back
    time, verdict = rules.view_time(claim, arrival, ack_time, link, granted, period)
    assert time >= arrival - max_rewind
    measured = link if link is not None else LinkEstimate(0.0, 0.0)
    slack = period + measured.spread
    allowed = max(measured.rtt, measured.rtt / 2.0 + granted) + slack
    assert time >= arrival - allowed - 1e-9
    earliest, latest = rules.window(arrival, ack_time, link, granted, period)
    assert time <= max(latest, arrival - max_rewind)  # nothing newer than it held
    if earliest <= claim <= latest and claim >= arrival - max_rewind:
        assert (time, verdict) == (claim, ViewTimeVerdict.CLAIMED)
    else:
        assert verdict is not ViewTimeVerdict.CLAIMED
    assert not math.isnan(time)


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
