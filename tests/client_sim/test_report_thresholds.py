"""--fail-if: parsing, the check against the report's schema, and breaches with values."""

from __future__ import annotations

import pytest

from client_sim.cli import parse_thresholds
from client_sim.report_thresholds import Threshold, ThresholdError, breaches, parse_threshold

REPORT = {
    "valid": False,
    "ticks": {"p99_ms": 12.5, "p95_ms": None},
    "shots": {"fair_agreement": 0.97, "by_rtt": {"0-50ms": {"agreement": 0.5}}},
}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("shots.fair_agreement<0.99", Threshold("shots.fair_agreement", "<", 0.99)),
        ("ticks.p99_ms > 16.7", Threshold("ticks.p99_ms", ">", 16.7)),
        ("ticks.p99_ms<=16.7", Threshold("ticks.p99_ms", "<=", 16.7)),
        ("ticks.p99_ms>=1e1", Threshold("ticks.p99_ms", ">=", 10.0)),
        ("valid==0", Threshold("valid", "==", 0.0)),
        ("shots.by_rtt.0-50ms.agreement!=1", Threshold("shots.by_rtt.0-50ms.agreement", "!=", 1)),
    ],
)
def test_a_threshold_is_a_path_an_operator_and_a_number(text: str, expected: Threshold) -> None:
    assert parse_threshold(text) == expected


@pytest.mark.parametrize(
    "text", ["ticks.p99_ms", "ticks.p99_ms=>3", "<3", "ticks.p99_ms<fast", "a<nan", "a<inf", ""]
)
def test_a_malformed_threshold_is_one_line_naming_it(text: str) -> None:
    with pytest.raises(ThresholdError) as error:
        parse_threshold(text)
    assert "--fail-if" in str(error.value) and "\n" not in str(error.value)


def test_the_report_s_schema_is_checked_before_the_run() -> None:
    assert len(parse_thresholds(["shots.fair_agreement<0.99", "ticks.p99_ms>16.7"])) == 2
    parse_thresholds(["shots.by_rtt.0-50ms.agreement<0.9"])  # a bucket appears with its shots
    parse_thresholds(["bot_process.tick_hz<57", "valid==0", "latency_ms.rtt_p95>100"])
    with pytest.raises(ValueError, match="no figure 'p99'"):
        parse_thresholds(["ticks.p99>16.7"])
    with pytest.raises(ValueError, match="not a number"):
        parse_thresholds(["shots<1"])


def test_breaches_name_the_threshold_and_the_measured_value() -> None:
    thresholds = [parse_threshold(t) for t in ("ticks.p99_ms>10", "shots.fair_agreement<0.9")]
    assert breaches(REPORT, thresholds) == [
        "threshold ticks.p99_ms>10 breached: ticks.p99_ms = 12.5"
    ]
    assert breaches(REPORT, [parse_threshold("valid==0")]) == [
        "threshold valid==0 breached: valid = 0"
    ]


def test_a_figure_nothing_measured_breaches_its_threshold() -> None:
    """A check that could not be made did not pass (n/a, or a bucket the run lacked)."""
    assert breaches(REPORT, [parse_threshold("ticks.p95_ms>10")]) == [
        "threshold ticks.p95_ms>10 breached: ticks.p95_ms is n/a"
    ]
    assert breaches(REPORT, [parse_threshold("shots.by_rtt.200ms+.agreement<0.9")]) != []
    assert breaches(REPORT, [parse_threshold("shots.by_rtt.0-50ms.agreement<0.4")]) == []
