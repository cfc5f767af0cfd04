"""Checkpoints (sans-I/O): a node's match survives the trip to bytes and back, exactly; a
damaged, foreign or mismatched file is refused with one line, never half-resumed."""

from __future__ import annotations

import dataclasses

import pytest

from server.replication import state as records
from server.replication.checkpoint import (
    Checkpoint,
    CheckpointError,
    decode_checkpoint,
    encode_checkpoint,
    file_name,
    newest_first,
    parse_name,
)
from server.sim.hitreg.backend import make_validator
from server.sim.match import MatchConfig
from server.sim.matchset import MatchSet
from shared.arena_map import default_map
from shared.protocol import InputMessage


def new_matches() -> MatchSet:
    return MatchSet(MatchConfig(default_map(), max_players=4), 2, make_validator("reference"))


def played(ticks: int = 30) -> MatchSet:
    """Two matches, three players, some movement: a state worth resuming."""
    matches = new_matches()
    seats = [matches.join(f"p{i}", 0.1) for i in range(3)]
    for tick in range(1, ticks + 1):
        for index, seat in seats:
            move = InputMessage(tick, tick, (0.2, 1.0), 0.3, 0.0, 0, tick / 60, tick - 1)
            matches[index].receive_input(seat.slot, move, tick / 60 - 0.005)
        matches.tick(tick)
    return matches


def checkpoint_of(matches: MatchSet, epoch: int = 3, region: str = "eu-west") -> Checkpoint:
    return Checkpoint(
        region,
        records.config_fingerprint(matches),
        1_764_000_000.5,
        records.capture_full(matches, epoch),
    )


def test_a_checkpoint_resumes_exactly_the_match_it_was_taken_of() -> None:
    primary = played()
    data = encode_checkpoint(checkpoint_of(primary))
    loaded = decode_checkpoint(data, "eu-west", records.config_fingerprint(primary))
    assert (loaded.epoch, loaded.tick, loaded.wall_time) == (3, 30, 1_764_000_000.5)
    resumed = new_matches()
    records.apply(resumed, loaded.state)
    assert resumed.tick_number == 30
    for ours, theirs in zip(resumed.matches, primary.matches, strict=True):
        assert ours.world.state_hash() == theirs.world.state_hash()
        assert {s: (x.name, x.inputs.acked) for s, x in ours.seats.items()} == {
            s: (x.name, x.inputs.acked) for s, x in theirs.seats.items()
        }
        assert ours.history.count == theirs.history.count
    # It goes on from there as the primary would have.
    resumed.tick(31)
    primary.tick(31)
    assert [m.world.state_hash() for m in resumed.matches] == [
        m.world.state_hash() for m in primary.matches
    ]


def test_a_damaged_foreign_or_mismatched_checkpoint_is_refused() -> None:
    matches = played(5)
    data = bytearray(encode_checkpoint(checkpoint_of(matches)))
    data[len(data) // 2] ^= 0xFF
    with pytest.raises(CheckpointError, match="damaged"):
        decode_checkpoint(bytes(data), "eu-west")
    whole = encode_checkpoint(checkpoint_of(matches))
    with pytest.raises(CheckpointError, match="of region 'eu-west', not 'us-east'"):
        decode_checkpoint(whole, "us-east")
    other = dataclasses.replace(records.config_fingerprint(matches), tick_rate=30)
    with pytest.raises(CheckpointError, match="another configuration"):
        decode_checkpoint(whole, "eu-west", other)
    for garbage in (b"", b"\x93\x01\x02\x03", whole[:100]):
        with pytest.raises(CheckpointError):
            decode_checkpoint(garbage, "eu-west")


def test_the_newest_is_the_highest_epoch_then_the_highest_tick() -> None:
    names = [
        file_name("eu-west", 2, 900),
        file_name("eu-west", 3, 120),  # a successor's first, at a lower tick: newer
        file_name("eu-west", 2, 1000),  # the deposed primary's last
        file_name("us-east", 9, 5),
        ".eu-west-e0000000004-t000000000001.ckpt.7.partial",
        "notes.txt",
    ]
    assert newest_first(names, "eu-west") == [names[0 + 1], names[2], names[0]]
    assert parse_name(file_name("a-b-e1", 7, 42)) == ("a-b-e1", 7, 42)
    assert parse_name("notes.txt") is None
