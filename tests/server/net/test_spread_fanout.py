"""The snapshot fan-out spread over two ticks: with snapshots every other tick, the seats of
one parity get a snapshot at its tick and the others at the start of the next, under the
same lease and epoch, and never from a node that is stepping down or was fenced meanwhile."""

from __future__ import annotations

import asyncio
import math
from types import SimpleNamespace
from typing import Any

import pytest

from server.net.sessions import Sessions
from server.net.ticker import Ticker
from server.sim.rtt import RttProbes
from shared.protocol import ProbeMessage, decode_server


class FakeConnection:
    def __init__(self) -> None:
        self.sent: list[tuple[bytes, bytes]] = []
        self.then: list[bytes] = []  # what rode with each snapshot (a probe, or nothing)

    def send_snapshot(self, head: bytes, body: bytes = b"", then: bytes = b"") -> bool:
        self.sent.append((head, body))
        self.then.append(then)
        return True


class FakeMatch:
    """A match whose every seat's part of a snapshot is its slot, spelled out."""

    index = 0

    def __init__(self) -> None:
        self.probes = RttProbes(8, interval=0.25)
        self.coded: list[list[int]] = []  # the seats asked for, call by call

    def snapshot_parts(self, result: Any, slots: list[int]) -> dict[int, bytes]:
        self.coded.append(slots)
        return {slot: b"head-%d" % slot for slot in slots}


def node(interval: int, clock: list[float]) -> Any:
    unpublished: list[str] = []
    counter = SimpleNamespace(inc=lambda *_: None)
    return SimpleNamespace(
        config=SimpleNamespace(snapshot_interval=interval, tick_rate=60, offender_holdoff=0.0),
        matches=SimpleNamespace(matches=[FakeMatch()], epoch=3),
        clock=lambda: clock[0],
        shutting_down=False,
        stepping_down=asyncio.Event(),
        hub=SimpleNamespace(fenced_epoch=None),
        journal=SimpleNamespace(published=lambda *args: None),
        checkpoints=None,
        failover={},
        metrics=SimpleNamespace(
            snapshots_dropped=counter,
            ticks_unpublished=SimpleNamespace(
                labels=lambda reason: SimpleNamespace(inc=lambda: unpublished.append(reason))
            ),
        ),
        log_fields={},
        unpublished=unpublished,
    )


def seated(sessions: Sessions, slots: range) -> dict[int, FakeConnection]:
    connections = {slot: FakeConnection() for slot in slots}
    for slot, connection in connections.items():
        sessions.connections[(0, slot)] = connection  # type: ignore[assignment]
    return connections


def snapshot(tick: int) -> Any:
    seats = dict.fromkeys(range(8))  # (every seat of FakeMatch's, seated at the tick)
    return SimpleNamespace(tick=tick, body=b"body-%d" % tick, state_hash="", seats=seats)


def heard(connections: dict[int, FakeConnection]) -> list[int]:
    return sorted(slot for slot, connection in connections.items() if connection.sent)


def shown(
    interval: int, clock: list[float], seats: int, deadline: float | None = None
) -> tuple[Any, dict[int, FakeConnection], Ticker]:
    """A node with ``seats`` players, right after it showed snapshot 8."""
    state = node(interval, clock)
    sessions = Sessions(state)
    connections = seated(sessions, range(seats))
    ticker = Ticker(state, sessions)
    ticker._show(8, [snapshot(8)], deadline=deadline, synced=True)
    return state, connections, ticker


def test_every_other_seat_gets_the_snapshot_a_tick_later_and_the_same_one() -> None:
    state, connections, ticker = shown(2, [10.0], 6)
    assert heard(connections) == [0, 2, 4]
    ticker._show_rest(9)  # the start of tick 9
    assert heard(connections) == [0, 1, 2, 3, 4, 5]
    # each share's seats were coded in one call, in the tick they were sent
    assert state.matches.matches[0].coded == [[0, 2, 4, 6], [1, 3, 5, 7]]
    assert {c.sent[0] for c in connections.values()} == {
        (b"head-%d" % slot, b"body-8") for slot in range(6)
    }
    ticker._show_rest(10)  # nothing is sent twice
    assert all(len(c.sent) == 1 for c in connections.values())


def test_with_a_snapshot_every_tick_everyone_gets_it_at_once() -> None:
    _, connections, ticker = shown(1, [0.0], 4)
    assert heard(connections) == [0, 1, 2, 3]
    ticker._show_rest(9)
    assert all(len(c.sent) == 1 for c in connections.values())


def test_the_rest_is_withheld_when_the_lease_ran_out_or_the_node_may_be_deposed() -> None:
    clock = [10.0]
    for stop in ("lease", "stepping_down", "fenced", "shutting_down", "new_epoch"):
        state, connections, ticker = shown(2, clock, 4, deadline=10.5)
        if stop == "lease":
            clock[0] = 10.5
        elif stop == "stepping_down":
            state.stepping_down.set()
        elif stop == "fenced":
            state.hub.fenced_epoch = 4
        elif stop == "new_epoch":  # stepped down, then led again: another epoch's seats
            state.matches.epoch = 4
        elif stop == "shutting_down":
            state.shutting_down = True
        ticker._show_rest(9)
        assert heard(connections) == [0, 2], stop
        assert state.unpublished == (["lease_expired"] if stop == "lease" else []), stop
        clock[0] = 10.0


def test_after_a_stall_the_rest_still_gets_the_snapshot_and_its_events() -> None:
    clock = [10.0]
    _, connections, ticker = shown(2, clock, 4)
    clock[0] = 15.0  # a 5 s stall: the schedule's next tick is 308
    ticker._show_rest(9)
    assert heard(connections) == [0, 1, 2, 3]


def test_a_share_of_the_seats_is_those_of_one_residue() -> None:
    sessions = Sessions(node(2, [0.0]))
    connections = seated(sessions, range(7))
    assert sessions.publish([snapshot(4)], math.inf, (1, 3)) == (2, 0)
    assert heard(connections) == [1, 4]


def test_a_due_probe_rides_with_its_seat_s_snapshot_timed_from_that_tick() -> None:
    """A seat's round-trip probe goes in the write of its own snapshot (one send, not
    two), so the seats of the second share get theirs a tick later, timed from it."""
    state = node(2, [10.0])
    sessions = Sessions(state)
    connections = seated(sessions, range(4))
    probes = state.matches.matches[0].probes
    for slot in range(4):
        probes.reset(slot, now=0.0)
    ticker = Ticker(state, sessions)
    ticker._show(60, [snapshot(60)], deadline=None, synced=True)  # tick 60: 1.0 s
    ticker._show_rest(61)
    sent_ids = {}
    for slot, connection in connections.items():
        (then,) = connection.then
        probe = decode_server(then)
        assert isinstance(probe, ProbeMessage)
        sent_ids[slot] = probe.id
    assert probes.echo(0, sent_ids[0], 1.05) and probes.echo(1, sent_ids[1], 1.05)
    assert probes.estimate(0).rtt == pytest.approx(0.05)  # type: ignore[union-attr]
    assert probes.estimate(1).rtt == pytest.approx(1.05 - 61 / 60)  # type: ignore[union-attr]
    ticker._show(62, [snapshot(62)], deadline=None, synced=True)
    assert connections[0].then[1:] == [b""] and connections[2].then[1:] == [b""]  # not due
