"""The bots' report: JSON for machines (field names are stable), a summary for people.

Every figure comes from a measurement: RTTs from the bots' own ping/pong round trips through
their modelled links, tick durations from the server's ``/health``, prediction error from
reconciliation, bandwidth from the bytes the bots' sockets carried.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from client_sim.bot import FailoverEvent
from client_sim.shooting import ShotSummary
from client_sim.swarm import SwarmResult

__all__ = ["RTT_BUCKETS_MS", "build_report", "format_summary", "shot_figures"]

#: Upper bounds of the RTT buckets of ``shots.by_rtt`` (the last is open-ended).
RTT_BUCKETS_MS = (50, 100, 150, 200)


def _ratio(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def shot_figures(shots: list[ShotSummary]) -> dict[str, Any]:
    """Client versus server verdicts. A rate is ``None`` when its denominator is 0.

    ``agreement``: share of judged shots where both said "no player hit" or both named the
    same victim. ``false_negative_rate``: of the shots the shooter saw hit, the share the
    server called a miss. ``false_positive_rate``: of the shots the shooter saw miss, the
    share the server called a hit.
    """
    judged = [s for s in shots if s.server_result is not None]
    client_hits = [s for s in judged if s.client_hit]
    client_misses = [s for s in judged if not s.client_hit]
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
    }


def failover_figures(
    events: list[FailoverEvent], kills: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """What the bots saw of lost primaries; with ``kills`` (one per kill: ``killed_at`` and
    the new primary's ``failover`` health entry), the server-side timings too.

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
        "stall_ms_p99": _pct(stalls, 99),
        "stall_ms_max": round(max(stalls), 3) if stalls else None,
        "acked_ticks_lost": ticks_lost if promoted_at_tick else None,
        "inputs_lost": sum(max(0, e.ack_before - e.ack_after) for e in resumed),
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


def build_report(
    result: SwarmResult,
    *,
    latency_spec: str,
    workers: int,
    server_before: dict[str, Any] | None,
    server_after: dict[str, Any] | None,
    kills: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    after = server_after or {}
    served = None
    if server_before is not None and server_after is not None:
        served = int(server_after["tick"]) - int(server_before["tick"])
    bot_ticks = max(1, result.swarm_ticks * max(result.connected, 1))
    acked = sum(result.inputs_acked)
    sent = sum(result.inputs_sent)
    return {
        "bots": {
            "requested": result.requested,
            "connected": result.connected,
            "workers": workers,
        },
        "ticks": {
            "rate_hz": after.get("tick_rate"),
            "served": served,
            "p50_ms": after.get("tick_ms_p50"),
            "p99_ms": after.get("tick_ms_p99"),
            "overruns": after.get("tick_overruns"),
        },
        "latency_ms": {
            "model": latency_spec,
            "rtt_p50": _pct(result.rtt_samples, 50, 1000.0),
            "rtt_p99": _pct(result.rtt_samples, 99, 1000.0),
            "samples": len(result.rtt_samples),
        },
        "prediction": {
            "error_p50_m": _pct(result.prediction_errors, 50),
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
            "by_rtt": {
                bucket: shot_figures([s for s in result.shots if _bucket(s.rtt_ms) == bucket])
                for bucket in sorted({_bucket(s.rtt_ms) for s in result.shots}, key=_bucket_order)
            },
            "by_weapon": {
                name: shot_figures([s for s in result.shots if s.weapon == weapon])
                for weapon, name in enumerate(("rifle", "launcher"))
            },
            "hits_received": result.hits_received,
            "behind_cover_rate": _ratio(result.hits_behind_cover, result.hits_received),
            "server": after.get("combat"),
        },
        "failover": failover_figures(result.failovers, kills),
        "bot_process": {
            "cpu_s": round(result.cpu_s, 3),
            "cpu_us_per_bot_tick": round(result.cpu_s / bot_ticks * 1e6, 2),
            "ticks_per_s": (
                round(result.swarm_ticks / result.duration_s, 2) if result.duration_s > 0 else None
            ),
        },
        "duration_s": round(result.duration_s, 3),
        "errors": result.errors,
    }


def _bucket_order(bucket: str) -> float:
    return float("inf") if bucket == "unknown" else float(bucket.split("-")[0].rstrip("ms+"))


def format_summary(report: dict[str, Any]) -> str:
    def show(value: object, unit: str = "") -> str:
        return "n/a" if value is None else f"{value}{unit}"

    b, t, lat = report["bots"], report["ticks"], report["latency_ms"]
    p, bw, inp = report["prediction"], report["bandwidth"], report["inputs"]
    lines = [
        f"bots        {b['connected']}/{b['requested']} connected ({b['workers']} worker(s))",
        f"server      {show(t['served'])} ticks at {show(t['rate_hz'])} Hz, tick p50 "
        f"{show(t['p50_ms'], ' ms')}, p99 {show(t['p99_ms'], ' ms')}, "
        f"overruns {show(t['overruns'])}",
        f"latency     measured RTT p50 {show(lat['rtt_p50'], ' ms')}, p99 "
        f"{show(lat['rtt_p99'], ' ms')} (model {lat['model']})",
        f"prediction  error p50 {show(p['error_p50_m'], ' m')}, p99 {show(p['error_p99_m'], ' m')}",
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
            f"{show(failover['stall_ms_p50'], ' ms')}, p99 {show(failover['stall_ms_p99'], ' ms')}"
            f", max {show(failover['stall_ms_max'], ' ms')}; acked ticks lost "
            f"{show(failover['acked_ticks_lost'])}, inputs lost {failover['inputs_lost']}"
        )
    if report["errors"]:
        lines.append("errors      " + ", ".join(f"{k}={v}" for k, v in report["errors"].items()))
    return "\n".join(lines)
