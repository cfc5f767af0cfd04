"""What coding one snapshot costs the node: interest selection and the delta encoder.

A seeded match on the default map: ``N`` players wander (up to 6 m/s, turning as they go),
every one a client; a snapshot every other tick (30 Hz). Each client acknowledges the
newest snapshot or the one before (half each, as the spread fan-out leaves them), so the
encoder codes against mixed baselines as it does in a node. The seats are coded in two
halves, as a node's spread fan-out codes them (``Match.snapshot_parts``).

Per size, the process CPU per snapshot (median of ``--rounds`` rounds, each over at least
``--min-seconds``) of:

* ``select_us``: :func:`server.sim.interest.select_players` for every client;
* ``encode_us``: :meth:`server.sim.deltas.DeltaEncoder.encode` for every client (the
  selection included), the players of every snapshot moved on from the last.

    python bench/snapshot_coding.py [--sizes 60,150,300,600] [--rounds 5] [--json PATH]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.interleaved import interleave, median_timing
from bench.report import Start, add_json_option, emit
from server.sim.deltas import DeltaEncoder
from server.sim.interest import InterestConfig, select_players
from shared.arena_map import default_map
from shared.commandline import OneLineParser
from shared.protocol.deltas import EntityCodec

__all__ = ["Scene", "main"]

INTERVAL = 2  # ticks per snapshot: 30 Hz at 60
SPEED_MS = 6.0


class Scene:
    """``players`` clients wandering on the default map, one snapshot after another."""

    def __init__(self, players: int, seed: int = 17) -> None:
        arena = default_map()
        self.rng = np.random.default_rng(seed)
        self.low, self.high = np.asarray(arena.bounds_min), np.asarray(arena.bounds_max)
        self.codec = EntityCodec.for_bounds(arena.bounds_min, arena.bounds_max)
        self.config = InterestConfig()
        self.players = players
        self.pos = np.zeros((players, 3))
        self.pos[:, :2] = self.rng.uniform(self.low, self.high, (players, 2))
        self.yaw = self.rng.uniform(-np.pi, np.pi, players)
        self.present = np.ones(players, dtype=np.bool_)
        self.slots = np.arange(players, dtype=np.int64)
        self.halves = (self.slots[0::2], self.slots[1::2])
        self.encoder = DeltaEncoder(self.codec, players, INTERVAL, self.config)
        self.priority = np.zeros((players, players))
        self.fights = np.full((players, players), -np.inf)
        self.tick = 0

    def _move(self) -> np.ndarray:
        """One snapshot interval on: each turns a little and walks; its quantised world."""
        self.tick += INTERVAL
        self.yaw += self.rng.uniform(-0.3, 0.3, self.players)
        step = SPEED_MS * INTERVAL / 60.0
        self.pos[:, 0] += step * np.cos(self.yaw)
        self.pos[:, 1] += step * np.sin(self.yaw)
        np.clip(self.pos[:, :2], self.low, self.high, out=self.pos[:, :2])
        velocity = np.zeros_like(self.pos)
        health = np.full(self.players, 100.0)
        return self.codec.quantise(
            self.pos, velocity, self.yaw, np.zeros(self.players), health, self.present
        )

    def select(self) -> None:
        self._move()
        now = self.tick / 60.0
        select_players(
            self.config, self.slots, self.pos, self.yaw, self.present, self.fights, now,
            self.priority,
        )  # fmt: skip

    def encode(self) -> None:
        values = self._move()
        now = self.tick / 60.0
        for half in self.halves:
            self.encoder.encode(
                self.tick, now, half, half, self.present, self.pos, self.yaw, values
            )
        newest = self.rng.random(self.players) < 0.5
        acks = np.where(newest, self.tick, self.tick - INTERVAL).astype(np.int64)
        self.encoder.note_acks(self.slots, acks)


def run(sizes: list[int], rounds: int, min_seconds: float) -> dict[str, Any]:
    results = []
    for players in sizes:
        print(f"snapshot_coding: {players} players ...", file=sys.stderr, flush=True)
        selecting, encoding = Scene(players), Scene(players)
        for _ in range(3):  # compiled or loaded from the cache, and the accounts filled
            selecting.select()
            encoding.encode()
        select_runs, encode_runs = interleave(
            [selecting.select, encoding.encode], rounds, min_seconds
        )
        select_us = median_timing(select_runs).cpu_seconds * 1e6
        encode_us = median_timing(encode_runs).cpu_seconds * 1e6
        tally = encoding.encoder.tally()
        results.append(
            {
                "players": players,
                "select_us": round(select_us, 1),
                "encode_us": round(encode_us, 1),
                "encode_us_per_client": round(encode_us / players, 3),
                "records_per_client": round(
                    (tally["records_delta"] + tally["records_full"]) / max(tally["coded"], 1), 1
                ),
                "select_us_runs": [round(t.cpu_seconds * 1e6, 1) for t in select_runs],
                "encode_us_runs": [round(t.cpu_seconds * 1e6, 1) for t in encode_runs],
            }
        )
        row = results[-1]
        print(
            f"snapshot_coding: {players} players: select {row['select_us']} us, "
            f"encode (selection included) {row['encode_us']} us a snapshot",
            file=sys.stderr,
            flush=True,
        )
    return {
        "bench": "snapshot_coding",
        "timing": "process_cpu, interleaved median",
        "snapshot_interval_ticks": INTERVAL,
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "loadavg_1m": round(os.getloadavg()[0], 2),
            "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        },
        "results": results,
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = OneLineParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="60,150,300,600", help="comma-separated players")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (medians)")
    parser.add_argument(
        "--min-seconds", type=float, default=0.3, help="each timing's least wall time"
    )
    add_json_option(parser, "snapshot_coding")
    args = parser.parse_args(argv)
    try:
        args.sizes = [int(size) for size in args.sizes.split(",")]
    except ValueError:
        parser.error(f"--sizes takes whole numbers separated by commas, not {args.sizes!r}")
    if any(size < 2 for size in args.sizes) or args.rounds < 1 or args.min_seconds <= 0:
        parser.error("--sizes must be at least 2 players, --rounds and --min-seconds positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    start = Start.now("snapshot_coding", "bench/snapshot_coding.py", argv)
    record = run(args.sizes, args.rounds, args.min_seconds)
    emit(record, args.json, start)
    return 0


if __name__ == "__main__":
    sys.exit(main())
