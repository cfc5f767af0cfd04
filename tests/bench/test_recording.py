"""bench/recording: a quick run is valid, reports each size's CPU and bytes, and its blocks
hold what the tick logged; bad sizes are refused in one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.recording import Scene, _logged_minutes, median_interval, ratio_interval, run_size
from server.record.blocks import FILE_HEADER, Block, seal_block

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench/recording.py"


def test_a_quick_run_is_valid_and_reports_every_size(tmp_path: Path) -> None:
    report = tmp_path / "recording.json"
    done = subprocess.run(
        [sys.executable, str(BENCH), "--quick", "--json", str(report)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stderr[-2000:]  # 2: an invalid run
    record = json.loads(report.read_text())
    assert record["valid"] and not record["invalid_reasons"]
    assert [row["players"] for row in record["results"]] == [8, 20]
    for row in record["results"]:
        assert row["tick_us"] > 0 and row["record_tick_us"] > 0 and row["record_writer_us"] > 0
        assert row["tick_with_recording_us"] > row["record_tick_us"]
        assert 0 < row["bytes_per_input"] < 200 and row["inputs"] > 100 * row["players"]
    # (no node measured, and the peer bench has no node of 20 players to set it against)
    assert set(record["targets"]) == set()
    for row in record["results"]:
        parts = row["record_tick_us"] + row["record_writer_us"]  # (each rounded apart)
        assert row["record_us"] == pytest.approx(parts, abs=0.002)
        assert row["node_us_source"] == "peers" and row["record_ratio_of_node"] is None
    assert record["provenance"]["command"].startswith("python bench/recording.py --quick")


def test_one_node_paused_and_resumed_gives_an_a_b_with_its_own_count(tmp_path: Path) -> None:
    report = tmp_path / "recording.json"
    done = subprocess.run(
        [sys.executable, str(BENCH), "--quick", "--node-switches", "1",
         "--node-switch-seconds", "3", "--json", str(report)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stderr[-2000:]
    record = json.loads(report.read_text())
    switched = record["node_switched"]
    assert record["valid"], record["invalid_reasons"]
    assert len(switched["cpu_us_a"]) == 2 and len(switched["cpu_us_b"]) == 1  # A B A
    assert len(switched["ratios"]) == 1 and all(a > 0 for a in switched["cpu_us_a"])
    # The node counted its log's CPU only while it recorded: a share in each B stretch.
    assert len(switched["record_shares_in_node"]) == 1
    assert all(0 < share < 0.5 for share in switched["record_shares_in_node"])
    target = record["targets"]["node_switched_ratio_20"]
    assert target["value"] == switched["ratio"] and target["limit"] == 0.03
    assert "record_share_in_node_20" in record["targets"]
    (row,) = [row for row in record["results"] if row["players"] == 20]
    assert row["node_us_source"] == "node"


def test_the_median_s_interval_narrows_with_the_ratios_scatter() -> None:
    assert median_interval([0.02] * 5) == [0.02, 0.02]
    low, high = median_interval([-0.05, 0.0, 0.03, 0.06, 0.1])
    assert low < 0.03 < high


def test_the_recording_scene_changes_nothing_and_its_log_decodes() -> None:
    done = run_size(players=6, ticks=90, rounds=2, seed=3)
    assert done["problems"] == []
    assert done["row"]["ticks"] == 90 and done["row"]["bytes"] > 0


def test_two_scenes_of_one_seed_are_sent_the_same_inputs() -> None:
    a, b = Scene(5, 9, record=False), Scene(5, 9, record=True)
    for tick in range(1, 65):
        a.offer(tick)
        b.offer(tick)
        a.tick(tick)
        b.tick(tick)
    assert a.inputs == b.inputs > 0
    assert a.matches[0].world.state_hash() == b.matches[0].world.state_hash()
    assert b.pending, "the recorded scene handed over a block"


def test_a_node_log_s_minutes_are_the_ticks_its_blocks_cover(tmp_path: Path) -> None:
    """The size a minute is of the match the log holds: first to last tick logged, across
    files (60 ticks a second)."""
    assert _logged_minutes(str(tmp_path)) == 0.0
    blocks = (Block(120, 179, (b"entries",)), Block(180, 1919, (b"entries",)))
    (tmp_path / "a.00001.arenalog").write_bytes(FILE_HEADER + seal_block(blocks[0]))
    (tmp_path / "a.00002.arenalog").write_bytes(FILE_HEADER + seal_block(blocks[1]))
    (tmp_path / "notes.txt").write_text("not a log")
    assert _logged_minutes(str(tmp_path)) == (1919 - 120 + 1) / 60 / 60


def test_the_a_b_interval_is_as_wide_as_the_runs_scatter() -> None:
    steady = [25.0, 25.0, 25.0, 25.0]
    assert ratio_interval(steady, [26.0] * 4) == [0.04, 0.04]  # no scatter: exact
    low, high = ratio_interval([23.0, 25.0, 27.0, 31.0], [25.5, 26.0, 26.5, 27.0])
    assert low < 0 < 0.03 < high  # runs 8 % apart cannot tell 3 % from nothing


def test_sizes_that_are_not_numbers_are_refused_in_one_line() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH), "--sizes", "60,lots"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "not '60,lots'" in done.stderr.strip().splitlines()[-1]


def test_a_node_run_too_short_to_measure_is_refused_in_one_line() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH), "--node-rounds", "1", "--node-seconds", "5"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "--node-seconds at least 10" in done.stderr.strip().splitlines()[-1]
