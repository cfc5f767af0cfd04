"""How fast a recorded match replays, and that it replays exactly, as JSON.

Per size, a real node records a match (``arena-server --record``) under bots, as
``bench/server_load.py`` runs them: full bots up to 60 players (the demo's match is 60 of
them), above that ``--full-bots`` full bots and the rest light players (the two cores
hold no more beside a node of 300); then ``arena-replay`` re-runs its log
``--repeats`` times, each a fresh process on one core (``NUMBA_NUM_THREADS=1``, pinned to
the bench's first core; nothing else of the bench runs meanwhile). Per size it reports the
median speed (match time replayed over wall time, loading the kernels excluded, as
``arena-replay --json`` counts it), every run's speed, the ticks and shots replayed, the
log's size, and the load average beside each replay.

A run is refused (exit 2, ``"valid": false``) when the recorded match was (the bots' run
was invalid: fewer players seated, a bot process under the tick rate), or when any replay
finds a mismatch or cannot read the log: its speed would then be of another match. Exit 1
when the 60-player match replays under 50 times real time; ``--quick``: a smoke run of a
few players, no target.

    python bench/replay.py [--sizes 60,300] [--full-bots 40] [--seconds 35] [--repeats 5]
                           [--json PATH]
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.report import Start, add_json_option, emit, targets_status
from bench.server_load import FULL_BOTS, measure
from shared.commandline import OneLineParser

SPEED_MIN_X = 50.0
SPEED_TARGET_PLAYERS = 60
#: The node's first seconds after the last bot is seated, before the window the bots'
#: run is judged on (the whole match is recorded, joins included).
WARMUP_S = 2.0
QUICK_PLAYERS, QUICK_SECONDS = 6, 8.0
REPLAY_TIMEOUT_S = 600


def log(line: str) -> None:
    print(f"bench/replay: {line}", file=sys.stderr, flush=True)


def light_players(players: int, full_bots: int) -> int:
    """The light players of a match of ``players``: none up to 60, else all but
    ``full_bots``."""
    return 0 if players <= SPEED_TARGET_PLAYERS else max(0, players - full_bots)


def record(players: int, full_bots: int, seconds: float, folder: str) -> dict[str, Any]:
    """A real node under ``players`` bots for ``seconds``, its match logged into
    ``folder``: the bots' run as ``bench/server_load.measure`` judges it."""
    light = light_players(players, full_bots)
    flags = ("--record", folder)
    return asyncio.run(measure(players, seconds, WARMUP_S, light=light, node_args=flags))


def _on_one_core(core: int) -> None:
    os.sched_setaffinity(0, {core})


def replay_once(folder: str, core: int) -> dict[str, Any]:
    """``arena-replay folder`` in a fresh process on ``core``: its JSON summary, its exit
    status, what it said on stderr, and the load average as it ended."""
    with tempfile.TemporaryDirectory() as scratch:
        summary_path = Path(scratch) / "replay.json"
        try:
            done = subprocess.run(
                [sys.executable, "-m", "server.record.cli", folder, "--json", str(summary_path)],
                capture_output=True, text=True, timeout=REPLAY_TIMEOUT_S,
                env={**os.environ, "NUMBA_NUM_THREADS": "1"},
                preexec_fn=lambda: _on_one_core(core),
            )  # fmt: skip
            returncode, said = done.returncode, done.stderr.strip().splitlines()[-3:]
        except subprocess.TimeoutExpired:
            returncode, said = None, [f"no end after {REPLAY_TIMEOUT_S} s"]
        summary = (
            json.loads(summary_path.read_text(encoding="utf-8")) if summary_path.exists() else {}
        )
    return {
        "returncode": returncode,
        "stderr": said,
        "loadavg_1m": round(os.getloadavg()[0], 2),
        **summary,
    }


def _mismatches(run: dict[str, Any]) -> int:
    keys = ("hash_mismatches", "verdict_mismatches", "seat_mismatches", "world_mismatches")
    return sum(int(run.get(key) or 0) for key in keys)


def run_size(
    players: int, full_bots: int, seconds: float, repeats: int, core: int
) -> tuple[dict[str, Any], list[str]]:
    """One size: record a match, replay it ``repeats`` times; its row and what makes the
    run invalid."""
    problems: list[str] = []
    with tempfile.TemporaryDirectory() as folder:
        log(f"{players} players: recording {seconds:g} s of a node under bots ...")
        bots = record(players, full_bots, seconds, folder)
        problems += [f"{players} players, the recorded run: {r}" for r in bots["invalid_reasons"]]
        log_bytes = sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file())
        runs = []
        for number in range(1, repeats + 1):
            run = replay_once(folder, core)
            log(
                f"{players} players: replay {number} of {repeats}: {run.get('speed_x')}x real "
                f"time, {run.get('ticks')} ticks, {_mismatches(run)} mismatches "
                f"(load {run['loadavg_1m']})"
            )
            runs.append(run)
    for number, run in enumerate(runs, 1):
        if run["returncode"] != 0 or run.get("speed_x") is None:
            said = "; ".join(run["stderr"]) or "no summary"
            problems.append(f"{players} players, replay {number}: exit {run['returncode']}: {said}")
        elif _mismatches(run):
            problems.append(f"{players} players, replay {number}: {_mismatches(run)} mismatches")
    speeds = [float(run["speed_x"]) for run in runs if run.get("speed_x") is not None]
    first = runs[0]
    ticks = int(first.get("ticks") or 0)
    row = {
        "players": players,
        "full_bots": players - light_players(players, full_bots),
        "light": light_players(players, full_bots),
        "seconds": seconds,
        "ticks": ticks,
        "shots": first.get("shots"),
        "log_bytes": log_bytes,
        "speed_x": round(statistics.median(speeds), 1) if speeds else None,
        "speed_x_runs": speeds,
        "wall_s_runs": [run.get("wall_s") for run in runs],
        "mismatches": [_mismatches(run) for run in runs],
        "loadavg_1m": [run["loadavg_1m"] for run in runs],
        "recorded_run": {
            key: bots.get(key)
            for key in ("bot_ticks_per_s", "tick_p99_ms", "fair_agreement", "loadavg_1m")
        },
    }
    return row, problems


def run(sizes: list[int], full_bots: int, seconds: float, repeats: int) -> dict[str, Any]:
    core = min(os.sched_getaffinity(0))
    rows, invalid = [], []
    for players in sizes:
        row, problems = run_size(players, full_bots, seconds, repeats, core)
        rows.append(row)
        invalid += problems
    targets = {
        f"speed_x_{row['players']}": {
            "value": row["speed_x"],
            "limit": SPEED_MIN_X,
            "met": row["speed_x"] is not None and row["speed_x"] >= SPEED_MIN_X,
        }
        for row in rows
        if row["players"] == SPEED_TARGET_PLAYERS
    }
    missed = [name for name, target in targets.items() if not target["met"]]
    return {
        "bench": "replay",
        "replay_core": core,
        "valid": not invalid,
        "invalid_reasons": invalid,
        "targets": targets,
        "targets_met": not missed,
        "missed": missed,
        "results": rows,
        "how": "a real node records a match under bots; arena-replay re-runs its log in "
        "fresh processes on one core (NUMBA_NUM_THREADS=1), its speed the match time "
        "replayed over the wall time, loading the kernels excluded; medians of the repeats",
    }


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="bench/replay.py", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes", default=f"{SPEED_TARGET_PLAYERS},300",
        help="comma-separated players, one recorded match each (default "
        f"{SPEED_TARGET_PLAYERS},300)",
    )  # fmt: skip
    parser.add_argument(
        "--full-bots", type=int, default=FULL_BOTS,
        help=f"full bots in a match of more than {SPEED_TARGET_PLAYERS} players, the rest "
        f"light players (default {FULL_BOTS})",
    )  # fmt: skip
    parser.add_argument("--seconds", type=float, default=35.0, help="seconds recorded (35)")
    parser.add_argument("--repeats", type=int, default=5, help="replays of each log (5)")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 6 players, 8 s")
    add_json_option(parser, "replay")
    args = parser.parse_args(argv)
    try:
        sizes = [int(size) for size in args.sizes.split(",")]
    except ValueError:
        parser.error(f"--sizes: {args.sizes!r} is not comma-separated whole numbers")
    if args.quick:
        sizes, args.seconds, args.repeats = [QUICK_PLAYERS], QUICK_SECONDS, 1
    if min(sizes) < 1 or args.full_bots < 1 or args.seconds < 5 or args.repeats < 1:
        parser.error("--sizes, --full-bots and --repeats must be positive, --seconds at least 5")
    start = Start.now("replay", "bench/replay.py", argv)
    report = run(sizes, args.full_bots, args.seconds, args.repeats)
    emit(report, args.json, start)
    return targets_status(report, log)


if __name__ == "__main__":
    sys.exit(main())
