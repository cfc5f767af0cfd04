"""docs/performance.md's two pictures, drawn from bench/results alone: how a node scales
with its players, and what a player costs each server of the peer bench.

SVG with its text as text, no date and a fixed hash salt, so the same results and the same
matplotlib draw the same bytes (a diff of a picture is a diff of the figures). matplotlib's
object API with the Agg canvas, never pyplot, as the load test's report does.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import matplotlib
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

__all__ = ["PICTURES", "draw"]

Report = dict[str, Any]


def scaling(fig: Figure, server_load: Report) -> None:
    rows = server_load["results"]
    players = [row["players"] for row in rows]
    cpu_ax, tick_ax = fig.subplots(1, 2)
    cpu_ax.plot(players, [row["server_cpu_us_per_player_tick"] for row in rows], marker="o")
    cpu_ax.set_xlabel("bots")
    cpu_ax.set_ylabel("node CPU per player-tick (µs)")
    cpu_ax.set_ylim(bottom=0)
    for key, label in (("tick_p50_ms", "p50"), ("tick_p99_ms", "p99")):
        tick_ax.plot(players, [row[key] for row in rows], marker="o", label=label)
    tick_ax.axhline(1000 / server_load["tick_rate_hz"], color="grey", linestyle="--",
                    label="tick budget")  # fmt: skip
    tick_ax.set_xlabel("bots")
    tick_ax.set_ylabel("tick duration (ms)")
    tick_ax.set_ylim(bottom=0)
    tick_ax.legend()
    fig.suptitle("A node under load-test bots", fontsize=10)


def peers(fig: Figure, report: Report) -> None:
    ax = fig.subplots()
    sizes = sorted(report["results"], key=int)
    servers = sorted({server for size in sizes for server in report["results"][size]})
    width = 0.8 / len(servers)
    for n, server in enumerate(servers):
        values = [
            report["results"][size].get(server, {}).get("server_cpu_us_per_player_tick")
            for size in sizes
        ]
        xs = [i + (n - (len(servers) - 1) / 2) * width for i in range(len(sizes))]
        ax.bar(xs, [float("nan") if v is None else v for v in values], width, label=server)
    ax.set_xticks(range(len(sizes)), [f"{size} players" for size in sizes])
    ax.set_ylabel("server CPU per player-tick (µs)")
    ax.legend()
    fig.suptitle("The same workload on each server of the peer bench", fontsize=10)


#: file name -> (the results file it is drawn from, how).
PICTURES: dict[str, tuple[str, Callable[[Figure, Report], None]]] = {
    "performance-scaling.svg": ("server_load", scaling),
    "performance-peers.svg": ("peers", peers),
}


def draw(name: str, report: Report) -> bytes:
    """The SVG bytes of picture ``name`` drawn from ``report``."""
    _, how = PICTURES[name]
    with matplotlib.rc_context({"svg.hashsalt": "arena", "svg.fonttype": "none"}):
        fig = Figure(figsize=(8, 3.2))
        FigureCanvasAgg(fig)
        how(fig, report)
        fig.tight_layout()
        buffer = io.BytesIO()
        fig.savefig(buffer, format="svg", metadata={"Date": None})
    return buffer.getvalue()
