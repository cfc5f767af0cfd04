"""docs/performance.md and README.md's figures block, made from bench/results/*.json.

Pure text from the results' dicts: one section a bench (what it measures, from its own
docstring; its headline figures as a small table; the command that produced them), so the
figures the docs show are always those of the committed runs and never drift from them.
"""

from __future__ import annotations

import ast
import json
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["BENCHES", "figures_table", "render_performance", "replace_figures_block"]

ROOT = Path(__file__).resolve().parents[1]
FIGURES_START = "<!-- figures: made by bench/report.py from bench/results; edit there -->"
FIGURES_END = "<!-- end of figures -->"

NONE = "\N{EN DASH}"
TIMES = "\N{MULTIPLICATION SIGN}"
Row = Sequence[object]
Table = tuple[Row, Sequence[Row]]


def number(value: object) -> str:
    """A figure as a reader wants it: three significant digits or so, thousands grouped."""
    if value is None:
        return NONE
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        size = abs(value)
        if size >= 100:
            return f"{value:,.0f}"
        if size >= 10:
            return f"{value:.1f}"
        if size >= 1:
            return f"{value:.2f}"
        return f"{value:.3g}"
    return str(value)


def markdown_table(table: Table) -> str:
    head, rows = table
    lines = ["| " + " | ".join(str(cell) for cell in head) + " |"]
    lines.append("|" + "---|" * len(head))
    lines += ["| " + " | ".join(number(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


# -- one headline table per bench ------------------------------------------------------


def server_load(r: dict[str, Any]) -> Table:
    head = ("bots", "node CPU µs / player-tick", "tick p50 ms", "tick p99 ms", "bot ticks / s")
    rows = [
        (
            row["players"],
            row["server_cpu_us_per_player_tick"],
            row["tick_p50_ms"],
            row["tick_p99_ms"],
            row["bot_ticks_per_s"],
        )
        for row in r["results"]
    ]
    return head, rows


def peers(r: dict[str, Any]) -> Table:
    head = (
        "players",
        "server",
        "server CPU µs / player-tick",
        f"{TIMES} Colyseus",
        "tick p99 ms",
        "bytes down / client / s",
    )
    rows: list[Row] = []
    for size, by_server in r["results"].items():
        for server, row in by_server.items():
            ratio = r["ratios"][size].get(f"{server}/colyseus", {})
            rows.append(
                (
                    int(size),
                    server,
                    row["server_cpu_us_per_player_tick"],
                    ratio.get(
                        "server_cpu_us_per_player_tick", 1.0 if server == "colyseus" else None
                    ),
                    row.get("tick_p99_ms"),
                    row.get("down_bytes_per_client_per_s"),
                )
            )
    return head, rows


def hitreg(r: dict[str, Any]) -> Table:
    head = ("players", "backend", "threads", "broad phase", "shots / s", f"{TIMES} reference")
    rows = [
        (
            row["players"],
            row["backend"],
            row["threads"],
            row["broad_phase"],
            row["shots_per_s"],
            row.get("speedup_vs_reference"),
        )
        for row in r["hitscan"]
    ]
    return head, rows


def adversary(r: dict[str, Any]) -> Table:
    head = (
        "attack",
        "honest snapshots / bot / s",
        "honest lost",
        "node cores",
        "tick p99 ms (baseline)",
    )
    rows = [
        (
            name,
            row["snapshots_per_bot_per_s"],
            row["honest_lost"],
            row["node_cores"],
            f"{number(row['tick_ms_p99'])} ({number(row['baseline']['tick_ms_p99'])})",
        )
        for name, row in r["attacks"].items()
    ]
    return head, rows


def fairness(r: dict[str, Any]) -> Table:
    head = ("load", "link RTT", "shots judged", "fair agreement", "unexplained")
    rows: list[Row] = []
    for load in ("quiet", "hog"):
        if load not in r:
            continue
        for rtt, row in r[load]["by_rtt"].items():
            rows.append(
                (load, rtt, row["judged"], row["fair_agreement"], row["causes"]["unexplained"])
            )
    return head, rows


def failover(r: dict[str, Any]) -> Table:
    head = (
        "coordinator",
        "transport",
        "replication",
        "CPU hog",
        "bots lost",
        "promotions",
        "acked ticks lost",
        "longest without primary ms",
        "stall p99 ms",
    )
    rows = [
        (
            run["coordinator"],
            run.get("transport", "ws"),
            run["replication"],
            run["hog"],
            run["audit"]["bots_lost"],
            run["audit"]["promotions"],
            run["audit"]["acked_ticks_lost"],
            run["audit"]["longest_without_primary_ms"],
            run["audit"]["stall_ms_p99"],
        )
        for run in r["runs"]
    ]
    return head, rows


def self_healing(r: dict[str, Any]) -> Table:
    head = (
        "scenario",
        "runs",
        "targets met",
        "acked ticks lost",
        "kill → promotion ms p50",
        "standby back in sync s p50",
    )
    rows = [
        (
            name,
            row["runs"],
            row["all_targets_met"],
            row["acked_ticks_lost"],
            row["kill_to_promotion_ms_p50"],
            row["standby_back_in_sync_s_p50"],
        )
        for name, row in r["summary"].items()
    ]
    return head, rows


def startup(r: dict[str, Any]) -> Table:
    head = ("checkout", "cold s to ready", "cold CPU s", "warm s to ready", "compile events cold")
    names = ["this code", *[f"baseline {n}" for n in range(1, len(r["checkouts"]))]]
    rows = [
        (
            name,
            c["cold_seconds_to_ready"],
            c["cold_cpu_s_to_ready"],
            c["warm_seconds_to_ready"],
            c["compile_events_cold"],
        )
        for name, c in zip(names, r["checkouts"], strict=True)
    ]
    return head, rows


def routing(r: dict[str, Any]) -> Table:
    head = ("path", "per second", "µs each", "p99 ms")
    rows = [
        (
            "routing decision (pure)",
            r["policy"]["decisions_per_s"],
            r["policy"]["us_per_decision"],
            None,
        ),
        ("seat answer, no HTTP", r["core"]["requests_per_s"], r["core"]["us_per_request"], None),
        (
            "seat answer over HTTP",
            r["http"]["requests_per_s"],
            r["http"]["directory_cpu_us_per_request"],
            r["http"]["latency_ms"]["p99"],
        ),
    ]
    return head, rows


def view_cost(r: dict[str, Any]) -> Table:
    head = ("load", "tick p50 with / without", "tick p99 with / without", "viewer frames / s")
    rows = [
        (
            load,
            run["tick_p50_ratio_median"],
            run["tick_p99_ratio_median"],
            run["viewer_frames_per_s_median"],
        )
        for load, run in r["runs"].items()
    ]
    return head, rows


def bot_kernels(r: dict[str, Any]) -> Table:
    head = ("kernel", "NumPy µs", "kernel µs", "speed-up")
    rows: list[Row] = []
    for name in ("view", "sight_lines", "shot"):
        row = r[name]
        rows.append((name.replace("_", " "), row["numpy_us"], row["kernel_us"], row["speedup"]))
    one = r["perception_pass"]
    rows.append(
        (
            "perception pass",
            one["union_and_numpy_glance_us"],
            one["fused_kernel_us"],
            one["speedup"],
        )
    )
    return head, rows


def bot_receive(r: dict[str, Any]) -> Table:
    return ("bots", "µs / frame", "µs / snapshot"), [
        (r["bots"], r["us_per_frame"], r["us_per_snapshot"])
    ]


def socket_floor(r: dict[str, Any]) -> Table:
    head = ("connections", "write µs", "read µs", "floor µs / bot-tick")
    return head, [
        (
            r["connections"],
            r["write"]["cpu_us_median"],
            r["read"]["cpu_us_median"],
            r["floor_us_per_bot_tick"],
        )
    ]


def node_kernels(r: dict[str, Any]) -> Table:
    head = ("players", "movement µs / call", "input decode µs / call", "inputs / decode call")
    return head, [
        (
            r["players"],
            r["movement_us_per_call"],
            r["input_decode_us_per_call"],
            r["inputs_per_decode_call"],
        )
    ]


def snapshot_coding(r: dict[str, Any]) -> Table:
    head = (
        "players",
        "interest selection µs",
        "encode µs",
        "encode µs / client",
        "records / client",
    )
    rows = [
        (
            row["players"],
            row["select_us"],
            row["encode_us"],
            row["encode_us_per_client"],
            row["records_per_client"],
        )
        for row in r["results"]
    ]
    return head, rows


def _interval(node: dict[str, Any]) -> str:
    """The A/B's 90 % interval, where the run gave one."""
    if "node_ab_interval_90" not in node:
        return ""
    low, high = node["node_ab_interval_90"]
    return f" (90 %: {100 * low:+.1f} to {100 * high:+.1f} %)"


def recording(r: dict[str, Any]) -> Table:
    head = (
        "players",
        "tick µs / player-tick",
        "recording on the tick µs",
        "on the writer µs",
        "recording / tick",
        "node µs / player-tick",
        "recording / node",
        "bytes / input",
        "MB / minute",
    )
    rows = [
        (
            row["players"],
            row["tick_us"],
            row["record_tick_us"],
            row["record_writer_us"],
            f"{100 * row['record_ratio']:.1f} %",
            "—"
            if row["node_us"] is None
            else f"{number(row['node_us'])} ({row['node_us_source']})",
            percent(row["record_ratio_of_node"]),
            row["bytes_per_input"],
            row["mb_per_minute"],
        )
        for row in r["results"]
    ]
    node = r.get("node")
    if node:  # the real node's: its own count of the log's share, and its A/B
        refused = " (runs refused)" if node.get("invalid_reasons") else ""
        plain = node["cpu_us_a"]
        runs = (
            f"runs {', '.join(number(a) for a in plain)}"
            if len(plain) <= 8
            else f"{len(plain)} runs, {number(min(plain))} to {number(max(plain))}"
        )
        rows.append(
            (
                f"{node['players']}, a node under bots{refused}",
                "—", "—", "—", "—",
                f"{number(node['cpu_us_per_player_tick'])} ({runs})",
                f"{100 * node['record_share_in_node']:.1f} %, its own count; A/B "
                f"{100 * node['node_ab_ratio']:+.1f} %{_interval(node)}",
                "—",
                node["mb_per_minute"],
            )
        )  # fmt: skip
    switched = r.get("node_switched")
    if switched:  # one node, its recording paused and resumed: the A/B inside one process
        refused = " (refused)" if switched.get("invalid_reasons") else ""
        low, high = switched["interval_90"]
        rows.append(
            (
                f"{switched['players']}, one node, recording paused and resumed "
                f"{switched['switches']} times{refused}",
                "—", "—", "—", "—",
                f"{number(statistics.median(switched['cpu_us_a']))} (paused)",
                f"{100 * switched['record_share_in_node']:.1f} %, its own count; A/B "
                f"{100 * switched['ratio']:+.1f} % (90 %: {100 * low:+.1f} to "
                f"{100 * high:+.1f} %)",
                "—", "—",
            )
        )  # fmt: skip
    on_disk = r.get("node_size")
    if on_disk and on_disk.get("mb_per_minute") is not None:
        refused = " (runs refused)" if on_disk.get("invalid_reasons") else ""
        runs = ", ".join(number(rate) for rate in on_disk["mb_per_minute_runs"])
        rows.append(
            (
                f"{on_disk['players']}, a node under its full bots{refused}",
                "—", "—", "—", "—", "—", "—", "—",
                f"{on_disk['mb_per_minute']} (runs {runs})",
            )
        )  # fmt: skip
    return head, rows


def percent(share: float | None) -> str:
    return "—" if share is None else f"{100 * share:.1f} %"


def replay(r: dict[str, Any]) -> Table:
    speed = f"{TIMES.strip()} real time (runs)"
    head = ("players (full bots)", "ticks", "shots", "log KB", speed, "mismatches")
    rows = [
        (
            f"{row['players']} ({row['full_bots']})",
            row["ticks"],
            row["shots"],
            round(row["log_bytes"] / 1000),
            f"{number(row['speed_x'])} ({', '.join(number(x) for x in row['speed_x_runs'])})",
            sum(row["mismatches"]),
        )
        for row in r["results"]
    ]
    return head, rows


def idle_node(r: dict[str, Any]) -> Table:
    head = (
        "CPU a second, ms (runs)",
        "tick rate Hz",
        f"µs a player-tick at {r['players']} players",
    )
    runs = ", ".join(number(run) for run in r["runs_ms_cpu_per_s"])
    return head, [
        (f"{number(r['ms_cpu_per_s'])} ({runs})", r["tick_rate_hz"], r["per_player_tick_us"])
    ]


def fanout_prototype(r: dict[str, Any]) -> Table:
    head = (
        "fan-out",
        "tick process µs / tick",
        "all CPU µs / client-tick",
        "delay p50 ms",
        "delay p99 ms",
    )
    rows = [
        (
            mode,
            row["tick_cpu_us_per_tick"],
            row["all_cpu_us_per_client_tick"],
            row["delay_ms_p50"],
            row["delay_ms_p99"],
        )
        for mode, row in r["modes"].items()
    ]
    return head, rows


def aead(r: dict[str, Any]) -> Table:
    head = ("payload B", "library", "seal µs", "open µs")
    rows = [
        (int(size), library, row["seal_us"], row["open_us"])
        for library, by_size in r["aead"].items()
        for size, row in by_size.items()
    ]
    channel = r.get("channel_600_B")
    if channel:
        rows.append(
            (600, "Channel (seal + header + lanes)", channel["send_us"], channel["receive_us"])
        )
    return head, rows


def websocket_paths(r: dict[str, Any]) -> Table:
    head = ("library", "server CPU µs / client-s", "client CPU µs / client-s")
    rows = [
        (name, row["server_cpu_us_per_client_s"], row["client_cpu_us_per_client_s"])
        for name, row in r["libraries"].items()
    ]
    return head, rows


def transport_loss(r: dict[str, Any]) -> Table:
    head = (
        "condition",
        "transport",
        "longest gap p99 ms",
        "RTT p90 ms",
        "inputs acked",
        "fair agreement",
        "beyond the cap",
        "snapshots lost",
        "down kbit/s a bot",
    )
    rows = []
    for key, cell in r["cells"].items():
        condition, transport = key.split("/")
        m = cell.get("median", {})
        rows.append((
            condition.replace("_", " "), transport, m.get("longest_gap_ms_p99"),
            m.get("rtt_p90_ms"), m.get("acked_ratio"), m.get("fair_agreement"),
            m.get("beyond_cap"), m.get("snapshots_lost"), m.get("down_kbps_per_bot"),
        ))  # fmt: skip
    return head, rows


def scale(r: dict[str, Any]) -> Table:
    head = (
        "run",
        "players (full + light)",
        "node CPU µs / player-tick",
        "tick p50 ms",
        "tick p99 ms",
        "overruns",
        "fair agreement",
        "load 1m",
        "valid",
    )
    rows = [
        (
            label,
            f"{run['players']} ({run['players'] - run['light']} + {run['light']})",
            run["server_cpu_us_per_player_tick"],
            run["tick_p50_ms"],
            run["tick_p99_ms"],
            run["tick_overruns"],
            run["fair_agreement"],
            run["loadavg_1m"],
            run["valid"],
        )
        for label, run in r["runs"].items()
    ]
    return head, rows


def udp_fuzz(r: dict[str, Any]) -> Table:
    """The honest bots and the node alone and beside the fuzzer, what the fuzzer sent and
    what came of it."""
    head = (
        "window",
        "honest snapshots / bot / s",
        "node cores",
        "load 1m",
        "bad datagrams",
        "refused",
        "accepted",
        "sources answered with more than they sent",
    )
    baseline, fuzzed = r["baseline"], r["fuzzed"]
    fuzz = fuzzed["fuzz"]
    alone = ("alone", baseline["snapshots_per_bot_per_s"], baseline["node_cores"],
             baseline["loadavg_1m_at_end"], None, None, None, None)  # fmt: skip
    beside = (
        "beside the fuzzer",
        fuzzed["snapshots_per_bot_per_s"],
        fuzzed["node_cores"],
        fuzzed["loadavg_1m_at_end"],
        fuzz["sent"],
        sum(fuzz["refused_by_cause"].values()),
        fuzz["accepted_from_fuzz_sources"],
        len(fuzz["amplifying_sources"]),
    )
    return head, [alone, beside]


@dataclass(frozen=True, slots=True)
class Bench:
    name: str
    script: str
    title: str
    table: Callable[[dict[str, Any]], Table]
    picture: str | None = None


BENCHES = (
    Bench(
        "server_load",
        "bench/server_load.py",
        "A node under load-test bots",
        server_load,
        "performance-scaling.svg",
    ),
    Bench(
        "peers",
        "bench/peers/run.py",
        "Beside Colyseus and a naive server",
        peers,
        "performance-peers.svg",
    ),
    Bench("hitreg", "bench/hitreg.py", "Hit registration", hitreg),
    Bench("snapshot_coding", "bench/snapshot_coding.py", "Coding a snapshot", snapshot_coding),
    Bench("node_kernels", "bench/node_kernels.py", "The node's per-tick kernels", node_kernels),
    Bench("idle_node", "bench/idle_node.py", "An idle node", idle_node),
    Bench("recording", "bench/recording.py", "Recording a match", recording),
    Bench("replay", "bench/replay.py", "Replaying a match", replay),
    Bench("fairness", "bench/fairness.py", "Fairness of lag compensation", fairness),
    Bench("adversary", "bench/adversary.py", "Hostile clients", adversary),
    Bench("view_cost", "bench/view_cost.py", "The live view's cost", view_cost),
    Bench("failover", "bench/failover.py", "Failover under faults", failover),
    Bench("self_healing", "bench/self_healing.py", "Self-healing regions", self_healing),
    Bench("startup", "bench/startup.py", "Start-up", startup),
    Bench("routing", "bench/routing.py", "The directory's routing", routing),
    Bench("bot_kernels", "bench/bot_kernels.py", "The bots' kernels", bot_kernels),
    Bench("bot_receive", "bench/bot_receive.py", "A frame's cost to a bot", bot_receive),
    Bench("socket_floor", "bench/socket_floor.py", "The loopback floor", socket_floor),
    Bench(
        "transport_loss", "bench/transport_loss.py", "Loss over UDP and WebSocket", transport_loss
    ),
    Bench("udp_fuzz", "bench/udp_fuzz.py", "Hostile datagrams", udp_fuzz),
    Bench("scale", "bench/scale.py", "A node at a region's scale", scale),
    Bench("aead", "bench/aead.py", "Sealing a datagram", aead),
    Bench("websocket_paths", "bench/websocket_paths.py", "WebSocket libraries", websocket_paths),
    Bench(
        "fanout_prototype",
        "bench/fanout_prototype.py",
        "Fan-out across processes",
        fanout_prototype,
    ),
)


def what_it_measures(script: str) -> str:
    """The first paragraph of the bench's docstring, on one line, in Markdown's backticks."""
    source = (ROOT / script).read_text(encoding="utf-8")
    docstring = ast.get_docstring(ast.parse(source)) or ""
    return " ".join(docstring.split("\n\n")[0].split()).replace("``", "`")


def command(report: dict[str, Any]) -> str:
    """What made the file: the provenance a bench now writes, or the field given by hand."""
    return str(report.get("provenance", {}).get("command") or report["command"])


def machine(report: dict[str, Any]) -> str:
    """The cores the run had: a figure from 2 cores and one from 16 are not the same."""
    block = report.get("machine") or {}
    found = (
        report.get("provenance", {}).get("cores")
        or report.get("cores")
        or block.get("cpus")
        or block.get("cpu_count")
    )
    return f" on {found} cores" if found else ""


def load(results: Path, name: str) -> dict[str, Any]:
    report: dict[str, Any] = json.loads((results / f"{name}.json").read_text(encoding="utf-8"))
    return report


def render_performance(results: Path) -> str:
    """The whole of docs/performance.md for the results in ``results``."""
    known = {bench.name for bench in BENCHES}
    unknown = sorted(p.stem for p in results.glob("*.json") if p.stem not in known)
    if unknown:
        raise ValueError(f"bench/results has files no bench makes: {', '.join(unknown)}")
    parts = [
        "# Performance",
        "",
        "The current figures of every bench, one section each: what it measures, its headline",
        "figures, and the command that produced them. Each bench writes its JSON to",
        "`bench/results/<bench>.json` (the previous run's figures are in git's history), and",
        "this page is made from those files by `python bench/report.py` (`make bench` runs the",
        "benches and then it); a test keeps the page and the files in step. The figures come",
        "from a shared development machine unless a section says otherwise: compare within a",
        "run, not across runs. How each bench works and how to read it is in its docstring;",
        "the peer bench's method is in [peers.md](peers.md), load testing in",
        "[load-testing.md](load-testing.md).",
        "",
        "The two pictures are drawn from the same files (`bench/performance_plots.py`).",
        "",
    ]
    present = [bench for bench in BENCHES if (results / f"{bench.name}.json").exists()]
    parts += [f"- [{bench.title}](#{anchor(bench.title)})" for bench in present]
    for bench in present:
        report = load(results, bench.name)
        parts += [
            "",
            f"## {bench.title}",
            "",
            f"{what_it_measures(bench.script)} (`{bench.script}`)",
            "",
            markdown_table(bench.table(report)),
            "",
        ]
        if bench.picture:
            parts += [f"![{bench.title}](images/{bench.picture})", ""]
        parts += [
            f"Measured{machine(report)} with:",
            "",
            "```",
            command(report),
            "```",
        ]
        if report.get("how"):
            parts += ["", f"How: {report['how']}."]
    return "\n".join(parts) + "\n"


def anchor(title: str) -> str:
    """GitHub's anchor for a heading: lower case, spaces to dashes, punctuation dropped."""
    kept = "".join(ch for ch in title.lower() if ch.isalnum() or ch in " -_")
    return kept.replace(" ", "-")


def figures_table(results: Path) -> str:
    """The README's few headline figures: a node's cost and tick under bots, and a shot."""
    server = load(results, "server_load")
    peer = load(results, "peers")
    rows: list[Row] = []
    # The node's own cost from the peer bench, where it has a core to itself beside a nearly
    # idle client core (bench/server_load's node shares both cores with its bots).
    for size in peer["config"]["sizes"]:
        costs = [
            run["server_cpu_us_per_player_tick"]
            for run in peer["runs"]
            if run["server"] == "arena-light" and run["players"] == size and run["valid"]
        ]
        if costs:
            rows.append(
                (
                    f"node CPU per player-tick, {size} players over WebSocket",
                    f"{number(statistics.median(costs))} µs",
                )
            )
    top = server["results"][-1]
    rows.append(
        (f"tick p99, {top['players']} bots (budget 16.7 ms)", f"{number(top['tick_p99_ms'])} ms")
    )
    # Arena's node under the clients the peer bench ran: light players over WebSocket and
    # over UDP, or (in an older run) clients that only wander.
    arenas = {"arena-light": "WebSocket", "arena-light-udp": "UDP", "arena-wander": "WebSocket"}
    for size, ratios in peer["ratios"].items():
        for arena, transport in arenas.items():
            pair = ratios.get(f"{arena}/colyseus", {})
            ratio = pair.get("server_cpu_us_per_player_tick")
            if ratio is not None:
                label = f"server CPU against Colyseus, {size} players, {transport}"
                rows.append((label, f"{number(ratio)}{TIMES}"))
    return markdown_table((("figure", "measured"), rows))


def replace_figures_block(readme: str, results: Path) -> str:
    """``readme`` with the text between the figures markers made from ``results``."""
    start, end = readme.find(FIGURES_START), readme.find(FIGURES_END)
    if start < 0 or end < start:
        raise ValueError("README.md has no figures block (its two marker comments)")
    head = readme[: start + len(FIGURES_START)]
    return f"{head}\n{figures_table(results)}\n{readme[end:]}"
