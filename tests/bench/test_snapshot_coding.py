"""bench/snapshot_coding: a short run reports each size with the figures it names, its
scenes code every client, and bad sizes are refused in one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from bench.snapshot_coding import Scene

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench/snapshot_coding.py"


def test_a_short_run_reports_every_size(tmp_path: Path) -> None:
    report = tmp_path / "coding.json"
    done = subprocess.run(
        [sys.executable, str(BENCH), "--sizes", "8,20", "--rounds", "2",
         "--min-seconds", "0.01", "--json", str(report)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads(report.read_text())
    assert [row["players"] for row in record["results"]] == [8, 20]
    for row in record["results"]:
        assert row["select_us"] > 0 and row["encode_us"] >= row["select_us"] * 0.5
        assert len(row["encode_us_runs"]) == 2
        assert 1 <= row["records_per_client"] <= row["players"]


def test_a_scene_codes_every_client_each_snapshot_against_mixed_baselines() -> None:
    scene = Scene(30)
    for _ in range(4):
        scene.encode()
    tally = scene.encoder.tally()
    assert tally["coded"] == 4 * 30
    assert tally["records_delta"] > 0 and tally["records_full"] > 0


def test_sizes_that_are_not_numbers_are_refused_in_one_line() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH), "--sizes", "60,lots"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "not '60,lots'" in done.stderr.strip().splitlines()[-1]
