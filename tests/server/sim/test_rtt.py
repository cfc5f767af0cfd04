"""The server's probes: a round trip no client can forge, robust to outliers and stalls."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from server.sim.lagcomp import LinkEstimate
from server.sim.rtt import HIGH, LOW, RttProbes


def answer(probes: RttProbes, now: float, rtt: float) -> None:
    """Send what is due at ``now`` and echo every probe ``rtt`` later."""
    slots, ids = probes.due(now)
    for slot, probe_id in zip(slots.tolist(), ids.tolist(), strict=True):
        assert probes.echo(slot, probe_id, now + rtt)


def test_nothing_is_known_before_the_first_echo_and_empty_seats_are_not_probed() -> None:
    probes = RttProbes(3, interval=0.25)
    assert probes.due(0.0)[0].tolist() == []
    probes.reset(1, now=0.0)
    assert probes.estimate(1) is None
    assert probes.due(0.0)[0].tolist() == [1]
    assert probes.due(0.125)[0].tolist() == []  # next one due a whole interval later
    assert probes.due(0.25)[0].tolist() == [1]


def test_the_round_trip_is_a_low_percentile_and_the_spread_a_high_one_less_it() -> None:
    probes = RttProbes(1, interval=0.25, window=32)
    probes.reset(0, now=0.0)
    rtts = [0.04 + 0.001 * (k % 10) for k in range(20)] + [0.5]  # one retransmitted echo
    for k, rtt in enumerate(rtts):
        answer(probes, 0.25 * k, rtt)
    low, high = np.percentile(rtts, (LOW, HIGH))
    estimate = probes.estimate(0)
    assert estimate == LinkEstimate(pytest.approx(low), pytest.approx(high - low))
    assert 0.04 <= estimate.rtt < 0.042  # one outlier moves neither the round trip much


@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=100), st.integers(1, 16))
def test_the_estimate_covers_only_the_recent_window(rtts: list[float], window: int) -> None:
    probes = RttProbes(1, interval=0.0, window=window)
    probes.reset(0, now=0.0)
    for k, rtt in enumerate(rtts):
        answer(probes, 10.0 * k, rtt)
    recent = np.array(rtts[-window:])
    sent = 10.0 * np.arange(len(rtts))[-window:]
    # The samples are what the server measured: echo arrival less send, in float64.
    measured = (sent + recent) - sent
    low, high = np.percentile(measured, (LOW, HIGH))  # numpy's linear percentiles, to rounding
    estimate = probes.estimate(0)
    assert estimate is not None
    assert estimate.rtt == pytest.approx(low, abs=1e-12)
    assert estimate.spread == pytest.approx(high - low, abs=1e-12)


def test_unknown_repeated_and_negative_ids_make_no_sample() -> None:
    probes = RttProbes(1, interval=0.25)
    probes.reset(0, now=0.0)
    (_,), (probe_id,) = probes.due(0.0)
    assert not probes.echo(0, probe_id + 1, 0.1)  # never sent
    assert not probes.echo(0, -1, 0.1)
    assert probes.echo(0, probe_id, 0.1)
    assert not probes.echo(0, probe_id, 0.2)  # answered already
    assert probes.estimate(0) == LinkEstimate(pytest.approx(0.1), 0.0)


def test_an_echo_of_a_probe_overwritten_in_flight_makes_no_sample() -> None:
    probes = RttProbes(1, interval=0.25, in_flight=2)
    probes.reset(0, now=0.0)
    first = probes.due(0.0)[1][0]
    probes.due(0.25)
    probes.due(0.5)  # takes the first probe's place in the ring
    assert not probes.echo(0, first, 0.6)


def test_a_sample_spanning_skipped_ticks_is_dropped() -> None:
    probes = RttProbes(1, interval=0.25)
    probes.reset(0, now=0.0)
    (_,), (probe_id,) = probes.due(0.0)
    probes.note_skip(0.2)  # the loop stalled: the echo's arrival says nothing of the link
    assert not probes.echo(0, probe_id, 0.3)
    (_,), (probe_id,) = probes.due(0.25)  # sent after the stall: a sample again
    assert probes.echo(0, probe_id, 0.3)
    assert probes.estimate(0) == LinkEstimate(pytest.approx(0.05), 0.0)


def test_a_forgotten_seat_is_neither_probed_nor_sampled() -> None:
    probes = RttProbes(2, interval=0.25)
    probes.reset(0, now=0.0)
    (_,), (probe_id,) = probes.due(0.0)
    probes.forget(0)
    assert not probes.echo(0, probe_id, 0.05)
    assert probes.estimate(0) is None
    assert probes.due(1.0)[0].tolist() == []


def test_a_new_player_starts_with_nothing_measured() -> None:
    probes = RttProbes(1, interval=0.25)
    probes.reset(0, now=0.0)
    answer(probes, 0.0, 0.1)
    probes.reset(0, now=1.0)
    assert probes.estimate(0) is None
    answer(probes, 1.0, 0.2)
    assert probes.estimate(0) == LinkEstimate(pytest.approx(0.2), 0.0)


def test_an_assumed_estimate_stands_until_the_first_own_sample() -> None:
    """A promoted standby holds its predecessor's estimate of each seat's link."""
    probes = RttProbes(1, interval=0.25)
    probes.reset(0, now=0.0)
    probes.assume(0, LinkEstimate(0.15, 0.01))
    assert probes.estimate(0) == LinkEstimate(0.15, 0.01)
    answer(probes, 0.0, 0.12)
    assert probes.estimate(0) == LinkEstimate(pytest.approx(0.12), 0.0)
    probes.reset(0, now=1.0)  # a new player: nothing assumed
    assert probes.estimate(0) is None


def test_the_slots_whose_estimate_was_set_are_taken_once_in_order() -> None:
    probes = RttProbes(4, interval=0.25)
    probes.reset(2, now=0.0)
    probes.reset(0, now=0.0)
    assert probes.take_changed() == [0, 2] and probes.take_changed() == []
    answer(probes, 0.0, 0.05)  # an echo each
    probes.assume(3, LinkEstimate(0.08, 0.01))  # (an estimate nobody measured yet)
    probes.assume(0, LinkEstimate(0.08, 0.01))  # (ignored: 0 has a sample of its own)
    assert probes.take_changed() == [0, 2, 3]
    probes.forget(2)
    assert probes.take_changed() == [2]
