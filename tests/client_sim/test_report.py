"""The bots' report: shot rates and their denominators, RTT buckets, stable field names."""

from __future__ import annotations

import json
import math
import re
from typing import Any

import pytest

from client_sim.fairness import CAUSES
from client_sim.report import (
    behind_cover_by_shooter_rtt,
    build_report,
    format_summary,
    peekers_advantage,
    shot_figures,
)
from client_sim.shooting import ShotSummary
from client_sim.swarm import SwarmResult


def summary(
    client_hit: bool,
    server_result: str | None,
    agrees: bool,
    rtt_ms: float = 40.0,
    weapon: int = 0,
    cause: str | None = None,
    rule: str | None = None,
    link_rtt_ms: float = 40.0,
    server_rtt_ms: float = 42.0,
) -> ShotSummary:
    if cause is None and not agrees and server_result is not None:
        cause = "unexplained"
    return ShotSummary(
        weapon, rtt_ms, client_hit, server_result, agrees, link_rtt_ms, rule, cause,
        server_rtt_ms,
    )  # fmt: skip


MIXED = [
    summary(True, "hit", True),
    summary(True, "miss", False, cause="claim_clamped"),  # false negative
    summary(False, "hit", False),  # false positive
    summary(False, "miss", True),
    summary(False, "rejected", True, rule="shooter_dead"),  # a rule, and they agree
    summary(True, None, False),  # unresolved: no verdict before the end
]
NO_CAUSES = dict.fromkeys(CAUSES, 0)


def test_shot_figures_count_and_rate_with_their_documented_denominators() -> None:
    assert shot_figures(MIXED) == {
        "fired": 6,
        "judged": 5,
        "unresolved": 1,
        "client_hits": 3,  # every shot the shooters saw hit, judged or not
        "server_hits": 2,
        "rejected": 1,
        "agreement": 0.6,  # 3 of the 5 judged
        "false_negative_rate": 0.5,  # 1 of the 2 judged client hits
        "false_positive_rate": 0.3333,  # 1 of the 3 judged client misses
        "fair_judged": 4,  # the rejected shot was the rule's
        "fair_agreement": 0.5,
        "fair_false_negative_rate": 0.5,
        "fair_false_positive_rate": 0.5,  # 1 of the 2 server hits the shooter saw miss
        "disagreements_by_cause": {**NO_CAUSES, "claim_clamped": 1, "unexplained": 1},
        "decided_by_rule": {
            "shooter_dead": 1,
            "beyond_cap": 0,
            "victim_already_dead": 0,
            "victim_not_shown": 0,
        },
    }


def test_rule_outcomes_leave_fair_agreement_but_count_among_the_causes() -> None:
    shots = [
        summary(True, "hit", True),
        summary(True, "rejected", False, cause="shooter_dead", rule="shooter_dead"),
        summary(True, "miss", False, cause="beyond_cap", rule="beyond_cap"),
        summary(True, "hit", True, cause="victim_already_dead", rule="victim_already_dead"),
        summary(False, "hit", False, cause="shooter_position"),
    ]
    figures = shot_figures(shots)
    assert (figures["agreement"], figures["fair_judged"], figures["fair_agreement"]) == (
        0.4, 2, 0.5,
    )  # fmt: skip
    assert figures["disagreements_by_cause"] == {
        **NO_CAUSES, "shooter_dead": 1, "beyond_cap": 1, "victim_already_dead": 1,
        "shooter_position": 1,
    }  # fmt: skip


def test_a_client_hit_on_the_wrong_victim_is_no_false_negative_but_a_disagreement() -> None:
    figures = shot_figures([summary(True, "hit", False)])
    assert figures["false_negative_rate"] == 0.0
    assert figures["agreement"] == 0.0


def test_rates_are_none_when_their_denominator_is_zero() -> None:
    empty = shot_figures([])
    assert empty["fired"] == 0
    assert (empty["agreement"], empty["false_negative_rate"], empty["false_positive_rate"]) == (
        None,
        None,
        None,
    )
    only_hits = shot_figures([summary(True, "hit", True)])
    assert only_hits["false_negative_rate"] == 0.0
    assert only_hits["false_positive_rate"] is None
    only_misses = shot_figures([summary(False, "miss", True)])
    assert only_misses["false_negative_rate"] is None
    assert only_misses["false_positive_rate"] == 0.0
    unresolved = shot_figures([summary(True, None, False)])
    assert (unresolved["judged"], unresolved["agreement"]) == (0, None)
    assert unresolved["false_negative_rate"] is None


def swarm_result(**overrides: Any) -> SwarmResult:
    result = SwarmResult(
        requested=10,
        connected=9,
        duration_s=2.0,
        cpu_s=0.5,
        swarm_ticks=120,
        rtt_samples=[0.010, 0.020, 0.030],
        prediction_errors=[0.0, 0.0, 0.5],
        bytes_down=[10_000, 20_000],
        bytes_up=[1_000, 3_000],
        snapshots=[100, 140],
        inputs_sent=[120, 120],
        inputs_acked=[110, 100],
        inputs_due=[112, 104],  # (sent up to the ack grace before the end)
        inputs_acked_due=[110, 100],
        inputs_resent=12,
        inputs_recovered=5,
        longest_gaps=[0.07] * 60 + [0.3] * 40,
        snapshots_lost=4,
        transports={"udp": 10},
        interpolation_misses=3,
        shots=list(MIXED),
        hits_received=4,
        hits_behind_cover=1,
    )
    for name, value in overrides.items():
        setattr(result, name, value)
    return result


SERVER_BEFORE = {"tick": 1000, "ticks_skipped": 3}
SERVER_AFTER = {
    "tick": 1120,
    "ticks_skipped": 10,
    "tick_rate": 60,
    "tick_ms_p50": 0.4,
    "tick_ms_p99": 1.5,
    "tick_overruns": 0,
    "combat": {"kills": 2},
}


def full_report(**overrides: Any) -> dict[str, Any]:
    return build_report(
        swarm_result(**overrides),
        latency_spec="fixed:40",
        workers=1,
        server_before=SERVER_BEFORE,
        server_after=SERVER_AFTER,
    )


STABLE_FIELDS = [
    "bots.requested",
    "bots.connected",
    "ticks.rate_hz",
    "ticks.served",
    "ticks.p50_ms",
    "ticks.p99_ms",
    "latency_ms.rtt_p50",
    "latency_ms.rtt_p99",
    "prediction.error_p99_m",
    "bandwidth.down_kbps_per_bot",
    "bandwidth.up_kbps_per_bot",
    "shots.fired",
    "shots.client_hits",
    "shots.server_hits",
    "shots.agreement",
    "shots.false_negative_rate",
    "shots.false_positive_rate",
    "shots.by_rtt",
    "shots.behind_cover_rate",
    "shots.fair_agreement",
    "ticks.skipped",
]


def field(report: dict[str, Any], dotted: str) -> Any:
    value: Any = report
    for part in dotted.split("."):
        assert isinstance(value, dict) and part in value, dotted
        value = value[part]
    return value


def test_the_report_lists_each_unexplained_shot_whole_and_no_other() -> None:
    detail = {"seq": 7, "server_result": "miss", "client_victim": 3}
    odd = ShotSummary(0, 40.0, True, "miss", False, 40.0, None, "unexplained", 42.0, detail)
    report = full_report(shots=[*MIXED, odd])
    assert report["shots"]["unexplained_shots"] == [detail]
    assert full_report()["shots"]["unexplained_shots"] == []


def test_the_report_lists_every_disputed_shot_by_tick_and_shooter() -> None:
    late = {"tick": 90, "shooter": 2, "seq": 5, "cause": "beyond_cap"}
    early = {"tick": 30, "shooter": 4, "seq": 1, "cause": "shooter_dead"}
    disputed = [
        ShotSummary(0, 40.0, True, "miss", False, cause=d["cause"], disputed=d)
        for d in (late, early)
    ]
    report = full_report(shots=[*MIXED, *disputed])
    assert report["shots"]["disputed"] == [early, late]
    assert full_report()["shots"]["disputed"] == []


def test_the_report_keeps_its_stable_field_names_with_measured_values() -> None:
    report = full_report()
    values = {name: field(report, name) for name in STABLE_FIELDS}
    by_rtt = values.pop("shots.by_rtt")
    assert values == {
        "bots.requested": 10,
        "bots.connected": 9,
        "ticks.rate_hz": 60,
        "ticks.served": 120,
        "ticks.p50_ms": 0.4,
        "ticks.p99_ms": 1.5,
        # Percentiles from a sketch: the value at the rank (no interpolation between
        # samples), within its 1 % relative accuracy.
        "latency_ms.rtt_p50": pytest.approx(20.0, rel=0.01),
        "latency_ms.rtt_p99": pytest.approx(20.0, rel=0.01),
        "prediction.error_p99_m": 0.0,
        "bandwidth.down_kbps_per_bot": 60.0,  # 15 kB mean * 8 / 1000 / 2 s
        "bandwidth.up_kbps_per_bot": 8.0,
        "shots.fired": 6,
        "shots.client_hits": 3,
        "shots.server_hits": 2,
        "shots.agreement": 0.6,
        "shots.false_negative_rate": 0.5,
        "shots.false_positive_rate": 0.3333,
        "shots.behind_cover_rate": 0.25,
        "shots.fair_agreement": 0.5,
        "ticks.skipped": 7,
    }
    assert by_rtt == {"0-50ms": shot_figures(MIXED)}
    assert report["shots"]["by_link_rtt"] == {"0-50ms": shot_figures(MIXED)}
    assert report["shots"]["rtt_ms"] == {
        "shots": 6, "server_p50": pytest.approx(42.0, rel=0.01),
        "bots_measured_p50": pytest.approx(40.0, rel=0.01),
        "link_p50": pytest.approx(40.0, rel=0.01),
        "server_minus_link_p50": pytest.approx(2.0, rel=0.01),
    }  # fmt: skip
    assert report["shots"]["server"] == {"kills": 2}
    assert report["inputs"] == {
        "sent": 240, "acked": 210, "due": 216, "acked_due": 210, "acked_ratio": 0.9722,
        "resent": 12, "recovered_by_redundancy": 5,
    }  # fmt: skip
    assert report["transport"] == "udp"
    assert report["snapshots"]["lost"] == 4
    assert report["snapshots"]["longest_gap_ms_p50"] == pytest.approx(70.0, rel=0.01)
    assert report["snapshots"]["longest_gap_ms_p99"] == pytest.approx(300.0, rel=0.01)
    summary = format_summary(report)
    assert "12 sent again, 5 recovered by redundancy" in summary
    assert "over udp: longest gap per bot p50 70" in summary
    json.dumps(report, allow_nan=False)  # plain JSON for machines


@pytest.mark.parametrize(
    ("rtt_ms", "bucket"),
    [
        (0.0, "0-50ms"),
        (49.9, "0-50ms"),
        (50.0, "50-100ms"),
        (99.99, "50-100ms"),
        (100.0, "100-150ms"),
        (199.9, "150-200ms"),
        (200.0, "200ms+"),
        (5000.0, "200ms+"),
        (math.nan, "unknown"),
    ],
)
def test_shots_are_bucketed_by_the_shooter_s_rtt(rtt_ms: float, bucket: str) -> None:
    report = full_report(shots=[summary(True, "hit", True, rtt_ms=rtt_ms)])
    assert list(report["shots"]["by_rtt"]) == [bucket]
    assert report["shots"]["by_rtt"][bucket]["fired"] == 1


def test_rtt_buckets_are_listed_in_increasing_order_with_unknown_last() -> None:
    rtts = [math.nan, 250.0, 10.0, 120.0, 60.0, 10.0, 170.0]
    report = full_report(shots=[summary(False, "miss", True, rtt_ms=r) for r in rtts])
    by_rtt = report["shots"]["by_rtt"]
    assert list(by_rtt) == ["0-50ms", "50-100ms", "100-150ms", "150-200ms", "200ms+", "unknown"]
    assert [b["fired"] for b in by_rtt.values()] == [2, 1, 1, 1, 1, 1]


def test_shots_are_split_by_weapon() -> None:
    shots = [summary(True, "hit", True, weapon=0), summary(False, "hit", False, weapon=1)]
    by_weapon = full_report(shots=shots)["shots"]["by_weapon"]
    assert by_weapon["rifle"] == shot_figures(shots[:1])
    assert by_weapon["launcher"] == shot_figures(shots[1:])


def test_missing_measurements_are_none_not_zero() -> None:
    report = build_report(
        SwarmResult(requested=5),
        latency_spec="fixed:0",
        workers=1,
        server_before=None,
        server_after=None,
    )
    assert [field(report, name) for name in STABLE_FIELDS if name != "shots.by_rtt"] == [
        5,
        0,
        None,
        None,
        None,
        None,
        None,
        None,
        None,
        None,
        None,
        0,
        0,
        0,
        None,
        None,
        None,
        None,
        None,
        None,
    ]
    assert report["shots"]["by_rtt"] == {}
    json.dumps(report, allow_nan=False)


def test_ticks_served_needs_both_server_readings() -> None:
    report = build_report(
        swarm_result(), latency_spec="x", workers=1, server_before=None, server_after=SERVER_AFTER
    )
    assert report["ticks"]["served"] is None
    assert report["ticks"]["rate_hz"] == 60


def test_the_summary_reads_a_full_report() -> None:
    text = format_summary(full_report(errors={"connect": 1}))
    assert "9/10 connected" in text
    assert "120 ticks at 60 Hz" in text
    assert re.search(r"RTT p50 (19\.[89]|20\.[01])\d* ms", text), text  # a sketch's 1 %
    assert "6 fired" in text and "agreement 0.6" in text
    assert "errors      connect=1" in text


@pytest.mark.parametrize("shots", [[], MIXED, [summary(True, None, False)]])
def test_the_summary_never_crashes_without_server_data(shots: list[ShotSummary]) -> None:
    report = build_report(
        SwarmResult(shots=list(shots)),
        latency_spec="fixed:0",
        workers=2,
        server_before=None,
        server_after=None,
    )
    text = format_summary(report)
    assert "n/a ticks at n/a Hz" in text
    assert "RTT p50 n/a" in text
    assert ("fired" in text) is bool(shots)


def test_shots_are_also_bucketed_by_the_link_s_configured_rtt() -> None:
    # A busy machine inflates what the bots measure: the link's own RTT tells them apart.
    shots = [summary(True, "hit", True, rtt_ms=160.0, link_rtt_ms=40.0)]
    report = full_report(shots=shots)["shots"]
    assert (list(report["by_rtt"]), list(report["by_link_rtt"])) == (["150-200ms"], ["0-50ms"])


def test_the_peeker_s_advantage_pairs_each_pair_s_first_sightings() -> None:
    sightings = [
        ("n", 1, 2, 10.0), ("n", 2, 1, 10.25),  # 1 saw 2 first, 250 ms sooner
        ("n", 3, 4, 20.5), ("n", 4, 3, 20.0),  # 4 first, 500 ms sooner
        ("n", 1, 2, 30.0),  # never seen back: no pair
        ("n", 5, 6, 40.0), ("n", 6, 5, 42.0),  # 2 s apart: two separate sightings
        ("m", 2, 1, 10.0),  # another node's players 1 and 2: other people
    ]  # fmt: skip
    figures = peekers_advantage(sightings)
    assert (figures["pairs"], figures["median_ms"]) == (2, 375.0)


def test_hits_behind_cover_are_bucketed_by_the_shooter_s_rtt() -> None:
    hits = [(30.0, True), (30.0, False), (160.0, True), (math.nan, False)]
    assert behind_cover_by_shooter_rtt(hits) == {
        "0-50ms": {"hits": 2, "behind_cover_rate": 0.5},
        "150-200ms": {"hits": 1, "behind_cover_rate": 1.0},
        "unknown": {"hits": 1, "behind_cover_rate": 0.0},
    }


def test_the_fog_figures_take_the_node_account_over_the_run():
    from client_sim.report import fog_figures

    bots = {"pop_ins": 0, "appearances": 7, "enemy_records": 900}
    before = {"snapshots": {"fog_sent": 100, "fog_seen": 80, "fog_hidden": 10, "fog_withheld": 5}}
    after = {"snapshots": {"fog_sent": 500, "fog_seen": 440, "fog_hidden": 40, "fog_withheld": 45}}
    figures = fog_figures(bots, before, after)
    assert figures["node_records"] == {"sent": 400, "seen": 360, "hidden": 30, "withheld": 40}
    assert figures["hidden_share"] == round(30 / 390, 4)
    assert figures["pop_ins"] == 0 and figures["appearances"] == 7
    # Fog off (no account), or no read before the run: nothing to say.
    assert fog_figures(bots, before, {"snapshots": {}})["hidden_share"] is None
    assert fog_figures(bots, None, after)["node_records"]["sent"] is None
