"""The registry: liveness on an injected clock, epoch fencing and the accounting of seats
handed out but not yet shown in a heartbeat (the heartbeat's own validation is
``tests/shared/test_directory.py``'s)."""

from __future__ import annotations

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
from server.directory.registry import Registry
from tests.shared.heartbeats import beat

TIMEOUT = 1.5


def view(registry: Registry, node_id: str, now: float) -> NodeView:
    """The stored node's view at ``now``, as the policy gets it."""
    found = _find(registry, node_id, now)
    assert found is not None, node_id
    return found


def _find(registry: Registry, node_id: str, now: float) -> NodeView | None:
    return next((n for r in registry.views(now) for n in r.nodes if n.node_id == node_id), None)


# -- liveness -----------------------------------------------------------------------------


def test_a_node_is_live_until_silent_longer_than_the_timeout() -> None:
    registry = Registry(TIMEOUT)
    ack = registry.heartbeat(beat(), now=10.0)
    assert (ack.status, ack.new_node, ack.group_epoch) == ("routable", True, 1)
    assert view(registry, "eu-1", 10.0).expires_at == 11.5
    [eu] = registry.views(11.5)
    assert [n.node_id for n in routable_nodes(eu, 11.5)] == ["eu-1"]
    assert routable_nodes(eu, 11.5001) == ()
    assert registry.sweep(11.5) == [] and registry.known == 1
    assert registry.sweep(11.6) == [beat()] and registry.known == 0
    assert registry.views(11.6) == ()


def test_each_heartbeat_extends_the_lease_and_updates_the_load() -> None:
    registry = Registry(TIMEOUT)
    registry.heartbeat(beat(players=1), now=0.0)
    ack = registry.heartbeat(beat(players=4), now=1.0)
    assert not ack.new_node
    assert view(registry, "eu-1", 2.0).expires_at == 2.5
    assert view(registry, "eu-1", 2.0).players == 4
    assert registry.sweep(2.4) == []


def test_the_registry_refuses_a_nonsense_timeout() -> None:
    with pytest.raises(ValueError):
        Registry(0.0)


# -- epochs -------------------------------------------------------------------------------


def test_failover_the_promoted_standby_wins_and_the_old_primary_is_fenced() -> None:
    registry = Registry(TIMEOUT)
    registry.heartbeat(beat("eu-1", epoch=1), now=0.0)
    assert registry.heartbeat(beat("eu-2", role="standby", epoch=1), now=0.0).status == "standby"
    promoted = registry.heartbeat(beat("eu-2", role="primary", epoch=2), now=0.5)
    assert (promoted.status, promoted.group_epoch, promoted.previous_group_epoch) == (
        "routable",
        2,
        1,
    )
    old = registry.heartbeat(beat("eu-1", epoch=1), now=0.6)
    assert (old.status, old.group_epoch) == ("fenced", 2)
    [eu] = registry.views(0.7)
    assert [n.node_id for n in routable_nodes(eu, 0.7)] == ["eu-2"]
    # The successor falls silent; the deposed primary keeps talking and stays fenced.
    for t in (1.0, 1.5, 2.0, 2.5, 3.0):
        assert registry.heartbeat(beat("eu-1", epoch=1), now=t).status == "fenced"
    registry.sweep(3.0)
    [eu] = registry.views(3.0)
    assert routable_nodes(eu, 3.0) == ()


def test_a_group_that_went_silent_is_forgotten_so_a_restarted_cluster_is_routed() -> None:
    registry = Registry(TIMEOUT)
    registry.heartbeat(beat("eu-1", epoch=5), now=0.0)
    registry.sweep(2.0)
    ack = registry.heartbeat(beat("eu-1", epoch=1), now=2.0)
    assert (ack.status, ack.group_epoch, ack.new_node) == ("routable", 1, True)


def test_groups_fence_independently_within_a_region() -> None:
    registry = Registry(TIMEOUT)
    registry.heartbeat(beat("eu-a1", group="a", epoch=7), now=0.0)
    assert registry.heartbeat(beat("eu-b1", group="b", epoch=1), now=0.0).status == "routable"
    [eu] = registry.views(0.0)
    assert [n.node_id for n in routable_nodes(eu, 0.0)] == ["eu-a1", "eu-b1"]


# -- reservations -------------------------------------------------------------------------


def test_reservations_count_as_load_until_they_expire() -> None:
    registry = Registry(TIMEOUT)
    registry.heartbeat(beat(players=2), now=0.0)
    registry.reserve("eu-1", "000000000000000a", "alice", now=0.0, ttl=10.0)
    registry.reserve("eu-1", "000000000000000b", "bob", now=1.0, ttl=10.0)
    assert view(registry, "eu-1", 1.0).reserved == 2
    assert view(registry, "eu-1", 10.0).reserved == 1  # alice's expired at exactly 10.0
    assert view(registry, "eu-1", 11.0).reserved == 0
    with pytest.raises(KeyError):
        registry.reserve("nope", "000000000000000c", "carol", now=1.0, ttl=10.0)


def test_a_burst_of_seats_spreads_over_nodes_before_any_heartbeat() -> None:
    registry = Registry(TIMEOUT)
    for name in ("eu-1", "eu-2", "eu-3"):
        registry.heartbeat(beat(name, capacity=4), now=0.0)
    chosen = []
    for i in range(12):
        decision = choose(registry.views(0.1), {"eu": 20.0}, now=0.1, slack_ms=40.0)
        assert isinstance(decision, Placement)
        chosen.append(decision.node_id)
        registry.reserve(decision.node_id, f"{i:016x}", f"p{i}", now=0.1, ttl=10.0)
    assert chosen == ["eu-1", "eu-2", "eu-3"] * 4
    full = choose(registry.views(0.1), {"eu": 20.0}, now=0.1, slack_ms=40.0)
    assert full == NoPlacement("full", "eu", 20.0, ("eu",))


def test_a_rise_in_players_settles_that_many_oldest_reservations() -> None:
    registry = Registry(TIMEOUT)
    registry.heartbeat(beat(players=0), now=0.0)
    for i, player in enumerate(("a", "b", "c")):
        registry.reserve("eu-1", f"{i:016x}", player, now=0.0, ttl=10.0)
    registry.heartbeat(beat(players=2), now=0.5)
    settled = view(registry, "eu-1", 0.5)
    assert (settled.players, settled.reserved, settled.free) == (2, 1, 7)
    registry.heartbeat(beat(players=1), now=1.0)  # someone left: nothing settles
    assert view(registry, "eu-1", 1.0).reserved == 1
    assert registry.heartbeat(beat(players=9), now=1.5).reserved == 0
    assert registry.outstanding == 0


def test_claimed_ids_settle_exactly_those_reservations() -> None:
    registry = Registry(TIMEOUT)
    registry.heartbeat(beat(players=0), now=0.0)
    for i, player in enumerate(("a", "b", "c")):
        registry.reserve("eu-1", f"{i:016x}", player, now=0.0, ttl=10.0)
    ack = registry.heartbeat(beat(players=5, claimed=(f"{1:016x}", "ffffffffffffffff")), now=0.5)
    assert ack.reserved == 2  # only b's was claimed; the players count is not used
    assert registry.heartbeat(beat(players=5, claimed=()), now=1.0).reserved == 2


def test_a_player_holds_one_reservation_at_a_time() -> None:
    registry = Registry(TIMEOUT)
    registry.heartbeat(beat("eu-1"), now=0.0)
    registry.heartbeat(beat("eu-2"), now=0.0)
    registry.reserve("eu-1", "000000000000000a", "alice", now=0.0, ttl=10.0)
    registry.reserve("eu-2", "000000000000000b", "alice", now=1.0, ttl=10.0)
    assert (view(registry, "eu-1", 1.0).reserved, view(registry, "eu-2", 1.0).reserved) == (0, 1)
    assert registry.outstanding == 1


def test_a_silent_node_takes_its_reservations_with_it() -> None:
    registry = Registry(TIMEOUT)
    registry.heartbeat(beat(), now=0.0)
    registry.reserve("eu-1", "000000000000000a", "alice", now=0.0, ttl=10.0)
    registry.sweep(2.0)
    assert registry.outstanding == 0
    registry.heartbeat(beat(), now=2.0)
    assert view(registry, "eu-1", 2.0).reserved == 0
    # and alice may ask again without tripping over her old reservation
    registry.reserve("eu-1", "000000000000000b", "alice", now=2.0, ttl=10.0)
    assert view(registry, "eu-1", 2.0).reserved == 1


def test_a_node_that_moves_region_leaves_the_old_one() -> None:
    registry = Registry(TIMEOUT)
    registry.heartbeat(beat("n-1", "eu"), now=0.0)
    registry.heartbeat(beat("n-2", "eu"), now=0.0)
    registry.heartbeat(beat("n-1", "na"), now=0.5)
    assert [(r.name, [n.node_id for n in r.nodes]) for r in registry.views(0.5)] == [
        ("eu", ["n-2"]),
        ("na", ["n-1"]),
    ]


# -- the cached views never drift from the registry's state ---------------------------------

OPERATIONS = st.lists(
    st.tuples(
        st.sampled_from(["beat", "beat", "reserve", "sweep", "look"]),
        st.sampled_from(["a", "b", "c", "d"]),  # node
        st.sampled_from(["eu", "na"]),  # region
        st.sampled_from(["primary", "standby"]),
        st.integers(0, 3),  # epoch, players
        st.sampled_from(["p", "q", "r"]),  # player
        st.floats(0.0, 1.0),  # time step
    ),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(OPERATIONS)
def test_cached_views_always_equal_views_built_from_scratch(operations: list) -> None:  # type: ignore[type-arg]
    registry = Registry(TIMEOUT)
    now, serial = 0.0, 0
    for op, name, region, role, number, player, step in operations:
        now += step
        if op == "beat":
            registry.heartbeat(beat(name, region, role=role, epoch=number, players=number), now)
        elif op == "reserve" and _find(registry, name, now) is not None:
            serial += 1
            registry.reserve(name, f"{serial:016x}", player, now, ttl=2.0)
        elif op == "sweep":
            registry.sweep(now)
        assert registry.views(now) == _fresh_views(registry, now)


def _fresh_views(registry: Registry, now: float) -> tuple[RegionView, ...]:
    """The views computed the slow way from the registry's own records."""
    by_region: dict[str, list[NodeView]] = {}
    for node in registry._nodes.values():
        b = node.beat
        live = [e for e in node.reservations.values() if e > now]
        by_region.setdefault(b.region, []).append(
            NodeView(
                b.node_id,
                b.region,
                b.endpoint,
                b.role,
                b.epoch,
                b.players,
                b.capacity,
                reserved=len(live),
                expires_at=node.last_seen + TIMEOUT,
                group=b.group,
                probe=b.probe,
            )
        )
    return tuple(
        RegionView(
            name,
            tuple(sorted(nodes, key=lambda n: n.node_id)),
            {g: e.epoch for (r, g), e in registry._groups.items() if r == name},
        )
        for name, nodes in sorted(by_region.items())
    )
