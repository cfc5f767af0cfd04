"""arena-demo sets its exit status by --fail-if, says which threshold and the measured
value, and still writes its JSON, its HTML page and its pictures."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def test_a_breached_threshold_fails_the_demo_with_the_figure(tmp_path: Path) -> None:
    path = tmp_path / "demo-report.json"
    done = subprocess.run(
        [sys.executable, "-m", "launch.demo", "--bots", "4", "--duration", "4",
         "--json", str(path), "--fail-if", "bots.connected<100"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    assert "threshold bots.connected<100 breached: bots.connected = 4" in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("arena-demo: ")
    report = json.loads(path.read_text())
    assert report["partial"] is False and "valid" in report
    assert (tmp_path / "demo-report.html").exists()
    assert sorted(p.name for p in (tmp_path / "demo-report").iterdir()) == [
        "agreement.png", "bandwidth.png", "failover.png", "rtt.png", "ticks.png",
    ]  # fmt: skip
