"""bench/replay: a quick run records a real node's match under a few bots and replays its
log on one core, exactly; bad arguments are refused in one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench/replay.py"


def test_a_quick_run_replays_a_recorded_match_exactly(tmp_path: Path) -> None:
    report = tmp_path / "replay.json"
    done = subprocess.run(
        [sys.executable, str(BENCH), "--quick", "--json", str(report)],
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    made = json.loads(report.read_text())
    assert made["valid"] and made["targets"] == {}  # (the target is the 60-player match's)
    (row,) = made["results"]
    assert row["players"] == 6 and row["full_bots"] == 6 and row["light"] == 0
    assert row["ticks"] > 60 * 5 and row["log_bytes"] > 0
    assert row["mismatches"] == [0] and row["speed_x"] == row["speed_x_runs"][0] > 1
    assert made["provenance"]["command"].startswith("python bench/replay.py --quick")


def test_bad_arguments_are_one_line() -> None:
    for bad in (["--sizes", "sixty"], ["--repeats", "0"]):
        done = subprocess.run(
            [sys.executable, str(BENCH), *bad, "--json", "-"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert done.returncode == 2
        assert done.stderr.count("\n") == 1 and bad[0] in done.stderr
