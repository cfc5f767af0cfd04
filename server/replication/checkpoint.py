"""Checkpoints: a region's match on disk, for when every node of the region has died (sans-I/O).

A checkpoint is a node's :class:`~server.replication.messages.FullState` (every match with
its history, seats and acknowledged inputs: what a joining standby starts from) with the
region, the configuration fingerprint, the epoch and tick it was taken at and the wall
clock then, and a digest of the state so a damaged file is refused rather than resumed.
Only published ticks are checkpointed, so a resumed match continues a history its players
were shown; what is lost is the ticks after the checkpoint (docs/failover.md).

Files are named ``<region>-e<epoch>-t<tick>.ckpt``: the newest is the highest epoch, then
the highest tick (a deposed primary may write after its successor's first checkpoint,
never at a higher epoch). Writing them atomically is the edge's job
(:mod:`server.net.checkpoints`).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import asdict, dataclass
from typing import Any

import msgpack

from server.replication import messages
from server.replication.messages import ConfigFingerprint, FullState

__all__ = [
    "FORMAT",
    "Checkpoint",
    "CheckpointError",
    "decode_checkpoint",
    "encode_checkpoint",
    "file_name",
    "newest_first",
    "parse_name",
]

FORMAT = "arena-checkpoint-1"
SUFFIX = ".ckpt"
_NAME = re.compile(r"^(?P<region>.+)-e(?P<epoch>\d+)-t(?P<tick>\d+)\.ckpt$")


class CheckpointError(ValueError):
    """A file that is not a whole checkpoint of this region and configuration."""


@dataclass(frozen=True, slots=True)
class Checkpoint:
    region: str
    fingerprint: ConfigFingerprint
    wall_time: float  # time.time() when the tick was published: how far to move the clock on
    state: FullState

    @property
    def epoch(self) -> int:
        return self.state.epoch

    @property
    def tick(self) -> int:
        return self.state.tick


def encode_checkpoint(checkpoint: Checkpoint) -> bytes:
    state = messages.encode(checkpoint.state)
    return msgpack.packb(
        {
            "format": FORMAT,
            "region": checkpoint.region,
            "fingerprint": asdict(checkpoint.fingerprint),
            "wall_time": checkpoint.wall_time,
            "digest": hashlib.blake2b(state, digest_size=16).digest(),
            "state": state,
        },
        use_bin_type=True,
    )


def decode_checkpoint(
    data: bytes, region: str, fingerprint: ConfigFingerprint | None = None
) -> Checkpoint:
    """The checkpoint in ``data``; :class:`CheckpointError` (one line) if it is damaged, of
    another format or region, or of a configuration this node cannot resume."""
    try:
        raw: Any = msgpack.unpackb(data, raw=False)
    except Exception:
        raise CheckpointError("not a checkpoint (unreadable)") from None
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise CheckpointError(f"not a checkpoint of format {FORMAT}")
    state = raw.get("state")
    if not isinstance(state, bytes) or hashlib.blake2b(state, digest_size=16).digest() != raw.get(
        "digest"
    ):
        raise CheckpointError("damaged: its digest does not match its state")
    if raw.get("region") != region:
        raise CheckpointError(f"of region {raw.get('region')!r}, not {region!r}")
    try:
        written = ConfigFingerprint(**raw["fingerprint"])
        full = messages.decode(state)
        wall_time = float(raw["wall_time"])
    except (KeyError, TypeError, ValueError, messages.MessageError) as error:
        raise CheckpointError(f"unreadable ({error})") from None
    if not isinstance(full, FullState):
        raise CheckpointError("holds no full state")
    if fingerprint is not None and written != fingerprint:
        raise CheckpointError(f"of another configuration ({written}, this node {fingerprint})")
    return Checkpoint(region, written, wall_time, full)


def file_name(region: str, epoch: int, tick: int) -> str:
    return f"{region}-e{epoch:010d}-t{tick:012d}{SUFFIX}"


def parse_name(name: str) -> tuple[str, int, int] | None:
    """``(region, epoch, tick)`` of a checkpoint file name; None for any other file."""
    found = _NAME.match(name)
    if found is None:
        return None
    return found["region"], int(found["epoch"]), int(found["tick"])


def newest_first(names: list[str], region: str) -> list[str]:
    """This region's checkpoint files, newest (highest epoch, then tick) first."""
    ranked = []
    for name in names:
        parsed = parse_name(name)
        if parsed is not None and parsed[0] == region:
            ranked.append((parsed[1], parsed[2], name))
    return [name for _, _, name in sorted(ranked, reverse=True)]
