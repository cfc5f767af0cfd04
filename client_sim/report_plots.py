"""The report's pictures, drawn from the JSON report alone (so any saved report can be
drawn again): PNG bytes per picture.

matplotlib's object API (:class:`matplotlib.figure.Figure` with the Agg canvas) and never
pyplot: no global figure state, no GUI backend picked from the environment, safe in any
process. A picture whose data the run did not produce (no shots, no failover) is drawn
with a line that says so, so the set of pictures is the same for every run.
"""

from __future__ import annotations

import io
import itertools
from collections.abc import Callable
from typing import Any

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

__all__ = ["PICTURES", "draw_pictures"]

Report = dict[str, Any]


def _empty(ax: Axes, why: str) -> None:
    ax.text(0.5, 0.5, why, ha="center", va="center", transform=ax.transAxes, color="grey")
    ax.set_xticks([])
    ax.set_yticks([])


def _nones(values: list[Any]) -> list[float]:
    """None as NaN: a gap in a line, not a zero."""
    return [float("nan") if v is None else float(v) for v in values]


def _rtt(fig: Figure, report: Report) -> None:
    hist = report["latency_ms"].get("histogram") or {}
    ax, ax_t = fig.subplots(1, 2)
    edges = hist.get("edges_ms") or []
    if edges:
        # Shares, not counts: one modelled RTT per bot against many measured per bot.
        widths = [b - a for a, b in itertools.pairwise(edges)]
        for key, label in (("model", "model (each bot's link)"), ("measured", "measured")):
            total = sum(hist[key]) or 1
            shares = [c / total for c in hist[key]]
            ax.bar(edges[:-1], shares, widths, align="edge", alpha=0.5, label=label)
        ax.set_xlabel("round-trip time (ms)")
        ax.set_ylabel("share")
        ax.legend()
    else:
        _empty(ax, "no RTT measured")
    ax.set_title(f"RTT: measured vs model {report['latency_ms']['model'][:40]}", fontsize=9)
    s = report["series"]
    if s["t"]:
        ax_t.plot(s["t"], _nones(s["rtt_p50_ms"]), label="p50")
        ax_t.plot(s["t"], _nones(s["rtt_p99_ms"]), label="p99")
        ax_t.set_xlabel("seconds")
        ax_t.set_ylabel("measured RTT (ms)")
        ax_t.legend()
    else:
        _empty(ax_t, "no samples")
    ax_t.set_title("RTT per second", fontsize=9)


def _rates(ax: Axes, table: dict[str, Any], title: str) -> None:
    names = list(table)
    if not names:
        _empty(ax, "no shots judged")
    else:
        x = range(len(names))
        for k, (key, label) in enumerate(
            (
                ("agreement", "agreement"),
                ("false_negative_rate", "false neg."),
                ("false_positive_rate", "false pos."),
            )
        ):
            values = [table[n][key] or 0.0 for n in names]
            ax.bar([i + (k - 1) * 0.27 for i in x], values, 0.27, label=label)
        ax.set_xticks(list(x), names, rotation=20, fontsize=8)
        ax.set_ylim(0, 1.3)
        ax.legend(fontsize=7, ncols=3, loc="upper center")
    ax.set_title(title, fontsize=9)


def _agreement(fig: Figure, report: Report) -> None:
    shots = report["shots"]
    ax_rtt, ax_cause, ax_t = fig.subplots(1, 3)
    _rates(ax_rtt, shots["by_rtt"], "by the shooter's measured RTT")
    causes = shots["disagreements_by_cause"]
    if any(causes.values()):
        ax_cause.barh(list(causes), list(causes.values()), color="tab:red")
        ax_cause.tick_params(axis="y", labelsize=7)
        ax_cause.set_xlabel("disagreements")
    else:
        _empty(ax_cause, "no disagreement")
    ax_cause.set_title("disagreements by cause", fontsize=9)
    s = report["series"]
    if any(s["shots"]):
        ax_t.plot(s["t"], _nones(s["agreement"]), marker=".", label="agreement")
        ax_t.set_ylim(0, 1.05)
        ax_t.set_xlabel("seconds")
        ax_t.set_ylabel("agreement")
        twin = ax_t.twinx()
        twin.bar(s["t"], s["shots"], alpha=0.2, color="grey")
        twin.set_ylabel("shots judged")
    else:
        _empty(ax_t, "no shots judged")
    ax_t.set_title("agreement per second", fontsize=9)


def _ticks(fig: Figure, report: Report) -> None:
    ax_h, ax_t = fig.subplots(1, 2)
    ticks = report["ticks"]
    hist = ticks.get("histogram")
    if hist and hist["counts"]:
        cumulative = hist["counts"]
        counts = [b - a for a, b in zip([0, *cumulative[:-1]], cumulative, strict=True)]
        labels = [f"≤{b:g}" for b in hist["le_ms"]] + [f">{hist['le_ms'][-1]:g}"]
        ax_h.bar(range(len(counts)), counts)
        ax_h.set_xticks(range(len(counts)), labels, rotation=60, fontsize=6)
        ax_h.set_xlabel("server tick duration (ms)")
        ax_h.set_ylabel("ticks")
        if ticks.get("rate_hz"):
            ax_h.set_title(f"tick durations (budget {1000 / ticks['rate_hz']:.1f} ms)", fontsize=9)
    else:
        _empty(ax_h, "no tick histogram (/metrics not read)")
        ax_h.set_title("tick durations", fontsize=9)
    server = report["series"].get("server") or {}
    if server.get("t"):
        ax_t.plot(server["t"], _nones(server["p50_ms"]), label="server tick p50")
        ax_t.plot(server["t"], _nones(server["p99_ms"]), label="server tick p99")
        ax_t.set_ylabel("ms")
        ax_t.legend(fontsize=7, loc="upper left")
    else:
        _empty(ax_t, "no server samples")
    s = report["series"]
    if s["t"]:
        twin = ax_t.twinx()
        twin.plot(s["t"], _nones(s["bot_tick_hz"]), color="tab:green", label="bot loop ticks/s")
        target = report["bot_process"].get("target_hz")
        if target:
            twin.axhline(target, color="tab:green", linestyle=":", linewidth=1)
        twin.set_ylabel("bot loop ticks/s")
        twin.set_ylim(bottom=0)
        twin.legend(fontsize=7, loc="lower right")
    ax_t.set_xlabel("seconds")
    ax_t.set_title("per second: server tick time, bot loop rate", fontsize=9)


def _bandwidth(fig: Figure, report: Report) -> None:
    ax = fig.subplots()
    s = report["series"]
    if s["t"]:
        for key, label in (("bytes_per_bot_per_s", "down"), ("bytes_up_per_bot_per_s", "up")):
            ax.plot(s["t"], [v * 8 / 1000 for v in _nones(s[key])], label=label)
        ax.set_xlabel("seconds")
        ax.set_ylabel("kbit/s per bot")
        ax.legend()
        twin = ax.twinx()
        twin.plot(s["t"], s["bots"], color="grey", linestyle=":", label="bots playing")
        twin.set_ylabel("bots playing")
        twin.set_ylim(bottom=0)
    else:
        _empty(ax, "no samples")
    ax.set_title("bandwidth per bot", fontsize=9)


def _failover(fig: Figure, report: Report) -> None:
    ax = fig.subplots()
    timeline = report["failover"]["timeline"]
    if not timeline:
        _empty(ax, "no failover seen by the bots")
    else:
        order = sorted(range(len(timeline)), key=lambda i: timeline[i][0])
        for row, i in enumerate(order):
            start, stall = timeline[i]
            if stall is None:
                ax.plot([start], [row], marker="x", color="tab:red")
            else:
                ax.plot([start, start + stall / 1000.0], [row, row], color="tab:blue", linewidth=2)
        ax.set_xlabel("seconds (from the last snapshot before the loss to the first after)")
        ax.set_ylabel("bot (one row per outage)")
    for kill in report["failover"].get("kill_times", []):
        ax.axvline(kill, color="tab:red", linestyle="--", linewidth=1)
    f = report["failover"]
    ax.set_title(
        f"failover: {f['bots_resumed']} resumed, {f['bots_lost']} lost (x); stall p50 "
        f"{f['stall_ms_p50']} ms, p99 {f['stall_ms_p99']} ms",
        fontsize=9,
    )


#: Each picture: its file name (without .png), its caption, what draws it, its size.
PICTURES: tuple[tuple[str, str, Callable[[Figure, Report], None], tuple[float, float]], ...] = (
    ("rtt", "RTT distribution against the model, and per second", _rtt, (11, 3.8)),
    ("agreement", "Client/server agreement by RTT, by cause, per second", _agreement, (14, 3.8)),
    ("ticks", "Server tick durations and the bot loop's rate", _ticks, (11, 3.8)),
    ("bandwidth", "Bandwidth per bot over time", _bandwidth, (8, 3.5)),
    ("failover", "Failover timeline: each bot's stall", _failover, (8, 4)),
)


def draw_pictures(report: Report) -> dict[str, bytes]:
    """Every picture of :data:`PICTURES` as PNG bytes, by name."""
    out = {}
    for name, _caption, draw, size in PICTURES:
        fig = Figure(figsize=size, layout="constrained")
        FigureCanvasAgg(fig)
        draw(fig, report)
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=100)
        out[name] = buffer.getvalue()
    return out
