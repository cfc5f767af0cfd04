"""bench/node_kernels: a short run checks both kernels against their references and times
them; bad arguments are refused in one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench/node_kernels.py"


def test_a_short_run_times_the_movement_and_the_input_decoder(tmp_path: Path) -> None:
    report = tmp_path / "kernels.json"
    done = subprocess.run(
        [sys.executable, str(BENCH), "--players", "20", "--rounds", "1", "--min-seconds",
         "0.01", "--json", str(report)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads(report.read_text())
    assert json.loads(done.stdout) == record
    assert record["players"] == 20 and record["inputs_per_decode_call"] == 40
    assert record["movement_us_per_call"] > 0 and record["input_decode_us_per_call"] > 0


def test_bad_arguments_are_one_line() -> None:
    for bad in (["--players", "0"], ["--min-seconds", "0"]):
        done = subprocess.run(
            [sys.executable, str(BENCH), *bad], capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
