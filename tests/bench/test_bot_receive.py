"""bench/bot_receive: a recording of a live node's frames replays to the same figures in a
fresh swarm, and a file that is not a recording is refused in one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench/bot_receive.py"


def bench(*args: str, within: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BENCH), *args], capture_output=True, text=True, timeout=within
    )


def test_a_file_that_is_not_a_recording_is_refused_in_one_line(tmp_path: Path) -> None:
    junk = tmp_path / "junk.msgpack"
    junk.write_bytes(b"\x93\x01\x02\x03")  # a msgpack array, not a recording
    done = bench("--load", str(junk), within=60.0)
    assert done.returncode != 0
    assert done.stderr.strip().splitlines()[-1].endswith("is not a arena-bot-receive/1 recording")
    assert "Traceback" not in done.stderr


@pytest.mark.integration
def test_a_recording_replays_every_snapshot_without_an_error(tmp_path: Path) -> None:
    kept, report = tmp_path / "frames.msgpack", tmp_path / "out.json"
    done = bench("--bots", "4", "--seconds", "2", "--repeats", "2", "--save", str(kept),
                 "--json", str(report), within=180.0)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    first = json.loads(report.read_text())
    assert first["bots"] == 4 and len(first["runs"]) == 2
    for run in first["runs"]:
        # 4 bots x 30 snapshots a second x ~1 s in the timed half, at the least
        assert run["snapshots"] > 60 and run["errors"] == {}, run
        assert run["us_per_frame"] > 0
    # The same frames, loaded: the same snapshots shown, in a fresh swarm each time.
    done = bench("--load", str(kept), "--repeats", "1", "--json", str(report), within=120.0)
    assert done.returncode == 0, done.stderr[-2000:]
    again = json.loads(report.read_text())
    assert again["runs"][0]["snapshots"] == first["runs"][0]["snapshots"]
    assert again["runs"][0]["frames"] == first["runs"][0]["frames"]
