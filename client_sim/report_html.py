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
"""


def render_html(report: dict[str, Any], summary: str, pictures: dict[str, bytes]) -> str:
    """One page: banners, the text summary, every picture inline, the JSON at the end."""
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
    report: dict[str, Any], summary: str, html_path: Path, png_dir: Path
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
    html_path.write_text(render_html(report, summary, pictures), encoding="utf-8")
    return [*written, html_path]
