"""The server's RTT estimate: the minimum of the recent samples, kept incrementally."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from server.rtt import RttEstimator, TickSendLog


@given(st.lists(st.floats(0.0, 2.0), min_size=1, max_size=300), st.integers(1, 64))
def test_the_estimate_is_the_minimum_of_the_window(samples: list[float], window: int) -> None:
    estimator = RttEstimator(window)
    for i, sample in enumerate(samples):
        estimator.observe(sample)
        assert estimator.estimate == min(samples[max(0, i + 1 - window) : i + 1])


def test_negative_samples_are_ignored_and_nothing_is_known_before_a_sample() -> None:
    estimator = RttEstimator()
    assert estimator.estimate is None
    estimator.observe(-0.1)
    assert estimator.estimate is None


def test_the_send_log_forgets_ticks_overwritten_in_its_ring() -> None:
    log = TickSendLog(capacity=4)
    log.record(1, 0.5)
    assert log.sent_at(1) == 0.5
    log.record(5, 0.9)  # same ring slot as tick 1
    assert log.sent_at(1) is None and log.sent_at(5) == 0.9
