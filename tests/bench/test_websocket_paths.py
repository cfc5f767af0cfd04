"""bench/websocket_paths.py: a short run of both libraries, end to end, in real processes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytest.importorskip("picows", reason="picows comes with the project's bench extra")


def test_both_libraries_carry_every_frame_and_are_compared(tmp_path: Path) -> None:
    out = tmp_path / "paths.json"
    command = [sys.executable, str(ROOT / "bench" / "websocket_paths.py"), "--clients", "4",
               "--seconds", "0.5", "--repeats", "1", "--json", str(out)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    for library in ("own", "picows"):
        (run,) = result["runs"][library]
        assert run["valid"], run
        assert run["snapshots_received"] > 0 and run["inputs_received"] > 0
        assert result["libraries"][library]["valid_runs"] == 1
    assert set(result["picows_over_own"]) == {
        "server_cpu_us_per_client_s",
        "client_cpu_us_per_client_s",
    }


def test_a_head_larger_than_the_frame_is_one_line() -> None:
    command = [sys.executable, str(ROOT / "bench" / "websocket_paths.py"), "--frame-bytes", "10"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 2
    assert "--frame-bytes" in done.stderr.strip().splitlines()[-1]
    assert "Traceback" not in done.stderr
