"""bench/bot_kernels: a short run times each kernel beside the NumPy it replaced (after
checking they agree), and bad arguments are refused in one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench/bot_kernels.py"


def test_a_short_run_reports_each_kernel_beside_its_numpy(tmp_path: Path) -> None:
    report = tmp_path / "kernels.json"
    done = subprocess.run(
        [sys.executable, str(BENCH), "--rounds", "1", "--min-seconds", "0.01",
         "--json", str(report)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads(report.read_text())
    assert json.loads(done.stdout) == record
    for part in ("view", "sight_lines", "shot"):
        assert record[part]["numpy_us"] > 0 and record[part]["kernel_us"] > 0
    perception = record["perception_pass"]
    assert perception["union_and_numpy_glance_us"] > 0 and perception["fused_kernel_us"] > 0


def test_bad_arguments_are_one_line() -> None:
    for bad in (["--rounds", "0"], ["--min-seconds", "-1"]):
        done = subprocess.run(
            [sys.executable, str(BENCH), *bad], capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
