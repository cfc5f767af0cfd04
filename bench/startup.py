"""A node's time to ready, cold (empty kernel cache) and warm, and its compile events, as JSON.

For each checkout measured (this one, and any ``--baseline DIR`` such as a clone of an
older commit) and each repeat, the bench starts ``arena-server --port P`` with a
fresh ``NUMBA_CACHE_DIR`` (cold), waits until the node is ready, stops it, and starts it
again on the same cache (warm). A node is ready when ``/health`` answers 200 with
``"ready": true``; code older than readiness has no ``ready`` and answered ``/health`` before
it had compiled anything, so for it the bench waits for its ``event=hitreg_ready`` line,
the moment its warm-up ended. Compile events are counted by a numba event listener in the
node's process (its forked warm-up workers inherit it and report on the same stderr). CPU
is the node's and its reaped children's. Figures are medians over the repeats, with the
machine's load.

    python bench/startup.py [--repeat 3] [--baseline DIR] [--hog] [--json PATH]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.report import Start, add_json_option, emit
from launch.supervisor import READY_WITHIN_S, Child

ROOT = Path(__file__).resolve().parent.parent
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
#: Targets for a first run on a 2-core machine.
TARGET_WARM_S = 2.0
TARGET_COLD_RATIO = 0.5

# Runs inside the node's process before the server is imported: one stderr line per
# compiled specialisation.
_COUNTING_LAUNCHER = """
import runpy, sys
from numba.core import event

class _Count(event.Listener):
    def on_start(self, ev):
        pass
    def on_end(self, ev):
        print("bench_compile_event", file=sys.stderr, flush=True)

event.register("numba:compile", _Count())
module, *arguments = sys.argv[1:]
sys.argv = ["arena-server", *arguments]
runpy.run_module(module, run_name="__main__")
"""


def progress(line: str) -> None:
    print(f"startup: {line}", file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def cpu_seconds_with_children(pid: int) -> float:
    """utime + stime + cutime + cstime of ``pid`` (its warm-up workers are reaped)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(value) for value in fields[11:15]) / CLOCK_TICKS


def health(port: int) -> tuple[int, dict[str, Any] | None]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as refused:
        return refused.code, None
    except (OSError, ValueError):
        return 0, None


def _is_compile_event(line: str) -> bool:
    return line.startswith("bench_compile_event")


def _log_lines(log: Path) -> list[str]:
    with contextlib.suppress(OSError):
        return log.read_text(encoding="utf-8", errors="replace").splitlines()
    return []


def server_module(checkout: Path) -> str | None:
    """The module ``arena-server`` runs in ``checkout`` (it moved in the split by layer)."""
    for module in ("server.net.cli", "server.cli"):
        if (checkout / (module.replace(".", "/") + ".py")).is_file():
            return module
    return None


def start_to_ready(checkout: Path, cache: Path) -> dict[str, Any]:
    """Start a node of ``checkout`` on ``cache``; seconds until ready, compile events, CPU.

    The node is a :class:`~launch.supervisor.Child` like every launcher's (it dies with the
    bench, SIGTERM then SIGKILL when done) run through the counting launcher; its stderr,
    where the compile events and an older node's ready line go, is its log file.
    """
    port = free_port()
    env = {"NUMBA_CACHE_DIR": str(cache), "PYTHONPATH": str(checkout)}
    with tempfile.TemporaryDirectory(prefix="arena-bench-startup-") as folder:
        log = Path(folder) / "node.log"
        began = time.perf_counter()
        node = Child(
            "the node",
            [sys.executable, "-c", _COUNTING_LAUNCHER, str(server_module(checkout))]
            + ["--port", str(port), "--log-level", "info"],
            env={**env, "ARENA_CLUSTER_SECRET": None},
            cwd=checkout,
            log_path=log,
        )
        try:
            while True:
                status, body = health(port)
                if status == 200 and body is not None:
                    legacy = "ready" not in body
                    if legacy and any("event=hitreg_ready" in line for line in _log_lines(log)):
                        break
                    if body.get("ready") is True:
                        break
                if not node.alive():
                    tail = [line for line in _log_lines(log) if not _is_compile_event(line)]
                    raise RuntimeError(
                        f"the node exited with {node.wait()}: {' | '.join(tail[-6:])}"
                    )
                if time.perf_counter() - began > READY_WITHIN_S:
                    raise RuntimeError(f"the node was not ready within {READY_WITHIN_S:g} s")
                time.sleep(0.05)
            seconds = time.perf_counter() - began
            cpu = cpu_seconds_with_children(node.pid)
        finally:
            node.stop(30.0)
        compile_events = sum(1 for line in _log_lines(log) if _is_compile_event(line))
    return {
        "seconds_to_ready": round(seconds, 3),
        "cpu_s_to_ready": round(cpu, 3),
        "compile_events": compile_events,
    }


def measure_checkout(checkout: Path, repeat: int) -> dict[str, Any]:
    commit = subprocess.run(
        ["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    dirty = bool(
        subprocess.run(
            ["git", "-C", str(checkout), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
    )
    runs: dict[str, list[dict[str, Any]]] = {"cold": [], "warm": []}
    for attempt in range(1, repeat + 1):
        with tempfile.TemporaryDirectory(prefix="arena-bench-cache-") as cache:
            for kind in ("cold", "warm"):
                load = os.getloadavg()[0]
                progress(f"{checkout.name} ({commit}) {kind} start {attempt} of {repeat} ...")
                run = {**start_to_ready(checkout, Path(cache)), "loadavg_1m": round(load, 2)}
                progress(f"  {json.dumps(run)}")
                runs[kind].append(run)

    def median(kind: str, field: str) -> float:
        return statistics.median(run[field] for run in runs[kind])

    return {
        "checkout": str(checkout),
        "commit": commit + ("-dirty" if dirty else ""),
        "cold_seconds_to_ready": median("cold", "seconds_to_ready"),
        "cold_cpu_s_to_ready": median("cold", "cpu_s_to_ready"),
        "warm_seconds_to_ready": median("warm", "seconds_to_ready"),
        "warm_cpu_s_to_ready": median("warm", "cpu_s_to_ready"),
        "compile_events_cold": median("cold", "compile_events"),
        "compile_events_warm": median("warm", "compile_events"),
        "runs": runs,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="bench/startup.py",
        description="Time a node from start to ready with an empty and with a warm kernel "
        "cache; prints JSON (medians over --repeat runs).",
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs per checkout (default 3)")
    parser.add_argument(
        "--baseline",
        type=Path,
        action="append",
        default=[],
        metavar="DIR",
        help="another checkout to measure the same way, e.g. a clone of an older "
        "commit (repeat for several)",
    )
    parser.add_argument(
        "--hog", action="store_true", help="keep one core busy with a CPU hog while measuring"
    )
    add_json_option(parser, "startup")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat: at least 1")
    for folder in args.baseline:
        if server_module(folder) is None:
            parser.error(f"--baseline {folder}: not an Arena checkout (no server/net/cli.py)")
    if not Path(args.json).resolve().parent.is_dir():
        parser.error(f"--json {args.json}: its folder does not exist")
    start = Start.now("startup", "bench/startup.py", argv)
    hog = (
        Child("the CPU hog", [sys.executable, "-c", "while True: pass"], inherit_stderr=True)
        if args.hog
        else None
    )
    try:
        load_at_start = os.getloadavg()[0]
        checkouts = [measure_checkout(ROOT, args.repeat)]
        checkouts += [measure_checkout(folder.resolve(), args.repeat) for folder in args.baseline]
    finally:
        if hog is not None:
            hog.stop(1.0)
    current = checkouts[0]
    report: dict[str, Any] = {
        "bench": "startup",
        "machine": {
            "cpus": os.cpu_count(),
            "python": sys.version.split()[0],
            "cpu_hog": args.hog,
            "loadavg_1m_at_start": round(load_at_start, 2),
            "loadavg_1m_at_end": round(os.getloadavg()[0], 2),
        },
        "repeats": args.repeat,
        "checkouts": checkouts,
        "targets": {"warm_seconds_to_ready_max": TARGET_WARM_S},
    }
    report["targets"]["warm_met"] = current["warm_seconds_to_ready"] <= TARGET_WARM_S
    if len(checkouts) > 1:
        before = checkouts[1]
        ratio = current["cold_seconds_to_ready"] / before["cold_seconds_to_ready"]
        report["cold_ratio_vs_baseline"] = round(ratio, 3)
        report["cold_cpu_ratio_vs_baseline"] = round(
            current["cold_cpu_s_to_ready"] / before["cold_cpu_s_to_ready"], 3
        )
        report["targets"]["cold_ratio_max"] = TARGET_COLD_RATIO
        report["targets"]["cold_met"] = ratio <= TARGET_COLD_RATIO
    emit(report, args.json, start)
    for entry in checkouts:
        progress(
            f"{entry['commit']}: cold {entry['cold_seconds_to_ready']:.2f} s "
            f"({entry['cold_cpu_s_to_ready']:.1f} s CPU, {entry['compile_events_cold']:g} "
            f"compile events), warm {entry['warm_seconds_to_ready']:.2f} s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
