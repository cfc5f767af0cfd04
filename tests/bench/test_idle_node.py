"""bench/idle_node: a short run measures a fresh node's CPU with nobody playing and shares
it among the players; bad arguments are refused in one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from bench.idle_node import per_player_tick_us

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench/idle_node.py"


def test_a_short_run_reads_an_idle_node_s_cpu(tmp_path: Path) -> None:
    # Long enough for the process clock (10 ms steps) to see an idle node of ~12 ms/s.
    report = tmp_path / "idle.json"
    done = subprocess.run(
        [sys.executable, str(BENCH), "--window", "3", "--settle", "0", "--repeats", "1",
         "--json", str(report)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    made = json.loads(report.read_text())
    assert len(made["runs_ms_cpu_per_s"]) == 1 and made["ms_cpu_per_s"] > 0
    assert made["per_player_tick_us"] == per_player_tick_us(made["ms_cpu_per_s"], 60)
    assert made["provenance"]["command"].startswith("python bench/idle_node.py --window 3")


def test_bad_arguments_are_one_line() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH), "--repeats", "0", "--json", "-"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "--repeats" in done.stderr


def test_the_cpu_is_shared_among_the_players_ticks() -> None:
    assert per_player_tick_us(36.0, 60) == 10.0  # 36 ms a second over 60 players x 60 ticks
