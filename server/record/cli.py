"""``arena-replay``: re-run a recorded match and check every tick, compare two recordings,
or (``--serve``) serve the view on a replayed match.

Reading the files, timing the run and serving are this module's; the replay, the
comparison and what the view shows are :mod:`server.record.replay`,
:mod:`server.record.compare` and :mod:`server.record.viewer`. Exit 0: every tick the same
(or the server stopped); 1: a tick differs (the first is printed with what differs); 2: the
log cannot be read (a damaged block, another version, nothing to replay), one line each,
after replaying what could be read.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from aiohttp import web

from server.http_site import serving, stop_on_signals
from server.record.blocks import LogIncompatible
from server.record.compare import compare_recordings
from server.record.entries import LogEntryError, config_from_entry
from server.record.replay import ReplayOutcome, replay_match, warm_up
from server.record.serve import create_app
from server.record.timeline import Recording, read_recording
from server.record.viewer import ReplayViewer, ViewerError, read_sightings
from server.sim.hitreg.backend import BackendUnavailable, HitValidator, make_validator
from server.sim.match import MatchConfig
from shared.commandline import OneLineParser

__all__ = ["main"]

PROG = "arena-replay"
SUFFIX = ".arenalog"


def build_parser() -> OneLineParser:
    parser = OneLineParser(
        prog=PROG,
        description="Replay a match log written by arena-server --record: re-run every tick "
        "with the same code and check its world hash, its shots' verdicts and its seats.",
    )
    parser.add_argument(
        "dirs", nargs="*", metavar="DIR",
        help="the log's directory (or files); several directories read as one recording "
        "(a primary's and its standby's)",
    )  # fmt: skip
    parser.add_argument(
        "--from", dest="start", type=int, metavar="T",
        help="start at the last keyframe at or before tick T (default: the first)",
    )  # fmt: skip
    parser.add_argument("--to", dest="stop", type=int, metavar="T", help="stop after tick T")
    parser.add_argument(
        "--json", metavar="PATH",
        help="write the outcome as JSON: ticks, hash_mismatches, verdict_mismatches, "
        "seat_mismatches, speed_x (replayed match time over wall time), the first mismatches",
    )  # fmt: skip
    parser.add_argument(
        "--compare", nargs=2, metavar=("DIR_A", "DIR_B"),
        help="instead of replaying, name the first tick where two recordings of the same "
        "match differ (hash, verdicts or seats), e.g. a primary's and its standby's",
    )  # fmt: skip
    parser.add_argument(
        "--backend", choices=("cpu", "reference"), default="cpu",
        help="the hit kernels to judge the shots with (all give the same verdicts; "
        "default: cpu)",
    )  # fmt: skip
    parser.add_argument(
        "--serve", action="store_true",
        help="instead of checking, serve the view on the replay: open the printed URL "
        "(/view) to play, pause, step and look at any shot (docs/replay.md)",
    )  # fmt: skip
    parser.add_argument(
        "--host", default="127.0.0.1", help="--serve: the address (default: 127.0.0.1)"
    )
    parser.add_argument(
        "--port", type=int, default=8780, help="--serve: the port (default: 8780; 0: any)"
    )
    parser.add_argument(
        "--match", type=int, default=0, metavar="M", help="--serve: the match (default: 0)"
    )
    parser.add_argument(
        "--sightings", metavar="BOTS_DIR",
        help="--serve: the folder of arena-bots --record, to show beside each shot what its "
        "shooter drew of its target",
    )  # fmt: skip
    return parser


def _files(paths: list[str]) -> list[tuple[str, bytes]]:
    """Every log file under ``paths``, in name order (the order written)."""
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found.extend(sorted(path.glob(f"*{SUFFIX}")))
        elif path.is_file():
            found.append(path)
        else:
            raise FileNotFoundError(f"{raw}: no such file or directory")
    if not found:
        raise FileNotFoundError(f"no {SUFFIX} files in {', '.join(paths)}")
    return [(str(path), path.read_bytes()) for path in found]


def _load(paths: list[str]) -> Recording:
    return read_recording(_files(paths))


def _summary(outcomes: list[ReplayOutcome], seconds: float, tick_rate: int) -> dict[str, Any]:
    ticks = sum(o.ticks for o in outcomes)
    return {
        "ticks": ticks,
        "shots": sum(o.shots for o in outcomes),
        "hash_mismatches": sum(o.hash_mismatches for o in outcomes),
        "verdict_mismatches": sum(o.verdict_mismatches for o in outcomes),
        "seat_mismatches": sum(o.seat_mismatches for o in outcomes),
        "world_mismatches": sum(o.world_mismatches for o in outcomes),
        "speed_x": round(ticks / tick_rate / seconds, 1) if seconds > 0 else None,
        "wall_s": round(seconds, 4),
        "matches": [
            {
                "match": o.match, "ticks": o.ticks, "first_tick": o.first_tick,
                "last_tick": o.last_tick,
                "mismatches": [{"tick": m.tick, "kind": m.kind, "what": m.what}
                               for m in o.mismatches],
                "problems": o.problems,
                "notes": o.notes,
            }
            for o in outcomes
        ],
    }  # fmt: skip


def _prepare(args: Any) -> tuple[Recording, MatchConfig, HitValidator]:
    recording = _load(args.dirs)
    if recording.config is None:
        raise LogEntryError("no configuration entry in the log (its first block is lost)")
    config = config_from_entry(recording.config)
    validator = make_validator(
        args.backend, box_min=config.arena.box_min, box_max=config.arena.box_max
    )
    return recording, config, validator


def _bot_lines(folder: str) -> Iterator[str]:
    """Every line of the bots' records in ``folder`` (``bot-*.jsonl``)."""
    files = sorted(Path(folder).glob("bot-*.jsonl"))
    if not files:
        raise FileNotFoundError(f"--sightings {folder}: no bot-*.jsonl files (arena-bots --record)")
    for path in files:
        with path.open(encoding="utf-8", errors="replace") as lines:
            yield from lines


def _serve(args: Any) -> int:
    recording, config, validator = _prepare(args)
    assert recording.config is not None
    sightings = read_sightings(_bot_lines(args.sightings)) if args.sightings else None
    viewer = ReplayViewer(
        recording, config, validator, args.match, args.start, args.stop,
        region=str(recording.config.get("region", "")),
        node=str(recording.config.get("node", "")), sightings=sightings,
    )  # fmt: skip
    for problem in recording.damaged + viewer.outcome.problems:
        print(f"{PROG}: {problem}", file=sys.stderr)
    if viewer.truncated:
        print(f"{PROG}: kept the first {len(viewer.ticks)} ticks (pick others with --from/--to)")
    how = "exactly" if viewer.outcome.exact else "with differences (see arena-replay DIR)"
    print(
        f"{PROG}: match {viewer.match}: ticks {viewer.first_tick}..{viewer.last_tick}, "
        f"{len(viewer.shots)} shots, replayed {how}"
    )
    asyncio.run(_run_server(create_app(viewer), args.host, args.port))
    return 0


async def _run_server(app: web.Application, host: str, port: int) -> None:
    """Serve ``app`` until SIGINT or SIGTERM."""
    stop = stop_on_signals()
    async with serving(app, host, port, shutdown_timeout=1.0) as url:
        print(f"{PROG}: serving the replay at {url}/view", flush=True)
        await stop.wait()


def _replay(args: Any) -> int:
    recording, config, validator = _prepare(args)
    warm_up(config, validator)  # (compiling the kernels is no part of the replay's speed)
    began = time.perf_counter()
    outcomes = [
        replay_match(recording, config, validator, index, args.start, args.stop)
        for index in recording.matches
    ]
    seconds = time.perf_counter() - began
    summary = _summary(outcomes, seconds, config.tick_rate)
    summary["damaged"] = recording.damaged
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    for outcome in outcomes:
        for line in outcome.mismatches[:1]:
            print(f"{PROG}: match {outcome.match}: first difference at {line.line()}")
    print(
        f"{PROG}: {summary['ticks']} ticks, {summary['shots']} shots replayed at "
        f"{summary['speed_x']}x real time: {summary['hash_mismatches']} hash, "
        f"{summary['verdict_mismatches']} verdict, {summary['seat_mismatches']} seat "
        "mismatches"
    )
    for note in (n for o in outcomes for n in o.notes):
        print(f"{PROG}: {note}")
    problems = recording.damaged + [p for o in outcomes for p in o.problems]
    for problem in problems:
        print(f"{PROG}: {problem}", file=sys.stderr)
    if problems or not summary["ticks"]:
        if not summary["ticks"] and not problems:
            print(f"{PROG}: no ticks to replay", file=sys.stderr)
        return 2
    return 0 if all(o.exact for o in outcomes) else 1


def _compare(args: Any) -> int:
    first, second = (_load([path]) for path in args.compare)
    difference, compared = compare_recordings(first, second)
    for problem in first.damaged + second.damaged:
        print(f"{PROG}: {problem}", file=sys.stderr)
    if difference is not None:
        print(f"{PROG}: the recordings differ first at {difference.line()}")
        return 1
    if not compared:
        print(f"{PROG}: the recordings share no tick", file=sys.stderr)
        return 2
    print(f"{PROG}: {compared} ticks in both recordings, the same")
    return 2 if first.damaged or second.damaged else 0


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if bool(args.dirs) == bool(args.compare):
        parser.error("give the log's DIR, or --compare DIR_A DIR_B")
    if not 0 <= args.port <= 65535:
        parser.error(f"--port: {args.port} is outside 0-65535")
    try:
        if args.compare:
            return _compare(args)
        return _serve(args) if args.serve else _replay(args)
    except (OSError, LogIncompatible, LogEntryError, BackendUnavailable, ViewerError) as error:
        print(f"{PROG}: {error}", file=sys.stderr)
        return 2
    except (ValueError, KeyError, TypeError, IndexError) as error:  # damage the CRC missed
        print(f"{PROG}: the log does not replay: {error!r}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C while replaying (a served one stops on its own)
        return 130


if __name__ == "__main__":
    sys.exit(main())
