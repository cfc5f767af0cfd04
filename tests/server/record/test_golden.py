"""The golden matches replay exactly against today's code.

Each is a real node's (or a failed-over region's) log of a few seconds of bots firing
(``tests/data/golden``). A change to movement, inputs, lag compensation or the hit kernels
that alters a world or a verdict fails here with the tick and the shot named. When the change
is meant, record them again: ``make golden`` (``tests/golden/record.py``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from server.record.entries import config_from_entry
from server.record.replay import replay_match
from server.record.timeline import read_recording
from server.sim.hitreg.backend import make_validator

GOLDEN = Path(__file__).resolve().parents[2] / "data" / "golden"
MATCHES = sorted(path.name for path in GOLDEN.iterdir() if path.is_dir())


def test_there_are_golden_matches() -> None:
    assert {"one-node", "failover"} <= set(MATCHES)


@pytest.mark.parametrize("name", MATCHES)
def test_a_golden_match_replays_with_the_same_hashes_and_verdicts(name: str) -> None:
    files = sorted((GOLDEN / name).glob("*.arenalog"))
    recording = read_recording([(path.name, path.read_bytes()) for path in files])
    assert recording.config is not None and not recording.damaged, recording.damaged
    config = config_from_entry(recording.config)
    validator = make_validator("cpu", box_min=config.arena.box_min, box_max=config.arena.box_max)
    for index in recording.matches:
        outcome = replay_match(recording, config, validator, index)
        assert not outcome.problems, outcome.problems
        assert outcome.ticks > 150 and outcome.shots > 0, "a golden match has bots firing"
        assert outcome.exact, (
            f"{name}: replaying today's code differs from the recording "
            "(re-record with `make golden` if the change is meant):\n"
            + "\n".join(m.line() for m in outcome.mismatches)
        )
