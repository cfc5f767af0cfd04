"""bench/server_load.py's verdicts: a run is refused when it did not measure the server under
every requested bot at 60 Hz, and the record is one whole run, the median valid one."""

from __future__ import annotations

from typing import Any

from bench.server_load import BOT_TICKS_PER_S_FLOOR, invalid_reasons, median_run, window_ticks


def measured(players: int = 300, **figures: Any) -> dict[str, Any]:
    """A run's record as ``measure`` builds it, every bot seated at 60 Hz unless ``figures``
    says otherwise, with the verdict of the rule under test."""
    run: dict[str, Any] = {
        "players": players,
        "connected": players,
        "seated_at_start": players,
        "seated_at_end": players,
        "bot_reconnects": 0,
        "ticks": 600,
        "bot_ticks_per_s": 59.9,
        "server_cpu_us_per_player_tick": 26.0,
        "tick_p99_ms": 5.0,
        **figures,
    }
    reasons = invalid_reasons(run)
    return {**run, "valid": not reasons, "invalid_reasons": reasons}


def run(cpu: float, p99: float) -> dict[str, Any]:
    return measured(server_cpu_us_per_player_tick=cpu, tick_p99_ms=p99)


def test_the_floor_is_95_percent_of_the_tick_rate() -> None:
    assert BOT_TICKS_PER_S_FLOOR == 57.0


def test_a_run_at_the_fields_pace_with_every_bot_seated_is_valid() -> None:
    assert measured()["valid"] is True
    assert measured()["invalid_reasons"] == []
    assert measured(bot_ticks_per_s=57.0)["valid"] is True


def test_a_bot_process_below_57_hz_makes_the_run_invalid() -> None:
    slow = measured(bot_ticks_per_s=51.23)
    assert slow["valid"] is False
    assert slow["invalid_reasons"] == ["bot process kept 51.2 Hz (< 57.0)"]
    assert measured(bot_ticks_per_s=None)["invalid_reasons"] == [
        "bot process reported no tick rate"
    ]


def test_any_reconnect_makes_the_run_invalid() -> None:
    assert measured(bot_reconnects=1)["invalid_reasons"] == ["1 bot reconnect without a failover"]
    assert measured(bot_reconnects=3)["invalid_reasons"] == ["3 bot reconnects without a failover"]


def test_fewer_bots_seated_or_connected_than_asked_make_the_run_invalid() -> None:
    assert measured(seated_at_start=299)["invalid_reasons"] == [
        "299 of 300 bots seated at the window's start"
    ]
    assert measured(seated_at_end=290)["invalid_reasons"] == [
        "290 of 300 bots seated at the window's end"
    ]
    assert measured(connected=298)["invalid_reasons"] == ["298 of 300 bots connected"]


def test_every_reason_is_given() -> None:
    churned = measured(bot_ticks_per_s=40.0, bot_reconnects=5, seated_at_end=295, connected=295)
    assert len(churned["invalid_reasons"]) == 4


def test_one_run_is_reported_as_it_is() -> None:
    assert median_run([run(26.0, 5.0)]) == run(26.0, 5.0)


def test_the_median_run_is_reported_whole_with_every_runs_cpu() -> None:
    record = median_run([run(28.6, 6.2), run(25.5, 5.2), run(26.1, 4.9)])
    assert record["server_cpu_us_per_player_tick"] == 26.1
    assert record["tick_p99_ms"] == 4.9  # the same run's, not a median of its own
    assert record["repeats"] == 3
    assert record["server_cpu_us_per_player_tick_runs"] == [28.6, 25.5, 26.1]
    assert record["runs_valid"] == 3
    assert record["invalid_runs"] == []


def test_of_an_even_count_the_higher_middle_run_is_reported() -> None:
    """The cautious side: a target is not met by averaging towards it."""
    record = median_run([run(30.0, 1.0), run(24.0, 2.0), run(27.0, 3.0), run(25.0, 4.0)])
    assert record["server_cpu_us_per_player_tick"] == 27.0


def test_a_run_below_57_hz_is_left_out_of_the_median_but_listed() -> None:
    """A slow bot process sends fewer inputs, so its run looks cheaper: it must not pull the
    median down (here it would make 25.0 the median of three)."""
    slow = measured(server_cpu_us_per_player_tick=20.0, bot_ticks_per_s=50.0)
    record = median_run([run(25.0, 1.0), slow, run(27.0, 2.0)])
    assert record["valid"] is True
    assert record["server_cpu_us_per_player_tick"] == 27.0  # higher middle of 25.0 and 27.0
    assert record["server_cpu_us_per_player_tick_runs"] == [25.0, 20.0, 27.0]
    assert record["runs_valid"] == 2
    assert record["invalid_runs"] == [
        {
            "server_cpu_us_per_player_tick": 20.0,
            "invalid_reasons": ["bot process kept 50.0 Hz (< 57.0)"],
        }
    ]


def test_with_no_valid_run_the_record_is_the_median_of_all_and_invalid() -> None:
    runs = [
        measured(server_cpu_us_per_player_tick=22.0, bot_reconnects=2),
        measured(server_cpu_us_per_player_tick=None, seated_at_end=0),
        measured(server_cpu_us_per_player_tick=21.0, bot_ticks_per_s=52.0),
    ]
    record = median_run(runs)
    assert record["valid"] is False
    assert record["server_cpu_us_per_player_tick"] == 22.0  # a run without a figure sorts last
    assert record["invalid_reasons"] == ["2 bot reconnects without a failover"]
    assert record["runs_valid"] == 0
    assert len(record["invalid_runs"]) == 3


def tick_metrics(slow: int, fast: int, overruns: int, skipped: int) -> dict[Any, float]:
    """A /metrics reading: ``fast`` ticks under 2 ms and ``slow`` ones of 40-50 ms so far."""
    bounds = (0.002, 0.05, float("inf"))
    counts = (fast, fast + slow, fast + slow)
    buckets = {
        ("arena_tick_duration_seconds_bucket", (("le", repr(le)),)): float(n)
        for le, n in zip(bounds, counts, strict=True)
    }
    return {
        **buckets,
        ("arena_tick_overruns_total", ()): float(overruns),
        ("arena_ticks_skipped_total", ()): float(skipped),
    }


def test_the_tick_figures_are_the_window_s_alone_not_the_joining_before_it() -> None:
    # 100 slow ticks while the bots joined, then a window of 1,000 fast ones.
    start = tick_metrics(slow=100, fast=500, overruns=100, skipped=40)
    end = tick_metrics(slow=100, fast=1500, overruns=100, skipped=40)
    figures = window_ticks(start, end)
    assert figures["tick_p99_ms"] is not None and figures["tick_p99_ms"] <= 2.0
    assert figures["tick_overruns"] == 0 and figures["ticks_skipped"] == 0
    # The same window with 20 slow ticks of its own: its p99 is theirs, and they count.
    end = tick_metrics(slow=120, fast=1480, overruns=120, skipped=43)
    figures = window_ticks(start, end)
    assert figures["tick_p99_ms"] is not None and figures["tick_p99_ms"] > 2.0
    assert figures["tick_overruns"] == 20 and figures["ticks_skipped"] == 3
