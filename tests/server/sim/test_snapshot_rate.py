"""``--snapshot-rate``: every tick simulated and replicated, one in n sent, with the events
of the ticks between; a promoted standby keeps the cadence and the events not yet sent;
shots are rewound through the snapshots sent, not the ticks between."""

from __future__ import annotations

import numpy as np
import pytest

from client_sim.interpolation import SnapshotBuffer
from server.net.config import NodeConfig
from server.sim.hitreg.reference import interpolate_positions
from server.sim.lagcomp import LagCompensation
from server.sim.match import Match, MatchConfig, TickResult
from shared.arena_map import default_map
from shared.protocol import JoinEvent, SnapshotMessage, decode_server
from tests.server.frames import players_shown, snapshot_for
from tests.server.replication.test_replication_state import replicate
from tests.server.sim.test_match import msg

ARENA = default_map()


def every_third(**config: object) -> Match:
    return Match(MatchConfig(ARENA, max_players=8, snapshot_interval=3, **config))


def shown(match: Match, result: object, slot: int) -> SnapshotMessage:
    snapshot = decode_server(snapshot_for(match, result, slot))  # type: ignore[arg-type]
    assert isinstance(snapshot, SnapshotMessage)
    return snapshot


def test_only_every_nth_tick_is_a_snapshot_and_it_carries_the_events_between() -> None:
    match = every_third()
    first = match.join("a", 0.1).slot
    bodies = {1: match.tick()}
    second = match.join("b", 0.1).slot
    for tick in range(2, 7):
        bodies[tick] = match.tick()
    assert [r.tick for r in bodies.values()] == [1, 2, 3, 4, 5, 6]
    # Every tick has its own events (what a standby is sent), shown or not.
    assert [r.events for r in bodies.values()] == [[JoinEvent(first)], [JoinEvent(second)],
                                                   [], [], [], []]  # fmt: skip
    assert [t for t, r in bodies.items() if r.body] == [3, 6]
    assert shown(match, bodies[3], first).events == (JoinEvent(first), JoinEvent(second))
    assert shown(match, bodies[6], second).events == ()
    assert match.config.snapshot_rate == 20


def test_a_promoted_standby_sends_the_events_its_primary_had_not_shown() -> None:
    primary, standby = every_third(), every_third()
    primary.join("a", 0.1)
    for _ in range(3):  # ticks 1-3: the join is shown at tick 3
        replicate(primary, primary.tick(), standby)
    late = primary.join("b", 0.1).slot
    replicate(primary, primary.tick(), standby)  # tick 4: b's join, not shown yet
    # The primary dies here. The standby's first tick as primary is 5, its first snapshot 6.
    standby.epoch = primary.epoch + 1
    assert not standby.tick().body
    result = standby.tick()
    assert result.tick == 6 and result.body
    assert shown(standby, result, late).events == (JoinEvent(late),)


@pytest.mark.parametrize(
    ("rate", "problem"),
    [
        (45, "must divide the tick rate (60: 60, 30, 20, 15, 12, 10, ...), not 45"),
        (15, "at 15 snapshots a second two snapshot intervals are 133.333 ms"),
        (0, "must divide the tick rate"),
    ],
)
def test_a_snapshot_rate_that_does_not_fit_is_refused_with_why(rate: int, problem: str) -> None:
    with pytest.raises(ValueError) as refused:
        NodeConfig(snapshot_rate=rate)
    assert problem in str(refused.value)


def test_a_rate_the_interpolation_cap_holds_is_taken_and_sets_the_interval() -> None:
    assert NodeConfig(snapshot_rate=20).snapshot_interval == 3
    assert NodeConfig(snapshot_rate=30).snapshot_interval == 2
    assert NodeConfig().snapshot_interval == 2  # 30 Hz at the default 60
    assert NodeConfig(tick_rate=64).snapshot_interval == 1  # (30 does not divide 64)
    assert NodeConfig(tick_rate=90).snapshot_interval == 3
    wide = LagCompensation(max_interp_delay=0.2)
    assert NodeConfig(snapshot_rate=10, lag_compensation=wide).snapshot_interval == 6


def test_a_shot_is_rewound_into_the_world_its_shooter_drew_not_the_ticks_between() -> None:
    """A target that turns every tick: the ticks between two snapshots lie off the line the
    client draws between them, by millimetres. The rewound target (on the primary and on
    a standby) is where the shooter's interpolation put it, bit for bit."""
    primary, standby = every_third(), every_third()
    target, shooter = primary.join("target", 0.1).slot, primary.join("shooter", 0.1).slot
    drawn, walked = SnapshotBuffer(), {}
    for tick in range(1, 31):
        turn = (1.0, 0.0) if tick % 2 else (0.0, 1.0)
        primary.receive_input(target, msg(tick - 1, move=turn), 0.0)
        result = primary.tick()
        replicate(primary, result, standby)
        walked[tick] = primary.world.pos[target].copy()
        if result.body:
            drawn.push(result.server_time, players_shown(primary, result, shooter))
    assert len(drawn) == 10
    widest_gap = 0.0
    for tick in np.arange(3.0, 30.0, 0.25):  # snapshot ticks, the ticks between, and past
        view_time = tick / 60
        view = drawn.view(view_time)
        assert view is not None and view.exact
        seen = view.positions[view.ids.tolist().index(target)]
        for match in (primary, standby):
            rewound, present = interpolate_positions(match.history_view(), 0, view_time)
            assert present[target]
            assert np.array_equal(rewound[target], seen), (tick, rewound[target], seen)
        # Where rewinding through every tick would have put it: the test has teeth.
        before, weight = int(tick), tick % 1
        after = walked.get(before + 1, walked[before])
        tick_by_tick = walked[before] + (after - walked[before]) * weight
        widest_gap = max(widest_gap, float(np.linalg.norm(tick_by_tick - seen)))
    assert widest_gap > 2e-3


def test_a_snapshot_spread_over_two_ticks_codes_each_half_in_the_tick_it_is_sent() -> None:
    """With the fan-out spread (``share``), the seats sent a tick later have their players
    coded then, not at the snapshot's tick, so neither tick pays for all the coding; their
    heads (ack, own state) are still the snapshot tick's, though the world moved on, and
    every frame equals the one coded for all seats at once."""

    def walking() -> tuple[Match, list[int]]:
        match = Match(MatchConfig(ARENA, max_players=8, snapshot_interval=2))
        return match, [match.join(f"p{i}", 0.1).slot for i in range(5)]

    def step(match: Match, slots: list[int], seq: int) -> TickResult:
        for slot in slots:
            move = (1.0, 0.0) if slot % 2 else (0.0, -1.0)
            match.receive_input(slot, msg(seq, move=move, yaw=0.1 * slot), arrival=0.0)
        return match.tick()

    at_once, slots = walking()
    spread, _ = walking()
    evens, odds = [s for s in slots if s % 2 == 0], [s for s in slots if s % 2]
    for seq in range(4):
        whole, result = step(at_once, slots, seq), step(spread, slots, seq)
    assert result.body  # tick 4: a snapshot tick
    expected = {slot: at_once.snapshot_head(whole, slot) for slot in slots}
    coded = spread.deltas.clients_coded
    assert spread.snapshot_parts(result, evens) == {s: expected[s] for s in evens}
    assert spread.deltas.clients_coded - coded == len(evens)  # the odd seats wait
    step(spread, slots, 4)  # the next tick: everyone walks on, the world is not tick 4's
    assert spread.snapshot_parts(result, odds) == {s: expected[s] for s in odds}
    assert spread.deltas.clients_coded - coded == len(slots)
