"""What two of the node's per-tick kernels cost, as JSON: run it in two checkouts to compare.

* **Movement**: ``shared.movement.step`` on ``--players`` players spread over the default
  map (every seated player moves every tick; the bots predict with it too).
* **Input decoding**: ``server.sim.input_frames.decode_input_frames`` on one read of a
  command packet (two masked input frames) from each of ``--players`` clients (the node
  decodes a tick's held reads in one call; 30 packets a second per player).

Both are checked first: the movement against its NumPy reference, bit for bit, and the
decoded inputs against what was encoded. Each figure is the median of ``--rounds``
interleaved timings of process CPU per call (``bench/interleaved.py``).

    python bench/node_kernels.py [--players 300] [--rounds 5] [--min-seconds 0.3] [--json PATH]
"""

from __future__ import annotations

import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.interleaved import interleave, median_timing
from bench.report import Start, add_json_option, emit
from server.sim.input_frames import decode_input_frames
from shared import protocol, wsframe
from shared.arena_map import default_map
from shared.commandline import OneLineParser
from shared.movement import step, step_reference

INPUTS_PER_PACKET = 2


def movement_case(players: int) -> tuple[np.ndarray, ...]:
    """Positions spread over the map (some against its boxes), at rest, moving all ways."""
    rng = np.random.default_rng(3)
    pos = np.column_stack([rng.uniform(-25.0, 25.0, (players, 2)), np.zeros(players)])
    move = rng.uniform(-0.7, 0.7, (players, 2))
    return pos, np.zeros((players, 3)), move, np.zeros(players, dtype=np.int64)


def command_packets(players: int) -> list[bytes]:
    """One read a client: its packet of two masked input frames, as the node receives it."""
    reads = []
    for client in range(players):
        frames = [
            wsframe.frame(
                wsframe.OP_BINARY,
                protocol.encode_input(
                    seq=2 * client + k, tick=1000 + k, move=(0.6, -0.3), yaw=1.0, pitch=0.1,
                    buttons=0, view_time=12.5, ack_tick=990,
                ),
                masked=True,
            )
            for k in range(INPUTS_PER_PACKET)
        ]  # fmt: skip
        reads.append(b"".join(frames))
    return reads


def run(players: int, rounds: int, min_seconds: float) -> dict[str, Any]:
    arena, dt = default_map(), 1.0 / 60
    pos, vel, move, buttons = movement_case(players)
    for got, want in zip(
        step(pos, vel, move, buttons, dt, arena),
        step_reference(pos, vel, move, buttons, dt, arena),
        strict=True,
    ):
        if not np.array_equal(got, want):
            raise AssertionError("the movement kernel and its reference disagree")
    reads = command_packets(players)
    columns = decode_input_frames(reads)
    if not columns.read_ok.all() or len(columns.ints) != players * INPUTS_PER_PACKET:
        raise AssertionError("the input decoder refused a valid command packet")
    samples = interleave(
        [lambda: step(pos, vel, move, buttons, dt, arena), lambda: decode_input_frames(reads)],
        rounds,
        min_seconds,
    )
    moving, decoding = (median_timing(s).cpu_seconds * 1e6 for s in samples)
    return {
        "bench": "node_kernels",
        "players": players,
        "rounds": rounds,
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "loadavg_1m": round(os.getloadavg()[0], 2),
            "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        },
        "movement_us_per_call": round(moving, 2),
        "input_decode_us_per_call": round(decoding, 2),
        "inputs_per_decode_call": players * INPUTS_PER_PACKET,
    }


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--players", type=int, default=300, help="players (default 300)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (medians)")
    parser.add_argument(
        "--min-seconds", type=float, default=0.3, help="each timing's least wall time"
    )
    add_json_option(parser, "node_kernels")
    args = parser.parse_args(argv)
    start = Start.now("node_kernels", "bench/node_kernels.py", argv)
    if args.players < 1 or args.rounds < 1 or args.min_seconds <= 0:
        parser.error("--players and --rounds at least 1, --min-seconds above 0")
    record = run(args.players, args.rounds, args.min_seconds)
    emit(record, args.json, start)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
