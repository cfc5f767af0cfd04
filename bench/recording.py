"""What recording a match costs the node: CPU on the tick and on the writer thread, and bytes.

In-process, per size, two identical seeded matches on the default map (one node's match of
``N`` players, a snapshot every other tick) are driven tick by tick with the same inputs,
as a node's intake queues them (``Match.receive_decoded``): each player walks, holding a
direction for a while, aims at another (its yaw changes every tick), fires now and then,
loses an input in fifty; its view time is its own clock's estimate of server time less the
interpolation delay, and its arrival the node's clock, both full-precision doubles as a
real node logs them. Match A only ticks; match B also records (``MatchLog.before_tick``
and ``after_tick`` around the tick, as the node's edge calls them, and the block handed
over when due). They tick in turn, tick by tick (which one first alternating), and per size
the bench reports, in process CPU per player-tick (medians of the rounds):

* ``tick_us``: the tick alone (A), what the node's simulation spends;
* ``record_tick_us``: the recording's part of B's tick (what the tick thread pays);
* ``record_writer_us``: coding and sealing B's blocks (the writer thread's work);
* ``record_us``: the two together, the recording's whole CPU;
* ``record_ratio_of_node``: that over a whole node's CPU per player-tick without recording
  (``node_us``: this run's node, below, where measured, else ``bench/peers``' from another
  run), what the target "recording costs the node at most 3 % more CPU per player-tick"
  asks of the recording's own work; ``record_ratio`` sets it against the simulated tick
  alone, and ``ab_ratio`` is B's whole tick over A's, less one;

and the log's size: bytes per input and MB per minute of match. A run is refused (exit 2,
``"valid": false``) when a block does not decode to the inputs logged, the two matches'
worlds differ or a node's run is refused; exit 1 when a target is missed (at the largest
size the recording within 3 % of the node's CPU; where the node is measured, also its A/B
and its own count within 3 %; at most 2 MB a minute at 60 players). ``--quick``: a smoke
run.

``--node-rounds N`` also measures a real node under bots at the largest size (what
``bench/server_load.py`` measures: the node process's CPU, sockets, fan-out and the writer
thread included; the node alone on one core, the bots on the other), N rounds alternately
without and with ``--record``: its CPU per player-tick without (``node_us``), its tick p99
either way and the log's size; in each recording run, the share of the node's CPU its log
took as the node itself counts it (``arena_record_cpu_seconds_total`` over the node's CPU
less it: one run, no A/B noise); and the node's own A/B, B's median over A's, the
target's own figure, with a 90 % interval from resampling the runs
(``node_ab_interval_90``). A node's CPU per player-tick scatters from one run to the next
on the development machine by 6 to 8 % (one standard deviation; the runs are listed, and
their extremes lie up to half the median apart), far more than the 3 % looked for: six
rounds pin the A/B down to about ±7 %, twelve to ±4 to 8 %, 36 to ±2.6 % in one set
and 50 to ±4.7 % in another (whose runs drifted more), and the target's entry says
whether its interval held the limit (``"resolved": false``: the A/B's verdict is then the
noise's).

``--node-switches N`` A/Bs inside one node instead of across runs: one node under the same
bots at the largest size (the node alone on one core), its recording paused and resumed
through its admin port every ``--node-switch-seconds`` (A B A ... B A, N recording
stretches, each stretch's first second left out), each recording stretch's CPU per
player-tick against the mean of the paused ones before and after it (a drift over the run
cancels out): the median of those N ratios with a 90 % interval from resampling them
(``node_switched``), and the node's own count of its log's share in the recording
stretches. Two runs' noise is gone from it; what is left is the node's own from one ten
seconds to the next (about 5 % a stretch on the development machine).

``--node-size-runs N`` also records a real node under 60 full bots N times: the log's MB
per minute of the ticks it holds (median), what a match of the project's own bots costs
on disk. When measured, that is the size target's figure; the scene's is reported beside
it (its aim shakes by 0.01 rad every tick, about 160 of the protocol's angle steps, noise
that no coder shrinks and more than a bot's or a player's aim does).

    python bench/recording.py [--sizes 60,300] [--ticks 1200] [--rounds 6]
                              [--node-rounds 36] [--node-seconds 20]
                              [--node-switches 20] [--node-switch-seconds 10]
                              [--node-size-runs 3] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.adversary import node_metrics
from bench.report import Start, add_json_option, emit, results_path, targets_status
from bench.server_load import (
    health,
    measure,
    pinned,
    process_cpu_seconds,
    recording_cpu_s,
    start_bots,
    wait_seated,
)
from launch.nodes import start_node
from server.record import entries
from server.record.blocks import (
    FILE_HEADER,
    Block,
    BlockWriter,
    Pending,
    read_blocks,
    seal_block,
)
from server.record.capture import MatchLog, block_of
from server.sim.hitreg.backend import make_validator
from server.sim.inputs import ReleasedInputs
from server.sim.lagcomp import LinkEstimate
from server.sim.match import MatchConfig
from server.sim.matchset import MatchSet
from shared.arena_map import default_map
from shared.commandline import OneLineParser
from shared.protocol.inputs import FLOAT_COLUMNS, INT_COLUMNS
from shared.weapons import RIFLE

__all__ = ["Scene", "main"]

TICK_RATE = 60
CPU_RATIO_MAX = 0.03
MB_PER_MINUTE_MAX = 2.0
SIZE_TARGET_PLAYERS = 60
INTERP_DELAY = 0.1
NODE_WARMUP_S = 2.0
#: Full bots in the node's A/B by default, the rest light players: with the node and its
#: writer thread on the same two cores, 20 left their process under the tick rate.
NODE_FULL_BOTS = 10
#: What a switch of the recording leaves out of its segment's start.
SWITCH_SETTLE_S = 1.0


def log(line: str) -> None:
    print(f"bench/recording: {line}", file=sys.stderr, flush=True)


class Scene:
    """``players`` clients of one match, their inputs drawn from ``seed`` (two scenes of
    the same seed are sent the same inputs, tick for tick)."""

    def __init__(self, players: int, seed: int, record: bool) -> None:
        self.rng = np.random.default_rng(seed)
        arena = default_map()
        config = MatchConfig(
            arena=arena, tick_rate=TICK_RATE, max_players=players, snapshot_interval=2
        )
        validator = make_validator("cpu", box_min=arena.box_min, box_max=arena.box_max)
        self.matches = MatchSet(config, 1, validator)
        self.log: MatchLog | None = None
        if record:
            self.log = MatchLog(
                self.matches, backend="cpu", region="bench", node="a", started=0.0,
                blocks=BlockWriter(TICK_RATE),
            )  # fmt: skip
        self.pending: list[Pending] = []
        match = self.matches[0]
        self.slots = np.array([match.join(f"bot{i}", INTERP_DELAY).slot for i in range(players)])
        n = players
        self.seq = np.zeros(n, dtype=np.int64)
        self.heading = self.rng.uniform(-np.pi, np.pi, n)
        self.target = self.rng.integers(0, n, n)
        self.latency = self.rng.uniform(0.01, 0.04, n)  # one way, seconds
        self.clock_error = self.rng.normal(0.0, 0.002, n)  # each client's sync error
        self.inputs = 0

    def offer(self, tick: int) -> None:
        """This tick's inputs, as the intake queues them."""
        rng, n = self.rng, len(self.slots)
        match = self.matches[0]
        now = tick / TICK_RATE
        turn = rng.random(n) < 0.05
        self.heading[turn] = rng.uniform(-np.pi, np.pi, int(turn.sum()))
        retarget = rng.random(n) < 0.01
        self.target[retarget] = rng.integers(0, n, int(retarget.sum()))
        me, them = match.world.pos[self.slots], match.world.pos[self.slots[self.target]]
        yaw = np.arctan2(them[:, 1] - me[:, 1], them[:, 0] - me[:, 0]) + rng.normal(0, 0.01, n)
        fire = rng.random(n) < 0.1
        sent = rng.random(n) >= 0.02
        self.seq += sent
        rows = np.flatnonzero(sent)
        ints = np.zeros((len(rows), len(INT_COLUMNS)), dtype=np.int64)
        ints[:, 0] = self.seq[rows]
        ints[:, 1] = tick
        ints[:, 2] = tick - 6
        ints[:, 3] = np.where(fire[rows], RIFLE.button, 0)
        floats = np.zeros((len(rows), len(FLOAT_COLUMNS)), dtype=np.float64)
        floats[:, 0] = np.cos(self.heading[rows])
        floats[:, 1] = np.sin(self.heading[rows])
        floats[:, 2] = yaw[rows]
        floats[:, 3] = np.where(fire[rows], rng.normal(0, 0.05, len(rows)), 0.0)
        estimate = now + self.clock_error[rows] + rng.normal(0, 2e-4, len(rows))
        floats[:, 4] = estimate - self.latency[rows] - INTERP_DELAY
        arrivals = now - 0.004 + rng.uniform(0, 0.004, len(rows))
        order = np.argsort(arrivals)
        match.receive_decoded(self.slots[rows][order], ints[order], floats[order], arrivals[order])
        self.inputs += len(rows)
        if tick % 15 == 0:
            for slot, one_way in zip(self.slots.tolist(), self.latency.tolist(), strict=True):
                match.probes.assume(slot, LinkEstimate(2 * one_way, 0.004))

    def tick(self, tick: int) -> tuple[float, float]:
        """One tick: its whole CPU seconds, and the recording's share of them."""
        record = self.log
        if record is None:
            began = time.process_time()
            self.matches.tick(tick)
            return time.process_time() - began, 0.0
        began = time.process_time()
        record.before_tick()
        ticking = time.process_time()
        results = self.matches.tick(tick)
        ticked = time.process_time()
        record.after_tick(results)
        if record.blocks.due:
            taken = record.take_block()
            if taken is not None:
                self.pending.append(taken)
        ended = time.process_time()
        return ended - began, (ticking - began) + (ended - ticked)


def _same_inputs(a: ReleasedInputs, b: ReleasedInputs) -> bool:
    return all(
        np.array_equal(
            np.ascontiguousarray(getattr(a, name)).view(np.uint64),
            np.ascontiguousarray(getattr(b, name)).view(np.uint64),
        )
        for name in ("slot", "depth", "ints", "floats", "guess", "guessed", "dropped")
    )


def _write(pending: list[Pending], problems: list[str]) -> tuple[float, int]:
    """Code and seal the blocks as the writer thread does: its CPU seconds and the bytes;
    then read each back and check it holds what was logged (not timed)."""
    began = time.process_time()
    sealed = [seal_block(block_of(taken)) for taken in pending]
    spent = time.process_time() - began
    for taken, data in zip(pending, sealed, strict=True):
        logged = [e.to_entry()["in"] for e in taken.entries if not isinstance(e, dict)]
        (block,) = read_blocks(FILE_HEADER + data)
        read = [e["in"] for e in entries.decode_block(block.planes) if e["k"] == "tick"]
        if len(read) != len(logged) or not all(
            (x is None and y is None) or (x is not None and y is not None and _same_inputs(x, y))
            for x, y in zip(logged, read, strict=True)
        ):
            problems.append(f"a block of ticks {taken.first_tick}..{taken.last_tick} does "
                            "not decode to the inputs logged")  # fmt: skip
    return spent, sum(len(data) for data in sealed)


def run_size(players: int, ticks: int, rounds: int, seed: int) -> dict[str, Any]:
    log(f"{players} players, {ticks} ticks in {rounds} rounds ...")
    plain, recorded = Scene(players, seed, False), Scene(players, seed, True)
    assert recorded.log is not None
    config_bytes = len(FILE_HEADER) + len(
        seal_block(Block(0, 0, entries.encode_block([recorded.log.config])))
    )
    per_round = max(1, ticks // rounds)
    a_us, b_us, record_us, writer_us = [], [], [], []
    problems: list[str] = []
    stored, tick = config_bytes, 0
    for _ in range(rounds):
        timed: dict[str, list[float]] = {"a": [], "b": [], "rec": []}
        for step in range(per_round):
            # A and B in turn, tick by tick (the machine's drift falls on both), which one
            # first alternating (the second finds the caches the first warmed).
            pair = ((plain, "a"), (recorded, "b"))
            for scene, key in pair if step % 2 else pair[::-1]:
                scene.offer(tick + step + 1)
                whole, share = scene.tick(tick + step + 1)
                timed[key].append(whole)
                if key == "b":
                    timed["rec"].append(share)
        tick += per_round
        writer_s, written = _write(recorded.pending, problems)
        blocks_ticks = sum(p.last_tick - p.first_tick + 1 for p in recorded.pending)
        recorded.pending = []
        stored += written
        scale = 1e6 / players
        a_us.append(statistics.fmean(timed["a"]) * scale)
        b_us.append(statistics.fmean(timed["b"]) * scale)
        record_us.append(statistics.fmean(timed["rec"]) * scale)
        if blocks_ticks:
            writer_us.append(writer_s / blocks_ticks * scale)
    assert recorded.log is not None
    last = recorded.log.take_block()
    if last is not None:
        stored += _write([last], problems)[1]
    if plain.matches[0].world.state_hash() != recorded.matches[0].world.state_hash():
        problems.append(f"{players} players: recording changed the match (hashes differ)")
    seconds = tick / TICK_RATE
    tick_us, record_tick_us = statistics.median(a_us), statistics.median(record_us)
    writer = statistics.median(writer_us) if writer_us else 0.0
    recording_us = record_tick_us + writer
    row = {
        "players": players,
        "ticks": tick,
        "inputs": recorded.inputs,
        "tick_us": round(tick_us, 3),
        "tick_with_recording_us": round(statistics.median(b_us), 3),
        "record_tick_us": round(record_tick_us, 3),
        "record_writer_us": round(writer, 3),
        "ab_ratio": round(statistics.median(b / a for a, b in zip(a_us, b_us, strict=True)) - 1, 4),
        "record_tick_ratio": round(record_tick_us / tick_us, 4),
        "record_us": round(recording_us, 3),
        "record_ratio": round(recording_us / tick_us, 4),
        "bytes": stored,
        "bytes_per_input": round(stored / max(1, recorded.inputs), 2),
        "mb_per_minute": round(stored / seconds * 60 / 1e6, 3),
        "tick_us_rounds": [round(v, 3) for v in a_us],
        "record_tick_us_rounds": [round(v, 3) for v in record_us],
        "record_writer_us_rounds": [round(v, 3) for v in writer_us],
    }
    log(
        f"{players} players: tick {row['tick_us']} us/player-tick, recording "
        f"{row['record_tick_us']} on the tick + {row['record_writer_us']} on the writer "
        f"({row['record_ratio']:.1%}); {row['bytes_per_input']} B/input, "
        f"{row['mb_per_minute']} MB/min"
    )
    return {"row": row, "problems": problems}


def node_cost() -> dict[int, float]:
    """A whole node's CPU per player-tick by players, from the committed ``bench/peers``
    results (Arena under light players over WebSocket, on a core of its own: sockets and
    fan-out included; another run), the median of its valid repeats."""
    try:
        report = json.loads(results_path("peers").read_text(encoding="utf-8"))
        costs: dict[int, list[float]] = {}
        for run in report["runs"]:
            if run["server"] == "arena-light" and run["valid"]:
                costs.setdefault(int(run["players"]), []).append(
                    float(run["server_cpu_us_per_player_tick"])
                )
        return {players: statistics.median(values) for players, values in costs.items()}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def _log_bytes(folder: str) -> int:
    return sum(path.stat().st_size for path in Path(folder).rglob("*") if path.is_file())


def _logged_minutes(folder: str) -> float:
    """The minutes of match a log folder's blocks cover (first to last tick logged)."""
    first, last = None, None
    for path in Path(folder).rglob("*.arenalog"):
        for block in read_blocks(path.read_bytes()):
            first = block.first_tick if first is None else min(first, block.first_tick)
            last = block.last_tick if last is None else max(last, block.last_tick)
    if first is None or last is None:
        return 0.0
    return (last - first + 1) / TICK_RATE / 60.0


def node_size(runs: int, seconds: float) -> dict[str, Any]:
    """A real node recording under :data:`SIZE_TARGET_PLAYERS` full bots, ``runs``
    times: the log's MB per minute of the ticks it holds (median of the runs)."""
    rates: list[float] = []
    invalid: list[str] = []
    loads: list[float] = []
    for number in range(1, runs + 1):
        log(f"node log size at {SIZE_TARGET_PLAYERS} bots, run {number} of {runs} ...")
        with tempfile.TemporaryDirectory() as folder:
            measured = asyncio.run(
                measure(SIZE_TARGET_PLAYERS, seconds, NODE_WARMUP_S, node_args=("--record", folder))
            )
            minutes = _logged_minutes(folder)
            if minutes <= 0:
                invalid.append("the node's log holds no block")
                continue
            rates.append(round(_log_bytes(folder) / 1e6 / minutes, 3))
        invalid += measured["invalid_reasons"]
        loads.append(measured["loadavg_1m"])
    return {
        "players": SIZE_TARGET_PLAYERS,
        "full_bots": SIZE_TARGET_PLAYERS,
        "runs": runs,
        "seconds": seconds,
        "mb_per_minute": statistics.median(rates) if rates else None,
        "mb_per_minute_runs": rates,
        "loadavg_1m": loads,
        "invalid_reasons": invalid,
    }


def node_ab(
    players: int, rounds: int, seconds: float, full_bots: int = NODE_FULL_BOTS
) -> dict[str, Any]:
    """A real node under ``players`` bots (at most ``full_bots`` of them full bots, the
    rest light players; the node alone on one core), alternately without (A) and with
    ``--record`` (B), in the order A B, B A, A B... (a machine that gets busier through a
    round would otherwise count against B every time): medians of the node's CPU per
    player-tick and tick p99, and the log's size over the bots' time (the node's first
    seconds, before every bot is seated, included)."""
    plain: list[dict[str, Any]] = []
    recorded: list[dict[str, Any]] = []
    sizes: list[int] = []
    light = max(0, players - full_bots)
    for round_ in range(1, rounds + 1):
        log(f"node A/B at {players} players, round {round_} of {rounds} ...")
        for recording in (False, True) if round_ % 2 else (True, False):
            if not recording:
                plain.append(
                    asyncio.run(measure(players, seconds, NODE_WARMUP_S, light=light, pin=True))
                )
                continue
            with tempfile.TemporaryDirectory() as folder:
                recorded.append(
                    asyncio.run(
                        measure(
                            players, seconds, NODE_WARMUP_S, light=light,
                            node_args=("--record", folder), pin=True,
                        )
                    )
                )  # fmt: skip
                sizes.append(_log_bytes(folder))

    def median(runs: list[dict[str, Any]], key: str) -> float:
        return float(statistics.median(run[key] for run in runs))

    cpu_a = median(plain, "server_cpu_us_per_player_tick")
    cpu_b = median(recorded, "server_cpu_us_per_player_tick")
    runs_a = [run["server_cpu_us_per_player_tick"] for run in plain]
    runs_b = [run["server_cpu_us_per_player_tick"] for run in recorded]
    # Inside each recording run, what the node counted its log took of its own CPU: the
    # share the A/B looks for, without two runs' noise between it.
    shares = [
        run["record_cpu_us_per_player_tick"]
        / (run["server_cpu_us_per_player_tick"] - run["record_cpu_us_per_player_tick"])
        for run in recorded
    ]
    return {
        "players": players,
        "full_bots": players - max(0, players - full_bots),
        "rounds": rounds,
        "seconds": seconds,
        "cpu_us_per_player_tick": cpu_a,
        "cpu_us_per_player_tick_recording": cpu_b,
        "node_ab_ratio": round(cpu_b / cpu_a - 1, 4),
        "node_ab_interval_90": ratio_interval(runs_a, runs_b),
        "cpu_us_a_spread": round((max(runs_a) - min(runs_a)) / cpu_a, 3),
        "record_cpu_us_per_player_tick": median(recorded, "record_cpu_us_per_player_tick"),
        "record_share_in_node": round(statistics.median(shares), 4),
        "record_shares_in_node": [round(share, 4) for share in shares],
        "cpu_us_a": runs_a,
        "cpu_us_b": runs_b,
        "tick_p99_ms": median(plain, "tick_p99_ms"),
        "tick_p99_ms_recording": median(recorded, "tick_p99_ms"),
        "loadavg_1m": [run["loadavg_1m"] for run in plain + recorded],
        "mb_per_minute": round(statistics.median(sizes) / 1e6 / (seconds / 60), 2),
        "invalid_reasons": [
            reason for run in plain + recorded for reason in run["invalid_reasons"]
        ],
    }


async def _post(url: str) -> None:
    async with aiohttp.ClientSession() as session, session.post(url) as answer:
        if answer.status != 200:
            raise RuntimeError(f"POST {url}: HTTP {answer.status}")


async def _switched(players: int, switches: int, seconds: float, full_bots: int) -> dict[str, Any]:
    """One node under ``players`` bots (the node alone on one core), recording paused (A)
    and resumed (B) through its admin port every ``seconds``, A first and last: A B A ...
    B A, ``switches`` B segments. Each segment's first second is left out (the writer
    thread finishing the block handed over at a pause). Per segment the node's CPU per
    player-tick and, in B, its own count of its log's share."""
    light = max(0, players - full_bots)
    segments = 2 * switches + 1
    duration = NODE_WARMUP_S + segments * seconds + players / 10 + 30.0
    with tempfile.TemporaryDirectory() as folder, start_node(
        "--max-players", str(max(players, 300)), "--log-level", "warning", "--record", folder,
    ) as node, pinned(node.process.pid, True):  # fmt: skip
        report_path = Path(folder) / "bots.json"
        bots = start_bots(node.url, players - light, light, duration, report_path)
        rows: list[dict[str, Any]] = []
        try:
            await wait_seated(node.admin_url, players, duration / 2)
            await asyncio.sleep(NODE_WARMUP_S)
            loadavg = [os.getloadavg()[0]]
            for index in range(segments):
                recording = index % 2 == 1
                await _post(node.admin_url + ("/record/resume" if recording else "/record/pause"))
                await asyncio.sleep(SWITCH_SETTLE_S)
                first, cpu0 = await health(node.admin_url), process_cpu_seconds(node.process.pid)
                metrics0 = await node_metrics(node.admin_url)
                await asyncio.sleep(seconds - SWITCH_SETTLE_S)
                last, cpu1 = await health(node.admin_url), process_cpu_seconds(node.process.pid)
                metrics1 = await node_metrics(node.admin_url)
                seated = min(first["players"], last["players"])
                player_ticks = seated * (last["tick"] - first["tick"])
                cpu = cpu1 - cpu0
                recorded = recording_cpu_s(metrics0, metrics1) or 0.0
                rows.append({
                    "recording": recording,
                    "players": seated,
                    "cpu_us_per_player_tick": round(cpu / player_ticks * 1e6, 3),
                    "record_share": round(recorded / (cpu - recorded), 4) if recording else None,
                })  # fmt: skip
                side = "B" if recording else "A"
                log(f"node switched: segment {index + 1} of {segments} ({side}): "
                    f"{rows[-1]['cpu_us_per_player_tick']} us")  # fmt: skip
            loadavg.append(os.getloadavg()[0])
        finally:
            bots.stop(5.0)
    invalid = [f"segment {i + 1} held {row['players']} players of {players}"
               for i, row in enumerate(rows) if row["players"] < players]  # fmt: skip
    cpu = [row["cpu_us_per_player_tick"] for row in rows]
    # Each B against the mean of the A before and after it: a drift of the machine or of
    # the match over the run cancels out to first order.
    ratios = [cpu[i] / ((cpu[i - 1] + cpu[i + 1]) / 2) - 1 for i in range(1, segments, 2)]
    shares = [row["record_share"] for row in rows if row["recording"]]
    return {
        "players": players,
        "full_bots": players - light,
        "switches": switches,
        "seconds": seconds,
        "ratio": round(statistics.median(ratios), 4),
        "interval_90": median_interval(ratios),
        "ratios": [round(r, 4) for r in ratios],
        "cpu_us_a": cpu[0::2],
        "cpu_us_b": cpu[1::2],
        "record_share_in_node": round(statistics.median(shares), 4),
        "record_shares_in_node": shares,
        "loadavg_1m": [round(x, 2) for x in loadavg],
        "invalid_reasons": invalid,
    }


def median_interval(values: list[float], draws: int = 4000) -> list[float]:
    """A 90 % interval for the median of ``values`` (a percentile bootstrap, seeded)."""
    rng = np.random.default_rng(0)
    medians = np.median(rng.choice(np.asarray(values), (draws, len(values))), axis=1)
    low, high = np.percentile(medians, [5, 95])
    return [round(float(low), 4), round(float(high), 4)]


def ratio_interval(a: list[float], b: list[float], draws: int = 4000) -> list[float]:
    """A 90 % interval for ``median(b) / median(a) - 1``, each side's runs resampled
    (a percentile bootstrap, seeded): how far this many runs pin the A/B down, as a
    node's CPU per player-tick scatters from one run to the next."""
    rng = np.random.default_rng(0)
    medians_a = np.median(rng.choice(np.asarray(a), (draws, len(a))), axis=1)
    medians_b = np.median(rng.choice(np.asarray(b), (draws, len(b))), axis=1)
    low, high = np.percentile(medians_b / medians_a - 1, [5, 95])
    return [round(float(low), 4), round(float(high), 4)]


def run(
    sizes: list[int], ticks: int, rounds: int, seed: int, node_rounds: int = 0,
    node_seconds: float = 20.0, node_full_bots: int = NODE_FULL_BOTS, node_size_runs: int = 0,
    node_switches: int = 0, node_switch_seconds: float = 10.0,
) -> dict[str, Any]:  # fmt: skip
    results, invalid = [], []
    for players in sizes:
        done = run_size(players, ticks, rounds, seed)
        results.append(done["row"])
        invalid += done["problems"]
    largest = results[-1]
    node = (
        node_ab(largest["players"], node_rounds, node_seconds, node_full_bots)
        if node_rounds
        else None
    )
    switched = (
        asyncio.run(
            _switched(largest["players"], node_switches, node_switch_seconds, node_full_bots)
        )
        if node_switches
        else None
    )
    # The node's CPU per player-tick each size's recording is set against: this run's own
    # node (its runs without --record) where measured, else the peer bench's (another run).
    peers = node_cost()
    for row in results:
        if node is not None and row["players"] == node["players"]:
            row["node_us"], row["node_us_source"] = node["cpu_us_per_player_tick"], "node"
        elif switched is not None and row["players"] == switched["players"]:
            row["node_us"] = float(statistics.median(switched["cpu_us_a"]))
            row["node_us_source"] = "node"
        else:
            row["node_us"], row["node_us_source"] = peers.get(row["players"]), "peers"
        row["record_ratio_of_node"] = (
            None if row["node_us"] is None else round(row["record_us"] / row["node_us"], 4)
        )
    targets: dict[str, dict[str, Any]] = {}
    if largest["record_ratio_of_node"] is not None:
        targets[f"record_ratio_of_node_{largest['players']}"] = {
            "value": largest["record_ratio_of_node"], "limit": CPU_RATIO_MAX,
            "met": largest["record_ratio_of_node"] <= CPU_RATIO_MAX,
            "source": largest["node_us_source"],
        }  # fmt: skip
    sized = [row for row in results if row["players"] == SIZE_TARGET_PLAYERS]
    on_disk = node_size(node_size_runs, node_seconds) if node_size_runs else None
    if on_disk is not None:
        invalid += on_disk["invalid_reasons"]
    size_source, size = (
        ("node", on_disk["mb_per_minute"])
        if on_disk is not None and on_disk["mb_per_minute"] is not None
        else ("scene", sized[0]["mb_per_minute"] if sized else None)
    )
    if size is not None:
        targets[f"mb_per_minute_{SIZE_TARGET_PLAYERS}"] = {
            "value": size, "limit": MB_PER_MINUTE_MAX, "met": size <= MB_PER_MINUTE_MAX,
            "source": size_source,
        }  # fmt: skip
    if node is not None:
        invalid += node["invalid_reasons"]
        players = node["players"]
        targets[f"node_ab_ratio_{players}"] = _ab_target(
            node["node_ab_ratio"], node["node_ab_interval_90"]
        )
        targets[f"record_share_in_node_{players}"] = _share_target(node["record_share_in_node"])
    if switched is not None:
        invalid += switched["invalid_reasons"]
        players = switched["players"]
        targets.setdefault(
            f"record_share_in_node_{players}", _share_target(switched["record_share_in_node"])
        )
        targets[f"node_switched_ratio_{players}"] = _ab_target(
            switched["ratio"], switched["interval_90"]
        )
    missed = [name for name, target in targets.items() if not target["met"]]
    return {
        "bench": "recording",
        "timing": "process_cpu; in-process, A (tick) and B (tick + recording) in turn tick "
        "by tick, medians of rounds; the node, runs without and with --record in turn",
        "tick_rate": TICK_RATE,
        "valid": not invalid,
        "invalid_reasons": invalid,
        "targets": targets,
        "targets_met": not missed,
        "missed": missed,
        "results": results,
        "node": node,
        "node_size": on_disk,
        "node_switched": switched,
        "how": "in-process, one thread, the writer's work timed apart as its thread runs it; "
        "`record_ratio_of_node` is that recording CPU (tick and writer) over a node's whole "
        "CPU per player-tick without recording (this run's node under bots where measured, "
        "else bench/peers': `node_us_source`), `record_ratio` over the simulated tick alone. "
        "Where a node is measured, its own A/B (`node_ab_ratio`, medians of the rounds; "
        "`node_switched_ratio`, one node's recording paused and resumed) and its own count "
        "of its log's CPU (`record_share_in_node`) are judged too",
    }


def _ab_target(ratio: float, interval: list[float]) -> dict[str, Any]:
    """An A/B's target: its median against the limit, and whether its 90 % interval tells
    the two sides of the limit apart at all (``resolved`` false: the interval holds the
    limit, and the verdict is the noise's)."""
    low, high = interval
    return {
        "value": ratio, "limit": CPU_RATIO_MAX, "met": ratio <= CPU_RATIO_MAX,
        "interval_90": [low, high], "resolved": not low <= CPU_RATIO_MAX <= high,
    }  # fmt: skip


def _share_target(share: float) -> dict[str, Any]:
    """The node's own count of its log's share of its CPU, against the limit."""
    return {"value": share, "limit": CPU_RATIO_MAX, "met": share <= CPU_RATIO_MAX}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = OneLineParser(prog="bench/recording.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="60,300", help="comma-separated players")
    parser.add_argument("--ticks", type=int, default=1200, help="ticks each match runs")
    parser.add_argument("--rounds", type=int, default=6, help="alternate rounds (medians)")
    parser.add_argument("--seed", type=int, default=11, help="the scenes' seed")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 8 and 20 players")
    parser.add_argument(
        "--node-rounds", type=int, default=0,
        help="also A/B a real node under bots at the largest size, this many rounds "
        "(default 0: not measured)",
    )  # fmt: skip
    parser.add_argument(
        "--node-seconds", type=float, default=20.0, help="the bots' seconds per node run"
    )
    parser.add_argument(
        "--node-full-bots", type=int, default=NODE_FULL_BOTS,
        help=f"full bots among the node's players, the rest light (default {NODE_FULL_BOTS})",
    )  # fmt: skip
    parser.add_argument(
        "--node-size-runs", type=int, default=0,
        help=f"also record a real node under {SIZE_TARGET_PLAYERS} full bots this many times "
        "for the log's size, the size target's figure when measured (default 0: not measured)",
    )  # fmt: skip
    parser.add_argument(
        "--node-switches", type=int, default=0,
        help="also A/B one node under bots at the largest size, pausing and resuming its "
        "recording through its admin port this many times (default 0: not measured)",
    )  # fmt: skip
    parser.add_argument(
        "--node-switch-seconds", type=float, default=10.0,
        help="seconds each paused or recording stretch lasts (default 10)",
    )  # fmt: skip
    add_json_option(parser, "recording")
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.ticks, args.rounds = "8,20", 120, 2
    try:
        args.sizes = [int(size) for size in args.sizes.split(",")]
    except ValueError:
        parser.error(f"--sizes takes whole numbers separated by commas, not {args.sizes!r}")
    if (
        min(args.node_rounds, args.node_full_bots, args.node_size_runs, args.node_switches) < 0
        or args.node_seconds < 10
        or args.node_switch_seconds < 3
    ):
        parser.error("--node-rounds, --node-full-bots, --node-size-runs and --node-switches "
                     "must be at least 0, --node-seconds at least 10 and --node-switch-seconds "
                     "at least 3")  # fmt: skip
    if any(size < 2 for size in args.sizes) or args.rounds < 1 or args.ticks < args.rounds:
        parser.error("--sizes must be at least 2 players, --rounds at least 1 and --ticks "
                     "at least --rounds")  # fmt: skip
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    start = Start.now("recording", "bench/recording.py", argv)
    report = run(
        args.sizes, args.ticks, args.rounds, args.seed, args.node_rounds, args.node_seconds,
        args.node_full_bots, args.node_size_runs, args.node_switches, args.node_switch_seconds,
    )  # fmt: skip
    emit(report, args.json, start)
    return targets_status(report, log)


if __name__ == "__main__":
    sys.exit(main())
