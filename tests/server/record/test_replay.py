"""Replaying a logged match: exact on the same code, and naming what differs when not."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from server.record import cli
from server.record.blocks import read_blocks
from server.record.entries import config_from_entry
from server.record.replay import ReplayOutcome, replay_match
from server.record.timeline import read_recording
from server.sim.hitreg.backend import make_validator
from server.sim.matchset import MatchSet
from tests.server.record.scenes import log_file, rewrite_log

Recorded = tuple[MatchSet, list[bytes]]


def _replay(data: bytes, start: int | None = None, stop: int | None = None) -> ReplayOutcome:
    recording = read_recording([("log", data)])
    assert recording.config is not None
    config = config_from_entry(recording.config)
    validator = make_validator(
        "reference", box_min=config.arena.box_min, box_max=config.arena.box_max
    )
    return replay_match(recording, config, validator, 0, start, stop)


def test_a_logged_match_replays_exactly(recorded: Recorded) -> None:
    matches, blocks = recorded
    outcome = _replay(log_file(blocks))
    assert (outcome.first_tick, outcome.last_tick) == (1, matches.tick_number)
    assert outcome.ticks == matches.tick_number
    assert outcome.shots > 20, "the scene's players fire"
    assert outcome.exact and not outcome.problems, outcome.mismatches


def test_from_and_to_start_at_a_keyframe_and_stop_at_the_tick(recorded: Recorded) -> None:
    _, blocks = recorded
    outcome = _replay(log_file(blocks), start=100, stop=150)
    assert outcome.first_tick == 92  # keyframes follow ticks 0, 91, 182 (90 ticks apart)
    assert outcome.last_tick == 150
    assert outcome.exact


def test_lost_blocks_with_no_keyframe_after_them_go_on_from_the_next_one(
    recorded: Recorded,
) -> None:
    # The blocks of ticks 30..119 lost (a disk that refused them): the next block's first
    # tick has no keyframe; the one after tick 182 is the first to go on from.
    matches, blocks = recorded
    spans = [(b.first_tick, b.last_tick) for b in read_blocks(log_file(blocks))]
    kept = [block for block, (first, last) in zip(blocks, spans, strict=True)
            if not (30 <= first and last <= 119)]  # fmt: skip
    assert len(kept) == len(blocks) - 3
    outcome = _replay(log_file(kept))
    assert outcome.exact, outcome.mismatches
    (problem,) = outcome.problems
    assert "ticks 30..119 are missing" in problem and "ticks 120..182 go unchecked" in problem
    assert outcome.ticks == 29 + matches.tick_number - 182
    assert outcome.last_tick == matches.tick_number


def _first_shot_tick(data: bytes) -> tuple[int, dict[str, Any]]:
    recording = read_recording([("log", data)])
    tick = min((t for t in recording.computed[0].values() if t.shots), key=lambda t: t.tick)
    return tick.tick, tick.shots[0]


def test_a_changed_verdict_is_named_with_its_shot_and_tick(recorded: Recorded) -> None:
    _, blocks = recorded
    data = log_file(blocks)
    tick, shot = _first_shot_tick(data)

    def flip(entry: dict[str, Any]) -> None:
        if entry["k"] == "tick" and entry["t"] == tick:
            first = entry["shots"][0]
            first["result"] = "miss" if first["result"] != "miss" else "hit"

    outcome = _replay(rewrite_log(data, flip))
    assert outcome.verdict_mismatches == 1 and outcome.hash_mismatches == 0
    line = outcome.mismatches[0].line()
    assert line.startswith(f"tick {tick}: verdict differs: shot of slot {shot['shooter']} "
                           f"seq {shot['seq']}: replayed")  # fmt: skip


def test_a_changed_input_fails_the_hash_at_its_tick_and_names_the_player(
    recorded: Recorded,
) -> None:
    _, blocks = recorded
    data = log_file(blocks)
    doctored_tick = 120

    def push(entry: dict[str, Any]) -> None:
        if entry["k"] == "tick" and entry["t"] == doctored_tick:
            floats = entry["in"].floats
            floats[0, 0] = -floats[0, 0] if floats[0, 0] else 1.0  # its move, mirrored

    recording = read_recording([("log", data)])
    inputs = recording.computed[0][(0, doctored_tick)].inputs
    assert inputs is not None
    slot = int(inputs.slot[0])
    outcome = _replay(rewrite_log(data, push))
    assert outcome.mismatches[0].tick == doctored_tick
    assert outcome.mismatches[0].kind == "hash"
    world = next(m for m in outcome.mismatches if m.kind == "world")
    assert world.tick == 182 and f"slot {slot} pos" in world.what  # the next keyframe's


def _write(folder: Path, data: bytes) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"test.a.1.00001{cli.SUFFIX}").write_bytes(data)
    return folder


def test_the_command_replays_and_writes_its_json(
    tmp_path: Path, recorded: Recorded, capsys: pytest.CaptureFixture[str]
) -> None:
    matches, blocks = recorded
    folder = _write(tmp_path / "log", log_file(blocks))
    out = tmp_path / "replay.json"
    assert cli.main([str(folder), "--json", str(out), "--backend", "reference"]) == 0
    summary = json.loads(out.read_text())
    assert summary["ticks"] == matches.tick_number
    assert summary["hash_mismatches"] == summary["verdict_mismatches"] == 0
    assert summary["speed_x"] > 1
    assert "0 hash, 0 verdict, 0 seat mismatches" in capsys.readouterr().out


def test_a_mismatch_exits_1_naming_the_first_tick(
    tmp_path: Path, recorded: Recorded, capsys: pytest.CaptureFixture[str]
) -> None:
    _, blocks = recorded
    data = log_file(blocks)
    tick, _ = _first_shot_tick(data)

    def drop_shots(entry: dict[str, Any]) -> None:
        if entry["k"] == "tick" and entry["t"] == tick:
            entry["shots"] = []

    folder = _write(tmp_path / "log", rewrite_log(data, drop_shots))
    assert cli.main([str(folder), "--backend", "reference"]) == 1
    assert f"first difference at tick {tick}: verdict differs" in capsys.readouterr().out


def test_a_damaged_log_replays_its_earlier_blocks_and_exits_2(
    tmp_path: Path, recorded: Recorded, capsys: pytest.CaptureFixture[str]
) -> None:
    _, blocks = recorded
    data = bytearray(log_file(blocks))
    data[-len(blocks[-1]) - len(blocks[-2]) // 2] ^= 0x10  # in the second-last block
    folder = _write(tmp_path / "log", bytes(data))
    out = tmp_path / "replay.json"
    assert cli.main([str(folder), "--json", str(out), "--backend", "reference"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "checksum mismatch" in err[0] and f"block {len(blocks) - 2}" in err[0]
    assert json.loads(out.read_text())["ticks"] > 100  # the blocks before it replayed


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"ARENALOG\x07\x00", "match log format 7, this arena-replay reads format 3\n"),
        (  # a log of the first format (each block one zlib stream of entries)
            b"ARENALOG\x01\x00BLK1" + bytes(40),
            "match log format 1, this arena-replay reads format 3 (record it again with "
            "this version)\n",
        ),
        (b"hello", "not an arena match log"),
    ],
)
def test_another_version_or_no_log_is_one_line_and_exit_2(
    tmp_path: Path, content: bytes, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _write(tmp_path / "log", content)
    assert cli.main([str(folder)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err


def test_a_folder_without_logs_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main([str(tmp_path)]) == 2
    assert capsys.readouterr().err == f"arena-replay: no .arenalog files in {tmp_path}\n"
