"""A small match driven in-process and logged, for the match log's tests (no sockets)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from server.record import entries
from server.record.blocks import FILE_HEADER, Block, BlockWriter, read_blocks, seal_block
from server.record.capture import MatchLog, block_of
from server.sim.hitreg.backend import make_validator
from server.sim.lagcomp import LinkEstimate
from server.sim.match import MatchConfig
from server.sim.matchset import MatchSet
from shared.arena_map import default_map
from shared.protocol import InputMessage
from shared.weapons import RIFLE

#: Snapshot tick -> the clients coded (slots) and the players each was sent (by slot).
Sent = dict[int, tuple[np.ndarray, np.ndarray]]


def recorded_match(
    ticks: int = 240,
    players: int = 6,
    seed: int = 7,
    ticks_per_block: int = 30,
    sent: Sent | None = None,
) -> tuple[MatchSet, list[bytes]]:
    """Run a match of ``players`` who walk, turn to the nearest other and fire now and then,
    with jittered arrivals, a late joiner and a leaver; return it and its sealed blocks
    (the first holds the configuration, as a log file's does). With ``sent``: every
    snapshot is coded for every seat, as a node does, and who was sent whom kept there."""
    rng = np.random.default_rng(seed)
    config = MatchConfig(
        arena=default_map(), tick_rate=60, max_players=max(16, players + 2), snapshot_interval=2
    )
    validator = make_validator("reference")
    matches = MatchSet(config, 1, validator)
    log = MatchLog(
        matches, backend="reference", region="test", node="a", started=0.0,
        keyframe_ticks=90, blocks=BlockWriter(ticks_per_block),
    )  # fmt: skip
    match = matches[0]
    seqs: dict[int, int] = {}
    sealed = [seal_entries([log.config])]
    for _ in range(players):
        seat = match.join(f"bot{len(seqs)}", 0.1)
        seqs[seat.slot] = 0
    for tick in range(1, ticks + 1):
        now = tick / config.tick_rate
        if tick == ticks // 3:
            seqs[match.join("late", 0.05).slot] = 0
        if tick == ticks // 2:
            match.leave(min(seqs))
            del seqs[min(seqs)]
        for slot in list(seqs):
            if rng.random() < 0.1:
                continue  # a lost input: the seat is guessed
            seqs[slot] += 1
            others = [s for s in seqs if s != slot]
            target = match.world.pos[others[int(rng.integers(len(others)))]] if others else None
            me = match.world.pos[slot]
            yaw = math.atan2(target[1] - me[1], target[0] - me[0]) if target is not None else 0.0
            fire = RIFLE.button if rng.random() < 0.15 else 0
            move = (float(rng.uniform(-1, 1)), float(rng.uniform(-1, 1)))
            message = InputMessage(
                seq=seqs[slot], tick=tick, move=move,
                yaw=float(yaw + rng.normal(0, 0.02)), pitch=0.0, buttons=fire,
                view_time=max(0.0, now - 0.1), ack_tick=max(-1, tick - 6),
            )  # fmt: skip
            match.receive_input(slot, message, now - 0.004 + float(rng.uniform(0, 0.004)))
        if tick % 20 == 0:
            for slot in seqs:  # (the round trips the probes would have measured)
                match.probes.assume(slot, LinkEstimate(0.04 + 0.001 * slot + tick * 1e-5, 0.005))
        log.before_tick()
        results = matches.tick(tick)
        log.after_tick(results)
        if sent is not None and results[0].shown is not None:
            match.snapshot_parts(results[0], sorted(results[0].seats))
            assert match.last_sent is not None
            slots, selected = match.last_sent
            sent[tick] = (slots.copy(), selected.copy())
        if log.blocks.due:
            pending = log.take_block()
            assert pending is not None
            sealed.append(seal_block(block_of(pending)))
    pending = log.take_block()
    if pending is not None:
        sealed.append(seal_block(block_of(pending)))
    return matches, sealed


def seal_entries(items: list[dict[str, Any]], first: int = 0, last: int = 0) -> bytes:
    return seal_block(Block(first, last, entries.encode_block(items)))


def log_file(blocks: list[bytes]) -> bytes:
    return FILE_HEADER + b"".join(blocks)


def rewrite_log(data: bytes, change: Callable[[dict[str, Any]], None]) -> bytes:
    """A log file with ``change`` applied to every entry (a doctored copy; a tick's
    ``in``, when it has inputs, is given to ``change`` as its ReleasedInputs)."""
    sealed = []
    for block in read_blocks(data):
        items = entries.decode_block(block.planes)
        for entry in items:
            change(entry)
        sealed.append(seal_entries(items, block.first_tick, block.last_tick))
    return log_file(sealed)
