"""The report's pictures and its one HTML file, drawn from a small synthetic run."""

from __future__ import annotations

import base64
import html
from pathlib import Path
from typing import Any

from client_sim.bot import FailoverEvent
from client_sim.report import build_report, format_summary
from client_sim.report_html import render_html, write_html_report
from client_sim.report_plots import PICTURES, draw_pictures
from client_sim.report_series import Sample, merge_samples
from client_sim.report_server import ServerWatch, server_figures
from client_sim.shooting import ShotSummary
from client_sim.swarm import ProcessFigures, SwarmResult
from client_sim.websocket import TlsTrust

PNG = b"\x89PNG\r\n\x1a\n"
METRICS = """# HELP arena_tick_duration_seconds Wall time
# TYPE arena_tick_duration_seconds histogram
arena_tick_duration_seconds_bucket{{le="0.001"}} {a}.0
arena_tick_duration_seconds_bucket{{le="0.002"}} {b}.0
arena_tick_duration_seconds_bucket{{le="+Inf"}} {c}.0
arena_tick_duration_seconds_count {c}.0
"""


def sample(k: int, ticks: int = 60, shots: int = 4) -> Sample:
    return Sample(
        at=100.0 + k, seconds=1.0, ticks=ticks, cpu_s=0.3, bots=4, bytes_down=40_000,
        bytes_up=4_000, rtts=(0.04, 0.05, 0.14), shots=shots, agreed=shots - 1,
    )  # fmt: skip


def synthetic_report(**fields: Any) -> dict[str, Any]:
    watch = ServerWatch(lambda: "ws://n/ws", TlsTrust())
    for k, (a, b, c) in enumerate([(0, 0, 0), (50, 58, 60), (100, 118, 120)]):
        watch.note("ws://n/ws", METRICS.format(a=a, b=b, c=c), 100.0 + k)
    watch.note("ws://n/ws", "", 103.0)  # a node that did not answer: a gap
    shots = [
        ShotSummary(0, 40.0, True, "hit", True, 40.0),
        ShotSummary(0, 140.0, True, "miss", False, 140.0, cause="claim_clamped"),
    ]
    result = SwarmResult(
        requested=4, connected=4, duration_s=3.0, swarm_ticks=180,
        rtt_samples=[0.04, 0.05, 0.14], link_rtts=[0.04, 0.04, 0.14, 0.14], shots=shots,
        failovers=[FailoverEvent(100, 50, 1.5, 2, 50, 0.4, epoch_before=1),
                   FailoverEvent(100, 50, 1.6, epoch_before=1)],
        processes=[ProcessFigures(60, 180, 3.0, 0.9, 3.2)],
        samples=[[sample(1), sample(2), sample(3, ticks=18)]], clock_to_wall=99.0, **fields,
    )  # fmt: skip
    return build_report(
        result,
        latency_spec="fixed(40ms)",
        workers=1,
        server_before={"tick": 0},
        server_after={"tick": 180, "tick_rate": 60, "tick_ms_p50": 0.9, "tick_ms_p99": 1.9},
        kills=[{"epoch": 2, "killed_at": 100.4, "failover": {}}],
        server=server_figures(watch, 99.0),
        origin=99.0,
    )


def test_the_tick_histogram_gives_quantiles_and_a_series() -> None:
    report = synthetic_report()
    ticks = report["ticks"]
    assert ticks["histogram"] == {"le_ms": [1.0, 2.0], "counts": [100, 118, 120]}
    assert ticks["p90_ms"] == 1.444  # rank 108 of 120: 8/18 into (1, 2] ms
    assert ticks["p95_ms"] == 1.778
    assert report["series"]["server"]["ticks"] == [60, 60]
    assert report["series"]["t"] == [2.0, 3.0, 4.0]
    assert report["series"]["bot_tick_hz"] == [60.0, 60.0, 18.0]
    assert report["series"]["agreement"] == [0.75, 0.75, 0.75]
    assert report["series"]["bytes_per_bot_per_s"] == [10_000.0] * 3
    assert report["failover"]["timeline"] == [[1.5, 400.0], [1.6, None]]
    assert report["failover"]["kill_times"] == [1.4]


def test_the_seconds_of_several_workers_merge_into_one_series() -> None:
    merged = merge_samples([[sample(1), sample(2)], [sample(1, ticks=30)]])
    assert [s.ticks for s in merged] == [30, 60]  # the slowest worker's loop
    assert merged[0].shots == 8 and merged[0].bots == 8 and len(merged[0].rtts) == 6


def test_every_picture_is_a_png_even_for_a_run_with_nothing_to_draw() -> None:
    empty = build_report(
        SwarmResult(), latency_spec="x", workers=1, server_before=None, server_after=None
    )
    for report in (synthetic_report(), empty):
        pictures = draw_pictures(report)
        assert sorted(pictures) == sorted(name for name, *_ in PICTURES)
        assert all(data.startswith(PNG) and len(data) > 5_000 for data in pictures.values())


def test_the_html_embeds_every_picture_and_holds_the_summary(tmp_path: Path) -> None:
    report = synthetic_report()
    summary = format_summary(report)
    written = write_html_report(report, summary, tmp_path / "report.html", tmp_path / "png")
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert written[-1] == tmp_path / "report.html"
    for name, *_ in PICTURES:
        data = (tmp_path / "png" / f"{name}.png").read_bytes()
        assert data.startswith(PNG)
        assert f"data:image/png;base64,{base64.b64encode(data).decode()}" in page
    assert f'<pre id="summary">{html.escape(summary)}</pre>' in page
    assert "bot process 60.0 ticks/s of 60 (100%)" in summary
    assert "<script" not in page and 'src="http' not in page  # opens anywhere, offline


def test_a_partial_or_invalid_run_says_so_at_the_top() -> None:
    partial = synthetic_report(partial=True)
    page = render_html(partial, format_summary(partial), {})
    assert "PARTIAL" in page and "INVALID" not in page
    invalid = {**partial, "partial": False, "valid": False, "invalid_reasons": ["too <busy>"]}
    page = render_html(invalid, "s", {})
    assert "INVALID" in page and "too &lt;busy&gt;" in page
    assert format_summary(partial).startswith("PARTIAL")


def _disputed(tick: int, shooter: int, seq: int, cause: str) -> dict[str, Any]:
    """A row as client_sim.fairness.disputed_shot writes it."""
    return {
        "tick": tick, "shooter": shooter, "seq": seq, "victim": {"client": 3, "server": -1},
        "verdict": {"client": "hit", "server": "miss"}, "server_damage": 0, "cause": cause,
        "rtt_ms": {"client": 80.5, "server": 81.0},
    }  # fmt: skip


def test_the_disputed_shots_link_to_their_place_in_the_replay() -> None:
    report = synthetic_report()
    report["shots"]["disputed"] = [_disputed(120, 4, 17, "claim_clamped"),
                                   _disputed(300, 2, 9, "<odd>")]  # fmt: skip
    page = render_html(report, "s", {}, replay_url="http://127.0.0.1:8780/")
    assert '<table id="disputed">' in page
    assert '<a href="http://127.0.0.1:8780/view#tick=120&amp;shot=4:17">replay</a>' in page
    assert '<a href="http://127.0.0.1:8780/view#tick=300&amp;shot=2:9">replay</a>' in page
    assert "&lt;odd&gt;" in page and "claim_clamped" in page
    unlinked = render_html(report, "s", {})
    assert '<table id="disputed">' in unlinked and "<a href" not in unlinked
    report["shots"]["disputed"] = []
    assert "No disputed shots." in render_html(report, "s", {}, replay_url="http://x")
