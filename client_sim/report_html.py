"""The report as files: ``report.json``-style JSON, PNGs, and one self-contained HTML page.

Locust's HTML report is the model: one file that opens anywhere, mailed or attached to an
issue. The pictures are embedded as base64 ``data:`` URIs (and also written beside it as
PNG files, for slides and diffs); nothing is fetched from the network. A partial run (Ctrl-C)
and an invalid one (a bot process that could not keep up) say so in a banner at the top.
"""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path
from typing import Any

from client_sim.report_plots import PICTURES, draw_pictures

__all__ = ["render_html", "write_html_report"]

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; max-width: 1500px; color: #222; }
pre { background: #f6f6f6; padding: 1em; overflow-x: auto; }
.banner { padding: .8em 1em; margin: 1em 0; border-radius: 4px; font-weight: bold; }
.partial { background: #fff3cd; border: 1px solid #e0c36a; }
.invalid { background: #f8d7da; border: 1px solid #d9868e; }
.valid { background: #d4edda; border: 1px solid #8fc79c; }
figure { margin: 1.5em 0; } img { max-width: 100%; border: 1px solid #ddd; }
figcaption { color: #555; font-size: .9em; }
table { border-collapse: collapse; font-size: .9em; }
td, th { border: 1px solid #ddd; padding: .2em .5em; text-align: left; }
"""
#: Disputed shots the page lists (the JSON at its end has all the report kept).
MAX_DISPUTED_ROWS = 200


def disputed_table(report: dict[str, Any], replay_url: str = "") -> str:
    """The shots whose two verdicts differ, one row each; with ``replay_url`` (the base
    URL of ``arena-replay DIR --serve`` on the node's match log), each links to its place
    in the replay: ``BASE/view#tick=T&shot=SHOOTER:SEQ``."""
    disputed = report.get("shots", {}).get("disputed") or []
    if not disputed:
        return "<p>No disputed shots.</p>"
    base = replay_url.rstrip("/")
    rows = []
    for shot in disputed[:MAX_DISPUTED_ROWS]:
        key = f"{shot['shooter']}:{shot['seq']}"
        where = f"{base}/view#tick={shot['tick']}&shot={key}"
        link = f'<a href="{html.escape(where)}">replay</a>' if base else ""
        verdict, victim, rtt = shot["verdict"], shot["victim"], shot["rtt_ms"]
        cells = [
            shot["tick"], key, f"{verdict['client']} {victim['client']}",
            f"{verdict['server']} {victim['server']}", shot["cause"],
            f"{rtt['client']} / {rtt['server']}",
        ]  # fmt: skip
        text = "".join(f"<td>{html.escape(str(cell))}</td>" for cell in cells)
        rows.append(f"<tr>{text}<td>{link}</td></tr>")
    more = len(disputed) - MAX_DISPUTED_ROWS
    tail = f"<p>{more} more in the JSON below.</p>" if more > 0 else ""
    head = (
        "<tr><th>tick</th><th>shooter:seq</th><th>bot's verdict, victim</th>"
        "<th>server's verdict, victim</th><th>cause</th><th>RTT ms (bot / server)</th>"
        "<th></th></tr>"
    )
    return f'<table id="disputed">{head}{"".join(rows)}</table>{tail}'


def render_html(
    report: dict[str, Any], summary: str, pictures: dict[str, bytes], replay_url: str = ""
) -> str:
    """One page: banners, the text summary, every picture inline, the disputed shots
    (linked into the replay at ``replay_url`` when given), the JSON at the end."""
    banners = []
    if report.get("partial"):
        banners.append(
            '<div class="banner partial">PARTIAL: the run was interrupted; its figures '
            "cover the part that ran.</div>"
        )
    if report.get("valid", True):
        banners.append('<div class="banner valid">valid: the bot process kept up.</div>')
    else:
        reasons = "".join(f"<li>{html.escape(r)}</li>" for r in report["invalid_reasons"])
        banners.append(
            '<div class="banner invalid">INVALID: these figures are not a measurement of '
            f"the server.<ul>{reasons}</ul></div>"
        )
    figures = []
    for name, caption, _draw, _size in PICTURES:
        if name in pictures:
            data = base64.b64encode(pictures[name]).decode("ascii")
            figures.append(
                f'<figure id="{name}"><img alt="{html.escape(caption)}" '
                f'src="data:image/png;base64,{data}"><figcaption>{html.escape(caption)} '
                f"({name}.png)</figcaption></figure>"
            )
    body = "\n".join(
        [
            "<h1>Arena load test</h1>",
            *banners,
            "<h2>Summary</h2>",
            f'<pre id="summary">{html.escape(summary)}</pre>',
            "<h2>Pictures</h2>",
            *figures,
            "<h2>Disputed shots</h2>",
            disputed_table(report, replay_url),
            "<h2>Report (JSON)</h2>",
            f"<details><summary>every figure</summary><pre>"
            f"{html.escape(json.dumps(report, indent=2))}</pre></details>",
        ]
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>Arena load test</title><style>{_STYLE}</style></head>\n<body>\n{body}\n"
        "</body></html>\n"
    )


def write_html_report(
    report: dict[str, Any], summary: str, html_path: Path, png_dir: Path, replay_url: str = ""
) -> list[Path]:
    """Draw the pictures, write them into ``png_dir`` and the page at ``html_path``;
    the paths written, the page last."""
    pictures = draw_pictures(report)
    png_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, data in pictures.items():
        path = png_dir / f"{name}.png"
        path.write_bytes(data)
        written.append(path)
    html_path.write_text(render_html(report, summary, pictures, replay_url), encoding="utf-8")
    return [*written, html_path]
