"""How a bench hands over its JSON, and how docs/performance.md is made from all of them.

A bench prints its report on stdout and writes the same text to ``--json PATH``, by
default ``bench/results/<bench>.json``: one file per bench, overwritten by its next run
(the history is git's). ``--json -`` prints only. Each report carries its provenance (the
bench, the command line, Python, the cores, the load average at start and end, the start
time), so a figure in the docs can always be traced to the run that made it.

    python bench/report.py [--check]

reads every ``bench/results/*.json`` and writes ``docs/performance.md``, its pictures
(``docs/images/performance-*.svg``, with matplotlib) and the figures block of ``README.md``;
``--check`` only says whether the two texts are what the results make (exit 1 when not).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["RESULTS", "Start", "add_json_option", "emit", "main", "results_path"]

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
STDOUT_ONLY = "-"


def results_path(bench: str) -> Path:
    """Where a bench's report goes unless told otherwise: the file the docs are made from."""
    return RESULTS / f"{bench}.json"


def add_json_option(parser: argparse.ArgumentParser, bench: str) -> None:
    """``--json PATH``, defaulting to the bench's results file (``-``: stdout only)."""
    parser.add_argument(
        "--json",
        metavar="PATH",
        default=str(results_path(bench)),
        help=f"also write the JSON here (default: bench/results/{bench}.json, which "
        "docs/performance.md is made from; '-' prints it only)",
    )


@dataclass(frozen=True, slots=True)
class Start:
    """What a report's provenance needs from the moment a run began."""

    bench: str
    command: str
    started_at: str
    loadavg_1m: float

    @classmethod
    def now(cls, bench: str, script: str, argv: list[str] | None = None) -> Start:
        """``script`` is the bench's path from the repository root (``bench/hitreg.py``)."""
        args = sys.argv[1:] if argv is None else argv
        return cls(
            bench=bench,
            command=shlex.join(["python", script, *args]),
            started_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            loadavg_1m=round(os.getloadavg()[0], 2),
        )

    def provenance(self) -> dict[str, Any]:
        return {
            "bench": self.bench,
            "command": self.command,
            "python": sys.version.split()[0],
            "cores": os.cpu_count(),
            "loadavg_1m_at_start": self.loadavg_1m,
            "loadavg_1m_at_end": round(os.getloadavg()[0], 2),
            "started_at": self.started_at,
        }


def emit(report: dict[str, Any], path: str | Path | None, start: Start | None = None) -> None:
    """Print ``report`` as indented JSON (with ``start``'s provenance added), and write the
    same text to ``path`` unless it is None or ``-``."""
    if start is not None:
        report = {**report, "provenance": start.provenance()}
    text = json.dumps(report, indent=2)
    print(text)
    if path and str(path) != STDOUT_ONLY:
        Path(path).write_text(text + "\n", encoding="utf-8")


def targets_status(report: dict[str, Any], log: Callable[[str], None]) -> int:
    """A bench with targets ends so: 2 for an invalid run (its reasons said), 1 when a
    target was missed (each named), 0 when every one was met."""
    if not report["valid"]:
        log("INVALID run: " + "; ".join(report["invalid_reasons"]))
        return 2
    for name in report["missed"]:
        log(f"target missed: {name}")
    log("every target met" if report["targets_met"] else f"{len(report['missed'])} targets missed")
    return 0 if report["targets_met"] else 1


def main(argv: list[str] | None = None) -> int:
    """Write (or ``--check``) docs/performance.md and README.md's figures block."""
    sys.path.insert(0, str(ROOT))
    from bench.performance_doc import render_performance, replace_figures_block

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 when a generated file is stale"
    )
    args = parser.parse_args(argv)
    wanted = {
        ROOT / "docs" / "performance.md": render_performance(RESULTS),
        ROOT / "README.md": replace_figures_block(
            (ROOT / "README.md").read_text(encoding="utf-8"), RESULTS
        ),
    }
    stale = [
        path
        for path, text in wanted.items()
        if not path.exists() or path.read_text(encoding="utf-8") != text
    ]
    if args.check:
        for path in stale:
            print(f"{path.relative_to(ROOT)} is not what bench/report.py makes of bench/results")
        return 1 if stale else 0
    for path in stale:
        path.write_text(wanted[path], encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)}")
    draw_pictures()
    return 0


def draw_pictures() -> None:
    """The pictures, when matplotlib is there (the ``plots`` extra): bytes that only follow
    the results and matplotlib's version, so they are rewritten only when they change."""
    try:
        from bench.performance_plots import PICTURES, draw
    except ImportError as missing:
        print(f"pictures not drawn: {missing} (pip install '.[plots]')")
        return
    for name, (bench, _) in PICTURES.items():
        path = ROOT / "docs" / "images" / name
        drawn = draw(name, json.loads(results_path(bench).read_text(encoding="utf-8")))
        if not path.exists() or path.read_bytes() != drawn:
            path.write_bytes(drawn)
            print(f"wrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    sys.exit(main())
