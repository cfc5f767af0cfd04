"""Ctrl-C ends a load test early without losing it: the report of the part that ran is
written (JSON marked partial, the HTML page with its banner) and the summary printed.
Against a real node; in-process bots and worker processes take different paths."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

import pytest

from launch.nodes import NodeProcess
from tests.processes import start_session

READY_S = 120.0  # a cold, busy machine: the bots' first progress line


@pytest.mark.parametrize("workers", [1, 2])
def test_ctrl_c_writes_a_partial_report(node: NodeProcess, tmp_path: Path, workers: int) -> None:
    folder = tmp_path / "report"
    command = [
        sys.executable, "-m", "client_sim.cli", "--server", node.url,
        "--server-admin", node.admin_url, "--count", "6",
        "--workers", str(workers), "--duration", "120", "--report-dir", str(folder),
    ]  # fmt: skip
    with start_session(command) as bots:
        bots.wait_for("bots 3/3 connected" if workers == 2 else "bots 6/6 connected", READY_S)
        bots.process.send_signal(signal.SIGINT)  # the leader only, as a terminal's ^C is not
        assert bots.process.wait(60) == 130, bots.output[-2000:]
    report = json.loads((folder / "report.json").read_text())
    assert report["partial"] is True
    assert report["bots"]["connected"] == 6
    assert report["duration_s"] < 60
    assert report["bot_process"]["tick_hz"] is not None
    page = (folder / "report.html").read_text(encoding="utf-8")
    assert "PARTIAL" in page and "data:image/png;base64," in page
    assert (folder / "rtt.png").read_bytes().startswith(b"\x89PNG")
    assert "PARTIAL     interrupted" in bots.output
    assert "the report covers the part that ran" in bots.output
