"""``GET /regions``' listing built from the registry's views: live nodes only, by role."""

from __future__ import annotations

from server.directory.listing import region_summaries
from server.directory.registry import Registry
from shared.directory import NodeSummary, RegionListing
from tests.shared.heartbeats import beat

TIMEOUT = 1.5


def test_region_summary_lists_primary_standbys_fenced_load_and_probes() -> None:
    registry = Registry(TIMEOUT)
    registry.heartbeat(beat("eu-1", epoch=1, players=3), now=0.0)
    registry.heartbeat(beat("eu-2", epoch=2, players=1, capacity=30), now=0.0)
    registry.heartbeat(beat("eu-3", role="standby", epoch=2), now=0.0)
    registry.heartbeat(beat("na-1", "na", players=5), now=0.0)
    registry.heartbeat(beat("oce-1", "oce"), now=-5.0)  # long silent: not listed
    registry.reserve("eu-2", "00000000000000aa", "alice", now=0.0, ttl=10.0)
    [eu, na] = region_summaries(registry.views(0.1), 0.1)
    assert eu.region == "eu"
    assert eu.primary is not None and eu.primary.to_json() == {
        "node_id": "eu-2",
        "endpoint": "ws://eu-2.test:7777/ws",
        "probe": "http://eu-2.test:7777/health",
        "epoch": 2,
        "group": "eu",
        "players": 1,
        "reserved": 1,
        "capacity": 30,
    }
    assert eu.primaries == (eu.primary,)
    assert [s.node_id for s in eu.standbys] == ["eu-3"]
    assert [s.node_id for s in eu.fenced] == ["eu-1"]
    assert (eu.players, eu.reserved, eu.capacity, eu.load) == (1, 1, 30, 0.0667)
    assert eu.probe == "http://eu-2.test:7777/health"
    assert eu.probes == tuple(f"http://eu-{i}.test:7777/health" for i in (1, 2, 3))
    assert (na.region, na.players, na.load) == ("na", 5, 0.5)


def test_a_region_in_failover_has_no_primary_and_probes_a_live_node() -> None:
    registry = Registry(TIMEOUT)
    registry.heartbeat(beat("eu-2", role="standby", capacity=0), now=0.0)
    [eu] = region_summaries(registry.views(0.0), 0.0)
    assert (eu.primary, eu.primaries, eu.capacity, eu.load) == (None, (), 0, None)
    assert eu.probe == "http://eu-2.test:7777/health"
    document = eu.to_json()
    assert document["primary"] is None and document["load"] is None


def test_the_listing_is_what_a_client_parses_back() -> None:
    registry = Registry(TIMEOUT)
    registry.heartbeat(beat("eu-1", group="pair-a"), now=0.0)
    registry.heartbeat(beat("na-1", "na", role="standby"), now=0.0)
    listing = RegionListing(region_summaries(registry.views(0.0), 0.0), TIMEOUT, 1.8e9)
    assert RegionListing.parse(listing.to_json()) == listing
    assert listing.probes() == {
        "eu": "http://eu-1.test:7777/health",
        "na": "http://na-1.test:7777/health",
    }
    assert isinstance(listing.regions[0].primary, NodeSummary)
    assert listing.regions[0].primary.group == "pair-a"
