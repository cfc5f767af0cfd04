"""Which events each client is told: every join, leave and respawn, and the shots of the
players it is sent (so what a client is told grows with the players near it, not with the
match), its own shots and hits always among them."""

from __future__ import annotations

import math
from typing import Any

import msgpack
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from server.sim import match as match_module
from server.sim.interest import InterestConfig
from server.sim.match import Match, MatchConfig, ShownWorld, TickResult, _events_told
from shared.arena_map import default_map
from shared.movement import BUTTON_FIRE
from shared.protocol import (
    InputMessage,
    JoinEvent,
    LeaveEvent,
    RespawnEvent,
    ShotEvent,
    SnapshotEvent,
    SnapshotMessage,
    decode_server,
    events_part,
    pack_event,
)
from shared.protocol.events import decode_event
from shared.weapons import EYE_HEIGHT, RESPAWN_DELAY_S
from tests.server.frames import players_shown, snapshot_for

ARENA = default_map()
RATE = 60
#: Only the players within 5 m (not the nearest few however far, no background
#: refreshes): who is sent reads exactly.
NEAR = InterestConfig(near_m=5.0, view_m=5.0, background=0, nearest=0)
# Joins spawn round-robin in the corners, 52 m apart: 0 at (-26, -26), 1 at (-26, 26),
# 2 at (26, -26), 3 at (26, 26) (moved next to 2 where a test says so). Player 0 aims
# along +y at the centre of player 1's head, with nothing between them.
HEAD_SHOT = (math.pi / 2, math.atan2(1.62 - EYE_HEIGHT, 52.0))
SKY = (0.0, 1.0)  # a miss


# -- _events_told ------------------------------------------------------------------------------


def shown_with(events: list[SnapshotEvent]) -> ShownWorld:
    """A snapshot's world telling ``events`` (its players do not matter here)."""
    parties = np.array(
        [(e.shooter, e.victim) if isinstance(e, ShotEvent) else (-1, -1) for e in events],
        dtype=np.int64,
    ).reshape(-1, 2)
    empty = np.zeros(0)
    return ShownWorld(
        np.zeros((0, 10), np.int32),
        empty.astype(bool),
        empty,
        empty,
        [pack_event(e) for e in events],
        parties,
    )


def selection(rows: list[list[int]], width: int) -> np.ndarray:
    """``(len(rows), width)`` bool: row ``c`` sends the players listed in ``rows[c]``."""
    selected = np.zeros((len(rows), width), dtype=np.bool_)
    for c, players in enumerate(rows):
        selected[c, players] = True
    return selected


def told(part: bytes) -> list[SnapshotEvent]:
    """The events of one ``events`` part, decoded."""
    unpacker = msgpack.Unpacker(raw=False)
    unpacker.feed(part)
    key, events = list(unpacker)
    assert key == "events"
    return [decode_event(e) for e in events]


def shot(shooter: int, victim: int = -1, seq: int = 0) -> ShotEvent:
    return ShotEvent(shooter, seq, 0, "hit" if victim >= 0 else "miss", 1.0, victim=victim)


def test_no_events_tell_each_client_an_empty_list() -> None:
    """Every client's part has an events pair, even on a quiet tick."""
    parts = _events_told(shown_with([]), selection([[0], [1], []], 2))
    assert parts == [events_part([])] * 3


def test_joins_leaves_and_respawns_are_told_to_everyone() -> None:
    """Even to a client sent nobody, and of players beyond any client's selection."""
    events: list[SnapshotEvent] = [JoinEvent(0), LeaveEvent(7), RespawnEvent(1), JoinEvent(300)]
    parts = _events_told(shown_with(events), selection([[0, 1], [], [1]], 2))
    assert parts == [events_part([pack_event(e) for e in events])] * 3


def test_a_shot_is_told_to_the_clients_sent_its_shooter_or_its_victim() -> None:
    """Those can see it happen (or suffer it); the order of the tick is kept."""
    events: list[SnapshotEvent] = [
        shot(0),  # a miss by 0
        JoinEvent(3),
        shot(1, victim=2),  # 1 hit 2
        shot(3, victim=0),  # 3 hit 0
    ]
    rows = [[0], [1], [2], [3], [], [0, 2]]
    parts = _events_told(shown_with(events), selection(rows, 4))
    a, join, b, c = events
    assert [told(p) for p in parts] == [
        [a, join, c],  # 0 is its shooter, and c's victim
        [join, b],
        [join, b],  # its victim
        [join, c],
        [join],  # sent nobody: not even a miss (whose victim, -1, is no column)
        [a, join, b, c],
    ]
    assert parts[5] == events_part([pack_event(e) for e in events])  # as packed once


def test_a_miss_is_not_told_to_a_client_sent_player_zero_only_for_its_victim() -> None:
    """A miss's victim is -1: it must not read as player 0 (the first column)."""
    parts = _events_told(shown_with([shot(3)]), selection([[0], [3]], 4))
    assert [told(p) for p in parts] == [[], [shot(3)]]


def test_a_party_beyond_the_selection_s_width_is_sent_to_nobody_without_a_crash() -> None:
    """A player seated and gone between two snapshots can be beyond every client's row."""
    events: list[SnapshotEvent] = [shot(9), shot(9, victim=1), shot(1, victim=12), LeaveEvent(9)]
    parts = _events_told(shown_with(events), selection([[0], [1]], 2))
    assert [told(p) for p in parts] == [[LeaveEvent(9)], events[1:]]


@given(
    width=st.integers(1, 6),
    rows=st.lists(st.lists(st.booleans(), min_size=8, max_size=8), max_size=5),
    events=st.lists(
        st.one_of(
            st.builds(JoinEvent, st.integers(0, 8)),
            st.builds(LeaveEvent, st.integers(0, 8)),
            st.builds(RespawnEvent, st.integers(0, 8)),
            st.builds(shot, st.integers(0, 8), st.integers(-1, 8)),
        ),
        max_size=8,
    ),
)
def test_each_client_is_told_exactly_the_events_that_concern_who_it_is_sent(
    width: int, rows: list[list[bool]], events: list[SnapshotEvent]
) -> None:
    """Every event everyone is told, and a shot by or at a player the client is sent, in
    the order they happened; parties may lie beyond the width."""
    selected = np.array([row[:width] for row in rows], dtype=np.bool_).reshape(len(rows), width)

    def sent(c: int, player: int) -> bool:
        return 0 <= player < width and bool(selected[c, player])

    parts = _events_told(shown_with(events), selected)
    assert len(parts) == len(rows)
    for c, part in enumerate(parts):
        expected = [
            e
            for e in events
            if not isinstance(e, ShotEvent) or sent(c, e.shooter) or sent(c, e.victim)
        ]
        assert part == events_part([pack_event(e) for e in expected])


# -- in the match ------------------------------------------------------------------------------


def new_match(players: int = 4, max_players: int = 4, **config: Any) -> Match:
    match = Match(
        MatchConfig(ARENA, tick_rate=RATE, max_players=max_players, interest=NEAR, **config)
    )
    for i in range(players):
        assert match.join(f"p{i}", 0.1).slot == i
    return match


def fire(match: Match, slot: int, seq: int, aim: tuple[float, float]) -> None:
    """One fire input that claims to have seen the newest tick, arriving now."""
    message = InputMessage(
        seq=seq,
        tick=seq,
        move=(0.0, 0.0),
        yaw=aim[0],
        pitch=aim[1],
        buttons=BUTTON_FIRE,
        view_time=match.server_time,
        ack_tick=-1,
    )
    assert match.receive_input(slot, message, arrival=match.server_time).usable


def events_of(match: Match, result: TickResult, slot: int) -> tuple[SnapshotEvent, ...]:
    """The events ``slot``'s snapshot of ``result`` tells it."""
    message = decode_server(snapshot_for(match, result, slot))
    assert isinstance(message, SnapshotMessage)
    return message.events


def test_every_client_is_told_every_join_and_leave_however_far() -> None:
    """Who is in the match is everyone's business (the scoreboard), near or not."""
    match = new_match()
    joined = match.tick()
    joins = tuple(JoinEvent(slot) for slot in range(4))
    assert [events_of(match, joined, slot) for slot in range(4)] == [joins] * 4
    match.leave(3)
    left = match.tick()
    assert [events_of(match, left, slot) for slot in range(3)] == [(LeaveEvent(3),)] * 3


def test_a_client_is_told_its_own_shots_and_hits_and_its_neighbours_not_a_far_fight() -> None:
    """A client always sends itself: its own shot and the hit it took (from 52 m) are
    told; a fight it is not sent either side of is not."""
    match = new_match()
    match.world.pos[3] = (26.0, -23.0, 0.0)  # 3 m from player 2, 52 m from 0 and 1
    match.tick()  # (the history holds them there)
    fire(match, 0, 0, HEAD_SHOT)  # 0 hits 1, 52 m away
    fire(match, 2, 0, SKY)  # 2 misses, beside 3
    result = match.tick()
    shots = {e.shooter: e for e in result.events if isinstance(e, ShotEvent)}
    assert sorted(shots) == [0, 2]
    assert (shots[0].result, shots[0].victim, shots[2].result) == ("hit", 1, "miss")
    assert [events_of(match, result, slot) for slot in range(4)] == [
        (shots[0],),  # its own shot
        (shots[0],),  # its own hit
        (shots[2],),  # its own miss, not the far fight
        (shots[2],),  # its neighbour's miss, not the far fight
    ]
    assert players_shown(match, result, 3)["id"].tolist() == [2, 3]


def test_a_respawn_is_told_to_everyone_however_far() -> None:
    """Like joins and leaves: the dead player is back, whoever it is near."""
    match = new_match()
    match.tick()
    for seq in (0, 6):  # two head shots six inputs apart (50 + 50): a kill
        fire(match, 0, seq, HEAD_SHOT)
        for _ in range(6):
            match.tick()
    assert not match.world.alive[1]
    for _ in range(round(RESPAWN_DELAY_S * RATE) + 1):
        result = match.tick()
        if RespawnEvent(1) in result.events:
            break
    else:
        pytest.fail("player 1 did not respawn")
    assert [events_of(match, result, slot) for slot in range(4)] == [(RespawnEvent(1),)] * 4


def test_a_snapshot_tells_the_shots_of_the_ticks_since_the_last_one_to_those_concerned() -> None:
    """A shot on a tick between snapshots is told with the next one, by the same rule."""
    match = new_match(snapshot_interval=2)
    while match.tick().shown is None:  # to a snapshot tick
        pass
    fire(match, 1, 0, SKY)
    between = match.tick()
    assert between.shown is None
    (miss,) = between.events
    result = match.tick()
    assert result.shown is not None and result.events == []
    assert [events_of(match, result, slot) for slot in range(4)] == [(), (miss,), (), ()]


def test_the_shot_of_a_player_gone_before_the_snapshot_is_told_to_nobody(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its seat can be beyond the width of every client's selection (64 columns here, the
    deltas' first size): it joined, fired and left between two snapshots."""
    widths: list[int] = []

    def spy(shown: ShownWorld, selected: np.ndarray) -> list[bytes]:
        widths.append(selected.shape[1])
        return _events_told(shown, selected)

    monkeypatch.setattr(match_module, "_events_told", spy)
    match = new_match(players=64, max_players=65, snapshot_interval=2)
    while match.tick().shown is None:
        pass
    late = match.join("late", 0.1)
    assert late.slot == 64
    match.world.pos[64] = (20.0, 10.0, 0.0)  # alone, 8 m from the nearest spawn point
    fire(match, 64, 0, SKY)
    between = match.tick()
    assert between.shown is None
    assert [type(e) for e in between.events] == [JoinEvent, ShotEvent]
    miss = between.events[1]
    assert isinstance(miss, ShotEvent) and (miss.shooter, miss.result) == (64, "miss")
    match.leave(64)
    result = match.tick()
    assert result.shown is not None
    for slot in (0, 37, 63):
        assert events_of(match, result, slot) == (JoinEvent(64), LeaveEvent(64))
    assert widths == [64]


#: Three players close together in a corner, two in another, one alone.
SPOTS = [(-26.0, -26.0), (-23.0, -26.0), (-20.0, -26.0), (20.0, 20.0), (23.0, 21.0), (26.0, -26.0)]


def test_over_a_game_each_client_is_told_exactly_what_concerns_the_players_it_is_shown() -> None:
    """Six players wandering and firing at random, in and out of each other's 5 m: each
    snapshot tells each client every join, leave and respawn, and the shots by or at the
    players it is shown, in the order they happened."""
    match = new_match(players=6, max_players=6, snapshot_interval=2)
    match.world.pos[:6, :2] = SPOTS
    rng = np.random.default_rng(11)
    pending: list[SnapshotEvent] = []
    told_shots = untold_shots = 0
    for seq in range(80):
        for slot in range(6):
            dx, dy = rng.uniform(-1.0, 1.0, 2).tolist()
            message = InputMessage(
                seq=seq, tick=seq, move=(dx, dy), yaw=float(rng.uniform(-math.pi, math.pi)),
                pitch=float(rng.uniform(-0.3, 0.3)),
                buttons=BUTTON_FIRE if rng.random() < 0.3 else 0,
                view_time=match.server_time, ack_tick=-1,
            )  # fmt: skip
            match.receive_input(slot, message, arrival=match.server_time)
        result = match.tick()
        pending.extend(result.events)
        if result.shown is None:
            continue
        for slot in range(6):
            shown = set(players_shown(match, result, slot)["id"].tolist())
            expected = tuple(
                e
                for e in pending
                if not isinstance(e, ShotEvent) or e.shooter in shown or e.victim in shown
            )
            assert events_of(match, result, slot) == expected
            shots = sum(isinstance(e, ShotEvent) for e in pending)
            told_shots += sum(isinstance(e, ShotEvent) for e in expected)
            untold_shots += shots - sum(isinstance(e, ShotEvent) for e in expected)
        pending = []
    assert told_shots > 0 and untold_shots > 0
