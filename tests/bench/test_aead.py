"""bench/aead.py: a short run times both libraries and the channel; a run too short to time
reports nothing; bad arguments are refused in one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "aead.py"


def test_a_short_run_times_both_libraries(tmp_path: Path) -> None:
    out = tmp_path / "aead.json"
    command = [
        sys.executable,
        str(BENCH),
        "--iterations",
        "5000",
        "--repeats",
        "3",
        "--json",
        str(out),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    assert json.loads(done.stdout) == result
    for library in ("cryptography", "pynacl"):
        for size in ("100", "600", "1000", "1200"):
            figures = result["aead"][library][size]
            assert figures["seal_us"] > 0 and figures["open_us"] > 0
    assert result["faster_at_1000_B"] in ("cryptography", "pynacl")
    assert result["channel_600_B"]["send_us"] > 0 and result["channel_600_B"]["receive_us"] > 0


def test_an_invalid_run_reports_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    sys.path.insert(0, str(ROOT))
    from bench import aead

    monkeypatch.setattr(aead, "MIN_WINDOW_S", 60.0)  # no timed run can be long enough
    out = tmp_path / "aead.json"
    assert aead.main(["--iterations", "1000", "--repeats", "3", "--json", str(out)]) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and not out.exists()
    assert "invalid run, nothing reported: " in captured.err


def test_bad_arguments_are_one_line() -> None:
    for bad in (["--iterations", "999"], ["--repeats", "2"], ["--iterations", "many"]):
        done = subprocess.run(
            [sys.executable, str(BENCH), *bad], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert "Traceback" not in done.stderr
