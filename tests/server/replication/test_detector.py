"""The standby's silence detector (sans-I/O)."""

from __future__ import annotations

import pytest

from server.replication.detector import PHI_Z, SilenceDetector


def fed(gaps: list[float], promise: float = 0.2) -> SilenceDetector:
    detector = SilenceDetector(promise)
    now = 0.0
    detector.arrived(now)
    for gap in gaps:
        now += gap
        detector.arrived(now)
    return detector


def test_a_steady_primary_is_given_the_promise_and_no_less() -> None:
    assert fed([1 / 60] * 300).wait() == 0.2
    assert fed([]).wait() == 0.2  # nothing learnt yet


def test_an_irregular_primary_is_given_longer() -> None:
    # A busy machine: mostly 16 ms, now and then a 400 ms tick.
    gaps = ([1 / 60] * 15 + [0.4]) * 16
    wait = fed(gaps).wait()
    assert 0.4 < wait <= 0.8
    mean = sum(gaps[-256:]) / 256
    assert wait == pytest.approx(min(0.8, mean + PHI_Z * _std(gaps[-256:])), rel=1e-9)


def test_the_wait_is_capped_so_a_frozen_primary_is_still_found() -> None:
    assert fed([0.01, 3.0] * 40).wait() == pytest.approx(0.8)


def test_a_new_link_starts_from_the_promise() -> None:
    detector = fed(([1 / 60] * 15 + [0.4]) * 16)
    detector.reset()
    assert detector.wait() == 0.2


def test_a_bad_promise_is_refused() -> None:
    with pytest.raises(ValueError):
        SilenceDetector(0.0)


def _std(values: list[float]) -> float:
    mean = sum(values) / len(values)
    return (sum((v - mean) ** 2 for v in values) / (len(values) - 1)) ** 0.5
