"""The bots' report: JSON for machines (field names are stable), a summary for people.

Every figure comes from a measurement: RTTs from the bots' own ping/pong round trips through
their modelled links, tick durations from the server's ``/health``, prediction error from
reconciliation, bandwidth from the bytes the bots' sockets carried.

A report is built from a tally (:mod:`client_sim.tally`), never from raw samples, so that
the tallies of several processes (workers, shards on other machines) merge into the report
one process would have written.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from client_sim.bot import FailoverEvent
from client_sim.fairness import CAUSES, RULE_CAUSES
from client_sim.report_series import merge_samples, series
from client_sim.report_validity import invalid_reasons
from client_sim.shooting import ShotSummary
from client_sim.sketch import Sketch
from client_sim.swarm import ProcessFigures, SwarmResult
from client_sim.tally import COUNTED, DISTRIBUTED, RTT_BINS_MS, SecondTally, Tally

__all__ = [
    "RTT_BUCKETS_MS",
    "build_report",
    "format_summary",
    "node_account",
    "observed_kills",
    "report_of",
    "shot_figures",
    "shot_figures_of",
    "tally_of",
]

#: Upper bounds of the RTT buckets of ``shots.by_rtt`` (the last is open-ended).
RTT_BUCKETS_MS = (50, 100, 150, 200)
MAX_UNEXPLAINED_SHOWN = 20  # unexplained shots the report lists whole
WEAPON_NAMES = ("rifle", "launcher")  # by weapon index
MAX_DISPUTED_SHOWN = 1000  # disputed shots the report lists (a bound on its size)


def _ratio(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


#: The counts a group of shots is tallied by: each a predicate over one shot.
SHOT_COUNTS: dict[str, Callable[[ShotSummary], bool]] = {
    "fired": lambda s: True,
    "judged": lambda s: s.server_result is not None,
    "client_hits": lambda s: s.client_hit,
    "server_hits": lambda s: s.server_result == "hit",
    "rejected": lambda s: s.server_result == "rejected",
    "agreed": lambda s: s.server_result is not None and s.agrees,
    "judged_client_hits": lambda s: s.server_result is not None and s.client_hit,
    "judged_client_hits_missed": lambda s: s.server_result not in (None, "hit") and s.client_hit,
    "judged_client_misses": lambda s: s.server_result is not None and not s.client_hit,
    "judged_client_misses_hit": lambda s: s.server_result == "hit" and not s.client_hit,
    "fair": lambda s: s.server_result is not None and s.rule is None,
    "fair_agreed": lambda s: s.server_result is not None and s.rule is None and s.cause is None,
    "fair_client_hits": lambda s: s.server_result is not None and s.rule is None and s.client_hit,
    "fair_client_hits_missed": lambda s: (
        s.server_result not in (None, "hit") and s.rule is None and s.client_hit
    ),
    "fair_server_hits": lambda s: s.server_result == "hit" and s.rule is None,
    "fair_server_hits_unseen": lambda s: (
        s.server_result == "hit" and s.rule is None and not s.client_hit
    ),
    **{
        f"cause:{cause}": (lambda c: lambda s: s.server_result is not None and s.cause == c)(cause)
        for cause in CAUSES
    },
    **{
        f"rule:{rule}": (lambda r: lambda s: s.server_result is not None and s.rule == r)(rule)
        for rule in RULE_CAUSES
    },
}


def shot_counts(shots: list[ShotSummary]) -> dict[str, int]:
    """The counts :func:`shot_figures_of` needs: they add over processes."""
    return {name: sum(1 for s in shots if holds(s)) for name, holds in SHOT_COUNTS.items()}


def shot_figures(shots: list[ShotSummary]) -> dict[str, Any]:
    """Client versus server verdicts of ``shots`` (:func:`shot_figures_of`)."""
    return shot_figures_of(shot_counts(shots))


def shot_figures_of(counts: Mapping[str, float]) -> dict[str, Any]:
    """Client versus server verdicts, from :func:`shot_counts` (summed over processes).
    A rate is ``None`` when its denominator is 0.

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
    c = {name: int(counts.get(name, 0)) for name in SHOT_COUNTS}
    return {
        "fired": c["fired"],
        "judged": c["judged"],
        "unresolved": c["fired"] - c["judged"],
        "client_hits": c["client_hits"],
        "server_hits": c["server_hits"],
        "rejected": c["rejected"],
        "agreement": _ratio(c["agreed"], c["judged"]),
        "false_negative_rate": _ratio(c["judged_client_hits_missed"], c["judged_client_hits"]),
        "false_positive_rate": _ratio(c["judged_client_misses_hit"], c["judged_client_misses"]),
        "fair_judged": c["fair"],
        "fair_agreement": _ratio(c["fair_agreed"], c["fair"]),
        "fair_false_negative_rate": _ratio(c["fair_client_hits_missed"], c["fair_client_hits"]),
        "fair_false_positive_rate": _ratio(c["fair_server_hits_unseen"], c["fair_server_hits"]),
        "disagreements_by_cause": {cause: c[f"cause:{cause}"] for cause in CAUSES},
        "decided_by_rule": {rule: c[f"rule:{rule}"] for rule in RULE_CAUSES},
    }


def _tally_shots(tally: Tally, shots: list[ShotSummary]) -> None:
    """Shots as counts: over all, by measured RTT, by the link's RTT, by weapon; the RTT
    estimates as sketches; the first unexplained disagreements whole."""
    groups: dict[str, list[ShotSummary]] = {"shots/all": shots}
    for shot in shots:
        groups.setdefault(f"shots/by_rtt/{_bucket(shot.rtt_ms)}", []).append(shot)
        groups.setdefault(f"shots/by_link_rtt/{_bucket(shot.link_rtt_ms)}", []).append(shot)
        groups.setdefault(f"shots/by_weapon/{WEAPON_NAMES[shot.weapon]}", []).append(shot)
    for prefix, members in groups.items():
        for name, count in shot_counts(members).items():
            tally.count(f"{prefix}/{name}", count)
    both = [s for s in shots if s.server_rtt_ms == s.server_rtt_ms]
    tally.count("shots/rtt/shots", len(both))
    tally.sketch("shots.rtt.server").add([s.server_rtt_ms for s in both])
    tally.sketch("shots.rtt.bots_measured").add([s.rtt_ms for s in both])
    tally.sketch("shots.rtt.link").add([s.link_rtt_ms for s in both])
    tally.sketch("shots.rtt.server_minus_link").add([s.server_rtt_ms - s.link_rtt_ms for s in both])
    tally.event_list("unexplained_shots").extend(
        [s.detail for s in shots if s.detail][:MAX_UNEXPLAINED_SHOWN]
    )
    tally.event_list("disputed_shots").extend(
        [s.disputed for s in shots if s.disputed][:MAX_DISPUTED_SHOWN]
    )


def _shot_groups(tally: Tally, prefix: str) -> dict[str, dict[str, float]]:
    """The shot counts under ``prefix`` (e.g. ``shots/by_rtt``), by group, in bucket order."""
    groups: dict[str, dict[str, float]] = {}
    for key, count in tally.group(prefix).items():
        group, name = key.rsplit("/", 1)
        groups.setdefault(group, {})[name] = count
    return {g: groups[g] for g in sorted(groups, key=_bucket_order) if groups[g].get("fired")}


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


def _tally_hits_checked(tally: Tally, hits: list[tuple[float, bool]]) -> None:
    for rtt, cover in hits:
        tally.count(f"cover/{_bucket(rtt)}/hits", 1)
        tally.count(f"cover/{_bucket(rtt)}/behind", int(cover))


def behind_cover_by_shooter_rtt(hits: list[tuple[float, bool]]) -> dict[str, Any]:
    """Hits received and checked, bucketed by the server's RTT estimate of the shooter:
    how many, and the share that reached a victim already behind cover on its screen."""
    tally = Tally()
    _tally_hits_checked(tally, hits)
    return _behind_cover_of(tally)


def _behind_cover_of(tally: Tally) -> dict[str, Any]:
    buckets: dict[str, dict[str, int]] = {}
    for key, count in tally.group("cover").items():
        bucket, name = key.rsplit("/", 1)
        buckets.setdefault(bucket, {})[name] = int(count)
    return {
        bucket: {
            "hits": buckets[bucket].get("hits", 0),
            "behind_cover_rate": _ratio(
                buckets[bucket].get("behind", 0), buckets[bucket].get("hits", 0)
            ),
        }
        for bucket in sorted(buckets, key=_bucket_order)
    }


def rtt_agreement(shots: list[ShotSummary]) -> dict[str, Any]:
    """The server's RTT estimate of each shooter against the bots' own measurement and the
    link's configured RTT, at the shots where the server had one (medians, ms, within the
    sketches' relative accuracy)."""
    tally = Tally()
    _tally_shots(tally, shots)
    return _rtt_agreement_of(tally)


def _rtt_agreement_of(tally: Tally) -> dict[str, Any]:
    return {
        "shots": tally.total("shots/rtt/shots"),
        **{
            f"{name}_p50": _quantile(tally, f"shots.rtt.{name}", 50)
            for name in ("server", "bots_measured", "link", "server_minus_link")
        },
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


def rtt_histogram(tally: Tally) -> dict[str, Any]:
    """Measured RTTs against the bots' modelled link RTTs, on fixed bins (ms; what does
    not fit is counted in ``overflow``): what the report's RTT picture draws. A starved
    bot process shows here as a measured distribution shifted right of its model."""
    low, width, bins = RTT_BINS_MS
    measured = tally.histogram("rtt.measured_ms", low, width, bins)
    model = tally.histogram("rtt.model_ms", low, width, bins)
    return {
        "edges_ms": measured.edges,
        "measured": list(measured.counts),
        "model": list(model.counts),
        "overflow": {"measured": measured.overflow, "model": model.overflow},
    }


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


def _quantile(tally: Tally, name: str, q: float, scale: float = 1.0) -> float | None:
    value = tally.sketch(name).quantile(q / 100.0)
    return None if value is None else round(value * scale, 3)


def _per_bot_per_s(tally: Tally, name: str, scale: float = 1.0) -> float | None:
    """A per-bot total's mean over the bots that reported it, per second of the run."""
    bots, seconds = tally.total(f"{name}/bots"), tally.maxima.get("duration_s", 0.0)
    if not bots or seconds <= 0:
        return None
    return tally.counts.get(name, 0) / bots * scale / seconds


def bot_process_figures(tally: Tally) -> dict[str, Any]:
    """Whether the bot processes kept up: each loop's ticks per second against the target
    (the slowest process's), and CPU seconds per wall second (summed over processes: 1.0
    is one core busy). A bot-tick is one bot's share of one loop iteration."""
    processes = [ProcessFigures(**p) for p in tally.events.get("processes", [])]
    rates = [p.tick_hz for p in processes if p.tick_hz is not None]
    target = max((p.target_hz for p in processes), default=0) or None
    wall = max((p.wall_s for p in processes), default=0.0)
    cpu_s = tally.counts.get("bot_process/cpu_s", 0.0)
    light_cpu_s = tally.counts.get("bot_process/light_cpu_s", 0.0)
    ticks = int(tally.maxima.get("swarm_ticks", 0))
    bot_ticks = max(1, ticks * max(tally.total("bots.connected"), 1))
    light_ticks = ticks * tally.total("bots.light.connected")
    tick_hz = round(min(rates), 2) if rates else None
    return {
        "target_hz": target,
        "tick_hz": tick_hz,
        "tick_ratio": round(tick_hz / target, 4) if tick_hz is not None and target else None,
        # (kept for the server-load bench: the same figure as tick_hz)
        "ticks_per_s": tick_hz,
        "cpu_s": round(cpu_s, 3),
        "cpu_cores": round(sum(p.cpu_s for p in processes) / wall, 3) if wall > 0 else None,
        # The full bots' share: the process's CPU less the light players' own work.
        "cpu_us_per_bot_tick": round((cpu_s - light_cpu_s) / bot_ticks * 1e6, 2),
        # A process of light players only: all its CPU; beside full bots: their own work
        # (inputs, sends, snapshot heads), timed.
        "cpu_us_per_light_bot_tick": (
            round(light_cpu_s / light_ticks * 1e6, 2) if light_ticks else None
        ),
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


def _failover_events(tally: Tally) -> list[FailoverEvent]:
    """The failovers the bots saw, ``lost_at`` on the wall clock."""
    return [FailoverEvent(**e) for e in tally.events.get("failovers", [])]


def _timeline(events: list[FailoverEvent], origin: float) -> list[list[float | None]]:
    """Each bot's outage: [seconds since ``origin`` of its last snapshot before the loss,
    its stall in ms (None: it never resumed)]."""
    return [
        [
            round(e.lost_at - origin, 3),
            None if e.stall_s is None else round(e.stall_s * 1000.0, 1),
        ]
        for e in events
    ]


def tally_of(result: SwarmResult) -> Tally:
    """One process's measurements as a tally (:mod:`client_sim.tally`): what a worker
    sends its parent and a shard writes as its part."""
    tally = Tally(partial=result.partial)
    for path, attribute in COUNTED.items():
        value = getattr(result, attribute)
        tally.count(path, sum(value) if isinstance(value, list) else value)
    for name, distribution in DISTRIBUTED.items():
        values = np.asarray(getattr(result, distribution.attribute), dtype=np.float64)
        tally.sketch(name).add(values * distribution.scale)
    tally.maxima["duration_s"] = result.duration_s
    tally.maxima["swarm_ticks"] = result.swarm_ticks
    tally.count("bot_process/cpu_s", result.cpu_s)
    tally.count("bot_process/light_cpu_s", result.light_cpu_s)
    for name, per_bot in (
        ("bytes_down", result.bytes_down),
        ("bytes_up", result.bytes_up),
        ("snapshots", result.snapshots),
    ):
        tally.count(name, sum(per_bot))
        tally.count(f"{name}/bots", len(per_bot))
    low, width, bins = RTT_BINS_MS
    tally.histogram("rtt.measured_ms", low, width, bins).add(np.asarray(result.rtt_samples) * 1e3)
    tally.histogram("rtt.model_ms", low, width, bins).add(np.asarray(result.link_rtts) * 1e3)
    _tally_shots(tally, result.shots)
    _tally_hits_checked(tally, result.hits_checked)
    tally.count("shots/hits_behind_cover", result.hits_behind_cover)
    for group, counts in (("fog", result.fog), ("errors", result.errors),
                          ("ended_on", result.node_urls),
                          ("transport", result.transports)):  # fmt: skip
        for key, count in counts.items():
            tally.count(f"{group}/{key}", count)
    wall = result.clock_to_wall
    tally.event_list("failovers").extend(
        {**dataclasses.asdict(e), "lost_at": e.lost_at + wall} for e in result.failovers
    )
    tally.event_list("sightings").extend(
        [node, seer, seen, at + wall] for node, seer, seen, at in result.sightings
    )
    tally.event_list("processes").extend(dataclasses.asdict(p) for p in result.processes)
    for sample in merge_samples(result.samples):
        tally.seconds.append(
            SecondTally(
                at=sample.at, seconds=sample.seconds, ticks=sample.ticks, cpu_s=sample.cpu_s,
                bots=sample.bots, bytes_down=sample.bytes_down, bytes_up=sample.bytes_up,
                shots=sample.shots, agreed=sample.agreed, rtt=Sketch().add(sample.rtts),
            )
        )  # fmt: skip
    return tally


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
    """The report of one run measured in this process (:func:`report_of` its tally)."""
    tally = tally_of(result)
    tally.server = node_account(
        latency_spec=latency_spec,
        server_before=server_before,
        server_after=server_after,
        kills=kills,
        server=server,
        origin=origin,
    )
    return report_of(tally, workers=workers)


def node_account(
    *,
    latency_spec: str,
    server_before: dict[str, Any] | None,
    server_after: dict[str, Any] | None,
    kills: list[dict[str, Any]] | None = None,
    server: dict[str, Any] | None = None,
    origin: float | None = None,
) -> dict[str, Any]:
    """A tally's ``server``: what the node said and what this process did to it.
    ``server``: :func:`client_sim.report_server.server_figures` (tick-duration histogram
    and series); ``origin``: the run's start (wall clock), the zero of every series."""
    return {
        "latency_spec": latency_spec,
        "before": server_before,
        "after": server_after,
        "kills": list(kills or []),
        "watch": server or {},
        "origin": origin,
    }


def report_of(tally: Tally, *, workers: int | None = None) -> dict[str, Any]:
    """The report a tally makes: of one process, or of every worker and shard merged.
    ``workers``: the processes that ran the bots (default: those in the tally)."""
    node = tally.server
    before, after_or_none = node.get("before"), node.get("after")
    after = after_or_none or {}
    seconds = tally.seconds
    origin = node.get("origin")
    if origin is None:
        origin = seconds[0].at - seconds[0].seconds if seconds else 0.0
    events = _failover_events(tally)
    kills = observed_kills(events, list(node.get("kills") or []), after_or_none, 0.0)
    server = node.get("watch") or {}
    served = skipped = None
    if before is not None and after_or_none is not None:
        served = int(after["tick"]) - int(before["tick"])
        if "ticks_skipped" in after:
            skipped = int(after["ticks_skipped"]) - int(before.get("ticks_skipped", 0))
    # The share of the inputs due an acknowledgement by the end that had one (the run's
    # last round trip is still in flight); a tally from before that count: of all sent.
    acked, sent = tally.total("inputs.acked_due"), tally.total("inputs.due")
    if not sent:
        acked, sent = tally.total("inputs.acked"), tally.total("inputs.sent")
    processes = len(tally.events.get("processes", []))
    received = _per_bot_per_s(tally, "snapshots")
    down, up = (_per_bot_per_s(tally, name, 8 / 1000) for name in ("bytes_down", "bytes_up"))
    transports = sorted(tally.group("transport"))
    report: dict[str, Any] = {
        "partial": tally.partial,
        # The bots' transport ("ws" or "udp"; "mixed" for parts that differ).
        "transport": transports[0] if len(transports) == 1 else "mixed" if transports else None,
        "valid": True,
        "invalid_reasons": [],
        "bots": {
            "requested": tally.total("bots.requested"),
            "connected": tally.total("bots.connected"),
            "workers": workers if workers is not None else processes,
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
            "model": node.get("latency_spec", ""),
            "histogram": rtt_histogram(tally),
        },
        "prediction": {},
        "bandwidth": {
            "down_kbps_per_bot": None if down is None else round(down, 2),
            "up_kbps_per_bot": None if up is None else round(up, 2),
        },
        "inputs": {"acked_ratio": round(acked / sent, 4) if sent else None},
        "snapshots": {"per_bot_per_s": None if received is None else round(received, 2)},
        "shots": {
            **shot_figures_of(tally.group("shots/all")),
            # Each unexplained disagreement (a bug somewhere): both verdicts and their grounds.
            "unexplained_shots": tally.events.get("unexplained_shots", [])[:MAX_UNEXPLAINED_SHOWN],
            # Every shot whose verdicts differ, by tick and shooter (its place in a match log).
            "disputed": sorted(
                tally.events.get("disputed_shots", []),
                key=lambda d: (d["tick"], d["shooter"], d["seq"]),
            )[:MAX_DISPUTED_SHOWN],
            "by_rtt": {
                k: shot_figures_of(v) for k, v in _shot_groups(tally, "shots/by_rtt").items()
            },
            "by_link_rtt": {
                k: shot_figures_of(v) for k, v in _shot_groups(tally, "shots/by_link_rtt").items()
            },
            "by_weapon": {
                name: shot_figures_of(tally.group(f"shots/by_weapon/{name}"))
                for name in WEAPON_NAMES
            },
            "behind_cover_rate": _ratio(
                tally.total("shots/hits_behind_cover"), tally.total("shots.hits_received")
            ),
            "behind_cover_by_shooter_rtt": _behind_cover_of(tally),
            "peekers_advantage_ms": peekers_advantage(
                [tuple(s) for s in tally.events.get("sightings", [])]
            ),
            "rtt_ms": _rtt_agreement_of(tally),
            "server": after.get("combat"),
        },
        "fog": fog_figures(
            {k: int(v) for k, v in tally.group("fog").items()}, before, after_or_none
        ),
        "failover": {
            **failover_figures(events, kills),
            # Where the bots played at the end (after a failover: the survivor).
            "ended_on": {k: int(v) for k, v in tally.group("ended_on").items()},
            "timeline": _timeline(events, origin),
            "kill_times": [round(k["killed_at"] - origin, 3) for k in kills if "killed_at" in k],
        },
        "bot_process": bot_process_figures(tally),
        "duration_s": round(tally.maxima.get("duration_s", 0.0), 3),
        "errors": {k: int(v) for k, v in tally.group("errors").items()},
        "series": {**series(seconds, origin), "server": server.get("series")},
    }
    for path in COUNTED:
        _place(report, path, tally.total(path))
    for name, distribution in DISTRIBUTED.items():
        for q in distribution.quantiles:
            _place(report, distribution.template.format(q=q), _quantile(tally, name, q))
        if distribution.samples:
            _place(report, distribution.samples, tally.sketch(name).count)
    if node.get("routing"):
        report["routing"] = node["routing"]
    if tally.population.get("of", 1) > 1:
        report["bots"]["shards"] = _shards_figures(tally.population)
    reasons = invalid_reasons(report)
    reasons += [r for r in tally.invalid_reasons if r not in reasons]
    report["valid"], report["invalid_reasons"] = not reasons, reasons
    return report


def _shards_figures(population: dict[str, Any]) -> dict[str, Any]:
    of = int(population["of"])
    return {"of": of, "merged": sorted(population.get("shards", []))}


def _place(report: dict[str, Any], path: str, value: Any) -> None:
    """Set the report's dotted ``path`` (its sections made where missing)."""
    *sections, leaf = path.split(".")
    target = report
    for section in sections:
        target = target.setdefault(section, {})
    target[leaf] = value


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
    snaps = report["snapshots"]
    proc = report["bot_process"]
    ratio = proc["tick_ratio"]
    lines = ["PARTIAL     interrupted: the run ended early"] if report.get("partial") else []
    lines += [
        f"bots        {b['connected']}/{b['requested']} connected ({b['workers']} worker(s))"
        + (
            f", light players {light['connected']}/{light['requested']} "
            f"({show(proc.get('cpu_us_per_light_bot_tick'), ' us')} CPU a light bot-tick)"
            if (light := b.get("light") or {}).get("requested")
            else ""
        ),
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
        f"inputs      {inp['acked']}/{inp['sent']} acknowledged (of those due by the end: "
        f"{show(inp['acked_ratio'])}), {inp['resent']} sent again, "
        f"{inp['recovered_by_redundancy']} recovered by redundancy",
        f"snapshots   over {report.get('transport')}: longest gap per bot p50 "
        f"{show(snaps['longest_gap_ms_p50'], ' ms')}, "
        f"p99 {show(snaps['longest_gap_ms_p99'], ' ms')}, {snaps['lost']} lost",
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
