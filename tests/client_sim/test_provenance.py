"""Every report says where it came from: arguments, seed, version, start time and load."""

from __future__ import annotations

import json
import os
from datetime import datetime

from client_sim.provenance import REPORT_VERSION, provenance, run_start
from shared.commandline import arena_version


def test_the_block_names_the_run_the_code_and_the_machine() -> None:
    start = run_start(["--count", "4", "--seed", "7"], 7, now=1_800_000_000.25)
    block = provenance(start)
    assert block["report_version"] == REPORT_VERSION
    assert block["arguments"] == ["--count", "4", "--seed", "7"]
    assert block["seed"] == 7
    assert block["version"] == arena_version()
    assert block["started_at"] == "2027-01-15T08:00:00.250+00:00"
    assert datetime.fromisoformat(block["started_at"]).timestamp() == 1_800_000_000.25
    assert block["cores"] == os.cpu_count() and 1 <= block["cores_usable"] <= block["cores"]
    for ends in ("load_average_at_start", "load_average_at_end"):
        assert len(block[ends]) == 3 and all(value >= 0 for value in block[ends])
    json.dumps(block)  # (it goes into a JSON report as it is)


def test_a_run_without_a_seed_says_so() -> None:
    assert provenance(run_start([], None))["seed"] is None
