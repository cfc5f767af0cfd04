"""What one loopback TCP write and one read cost a uvloop process here, as JSON: the floor
under the bot process's cost per bot-tick.

A bot process at 300 bots writes about 35 packets a second per bot (30 command packets and
the answers to the node's probes) and reads about 34 (30 snapshots and the probes). On
loopback the writer's system call also runs the receiver's TCP input, so a write costs
the bot process far more than a write to a network card would. This bench measures both
with nothing else in the way:

1. **Writes**: ``--connections`` sockets to a sink process (on another core when there
   is one) that reads and drops; each round writes ``--write-bytes`` to every socket,
   30 rounds a second, like the bots' command packets.
2. **Reads**: the other way round; a receiver process with a ``data_received`` that only
   counts, ``--read-bytes`` a message (a snapshot's size at 300 bots).

Each figure is the process's CPU (user and system, ``getrusage``) over the messages, the
median of ``--repeats`` runs, and the JSON gives what both add up to per bot-tick at the
bots' rates.

    python bench/socket_floor.py [--connections 300] [--seconds 6] [--repeats 3] [--json PATH]
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.report import Start, add_json_option, emit
from shared.commandline import OneLineParser

#: A bot's packets a second at 300 bots on one node (bench/server_load.py): 30 command
#: packets plus about 5 probe answers and pings up; 30 snapshots plus 4 probes down.
WRITES_PER_BOT_S = 35
READS_PER_BOT_S = 34
TICK_RATE = 60
ROUNDS_PER_S = 30.0


def log(line: str) -> None:
    print(f"bench/socket_floor: {line}", file=sys.stderr, flush=True)


def pin(cpu: int) -> None:
    """Run on ``cpu`` when this machine has it (the two sides on two cores)."""
    if hasattr(os, "sched_setaffinity") and cpu < (os.cpu_count() or 1):
        os.sched_setaffinity(0, {cpu})


class _Counting(asyncio.Protocol):
    def __init__(self, counter: list[int]) -> None:
        self.counter = counter

    def data_received(self, data: bytes) -> None:
        self.counter[0] += 1


def _serve(ready: Any, go: Any, done: Any, seconds: float, cpu: int) -> None:
    """The far side: accept, count each read, and report this process's CPU over the
    measured window (from ``go`` to ``seconds`` later)."""
    pin(cpu)

    async def serve() -> None:
        loop = asyncio.get_running_loop()
        counter = [0]
        server = await loop.create_server(lambda: _Counting(counter), "127.0.0.1", 0)
        ready.send(server.sockets[0].getsockname()[1])
        await loop.run_in_executor(None, go.recv)
        before, reads = resource.getrusage(resource.RUSAGE_SELF), counter[0]
        await asyncio.sleep(seconds)
        after = resource.getrusage(resource.RUSAGE_SELF)
        done.send((after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime,
                   counter[0] - reads))  # fmt: skip

    uvloop.run(serve())


def measure(connections: int, seconds: float, size: int, side: str) -> dict[str, Any]:
    """Open ``connections`` sockets to a fresh far side and write ``size`` bytes to each,
    :data:`ROUNDS_PER_S` rounds a second for ``seconds``: the CPU per write of this
    process (``side`` "write") or per read callback of the far side ("read")."""
    context = multiprocessing.get_context("spawn")
    ready_r, ready_w = context.Pipe(duplex=False)
    go_r, go_w = context.Pipe(duplex=False)
    done_r, done_w = context.Pipe(duplex=False)
    far = context.Process(target=_serve, args=(ready_w, go_r, done_w, seconds + 1.0, 0))
    far.start()
    pin(1)
    port = ready_r.recv()

    async def write() -> tuple[float, float, int]:
        loop = asyncio.get_running_loop()
        transports = [
            (await loop.create_connection(asyncio.Protocol, "127.0.0.1", port))[0]
            for _ in range(connections)
        ]
        await asyncio.sleep(0.5)
        payload = b"x" * size
        go_w.send(True)
        before = resource.getrusage(resource.RUSAGE_SELF)
        writes, end = 0, time.monotonic() + seconds
        while time.monotonic() < end:
            for transport in transports:
                transport.write(payload)
            writes += connections
            await asyncio.sleep(1.0 / ROUNDS_PER_S)
        after = resource.getrusage(resource.RUSAGE_SELF)
        await asyncio.sleep(1.5)  # (the far side's window closes)
        return after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime, writes

    try:
        user, system, count = uvloop.run(write())
        if side == "read":
            user, system, count = done_r.recv()
    finally:
        far.kill()
        far.join()
    if not count:
        raise RuntimeError(f"no {side}s were counted")
    return {
        "count": count,
        "user_us": round(user / count * 1e6, 2),
        "system_us": round(system / count * 1e6, 2),
        "cpu_us": round((user + system) / count * 1e6, 2),
    }


def run(
    connections: int, seconds: float, write_bytes: int, read_bytes: int, repeats: int
) -> dict[str, Any]:
    sides: dict[str, list[dict[str, Any]]] = {"write": [], "read": []}
    for repeat in range(1, repeats + 1):
        for side, size in (("write", write_bytes), ("read", read_bytes)):
            log(f"repeat {repeat}/{repeats}: {side}s of {size} B on {connections} sockets, "
                f"{ROUNDS_PER_S:g} rounds a second for {seconds:g} s")  # fmt: skip
            sides[side].append(measure(connections, seconds, size, side))
    median = {side: statistics.median(r["cpu_us"] for r in runs) for side, runs in sides.items()}
    per_bot_tick = (
        WRITES_PER_BOT_S * median["write"] + READS_PER_BOT_S * median["read"]
    ) / TICK_RATE
    return {
        "bench": "socket_floor",
        "connections": connections,
        "repeats": repeats,
        "machine": {"cpus": os.cpu_count(), "loadavg_1m": round(os.getloadavg()[0], 2)},
        "write": {"bytes": write_bytes, "cpu_us_median": median["write"], "runs": sides["write"]},
        "read": {"bytes": read_bytes, "cpu_us_median": median["read"], "runs": sides["read"]},
        "bot_rates": {"writes_per_s": WRITES_PER_BOT_S, "reads_per_s": READS_PER_BOT_S},
        "floor_us_per_bot_tick": round(per_bot_tick, 2),
    }


def main() -> int:
    parser = OneLineParser(
        description="CPU of one loopback TCP write and read in a uvloop process (JSON)"
    )
    parser.add_argument("--connections", type=int, default=300, help="sockets (default 300)")
    parser.add_argument("--seconds", type=float, default=6.0, help="per run (default 6)")
    parser.add_argument("--write-bytes", type=int, default=60, help="a write (default 60)")
    parser.add_argument("--read-bytes", type=int, default=600, help="a read (default 600)")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each (default 3)")
    add_json_option(parser, "socket_floor")
    args = parser.parse_args()
    start = Start.now("socket_floor", "bench/socket_floor.py", None)
    if min(args.connections, args.write_bytes, args.read_bytes, args.repeats) < 1:
        parser.error("--connections, --repeats and the sizes must be at least 1")
    if not args.seconds > 0:
        parser.error("--seconds must be positive")
    result = run(args.connections, args.seconds, args.write_bytes, args.read_bytes, args.repeats)
    emit(result, args.json, start)
    return 0


if __name__ == "__main__":
    sys.exit(main())
