"""bench/server_load.py's repeat: the record is one whole run, the median one."""

from __future__ import annotations

from typing import Any

from bench.server_load import median_run


def run(cpu: float, p99: float) -> dict[str, Any]:
    return {"players": 300, "server_cpu_us_per_player_tick": cpu, "tick_p99_ms": p99}


def test_one_run_is_reported_as_it_is() -> None:
    assert median_run([run(26.0, 5.0)]) == run(26.0, 5.0)


def test_the_median_run_is_reported_whole_with_every_runs_cpu() -> None:
    record = median_run([run(28.6, 6.2), run(25.5, 5.2), run(26.1, 4.9)])
    assert record["server_cpu_us_per_player_tick"] == 26.1
    assert record["tick_p99_ms"] == 4.9  # the same run's, not a median of its own
    assert record["repeats"] == 3
    assert record["server_cpu_us_per_player_tick_runs"] == [28.6, 25.5, 26.1]


def test_of_an_even_count_the_higher_middle_run_is_reported() -> None:
    """The cautious side: a target is not met by averaging towards it."""
    record = median_run([run(30.0, 1.0), run(24.0, 2.0), run(27.0, 3.0), run(25.0, 4.0)])
    assert record["server_cpu_us_per_player_tick"] == 27.0
