"""The bots' report: JSON for machines (field names are stable), a summary for people.

Every figure comes from a measurement: RTTs from the bots' own ping/pong round trips through
their modelled links, tick durations from the server's ``/health``, prediction error from
reconciliation, bandwidth from the bytes the bots' sockets carried.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from client_sim.bot import FailoverEvent
from client_sim.fairness import CAUSES, RULE_CAUSES
from client_sim.report_series import merge_samples, series
from client_sim.report_validity import invalid_reasons
from client_sim.shooting import ShotSummary
from client_sim.swarm import SwarmResult

__all__ = [
    "RTT_BUCKETS_MS",
    "build_report",
    "format_summary",
    "observed_kills",
    "shot_figures",
]

#: Upper bounds of the RTT buckets of ``shots.by_rtt`` (the last is open-ended).
RTT_BUCKETS_MS = (50, 100, 150, 200)
MAX_UNEXPLAINED_SHOWN = 20  # unexplained shots the report lists whole
MAX_DISPUTED_SHOWN = 1000  # disputed shots the report lists (a bound on its size)


def _ratio(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def shot_figures(shots: list[ShotSummary]) -> dict[str, Any]:
    """Client versus server verdicts. A rate is ``None`` when its denominator is 0.

    ``agreement``: share of judged shots where both said "no player hit" or both named the
    same victim. ``false_negative_rate``: of the shots the shooter saw hit, the share the
    server called a miss. ``false_positive_rate``: of the shots the shooter saw miss, the
    share the server called a hit.

    ``fair_agreement``: the share of the judged shots that no rule decided (shooter dead,
    beyond the cap, victim already dead: :mod:`client_sim.fairness`) on which both agree;
    ``fair_false_negative_rate`` and ``fair_false_positive_rate`` the same two rates over
    those shots, the second of the server's hits (the share the shooter had seen miss), so
    that plain misses do not dilute it. ``disagreements_by_cause``: every disagreement,
    rule outcomes included, by its one cause; ``decided_by_rule``: the judged shots each
    rule decided, whether or not the two verdicts differed.
    """
    judged = [s for s in shots if s.server_result is not None]
    client_hits = [s for s in judged if s.client_hit]
    client_misses = [s for s in judged if not s.client_hit]
    fair = [s for s in judged if s.rule is None]
    fair_client_hits = [s for s in fair if s.client_hit]
    fair_server_hits = [s for s in fair if s.server_result == "hit"]
    return {
        "fired": len(shots),
        "judged": len(judged),
        "unresolved": len(shots) - len(judged),
        "client_hits": sum(s.client_hit for s in shots),
        "server_hits": sum(s.server_result == "hit" for s in judged),
        "rejected": sum(s.server_result == "rejected" for s in judged),
        "agreement": _ratio(sum(s.agrees for s in judged), len(judged)),
        "false_negative_rate": _ratio(
            sum(s.server_result != "hit" for s in client_hits), len(client_hits)
        ),
        "false_positive_rate": _ratio(
            sum(s.server_result == "hit" for s in client_misses), len(client_misses)
        ),
        "fair_judged": len(fair),
        "fair_agreement": _ratio(sum(s.cause is None for s in fair), len(fair)),
        "fair_false_negative_rate": _ratio(
            sum(s.server_result != "hit" for s in fair_client_hits), len(fair_client_hits)
        ),
        "fair_false_positive_rate": _ratio(
            sum(not s.client_hit for s in fair_server_hits), len(fair_server_hits)
        ),
        "disagreements_by_cause": {
            cause: sum(s.cause == cause for s in judged) for cause in CAUSES
        },
        "decided_by_rule": {rule: sum(s.rule == rule for s in judged) for rule in RULE_CAUSES},
    }


def _bucketed(shots: list[ShotSummary], rtt_ms: Callable[[ShotSummary], float]) -> dict[str, Any]:
    buckets = sorted({_bucket(rtt_ms(s)) for s in shots}, key=_bucket_order)
    return {
        bucket: shot_figures([s for s in shots if _bucket(rtt_ms(s)) == bucket])
        for bucket in buckets
    }


def peekers_advantage(
    sightings: list[tuple[str, int, int, float]], window_s: float = 1.0
) -> dict[str, Any]:
    """How much sooner the one who sees first saw the other, over every pair of players
    who both saw each other within ``window_s`` (each sighting paired once, nearest first).
    Each bot looks a few times a second, so each time is known to one perception interval.
    """
    onsets: dict[tuple[str, int, int], list[float]] = {}
    for node, seer, seen, at in sightings:
        onsets.setdefault((node, seer, seen), []).append(at)
    gaps: list[float] = []
    for (node, seer, seen), times in onsets.items():
        if seer >= seen:
            continue  # each pair once, from its lower id
        others = sorted(onsets.get((node, seen, seer), []))
        for at in sorted(times):
            near = [o for o in others if abs(o - at) <= window_s]
            if near:
                nearest = min(near, key=lambda o: abs(o - at))
                others.remove(nearest)  # each sighting pairs once
                gaps.append(abs(nearest - at))
    return {
        "median_ms": _pct(gaps, 50, 1000.0),
        "p90_ms": _pct(gaps, 90, 1000.0),
        "pairs": len(gaps),
    }


def behind_cover_by_shooter_rtt(hits: list[tuple[float, bool]]) -> dict[str, Any]:
    """Hits received and checked, bucketed by the server's RTT estimate of the shooter:
    how many, and the share that reached a victim already behind cover on its screen."""
    buckets = sorted({_bucket(rtt) for rtt, _ in hits}, key=_bucket_order)
    out = {}
    for bucket in buckets:
        behind = [cover for rtt, cover in hits if _bucket(rtt) == bucket]
        out[bucket] = {"hits": len(behind), "behind_cover_rate": _ratio(sum(behind), len(behind))}
    return out


def rtt_agreement(shots: list[ShotSummary]) -> dict[str, Any]:
    """The server's RTT estimate of each shooter against the bots' own measurement and the
    link's configured RTT, at the shots where the server had one (medians, ms)."""
    both = [s for s in shots if s.server_rtt_ms == s.server_rtt_ms]
    return {
        "shots": len(both),
        "server_p50": _pct([s.server_rtt_ms for s in both], 50),
        "bots_measured_p50": _pct([s.rtt_ms for s in both if s.rtt_ms == s.rtt_ms], 50),
        "link_p50": _pct([s.link_rtt_ms for s in both], 50),
        "server_minus_link_p50": _pct([s.server_rtt_ms - s.link_rtt_ms for s in both], 50),
    }


def observed_kills(
    events: list[FailoverEvent],
    kills: list[dict[str, Any]],
    survivor: dict[str, Any] | None,
    clock_to_wall: float,
) -> list[dict[str, Any]]:
    """``kills`` (what this process did), plus the failovers the bots saw that nobody
    here caused (``arena-chaos kill`` from another terminal): a new epoch the bots were
    welcomed at is a kill of the primary before it. Such a kill's time is estimated as
    the bots' last snapshot before the loss; its server timings are the survivor's
    ``/health`` ``failover`` entry when the survivor leads at that epoch."""
    known = {k.get("epoch") for k in kills}
    seen: dict[int, float] = {}
    for e in events:
        if e.epoch_after > e.epoch_before >= 0 and e.epoch_after not in known:
            seen[e.epoch_after] = min(seen.get(e.epoch_after, math.inf), e.lost_at)
    inferred = []
    for epoch, lost_at in sorted(seen.items()):
        told = survivor is not None and survivor.get("epoch") == epoch
        inferred.append(
            {
                "epoch": epoch,
                "killed_at": lost_at + clock_to_wall,
                "killed_at_estimated": True,
                "failover": dict(survivor.get("failover") or {}) if told and survivor else {},
            }
        )
    return [*kills, *inferred]


def failover_figures(
    events: list[FailoverEvent], kills: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """What the bots saw of lost primaries; with ``kills`` (one per kill: ``killed_at`` and
    the new primary's ``failover`` health entry), the server-side timings too.

    ``reconnects_without_failover``: bots that left their primary and were welcomed back
    at the same epoch: nothing had failed over (a starved bot process, see
    :mod:`client_sim.report_validity`).

    ``acked_ticks_lost``: ticks a bot was shown that the new primary does not have (its
    replicated tick at promotion is older). ``inputs_lost``: inputs the old primary
    acknowledged that the new primary never applied (its ack for the seat is older).
    """
    promoted_at_tick = {
        int(k["epoch"]): int(k["failover"]["promoted_at_tick"])
        for k in kills or []
        if k.get("failover", {}).get("promoted_at_tick") is not None
    }
    resumed = [e for e in events if e.resumed]
    stalls = [e.stall_s * 1000.0 for e in resumed if e.stall_s is not None]
    ticks_lost = sum(
        max(0, e.tick_before - promoted_at_tick[e.epoch_after])
        for e in resumed
        if e.epoch_after in promoted_at_tick
    )
    figures: dict[str, Any] = {
        "events": len(events),
        "bots_resumed": len(resumed),
        "bots_lost": len(events) - len(resumed),
        "stall_ms_p50": _pct(stalls, 50),
        "stall_ms_p90": _pct(stalls, 90),
        "stall_ms_p95": _pct(stalls, 95),
        "stall_ms_p99": _pct(stalls, 99),
        "stall_ms_max": round(max(stalls), 3) if stalls else None,
        "acked_ticks_lost": ticks_lost if promoted_at_tick else None,
        "inputs_lost": sum(max(0, e.ack_before - e.ack_after) for e in resumed),
        "reconnects_without_failover": sum(
            0 <= e.epoch_after <= e.epoch_before for e in events if e.epoch_before >= 0
        ),
    }
    timed = [k for k in kills or [] if "killed_at" in k and k.get("failover")]
    detected = [
        (k["failover"]["detected_at"] - k["killed_at"]) * 1000
        for k in timed
        if "detected_at" in k["failover"]
    ]
    promoted = [
        (k["failover"]["first_tick_at"] - k["killed_at"]) * 1000
        for k in timed
        if "first_tick_at" in k["failover"]
    ]
    figures["detected_ms"] = round(float(np.mean(detected)), 3) if detected else None
    figures["promoted_ms"] = round(float(np.mean(promoted)), 3) if promoted else None
    figures["kills"] = len(kills or [])
    return figures


def rtt_histogram(measured: list[float], model: list[float], bins: int = 40) -> dict[str, Any]:
    """Measured RTTs against the bots' modelled link RTTs, on shared bins (ms): what the
    report's RTT picture draws. A starved bot process shows here as a measured
    distribution shifted right of its model."""
    both = np.asarray([*measured, *model], dtype=np.float64) * 1000.0
    if not len(both):
        return {"edges_ms": [], "measured": [], "model": []}
    top = float(np.percentile(both, 99.5)) * 1.1 or 1.0
    edges = np.linspace(0.0, top, bins + 1)

    def counts(seconds: list[float]) -> list[int]:
        ms = np.minimum(np.asarray(seconds, dtype=np.float64) * 1000.0, top)  # tail: last bin
        return np.histogram(ms, edges)[0].tolist()

    return {"edges_ms": np.round(edges, 2).tolist(), "measured": counts(measured),
            "model": counts(model)}  # fmt: skip


def _bucket(rtt_ms: float) -> str:
    if rtt_ms != rtt_ms:  # NaN: no pong yet when the shot was fired
        return "unknown"
    low = 0
    for high in RTT_BUCKETS_MS:
        if rtt_ms < high:
            return f"{low}-{high}ms"
        low = high
    return f"{low}ms+"


def _pct(values: list[float] | np.ndarray, q: float, scale: float = 1.0) -> float | None:
    if len(values) == 0:
        return None
    return round(float(np.percentile(np.asarray(values), q)) * scale, 3)


def _kbps(byte_counts: list[int], seconds: float) -> float | None:
    if not byte_counts or seconds <= 0:
        return None
    return round(float(np.mean(byte_counts)) * 8 / 1000 / seconds, 2)


def bot_process_figures(result: SwarmResult) -> dict[str, Any]:
    """Whether the bot process kept up: its loop's ticks per second against the target
    (the slowest process's, with workers), and CPU seconds per wall second (summed over
    processes: 1.0 is one core busy)."""
    processes = result.processes
    rates = [p.tick_hz for p in processes if p.tick_hz is not None]
    target = max((p.target_hz for p in processes), default=0) or None
    wall = max((p.wall_s for p in processes), default=0.0)
    bot_ticks = max(1, result.swarm_ticks * max(result.connected, 1))
    tick_hz = round(min(rates), 2) if rates else None
    return {
        "target_hz": target,
        "tick_hz": tick_hz,
        "tick_ratio": round(tick_hz / target, 4) if tick_hz is not None and target else None,
        # (kept for the server-load bench: the same figure as tick_hz)
        "ticks_per_s": tick_hz,
        "cpu_s": round(result.cpu_s, 3),
        "cpu_cores": round(sum(p.cpu_s for p in processes) / wall, 3) if wall > 0 else None,
        "cpu_us_per_bot_tick": round(result.cpu_s / bot_ticks * 1e6, 2),
        "processes": [
            {
                "tick_hz": None if p.tick_hz is None else round(p.tick_hz, 2),
                "cpu_cores": round(p.cpu_s / p.wall_s, 3) if p.wall_s > 0 else None,
            }
            for p in processes
        ],
    }


def tick_percentiles(server: dict[str, Any], health: dict[str, Any]) -> dict[str, Any]:
    """Tick durations from one source, so that the percentiles are of one distribution:
    the run's ``/metrics`` histogram (every tick of every node the bots played on,
    interpolated within buckets), else the node's ``/health`` (exact p50 and p99 over its
    last 3600 ticks; a node promoted mid-run has fewer)."""
    if server.get("histogram"):
        return {"percentiles_from": "histogram"} | {
            f"p{q}_ms": server.get(f"p{q}_ms") for q in (50, 90, 95, 99)
        }
    return {
        "percentiles_from": "health" if "tick_ms_p50" in health else None,
        "p50_ms": health.get("tick_ms_p50"),
        "p90_ms": None,
        "p95_ms": None,
        "p99_ms": health.get("tick_ms_p99"),
    }


def _timeline(result: SwarmResult, origin: float) -> list[list[float | None]]:
    """Each bot's outage: [seconds since ``origin`` of its last snapshot before the loss,
    its stall in ms (None: it never resumed)]."""
    return [
        [
            round(e.lost_at + result.clock_to_wall - origin, 3),
            None if e.stall_s is None else round(e.stall_s * 1000.0, 1),
        ]
        for e in result.failovers
    ]


def build_report(
    result: SwarmResult,
    *,
    latency_spec: str,
    workers: int,
    server_before: dict[str, Any] | None,
    server_after: dict[str, Any] | None,
    kills: list[dict[str, Any]] | None = None,
    server: dict[str, Any] | None = None,
    origin: float | None = None,
) -> dict[str, Any]:
    """The report of one run. ``server``: :func:`client_sim.report_server.server_figures`
    (tick-duration histogram and series); ``origin``: the run's start (wall clock), the
    zero of every series (default: the first sample's start)."""
    after = server_after or {}
    samples = merge_samples(result.samples)
    if origin is None:
        origin = samples[0].at - samples[0].seconds if samples else 0.0
    kills = observed_kills(result.failovers, list(kills or []), server_after, result.clock_to_wall)
    server = server or {}
    served = skipped = None
    if server_before is not None and server_after is not None:
        served = int(server_after["tick"]) - int(server_before["tick"])
        if "ticks_skipped" in server_after:
            skipped = int(server_after["ticks_skipped"]) - int(
                server_before.get("ticks_skipped", 0)
            )
    acked = sum(result.inputs_acked)
    sent = sum(result.inputs_sent)
    report: dict[str, Any] = {
        "partial": result.partial,
        "valid": True,
        "invalid_reasons": [],
        "bots": {
            "requested": result.requested,
            "connected": result.connected,
            "workers": workers,
        },
        "ticks": {
            "rate_hz": after.get("tick_rate"),
            "snapshot_rate_hz": after.get("snapshot_rate"),
            "served": served,
            **tick_percentiles(server, after),
            "histogram": server.get("histogram"),
            "overruns": after.get("tick_overruns"),
            "skipped": skipped,
        },
        "latency_ms": {
            "model": latency_spec,
            "rtt_p50": _pct(result.rtt_samples, 50, 1000.0),
            "rtt_p90": _pct(result.rtt_samples, 90, 1000.0),
            "rtt_p95": _pct(result.rtt_samples, 95, 1000.0),
            "rtt_p99": _pct(result.rtt_samples, 99, 1000.0),
            "samples": len(result.rtt_samples),
            "histogram": rtt_histogram(result.rtt_samples, result.link_rtts),
        },
        "prediction": {
            "error_p50_m": _pct(result.prediction_errors, 50),
            "error_p90_m": _pct(result.prediction_errors, 90),
            "error_p95_m": _pct(result.prediction_errors, 95),
            "error_p99_m": _pct(result.prediction_errors, 99),
            "samples": len(result.prediction_errors),
        },
        "bandwidth": {
            "down_kbps_per_bot": _kbps(result.bytes_down, result.duration_s),
            "up_kbps_per_bot": _kbps(result.bytes_up, result.duration_s),
        },
        "inputs": {
            "sent": sent,
            "acked": acked,
            "acked_ratio": round(acked / sent, 4) if sent else None,
        },
        "snapshots": {
            "received": sum(result.snapshots),
            "per_bot_per_s": (
                round(float(np.mean(result.snapshots)) / result.duration_s, 2)
                if result.snapshots and result.duration_s > 0
                else None
            ),
            "interpolation_misses": result.interpolation_misses,
        },
        "shots": {
            **shot_figures(result.shots),
            # Each unexplained disagreement (a bug somewhere): both verdicts and their grounds.
            "unexplained_shots": [s.detail for s in result.shots if s.detail][
                :MAX_UNEXPLAINED_SHOWN
            ],
            # Every shot whose verdicts differ, by tick and shooter (its place in a match log).
            "disputed": sorted(
                (s.disputed for s in result.shots if s.disputed),
                key=lambda d: (d["tick"], d["shooter"], d["seq"]),
            )[:MAX_DISPUTED_SHOWN],
            "by_rtt": _bucketed(result.shots, lambda s: s.rtt_ms),
            "by_link_rtt": _bucketed(result.shots, lambda s: s.link_rtt_ms),
            "by_weapon": {
                name: shot_figures([s for s in result.shots if s.weapon == weapon])
                for weapon, name in enumerate(("rifle", "launcher"))
            },
            "hits_received": result.hits_received,
            "behind_cover_rate": _ratio(result.hits_behind_cover, result.hits_received),
            "behind_cover_by_shooter_rtt": behind_cover_by_shooter_rtt(result.hits_checked),
            "peekers_advantage_ms": peekers_advantage(result.sightings),
            "rtt_ms": rtt_agreement(result.shots),
            "server": after.get("combat"),
        },
        "fog": fog_figures(result.fog, server_before, server_after),
        "failover": {
            **failover_figures(result.failovers, kills),
            # A stall (no snapshot for 0.5 s) probed and ridden out: no failover, no reconnect.
            "stalls_ridden_out": result.stalls,
            # A token refused (seat freed, token expired, a state without the seat): the
            # bot played on in a new seat.
            "seats_lost": result.seats_lost,
            # Where the bots played at the end (after a failover: the survivor).
            "ended_on": dict(result.node_urls),
            "timeline": _timeline(result, origin),
            "kill_times": [round(k["killed_at"] - origin, 3) for k in kills if "killed_at" in k],
        },
        "bot_process": bot_process_figures(result),
        "duration_s": round(result.duration_s, 3),
        "errors": result.errors,
        "series": {**series(samples, origin), "server": server.get("series")},
    }
    reasons = invalid_reasons(report)
    report["valid"], report["invalid_reasons"] = not reasons, reasons
    return report


def fog_figures(
    bots: dict[str, int], before: dict[str, Any] | None, after: dict[str, Any] | None
) -> dict[str, Any]:
    """Fog of war over the run: what the bots saw (:class:`client_sim.sight.PopInWatch`:
    pop-ins must be 0) and the node's account of the records of other players it sent
    (``/health`` ``snapshots.fog_*`` of the node the bots ended on, after less before;
    None without both reads, or with fog off): judged seen within the client's margin,
    or hidden for the whole of it.
    ``hidden_share``: hidden among those judged."""
    figures: dict[str, Any] = {
        "pop_ins": bots.get("pop_ins", 0),
        "appearances": bots.get("appearances", 0),
        "enemy_records": bots.get("enemy_records", 0),
    }
    node: dict[str, int | None] = dict.fromkeys(("sent", "seen", "hidden", "withheld"))
    old = (before or {}).get("snapshots") or {}
    new = (after or {}).get("snapshots") or {}
    if before is not None and "fog_sent" in new:
        if int(new["fog_sent"]) < int(old.get("fog_sent", 0)):
            old = {}  # (another node's counts: the bots ended on a promoted standby)
        node = {k: int(new[f"fog_{k}"]) - int(old.get(f"fog_{k}", 0)) for k in node}
    hidden = node["hidden"] or 0
    judged = (node["seen"] or 0) + hidden
    return {
        **figures,
        "node_records": node,
        "hidden_share": round(hidden / judged, 4) if judged else None,
    }


def _bucket_order(bucket: str) -> float:
    return float("inf") if bucket == "unknown" else float(bucket.split("-")[0].rstrip("ms+"))


def format_summary(report: dict[str, Any]) -> str:
    def show(value: object, unit: str = "") -> str:
        return "n/a" if value is None else f"{value}{unit}"

    b, t, lat = report["bots"], report["ticks"], report["latency_ms"]
    p, bw, inp = report["prediction"], report["bandwidth"], report["inputs"]
    proc = report["bot_process"]
    ratio = proc["tick_ratio"]
    lines = ["PARTIAL     interrupted: the run ended early"] if report.get("partial") else []
    lines += [
        f"bots        {b['connected']}/{b['requested']} connected ({b['workers']} worker(s))",
        f"bot process {show(proc['tick_hz'])} ticks/s of {show(proc['target_hz'])} "
        f"({show(None if ratio is None else f'{ratio:.0%}')}), CPU "
        f"{show(proc['cpu_cores'], ' core(s)')}",
        f"server      {show(t['served'])} ticks at {show(t['rate_hz'])} Hz (snapshots "
        f"{show(t.get('snapshot_rate_hz'))} Hz), tick p50 "
        f"{show(t['p50_ms'], ' ms')}, p90 {show(t['p90_ms'], ' ms')}, p95 "
        f"{show(t['p95_ms'], ' ms')}, p99 {show(t['p99_ms'], ' ms')}, "
        f"overruns {show(t['overruns'])}, skipped {show(t['skipped'])}",
        f"latency     measured RTT p50 {show(lat['rtt_p50'], ' ms')}, p90 "
        f"{show(lat['rtt_p90'], ' ms')}, p95 {show(lat['rtt_p95'], ' ms')}, p99 "
        f"{show(lat['rtt_p99'], ' ms')} (model {lat['model']})",
        f"prediction  error p50 {show(p['error_p50_m'], ' m')}, p90 {show(p['error_p90_m'], ' m')}"
        f", p95 {show(p['error_p95_m'], ' m')}, p99 {show(p['error_p99_m'], ' m')}",
        f"bandwidth   {show(bw['down_kbps_per_bot'], ' kbit/s')} down, "
        f"{show(bw['up_kbps_per_bot'], ' kbit/s')} up per bot",
        f"inputs      {inp['acked']}/{inp['sent']} acknowledged",
    ]
    shots = report["shots"]
    if shots["fired"]:
        lines.append(
            f"shots       {shots['fired']} fired, {shots['client_hits']} hits on the shooters' "
            f"screens, {shots['server_hits']} by the server; agreement "
            f"{show(shots['agreement'])}, false negatives {show(shots['false_negative_rate'])}, "
            f"false positives {show(shots['false_positive_rate'])}, behind cover "
            f"{show(shots['behind_cover_rate'])}"
        )
        causes = ", ".join(f"{k} {v}" for k, v in shots["disagreements_by_cause"].items() if v)
        peek = shots["peekers_advantage_ms"]
        lines.append(
            f"fairness    fair agreement {show(shots['fair_agreement'])} over "
            f"{shots['fair_judged']} shots no rule decided; disagreements: {causes or 'none'}; "
            f"peeker's advantage p50 {show(peek['median_ms'], ' ms')} ({peek['pairs']} pairs)"
        )
    routing = report.get("routing")
    if routing:
        regions = ", ".join(f"{k} {v}" for k, v in routing["players_by_region"].items())
        lines.append(
            f"routing     {regions}; mean RTT {routing['mean_rtt_ms']} ms, best "
            f"{routing['mean_best_rtt_ms']} ms, regret {routing['regret_ms']} ms, "
            f"{routing['overflowed']} overflowed"
        )
    failover = report["failover"]
    if failover["events"] or failover["kills"]:
        lines.append(
            f"failover    {failover['kills']} kill(s): detected "
            f"{show(failover['detected_ms'], ' ms')}"
            f", promoted {show(failover['promoted_ms'], ' ms')}; {failover['bots_resumed']} bots "
            f"resumed, {failover['bots_lost']} lost; stall p50 "
            f"{show(failover['stall_ms_p50'], ' ms')}, p90 {show(failover['stall_ms_p90'], ' ms')}"
            f", p95 {show(failover['stall_ms_p95'], ' ms')}, p99 "
            f"{show(failover['stall_ms_p99'], ' ms')}"
            f", max {show(failover['stall_ms_max'], ' ms')}; acked ticks lost "
            f"{show(failover['acked_ticks_lost'])}, inputs lost {failover['inputs_lost']}, "
            f"seats lost {failover['seats_lost']}"
        )
    fog = report["fog"]
    if fog["enemy_records"]:
        lines.append(
            f"fog         {fog['pop_ins']} pop-ins over {fog['appearances']} appearances in "
            f"sight range; hidden share {show(fog['hidden_share'])} of the records the node "
            f"judged, {show(fog['node_records']['withheld'])} withheld"
        )
    if report["errors"]:
        lines.append("errors      " + ", ".join(f"{k}={v}" for k, v in report["errors"].items()))
    lines += [f"WARNING     invalid run: {reason}" for reason in report["invalid_reasons"]]
    return "\n".join(lines)
