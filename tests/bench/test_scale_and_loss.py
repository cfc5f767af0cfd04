"""bench/scale and bench/transport_loss: their verdicts on a run's figures, and bad
arguments refused in one line (the runs themselves take minutes: `make bench`)."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench import scale, transport_loss

ROOT = Path(__file__).resolve().parents[2]


def test_scale_judges_the_tick_budget_overruns_and_fairness() -> None:
    good = {"tick_p99_ms": 12.0, "tick_overruns": 0, "fair_agreement": 0.995}
    assert all(scale.verdicts(good).values())
    bad = {"tick_p99_ms": 17.0, "tick_overruns": 3, "fair_agreement": 0.98}
    assert not any(scale.verdicts(bad).values())
    assert scale.verdicts({"tick_overruns": 0})["tick_p99_within_budget"] is None


def _cell(**median: Any) -> dict[str, Any]:
    return {"median": median}


def test_transport_loss_checks_udp_under_loss_against_its_own_run_without() -> None:
    args = argparse.Namespace(rtt_ms=100.0, jitter_ms=2.0)
    quiet = _cell(fair_agreement=0.99, beyond_cap=2)
    lossy = _cell(longest_gap_ms_p99=99.0, rtt_p90_ms=120.0, acked_ratio=0.9995,
                  fair_agreement=0.987, beyond_cap=2)  # fmt: skip
    worse = _cell(longest_gap_ms_p99=140.0, rtt_p90_ms=140.0, acked_ratio=0.99,
                  fair_agreement=0.98, beyond_cap=3)  # fmt: skip
    cells = {"no_loss/udp": quiet, "loss_2pct/udp": lossy, "loss_5pct/udp": worse}
    checks = transport_loss.verdicts({**cells, "loss_2pct/ws": worse}, args)
    assert set(checks) == {"loss_2pct", "loss_5pct"}  # UDP under loss only
    assert all(checks["loss_2pct"].values())
    assert not any(checks["loss_5pct"].values())


def test_transport_loss_names_each_condition_by_its_flags() -> None:
    grid = transport_loss.conditions([2.0, 5.0], "0.02,0.3")
    assert grid == {
        "no_loss": ["--loss", "0"],
        "loss_2pct": ["--loss", "0.02"],
        "loss_5pct": ["--loss", "0.05"],
        "bursty": ["--burst-loss", "0.02,0.3"],
    }
    assert "bursty" not in transport_loss.conditions([], "")


@pytest.mark.parametrize(
    ("script", "args"),
    [
        ("bench/scale.py", ["--full", "0"]),
        ("bench/scale.py", ["--duration", "5"]),
        ("bench/transport_loss.py", ["--transports", "tcp"]),
        ("bench/transport_loss.py", ["--bots", "0"]),
    ],
)
def test_bad_arguments_are_one_line(script: str, args: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / script), *args], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1, done.stderr
