"""bench/hitreg.py and bench/interleaved.py: the reference and each kernel are timed in
alternation on the same clock, and no figure is reported for a backend that disagrees with
the reference."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bench import hitreg, interleaved
from server.sim.hitreg import HitValidator


class FakeClocks:
    """Process CPU and wall clocks that move only when a fake call says how long it took."""

    def __init__(self) -> None:
        self.cpu = 0.0
        self.wall = 0.0
        self.calls: list[str] = []

    def call(self, name: str, costs: list[tuple[float, float]]) -> Callable[[], None]:
        """A call that takes the next (cpu, wall) seconds of ``costs`` each time."""
        remaining = iter(costs)

        def run() -> None:
            cpu, wall = next(remaining)
            self.cpu += cpu
            self.wall += wall
            self.calls.append(name)

        return run

    def interleave(
        self, runs: list[Callable[[], None]], rounds: int, min_seconds: float
    ) -> list[list[interleaved.Timing]]:
        return interleaved.interleave(
            runs, rounds, min_seconds, cpu_clock=lambda: self.cpu, wall_clock=lambda: self.wall
        )


def test_runs_alternate_and_each_keeps_its_median_on_both_clocks() -> None:
    clocks = FakeClocks()
    # The reference on one thread (CPU = wall, one round slowed by a busy spell); the
    # kernel on two threads (CPU twice its wall time).
    reference = clocks.call("R", [(2.0, 2.0), (9.0, 9.0), (3.0, 3.0)])
    kernel = clocks.call("K", [(0.5, 0.25), (0.25, 0.125), (4.0, 2.0)])
    reference_samples, kernel_samples = clocks.interleave([reference, kernel], 3, 0.0)
    assert clocks.calls == ["R", "K", "R", "K", "R", "K"]
    assert interleaved.median_timing(reference_samples) == interleaved.Timing(3.0, 3.0)
    assert interleaved.median_timing(kernel_samples) == interleaved.Timing(0.5, 0.25)


def test_a_sample_repeats_short_calls_until_it_fills_min_seconds() -> None:
    clocks = FakeClocks()
    short = clocks.call("S", [(0.25, 0.25)] * 8)
    (samples,) = clocks.interleave([short], 2, 1.0)
    assert clocks.calls == ["S"] * 8  # four calls per sample
    assert samples == [interleaved.Timing(0.25, 0.25)] * 2  # per call, not per sample


def test_one_thread_is_timed_by_cpu_and_the_rest_by_wall() -> None:
    assert interleaved.clock_for("cpu", 1) == "cpu_seconds"
    assert interleaved.clock_for("cpu", 2) == "seconds"
    assert interleaved.clock_for("cuda", 1) == "seconds"  # a GPU's work is no process CPU


def test_the_speedup_compares_time_per_shot() -> None:
    """The reference resolves fewer shots: 1 s for 100 shots against 1 s for 1000 is x10."""
    second = interleaved.Timing(1.0, 2.0)
    assert interleaved.speedup(second, 100, second, 1000, "cpu_seconds") == 10.0
    assert interleaved.speedup(interleaved.Timing(1.0, 4.0), 100, second, 1000, "seconds") == 20.0


def quick_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    path = tmp_path / "h.json"
    assert hitreg.main(["--quick", "--players", "16", "--json", str(path)]) == 0
    report = json.loads(path.read_text())
    assert json.loads(capsys.readouterr().out) == report
    return report


def test_a_quick_run_reports_both_clocks_and_positive_speedups(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = quick_report(tmp_path, capsys)
    assert report["timing"] == "process_cpu, interleaved median"
    assert report["rounds"] == 3
    for moment in ("loadavg_at_start", "loadavg_at_end"):
        assert len(report["machine"][moment]) == 3
    rows = report["hitscan"] + report["projectiles"]
    assert {row["backend"] for row in rows} >= {"reference", "cpu"}
    for row in rows:
        assert row["cpu_seconds"] > 0 and row["seconds"] > 0
        assert row["rates_from"] == interleaved.clock_for(row["backend"], row["threads"])
        if row["backend"] == "reference":
            assert row["samples"] % report["rounds"] == 0
        else:
            assert row["samples"] == report["rounds"]
            assert row["speedup_vs_reference"] > 0 and math.isfinite(row["speedup_vs_reference"])
    assert any(row["threads"] == 1 for row in report["hitscan"] if row["backend"] == "cpu")
    assert report["targets"]  # still computed from the rows


def test_no_figure_is_reported_for_a_kernel_that_disagrees_with_the_reference(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    resolve = HitValidator.resolve_hitscan

    def wrong_on_cpu(self: HitValidator, *args: Any, **kwargs: Any) -> Any:
        out = resolve(self, *args, **kwargs)
        if self.backend == "cpu":
            out.kind[:] = (out.kind + 1) % 3  # every verdict changed
        return out

    monkeypatch.setattr(HitValidator, "resolve_hitscan", wrong_on_cpu)
    with pytest.raises(SystemExit, match="cpu disagrees with the reference on kind"):
        hitreg.main(["--quick", "--players", "16", "--no-projectiles", "--json", "-"])
    assert capsys.readouterr().out == ""
