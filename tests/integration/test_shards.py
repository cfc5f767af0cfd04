"""A swarm split into three shards, each its own process against one node, merged by
``arena-bots merge`` into the report one process running the same seed writes: the same
bots, the same links, the same population."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from launch.nodes import NodeProcess

BOTS = 6
PLAY_S = "3"
LATENCY = "lognormal(median=60ms,sigma=0.5)"


def _bots(node: NodeProcess, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "client_sim.cli", "--server", node.url, "--count", str(BOTS),
        "--duration", PLAY_S, "--seed", "7", "--latency", LATENCY, "--quiet", *extra,
    ]  # fmt: skip


def test_three_shards_merge_into_the_report_of_one_process(
    node: NodeProcess, tmp_path: Path
) -> None:
    parts = [tmp_path / f"part-{i}.json" for i in range(3)]
    shards = [
        subprocess.Popen(_bots(node, "--shard", f"{i}/3", "--part", str(part)),
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for i, part in enumerate(parts)
    ]  # fmt: skip
    outputs = [shard.communicate(timeout=60)[0] for shard in shards]
    assert [shard.returncode for shard in shards] == [0, 0, 0], outputs
    merged_path = tmp_path / "merged.json"
    merge = subprocess.run(
        [sys.executable, "-m", "client_sim.cli", "merge", *map(str, parts),
         "--json", str(merged_path)],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert merge.returncode == 0, merge.stderr
    merged = json.loads(merged_path.read_text())

    whole_path = tmp_path / "whole.json"
    whole_part = tmp_path / "whole-part.json"
    one = subprocess.run(
        _bots(node, "--json", str(whole_path), "--part", str(whole_part)),
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert one.returncode == 0, one.stdout + one.stderr
    whole = json.loads(whole_path.read_text())

    assert merged["bots"]["requested"] == whole["bots"]["requested"] == BOTS
    assert merged["bots"]["connected"] == whole["bots"]["connected"] == BOTS
    assert merged["bots"]["workers"] == 3 and merged["bots"]["shards"] == {
        "of": 3,
        "merged": [0, 1, 2],
    }
    # The same links: every bot's modelled RTT in the same fixed bin, whichever shard.
    assert merged["latency_ms"]["histogram"]["model"] == whole["latency_ms"]["histogram"]["model"]
    assert sum(merged["latency_ms"]["histogram"]["model"]) == BOTS
    # The same population: the parts name the seed and size; shard i holds bots i, i+3.
    population = [json.loads(p.read_text())["population"] for p in parts]
    assert {(p["seed"], p["count"], p["of"]) for p in population} == {(7, BOTS, 3)}
    assert [p["shards"] for p in population] == [[0], [1], [2]]
    assert [json.loads(p.read_text())["counts"]["bots.requested"] for p in parts] == [2, 2, 2]
    assert merged["valid"] is whole["valid"] is True, (merged["invalid_reasons"],
                                                       whole["invalid_reasons"])  # fmt: skip
    assert merged["latency_ms"]["samples"] > 0 and merged["inputs"]["sent"] > 0


def test_a_damaged_part_is_one_line_and_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": "arena-bots-tally/1", "population": {}}))
    merge = subprocess.run(
        [sys.executable, "-m", "client_sim.cli", "merge", str(bad), "--json",
         str(tmp_path / "out.json")],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert merge.returncode == 2
    assert merge.stderr.strip().count("\n") == 0, merge.stderr
    assert "'partial' is missing" in merge.stderr
    assert "Traceback" not in merge.stderr
