"""bench/socket_floor.py: a short run counts every write and read it times, over loopback,
and bad arguments are refused in one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "socket_floor.py"


def test_a_short_run_times_writes_and_reads(tmp_path: Path) -> None:
    out = tmp_path / "floor.json"
    command = [sys.executable, str(BENCH), "--connections", "4", "--seconds", "0.5",
               "--repeats", "1", "--json", str(out)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    assert json.loads(done.stdout) == result
    for side in ("write", "read"):
        (run,) = result[side]["runs"]
        assert run["count"] > 0 and run["cpu_us"] == result[side]["cpu_us_median"] > 0, run
    rates = result["bot_rates"]
    expected = (rates["writes_per_s"] * result["write"]["cpu_us_median"]
                + rates["reads_per_s"] * result["read"]["cpu_us_median"]) / 60  # fmt: skip
    assert abs(result["floor_us_per_bot_tick"] - expected) < 0.01


def test_bad_arguments_are_one_line() -> None:
    for bad in (
        ["--connections", "0"],
        ["--seconds", "-1"],
        ["--read-bytes", "0"],
        ["--repeats", "0"],
    ):
        done = subprocess.run(
            [sys.executable, str(BENCH), *bad], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert "Traceback" not in done.stderr
