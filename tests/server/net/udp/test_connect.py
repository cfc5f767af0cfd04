"""``POST /connect``'s rules that need no socket: who behind a directory gets a token, and
which UDP addresses a token lists."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

from server.directory.reservations import issue
from server.net.udp.connect import _admission_refusal
from server.net.udp.tokens import region_addresses
from server.region_key import region_key
from server.tokens import issue_token

SECRET = b"a cluster secret of the region"


def node(directory: str = "http://directory:7000", open_join: bool = False) -> Any:
    config = SimpleNamespace(
        directory_url=directory, open_join=open_join, region="eu", node_id="eu-1"
    )
    return SimpleNamespace(config=config, secret=SECRET)


def test_behind_a_directory_a_token_needs_a_reservation_or_a_session_token() -> None:
    now = time.time()
    assert _admission_refusal(node(), "ada", None) is not None
    assert _admission_refusal(node(), "ada", "forged")[1] == "invalid_reservation"  # type: ignore[index]
    reservation = issue(SECRET, "ada", "eu-1", "eu", now, 30.0)
    assert _admission_refusal(node(), "ada", reservation) is None
    assert _admission_refusal(node(), "bob", reservation)[2].startswith("reservation wrong_player")  # type: ignore[index]
    elsewhere = issue(SECRET, "ada", "eu-2", "eu", now, 30.0)
    assert _admission_refusal(node(), "ada", elsewhere) is not None
    session = issue_token(SECRET, "eu", 3, "ada", seat_id=1, expires_at=now + 60)
    assert _admission_refusal(node(), "ada", session) is None
    assert _admission_refusal(node(directory=""), "ada", None) is None
    assert _admission_refusal(node(open_join=True), "ada", None) is None


def test_a_token_lists_this_node_first_then_each_peer_once() -> None:
    own = ("10.0.0.5", 7777)
    peers = ["http://10.0.0.6:7778", "https://standby.example", "http://10.0.0.5:7777/", "bad"]
    assert region_addresses(own, peers) == [own, ("10.0.0.6", 7778), ("standby.example", 443)]


def test_the_region_key_is_the_same_on_every_node_of_a_region_and_differs_between_regions() -> None:
    assert region_key(SECRET, "eu") == region_key(SECRET, "eu")
    assert len(region_key(SECRET, "eu")) == 32
    assert region_key(SECRET, "eu") != region_key(SECRET, "us")
    assert region_key(SECRET, "eu") != region_key(b"another secret entirely", "eu")
