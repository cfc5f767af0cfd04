"""A run whose bot process could not keep up, or whose bots left a live primary, is no
measurement: valid false, with the reasons, in the report and its summary."""

from __future__ import annotations

from typing import Any

from client_sim.bot import FailoverEvent
from client_sim.report import build_report, format_summary
from client_sim.swarm import ProcessFigures, SwarmResult


def report_of(**fields: Any) -> dict[str, Any]:
    result = SwarmResult(requested=4, connected=4, duration_s=10.0, **fields)
    return build_report(
        result, latency_spec="fixed(40ms)", workers=1, server_before=None, server_after=None
    )


def process(tick_hz: float, target_hz: int = 60, cpu_s: float = 3.0) -> ProcessFigures:
    return ProcessFigures(target_hz, round(tick_hz * 10), 10.0, cpu_s, 10.5)


def resumed(epoch_before: int, epoch_after: int) -> FailoverEvent:
    return FailoverEvent(100, 50, 1.0, epoch_after, 50, 0.3, epoch_before=epoch_before)


def test_a_bot_process_that_kept_the_tick_rate_makes_a_valid_run() -> None:
    report = report_of(processes=[process(59.8)], failovers=[resumed(1, 2)])
    assert report["valid"] is True and report["invalid_reasons"] == []
    assert report["bot_process"]["tick_hz"] == 59.8
    assert report["bot_process"]["target_hz"] == 60
    assert report["bot_process"]["cpu_cores"] == round(3.0 / 10.5, 3)
    assert "WARNING" not in format_summary(report)


def test_a_bot_process_at_18_hz_of_60_makes_an_invalid_run_that_says_why() -> None:
    report = report_of(processes=[process(18.0)])
    assert report["valid"] is False
    (reason,) = report["invalid_reasons"]
    assert "18 ticks/s of 60" in reason and "30%" in reason
    summary = format_summary(report)
    assert "bot process 18.0 ticks/s of 60 (30%)" in summary
    assert f"WARNING     invalid run: {reason}" in summary


def test_the_slowest_worker_decides_and_cpu_adds_up() -> None:
    report = report_of(processes=[process(60.0, cpu_s=4.0), process(50.0, cpu_s=5.0)])
    assert report["bot_process"]["tick_hz"] == 50.0
    assert report["bot_process"]["cpu_cores"] == round(9.0 / 10.5, 3)
    assert [p["tick_hz"] for p in report["bot_process"]["processes"]] == [60.0, 50.0]
    assert report["valid"] is False


def test_95_percent_of_the_tick_rate_is_enough() -> None:
    assert report_of(processes=[process(57.0)])["valid"] is True
    assert report_of(processes=[process(56.9)])["valid"] is False


def test_bots_that_reconnected_at_the_same_epoch_make_an_invalid_run() -> None:
    """They left a primary that was still serving: no failover happened."""
    report = report_of(processes=[process(60.0)], failovers=[resumed(1, 1), resumed(1, 2)])
    assert report["failover"]["reconnects_without_failover"] == 1
    assert report["valid"] is False
    assert "1 bot(s) reconnected without a failover" in report["invalid_reasons"][0]
    assert "a starved bot process" in report["invalid_reasons"][0]


def test_bots_that_left_a_node_that_skipped_ticks_blame_the_node_s_stall() -> None:
    result = SwarmResult(
        requested=4, connected=4, duration_s=10.0, processes=[process(60.0)],
        failovers=[resumed(1, 1)],
    )  # fmt: skip
    report = build_report(
        result,
        latency_spec="fixed(40ms)",
        workers=1,
        server_before={"tick": 0, "ticks_skipped": 0},
        server_after={"tick": 600, "ticks_skipped": 180},
    )
    (reason,) = report["invalid_reasons"]
    assert "the node stalled (180 ticks skipped) past the bots' probe" in reason


def test_a_failover_the_bots_saw_counts_as_a_kill_even_when_nobody_here_made_it() -> None:
    """arena-chaos kill from another terminal: the survivor's /health gives the timings."""
    survivor = {"epoch": 2, "tick": 900, "failover": {"promoted_at_tick": 95, "detected_at": 5.0}}
    result = SwarmResult(
        requested=2,
        connected=2,
        failovers=[resumed(1, 2), resumed(1, 2)],
        clock_to_wall=3.9,  # the bots' last snapshot: loop 1.0 = wall 4.9
    )
    report = build_report(
        result, latency_spec="x", workers=1, server_before=None, server_after=survivor
    )
    failover = report["failover"]
    assert failover["kills"] == 1
    assert failover["detected_ms"] == 100.0  # from the estimated kill time
    assert failover["acked_ticks_lost"] == 2 * (100 - 95)
    assert "1 kill(s)" in format_summary(report)
