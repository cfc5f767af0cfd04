"""Light players beside full bots against a real node: they join, send inputs the node
acknowledges, read every snapshot from its head, and the report counts them apart."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from launch.nodes import NodeProcess


def test_light_players_play_beside_full_bots_and_are_counted_apart(
    node: NodeProcess, tmp_path: Path
) -> None:
    out = tmp_path / "report.json"
    run = subprocess.run(
        [sys.executable, "-m", "client_sim.cli", "--server", node.url, "--count", "2",
         "--light", "4", "--duration", "4", "--quiet", "--json", str(out)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    report = json.loads(out.read_text())
    bots, light = report["bots"], report["bots"]["light"]
    assert (bots["requested"], bots["connected"]) == (2, 2)  # the full bots' figures
    assert (light["requested"], light["connected"]) == (4, 4)
    assert light["snapshots"] >= 4 * 2 * 20  # 30 Hz for most of 4 s, each player
    assert light["inputs_acked"] >= 0.8 * light["inputs_sent"] > 0
    assert light["bytes_up"] > 0 and light["bytes_down"] > 0
    assert sum(report["latency_ms"]["histogram"]["model"]) == 2  # full bots' links only
    assert report["bot_process"]["cpu_us_per_light_bot_tick"] > 0
    assert "light players 4/4" in run.stdout
