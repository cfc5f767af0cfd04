"""The routing policy, rule by rule, then as properties checked against a brute-force oracle."""

from __future__ import annotations

import math
import random
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from server.directory.policy import (
    NodeView,
    NoPlacement,
    Placement,
    RegionView,
    choose,
    routable_nodes,
)

NOW = 100.0


def node(
    node_id: str,
    region: str = "eu",
    *,
    players: int = 0,
    capacity: int = 10,
    reserved: int = 0,
    role: str = "primary",
    epoch: int = 1,
    expires_at: float = NOW + 1.0,
    group: str = "",
) -> NodeView:
    return NodeView(
        node_id=node_id,
        region=region,
        endpoint=f"ws://{node_id}.test:7777/ws",
        role=role,  # type: ignore[arg-type]
        epoch=epoch,
        players=players,
        capacity=capacity,
        reserved=reserved,
        expires_at=expires_at,
        group=group,
    )


def regions(*nodes: NodeView, fences: dict[str, dict[str, int]] | None = None) -> list[RegionView]:
    by_region: dict[str, list[NodeView]] = {}
    for n in nodes:
        by_region.setdefault(n.region, []).append(n)
    fences = fences or {}
    return [RegionView(name, tuple(ns), fences.get(name, {})) for name, ns in by_region.items()]


def seat(views: list[RegionView], rtt: dict[str, float], slack: float = 40.0) -> Placement:
    decision = choose(views, rtt, now=NOW, slack_ms=slack)
    assert isinstance(decision, Placement), decision
    return decision


def refusal(views: list[RegionView], rtt: dict[str, float], slack: float = 40.0) -> NoPlacement:
    decision = choose(views, rtt, now=NOW, slack_ms=slack)
    assert isinstance(decision, NoPlacement), decision
    return decision


# -- the rules, one at a time -----------------------------------------------------------


def test_the_nearest_region_wins() -> None:
    views = regions(node("na-1", "na"), node("eu-1", "eu"), node("asia-1", "asia"))
    decision = seat(views, {"na": 95.0, "eu": 22.5, "asia": 160.0})
    assert decision == Placement(
        region="eu",
        node_id="eu-1",
        endpoint="ws://eu-1.test:7777/ws",
        epoch=1,
        rtt_ms=22.5,
        best_region="eu",
        best_rtt_ms=22.5,
    )
    assert not decision.overflow


def test_within_a_region_the_least_loaded_node_wins_by_share_not_by_count() -> None:
    # eu-a: 6/10 = 0.6; eu-b: 10/20 = 0.5 (more players, but a smaller share); eu-c: 0.7.
    views = regions(
        node("eu-a", players=6, capacity=10),
        node("eu-b", players=10, capacity=20),
        node("eu-c", players=5, capacity=10, reserved=2),
    )
    assert seat(views, {"eu": 20.0}).node_id == "eu-b"


def test_reservations_count_as_load() -> None:
    views = regions(node("eu-a", players=2, reserved=3), node("eu-b", players=4))
    assert seat(views, {"eu": 20.0}).node_id == "eu-b"  # 5/10 against 4/10


def test_ties_go_to_the_smaller_node_id_whatever_the_order() -> None:
    nodes = [node(f"eu-{i}", players=3) for i in (3, 1, 2)]
    for _ in range(5):
        random.shuffle(nodes)
        assert seat(regions(*nodes), {"eu": 20.0}).node_id == "eu-1"


def test_equal_rtts_go_to_the_region_first_by_name() -> None:
    views = regions(node("na-1", "na"), node("eu-1", "eu"))
    decision = seat(views, {"na": 50.0, "eu": 50.0})
    assert (decision.region, decision.best_region) == ("eu", "eu")


def test_a_full_best_region_overflows_to_the_next_within_the_slack() -> None:
    views = regions(
        node("eu-1", "eu", players=10),
        node("eu-2", "eu", players=8, reserved=2),
        node("na-1", "na", players=3),
        node("me-1", "me", players=0),
    )
    decision = seat(views, {"eu": 30.0, "me": 75.0, "na": 70.0}, slack=40.0)
    assert (decision.region, decision.node_id, decision.rtt_ms) == ("na", "na-1", 70.0)
    assert (decision.best_region, decision.best_rtt_ms) == ("eu", 30.0)
    assert decision.overflow


def test_the_slack_is_inclusive() -> None:
    views = regions(node("eu-1", "eu", players=10), node("na-1", "na"))
    assert seat(views, {"eu": 30.0, "na": 70.0}, slack=40.0).region == "na"
    assert refusal(views, {"eu": 30.0, "na": 70.001}, slack=40.0).reason == "full"


def test_no_overflow_beyond_the_slack_even_to_an_empty_region() -> None:
    views = regions(node("eu-1", "eu", players=10), node("na-1", "na"), node("asia-1", "asia"))
    decision = refusal(views, {"eu": 25.0, "na": 90.0, "asia": 160.0}, slack=40.0)
    assert decision == NoPlacement("full", "eu", 25.0, ("eu",))


def test_a_zero_slack_never_overflows() -> None:
    views = regions(node("eu-1", "eu", players=10), node("na-1", "na"))
    assert refusal(views, {"eu": 25.0, "na": 25.5}, slack=0.0).reason == "full"
    assert seat(views, {"eu": 25.0, "na": 25.0}, slack=0.0).region == "na"


def test_stale_nodes_are_ignored() -> None:
    views = regions(
        node("eu-1", "eu", expires_at=NOW - 0.001),
        node("eu-2", "eu", players=9, expires_at=NOW),  # exactly at expiry: still live
        node("na-1", "na"),
    )
    assert seat(views, {"eu": 20.0, "na": 90.0}).node_id == "eu-2"
    gone = regions(node("eu-1", "eu", expires_at=NOW - 0.001), node("na-1", "na"))
    # A region with no live node is out of service: the best live region is na.
    decision = seat(gone, {"eu": 20.0, "na": 90.0})
    assert (decision.region, decision.best_region) == ("na", "na")


def test_standbys_are_never_seated() -> None:
    views = regions(node("eu-standby", "eu", role="standby", epoch=1), node("na-1", "na"))
    decision = seat(views, {"eu": 20.0, "na": 90.0})
    assert decision.node_id == "na-1"
    only_standby = regions(node("eu-standby", "eu", role="standby"))
    assert refusal(only_standby, {"eu": 20.0}) == NoPlacement("no_region")


def test_a_lower_epoch_primary_is_ignored() -> None:
    views = regions(
        node("eu-old", "eu", epoch=3, players=0),
        node("eu-new", "eu", epoch=4, players=9),
    )
    assert seat(views, {"eu": 20.0}).node_id == "eu-new"
    full_new = regions(node("eu-old", "eu", epoch=3), node("eu-new", "eu", epoch=4, players=10))
    assert refusal(full_new, {"eu": 20.0}).reason == "full"


def test_a_remembered_fence_keeps_a_deposed_primary_out_after_its_successor_died() -> None:
    views = regions(
        node("eu-old", "eu", epoch=3),
        node("eu-new", "eu", epoch=4, expires_at=NOW - 1),
        fences={"eu": {"eu": 4}},
    )
    assert refusal(views, {"eu": 20.0}) == NoPlacement("no_region")
    assert seat(regions(node("eu-old", "eu", epoch=3)), {"eu": 20.0}).node_id == "eu-old"


def test_epochs_are_compared_within_a_replication_group_only() -> None:
    views = regions(
        node("eu-a1", "eu", epoch=7, group="a", players=5),
        node("eu-b1", "eu", epoch=1, group="b", players=1),
        node("eu-b0", "eu", epoch=0, group="b"),
    )
    assert [n.node_id for n in routable_nodes(views[0], NOW)] == ["eu-a1", "eu-b1"]
    assert seat(views, {"eu": 20.0}).node_id == "eu-b1"


def test_full_and_zero_capacity_nodes_are_never_seated() -> None:
    views = regions(
        node("eu-1", "eu", players=10),
        node("eu-2", "eu", players=9, reserved=1),
        node("eu-3", "eu", capacity=0),  # draining
        node("eu-4", "eu", players=12),  # over capacity (reported)
    )
    assert refusal(views, {"eu": 20.0}) == NoPlacement("full", "eu", 20.0, ("eu",))


def test_unknown_unmeasured_and_invalid_rtts_are_ignored() -> None:
    views = regions(node("eu-1", "eu"), node("na-1", "na"))
    assert seat(views, {"mars": 1.0, "na": 90.0}).region == "na"
    assert seat(views, {"eu": math.nan, "na": 90.0}).region == "na"
    assert seat(views, {"eu": -1.0, "na": 90.0}).region == "na"
    assert seat(views, {"eu": math.inf, "na": 90.0}).region == "na"
    assert refusal(views, {"mars": 1.0}) == NoPlacement("no_region")
    assert refusal(views, {}) == NoPlacement("no_region")
    assert refusal([], {"eu": 10.0}) == NoPlacement("no_region")


def test_a_negative_or_infinite_slack_is_misuse() -> None:
    with pytest.raises(ValueError):
        choose([], {}, now=NOW, slack_ms=-1.0)
    with pytest.raises(ValueError):
        choose([], {}, now=NOW, slack_ms=math.inf)


def test_node_view_load_and_free() -> None:
    n = node("eu-1", players=3, reserved=2, capacity=10)
    assert (n.load, n.free) == (0.5, 5)
    assert node("eu-2", capacity=0).load == math.inf
    assert n.group_key == "eu" and replace(n, group="g").group_key == "g"


# -- properties against an oracle -----------------------------------------------------------

REGION_NAMES = ("na", "sa", "eu", "asia", "oce")


def _routable_oracle(region: RegionView, now: float) -> list[NodeView]:
    live_primaries = [n for n in region.nodes if n.role == "primary" and n.expires_at >= now]
    result = []
    for n in live_primaries:
        peers = [p.epoch for p in live_primaries if p.group_key == n.group_key]
        fence = region.fences.get(n.group_key, -1)
        if n.epoch >= max([fence, *peers]):
            result.append(n)
    return result


def oracle(views: list[RegionView], rtt: dict[str, float], slack: float) -> Placement | NoPlacement:
    """Every eligible (region, node) pair under one sort key; the first wins."""
    measured = {
        r.name: (rtt[r.name], _routable_oracle(r, NOW))
        for r in views
        if r.name in rtt and 0 <= rtt[r.name] < math.inf
    }
    in_service = {name: v for name, v in measured.items() if v[1]}
    if not in_service:
        return NoPlacement("no_region")
    best_rtt, best_name = min((v[0], name) for name, v in in_service.items())
    pairs = [
        (r_rtt, name, (n.players + n.reserved) / n.capacity, n.node_id, n)
        for name, (r_rtt, nodes) in in_service.items()
        for n in nodes
        if r_rtt <= best_rtt + slack and n.players + n.reserved < n.capacity
    ]
    if not pairs:
        considered = tuple(
            name
            for r_rtt, name in sorted((v[0], name) for name, v in in_service.items())
            if r_rtt <= best_rtt + slack
        )
        return NoPlacement("full", best_name, best_rtt, considered)
    r_rtt, name, _load, _id, chosen = min(pairs, key=lambda p: p[:4])
    return Placement(
        name, chosen.node_id, chosen.endpoint, chosen.epoch, r_rtt, best_name, best_rtt
    )


@st.composite
def scenes(draw: st.DrawFn) -> tuple[list[RegionView], dict[str, float], float]:
    views = []
    for name in draw(st.lists(st.sampled_from(REGION_NAMES), unique=True, max_size=5)):
        count = draw(st.integers(min_value=0, max_value=4))
        nodes = tuple(
            node(
                f"{name}-{i}",
                name,
                players=draw(st.integers(0, 10)),
                capacity=draw(st.integers(0, 10)),
                reserved=draw(st.integers(0, 3)),
                role=draw(st.sampled_from(["primary", "primary", "standby"])),
                epoch=draw(st.integers(0, 3)),
                expires_at=draw(st.sampled_from([NOW - 0.5, NOW, NOW + 0.5])),
                group=draw(st.sampled_from(["", "", "g"])),
            )
            for i in range(count)
        )
        fences = draw(st.dictionaries(st.sampled_from([name, "g"]), st.integers(0, 4), max_size=2))
        views.append(RegionView(name, nodes, fences))
    rtt = draw(
        st.dictionaries(
            st.sampled_from([*REGION_NAMES, "mars"]),
            st.sampled_from([0.0, 10.0, 25.0, 40.0, 50.0, 65.0, 90.0, 200.0])
            | st.floats(min_value=0.0, max_value=400.0),
        )
    )
    slack = draw(st.sampled_from([0.0, 15.0, 40.0, 100.0]))
    return views, rtt, slack


@settings(max_examples=250, deadline=None)
@given(scenes())
def test_the_policy_agrees_with_the_brute_force_oracle(
    scene: tuple[list[RegionView], dict[str, float], float],
) -> None:
    views, rtt, slack = scene
    assert choose(views, rtt, now=NOW, slack_ms=slack) == oracle(views, rtt, slack)


@settings(max_examples=150, deadline=None)
@given(scenes(), st.randoms(use_true_random=False))
def test_invariants_of_every_seat(
    scene: tuple[list[RegionView], dict[str, float], float], rnd: random.Random
) -> None:
    views, rtt, slack = scene
    decision = choose(views, rtt, now=NOW, slack_ms=slack)
    # The order regions and nodes arrive in never changes the answer.
    shuffled = [
        RegionView(r.name, tuple(rnd.sample(r.nodes, len(r.nodes))), r.fences)
        for r in rnd.sample(views, len(views))
    ]
    assert choose(shuffled, rtt, now=NOW, slack_ms=slack) == decision
    if isinstance(decision, NoPlacement):
        return
    chosen = next(n for r in views for n in r.nodes if n.node_id == decision.node_id)
    # Never further than best + slack, and the best is the lowest measured RTT in service.
    assert decision.rtt_ms == rtt[decision.region] <= decision.best_rtt_ms + slack
    assert decision.best_rtt_ms <= decision.rtt_ms
    # Never on a full, stale, standby or deposed node.
    assert chosen.free >= 1
    assert chosen.live(NOW)
    assert chosen.role == "primary"
    region = next(r for r in views if r.name == decision.region)
    assert chosen in routable_nodes(region, NOW)
    # Least loaded among the routable nodes of its region that have room.
    rivals = [n for n in routable_nodes(region, NOW) if n.free >= 1]
    assert (chosen.load, chosen.node_id) == min((n.load, n.node_id) for n in rivals)


def test_a_tie_break_ranks_equally_loaded_nodes_but_never_beats_load() -> None:
    views = regions(node("eu-1", players=2), node("eu-2", players=2), node("eu-3", players=1))
    reverse = {"eu-1": "c", "eu-2": "b", "eu-3": "a"}.__getitem__
    assert seat(views, {"eu": 10.0}).node_id == "eu-3"  # the least loaded, whatever the rank
    tied = regions(node("eu-1", players=2), node("eu-2", players=2))
    assert seat(tied, {"eu": 10.0}).node_id == "eu-1"  # by node id
    decision = choose(tied, {"eu": 10.0}, now=NOW, slack_ms=40.0, tie_break=reverse)
    assert isinstance(decision, Placement) and decision.node_id == "eu-2"
    decision = choose(views, {"eu": 10.0}, now=NOW, slack_ms=40.0, tie_break=reverse)
    assert isinstance(decision, Placement) and decision.node_id == "eu-3"
