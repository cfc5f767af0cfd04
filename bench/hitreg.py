"""Benchmark of lag-compensated hit registration: shots/s and hitbox tests/s per backend.

Scenes are one match of P players spread at constant density (one player per 100 m^2, so a
200 m shot crosses a realistic crowd whatever P), walls scattered over the area, 16
snapshots of history at 60 Hz with players walking, shots from random players in random
directions with view times within the last 200 ms. Every backend resolves the same shots; its
results are checked against the reference's before any figure is reported (bit for bit, but
a real GPU's distances, which may differ in their last bits: within 1e-9).

A "hitbox test" is one (shot, present player, hitbox) triple the narrow phase considered
(the bounding-sphere early-out counts as testing the player's three hitboxes), so without
the broad phase a shot makes 3 x (P - 1) of them; with it, only those of the players in the
grid cells the ray crosses.

Timing: the reference and each kernel are timed in alternation (R, K, R, K, ... over a fixed
number of rounds) and each one's median is kept, so both see the same machine state. Rows on
one thread are timed by process CPU time, which other processes on a busy machine do not
inflate; process CPU adds up all threads and misses a GPU's work, so rows on several threads
(and CUDA rows) are timed by wall time. Each row keeps both (``cpu_seconds``, ``seconds``)
and says which its rates and speed-up use (``rates_from``). A speed-up compares time per shot
on the same clock, since the reference resolves fewer shots.

Prints JSON on stdout (and to ``--json PATH``), progress and a summary on stderr.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

# Run as a script from anywhere: the project root is the parent of bench/.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import numba

from bench.interleaved import Clock, Timing, clock_for, interleave, median_timing, speedup
from bench.report import Start, add_json_option, emit
from server.sim.hitreg import (
    BackendName,
    History,
    HitscanResults,
    HitscanShots,
    HitValidator,
    ProjectileResults,
    ProjectileShots,
    make_validator,
)
from server.sim.hitreg.cpu import player_grid
from server.sim.hitreg.cuda import cuda_available, simulator_enabled
from shared.weapons import flight_step

__all__ = ["main"]

TICK_RATE = 60.0
SNAPSHOTS = 16
AREA_PER_PLAYER = 100.0  # m^2
SHOT_RANGE = 200.0
MAX_WALLS = 64

TARGET_SPEEDUP_VS_REFERENCE = 50.0
TARGET_TESTS_PER_CORE = 200e6
TARGET_BROAD_PHASE_SPEEDUP = 10.0


def progress(message: str) -> None:
    print(f"[bench/hitreg] {message}", file=sys.stderr, flush=True)


def spread_scene(
    rng: np.random.Generator, players: int
) -> tuple[History, np.ndarray, np.ndarray, float]:
    """One match, ``players`` walking at up to 6 m/s, 8 m walls (one per four players, at
    most MAX_WALLS)."""
    half = math.sqrt(players * AREA_PER_PLAYER) / 2.0
    feet = np.zeros((players, 3))
    feet[:, :2] = rng.uniform(-half, half, size=(players, 2))
    velocity = np.zeros((players, 3))
    velocity[:, :2] = rng.uniform(-6.0, 6.0, size=(players, 2))
    ticks = np.arange(600, 600 + SNAPSHOTS)
    times = (ticks / TICK_RATE)[None, :]
    positions = feet[None, :, :] + velocity[None, :, :] * (times[0, :, None, None] - times[0, 0])
    # A map's worth of walls, not a city's: the world test is linear in boxes (no broad
    # phase for the static geometry), and this benchmark is about players.
    walls = min(max(4, players // 4), MAX_WALLS)
    centre = rng.uniform(-half, half, size=(walls, 2))
    size = np.where(rng.random((walls, 1)) < 0.5, (8.0, 1.0), (1.0, 8.0))
    box_min = np.zeros((walls, 3))
    box_max = np.full((walls, 3), 3.0)
    box_min[:, :2] = centre - size / 2
    box_max[:, :2] = centre + size / 2
    history = History(
        times=times,
        positions=positions[None],
        alive=np.ones((1, SNAPSHOTS, players), dtype=np.uint8),
        start=np.zeros(1, dtype=np.int64),
        count=np.full(1, SNAPSHOTS, dtype=np.int64),
    )
    return history, box_min, box_max, float(times[0, -1])


def hitscan_batch(rng: np.random.Generator, history: History, n: int, now: float) -> HitscanShots:
    players = history.players
    shooter = rng.integers(0, players, size=n).astype(np.int32)
    origin = history.positions[0, -1, shooter] + (0.0, 0.0, 1.6)
    azimuth = rng.uniform(0.0, 2.0 * math.pi, size=n)
    elevation = rng.normal(0.0, 0.03, size=n)
    direction = np.stack(
        [
            np.cos(azimuth) * np.cos(elevation),
            np.sin(azimuth) * np.cos(elevation),
            np.sin(elevation),
        ],
        axis=1,
    )
    return HitscanShots(
        match=np.zeros(n, dtype=np.int32),
        shooter=shooter,
        origin=origin,
        direction=direction,
        max_range=SHOT_RANGE,
        view_time=now - rng.uniform(0.05, 0.2, size=n),
    )


def projectile_batch(
    rng: np.random.Generator, history: History, n: int, now: float
) -> ProjectileShots:
    shots = hitscan_batch(rng, history, n, now)
    return ProjectileShots(
        match=shots.match,
        shooter=shots.shooter,
        origin=shots.origin,
        velocity=shots.direction * 300.0,
        gravity=9.81,
        spawn_time=shots.view_time,
        end_time=now,
        expire_time=now + 1.0,
        step_time=flight_step(300.0, 9.81, now + 1.0 - shots.view_time),
    )


def subset(shots: HitscanShots, n: int) -> HitscanShots:
    return HitscanShots(
        match=shots.match[:n],
        shooter=shots.shooter[:n],
        origin=shots.origin[:n],
        direction=shots.direction[:n],
        max_range=shots.max_range[:n],
        view_time=shots.view_time[:n],
    )


#: On a real GPU a distance may differ from the reference's in its last bits (NVVM contracts
#: multiply-adds into FMAs; see server/sim/hitreg/cuda.py): compared within this, as the
#: tests compare them; everything else, and every other backend, bit for bit.
GPU_DISTANCE_TOLERANCE = 1e-9


def require_same_verdicts(
    backend: str,
    got: HitscanResults | ProjectileResults,
    expected: HitscanResults | ProjectileResults,
    fields: Sequence[str],
) -> None:
    """No figure is worth reporting for a backend that disagrees with the specification."""
    for name in fields:
        have, want = getattr(got, name), getattr(expected, name)
        if name == "distance" and backend == "cuda" and not simulator_enabled():
            tolerance = GPU_DISTANCE_TOLERANCE
            same = np.allclose(have, want, rtol=tolerance, atol=tolerance, equal_nan=True)
        else:
            same = np.array_equal(have, want)
        if not same:
            raise SystemExit(f"{backend} disagrees with the reference on {name}")


def hitscan_rates(out: HitscanResults, timing: Timing, clock: Clock) -> dict[str, Any]:
    shots = len(out.kind)
    tests = int(out.hitbox_tests.sum())
    seconds = timing.on(clock)
    return {
        "shots": shots,
        "seconds": timing.seconds,
        "cpu_seconds": timing.cpu_seconds,
        "rates_from": clock,
        "shots_per_s": shots / seconds,
        "hitbox_tests": tests,
        "hitbox_tests_per_s": tests / seconds,
        "kinds": {"miss": int((out.kind == 0).sum()), "player": int((out.kind == 1).sum()),
                  "world": int((out.kind == 2).sum())},
    }  # fmt: skip


def projectile_rates(projectiles: int, timing: Timing, clock: Clock) -> dict[str, Any]:
    return {
        "projectiles": projectiles,
        "seconds": timing.seconds,
        "cpu_seconds": timing.cpu_seconds,
        "rates_from": clock,
        "projectiles_per_s": projectiles / timing.on(clock),
    }


def bench_hitscan(
    players: int, rng: np.random.Generator, args: argparse.Namespace, backends: list[BackendName]
) -> list[dict[str, Any]]:
    history, box_min, box_max, now = spread_scene(rng, players)
    shots = hitscan_batch(rng, history, args.shots, now)
    reference_shots = subset(shots, max(8, args.reference_budget // players))
    progress(f"hitscan, {players} players: reference on {len(reference_shots)} shots")
    reference = make_validator("reference", box_min=box_min, box_max=box_max)
    expected = reference.resolve_hitscan(history, reference_shots)
    reference_out = HitscanResults.allocate(len(reference_shots))

    def run_reference() -> None:
        reference.resolve_hitscan(history, reference_shots, reference_out)

    def build_grid() -> None:
        player_grid(history, True)

    grid = median_timing(interleave([build_grid], args.rounds, min(args.min_seconds, 0.2))[0])
    progress(f"hitscan, {players} players: broad-phase grid builds in {grid.seconds * 1e3:.2f} ms")
    all_threads = numba.get_num_threads()
    reference_samples: list[Timing] = []
    rows: list[dict[str, Any]] = []
    for backend in backends:
        validator = make_validator(backend, box_min=box_min, box_max=box_max)
        validator.warm_up()
        for broad_phase in (False, True):
            # Same verdicts as the specification before any speed is worth reporting.
            check = validator.resolve_hitscan(history, reference_shots, broad_phase=broad_phase)
            require_same_verdicts(
                backend, check, expected, ("kind", "victim", "hitbox", "distance")
            )
            out = HitscanResults.allocate(len(shots))

            def run_kernel(
                v: HitValidator = validator, bp: bool = broad_phase, o: HitscanResults = out
            ) -> None:
                v.resolve_hitscan(history, shots, o, broad_phase=bp)

            thread_counts = sorted({1, all_threads}) if backend == "cpu" else [all_threads]
            for threads in thread_counts:
                if backend == "cpu":
                    numba.set_num_threads(threads)
                label = f"{backend}, broad phase {'on' if broad_phase else 'off'}"
                progress(f"hitscan, {players} players: {label}, {threads} thread(s)")
                reference_timings, kernel_timings = interleave(
                    [run_reference, run_kernel], args.rounds, args.min_seconds
                )
                reference_samples += reference_timings
                kernel = median_timing(kernel_timings)
                clock = clock_for(backend, threads)
                row = hitscan_rates(out, kernel, clock)
                row["samples"] = len(kernel_timings)
                reference_timing = median_timing(reference_timings)
                row["speedup_vs_reference"] = speedup(
                    reference_timing, len(reference_shots), kernel, len(shots), clock
                )
                row["hitbox_tests_per_s_per_thread"] = row["hitbox_tests_per_s"] / threads
                if broad_phase:
                    row["grid_build_seconds_included"] = grid.seconds
                rows.append({"players": players, "backend": backend,
                             "broad_phase": broad_phase, "threads": threads, **row})  # fmt: skip
            numba.set_num_threads(all_threads)
    reference_row = hitscan_rates(reference_out, median_timing(reference_samples), "cpu_seconds")
    reference_row["samples"] = len(reference_samples)
    return [{"players": players, "backend": "reference", "broad_phase": False, "threads": 1,
             **reference_row}, *rows]  # fmt: skip


def bench_projectiles(
    players: int, rng: np.random.Generator, args: argparse.Namespace, backends: list[BackendName]
) -> list[dict[str, Any]]:
    history, box_min, box_max, now = spread_scene(rng, players)
    flights = projectile_batch(rng, history, args.projectiles, now)
    keep = max(2, args.projectiles // 64)
    few = ProjectileShots(
        match=flights.match[:keep],
        shooter=flights.shooter[:keep],
        origin=flights.origin[:keep],
        velocity=flights.velocity[:keep],
        gravity=flights.gravity[:keep],
        spawn_time=flights.spawn_time[:keep],
        end_time=flights.end_time[:keep],
        expire_time=flights.expire_time[:keep],
        step_time=flights.step_time[:keep],
    )
    reference = make_validator("reference", box_min=box_min, box_max=box_max)
    expected = reference.resolve_projectiles(history, few)

    def run_reference() -> None:
        reference.resolve_projectiles(history, few)

    reference_samples: list[Timing] = []
    rows: list[dict[str, Any]] = []
    for backend in backends:
        validator = make_validator(backend, box_min=box_min, box_max=box_max)
        validator.warm_up()
        threads = numba.get_num_threads()
        clock = clock_for(backend, threads)
        for broad_phase in (False, True):
            check = validator.resolve_projectiles(history, few, broad_phase=broad_phase)
            require_same_verdicts(backend, check, expected, ("kind", "victim", "hitbox", "expired"))
            progress(f"projectiles, {players} players: {backend}, broad phase {broad_phase}")

            def run_kernel(v: HitValidator = validator, bp: bool = broad_phase) -> None:
                v.resolve_projectiles(history, flights, broad_phase=bp)

            reference_timings, kernel_timings = interleave(
                [run_reference, run_kernel], args.rounds, args.min_seconds
            )
            reference_samples += reference_timings
            kernel = median_timing(kernel_timings)
            reference_timing = median_timing(reference_timings)
            rows.append(
                {
                    "players": players,
                    "backend": backend,
                    "broad_phase": broad_phase,
                    "threads": threads,
                    **projectile_rates(len(flights), kernel, clock),
                    "samples": len(kernel_timings),
                    "speedup_vs_reference": speedup(
                        reference_timing, len(few), kernel, len(flights), clock
                    ),
                }
            )
    reference_row = projectile_rates(len(few), median_timing(reference_samples), "cpu_seconds")
    return [{"players": players, "backend": "reference", "broad_phase": False, "threads": 1,
             **reference_row, "samples": len(reference_samples)}, *rows]  # fmt: skip


def targets(rows: list[dict[str, Any]], largest: int) -> dict[str, Any]:
    """The project's performance targets, with the measured values."""
    cpu = [r for r in rows if r["backend"] == "cpu"]
    if not cpu:
        return {}
    all_threads = max(r["threads"] for r in cpu)

    def by_players(field: str, broad_phase: bool, threads: int) -> dict[str, float]:
        return {
            str(r["players"]): r[field]
            for r in cpu
            if r["broad_phase"] == broad_phase and r["threads"] == threads
        }

    result: dict[str, Any] = {}
    for broad_phase in (False, True):
        for threads in sorted({1, all_threads}):
            speedups = by_players("speedup_vs_reference", broad_phase, threads)
            name = (
                f"cpu_speedup_vs_reference_{'with' if broad_phase else 'without'}"
                f"_broad_phase_{threads}_thread{'s' if threads > 1 else ''}"
            )
            result[name] = {
                "target": TARGET_SPEEDUP_VS_REFERENCE, "by_players": speedups,
                "met": min(speedups.values()) >= TARGET_SPEEDUP_VS_REFERENCE,
            }  # fmt: skip
    per_core = by_players("hitbox_tests_per_s", False, 1)
    result["hitbox_tests_per_s_per_core_without_broad_phase"] = {
        "target": TARGET_TESTS_PER_CORE, "measured_on_one_thread": True, "by_players": per_core,
        "met": min(per_core.values()) >= TARGET_TESTS_PER_CORE,
    }  # fmt: skip
    on = by_players("shots_per_s", True, all_threads).get(str(largest))
    off = by_players("shots_per_s", False, all_threads).get(str(largest))
    if on and off:
        result["broad_phase_speedup"] = {
            "target": TARGET_BROAD_PHASE_SPEEDUP, "players": largest, "value": on / off,
            "met": on / off >= TARGET_BROAD_PHASE_SPEEDUP,
        }  # fmt: skip
    return result


def summary(report: dict[str, Any]) -> None:
    progress("summary (hitscan, shots/s):")
    for row in report["hitscan"]:
        speedup = row.get("speedup_vs_reference")
        progress(
            f"  {row['players']:>6} players  {row['backend']:<9} "
            f"broad={'on ' if row['broad_phase'] else 'off'} threads={row['threads']}  "
            f"{row['shots_per_s']:>12,.0f} shots/s  "
            f"{row['hitbox_tests_per_s'] / 1e6:>9,.1f} M hitbox tests/s"
            + (f"  x{speedup:,.0f} vs reference" if speedup else "")
            + f"  ({'cpu' if row['rates_from'] == 'cpu_seconds' else 'wall'} time)"
        )
    machine = report["machine"]
    progress(
        f"  load average (1 min) {machine['loadavg_at_start'][0]:.2f} at start, "
        f"{machine['loadavg_at_end'][0]:.2f} at end"
    )
    for name, target in report["targets"].items():
        progress(f"  target {name}: {'met' if target['met'] else 'NOT met'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="bench/hitreg.py",
        description="Benchmark the hit-registration backends; prints JSON on stdout.",
    )
    parser.add_argument("--quick", action="store_true", help="a few seconds: fewer shots")
    add_json_option(parser, "hitreg")
    parser.add_argument(
        "--players", type=int, nargs="+", default=[64, 1000, 10000], metavar="P",
        help="players per match to measure (default: 64 1000 10000)",
    )  # fmt: skip
    parser.add_argument("--seed", type=int, default=12345, help="scene seed (default 12345)")
    parser.add_argument(
        "--no-projectiles", action="store_true", help="skip the projectile measurements"
    )
    args = parser.parse_args(argv)
    start = Start.now("hitreg", "bench/hitreg.py", argv)
    if any(p < 2 for p in args.players):
        parser.error("--players: every value must be at least 2")
    args.shots = 4000 if args.quick else 40000
    args.projectiles = 64 if args.quick else 512
    args.reference_budget = 20_000 if args.quick else 200_000  # shots x players
    args.min_seconds = 0.05 if args.quick else 0.5
    args.rounds = 3 if args.quick else 5

    backends: list[BackendName] = ["cpu"]
    if cuda_available() and not simulator_enabled():
        backends.append("cuda")
    threads = numba.get_num_threads()
    progress(f"backends: reference, {', '.join(backends)}; numba threads {threads}")
    progress("warming up (numba compiles the kernels or loads them from its cache)")
    started = time.perf_counter()
    loadavg_at_start = os.getloadavg()
    make_validator("cpu").warm_up()
    rng = np.random.default_rng(args.seed)
    hitscan_rows: list[dict[str, Any]] = []
    projectile_rows: list[dict[str, Any]] = []
    for players in args.players:
        hitscan_rows += bench_hitscan(players, rng, args, backends)
        if not args.no_projectiles:
            projectile_rows += bench_projectiles(players, rng, args, backends)
    report = {
        "benchmark": "hitreg",
        "quick": args.quick,
        "machine": {
            "python": platform.python_version(),
            "numpy": np.__version__,
            "numba": numba.__version__,
            "cpu_count": os.cpu_count(),
            "numba_threads": numba.get_num_threads(),
            "cuda": "cuda" in backends,
            "gpu_distance_tolerance": GPU_DISTANCE_TOLERANCE if "cuda" in backends else None,
            "loadavg_at_start": list(loadavg_at_start),
            "loadavg_at_end": list(os.getloadavg()),
        },
        "timing": "process_cpu, interleaved median",
        "rounds": args.rounds,
        "scene": {
            "area_per_player_m2": AREA_PER_PLAYER,
            "snapshots": SNAPSHOTS,
            "tick_rate": TICK_RATE,
            "shot_range_m": SHOT_RANGE,
            "rewind_s": [0.05, 0.2],
            "walls": f"players // 4, at least 4, at most {MAX_WALLS}",
            "projectile_speed_m_s": 300.0,
            "seed": args.seed,
        },
        "hitscan": hitscan_rows,
        "projectiles": projectile_rows,
        "targets": targets(hitscan_rows, max(args.players)),
        "seconds": time.perf_counter() - started,
    }
    emit(report, args.json, start)
    summary(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
