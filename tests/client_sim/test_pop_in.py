"""The bots' pop-in measure: an enemy that appears in a snapshot while the frames before
it could have shown him is a pop-in; one that stepped out from behind a wall, joined or
respawned, or stands where distance culling may explain him, is not."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from client_sim.sight import PopInWatch
from shared.arena_map import default_map
from shared.protocol import JoinEvent, RespawnEvent
from shared.protocol.between import arrivals
from shared.protocol.snapshots import ENTITY_DTYPE, ENTITY_FLAG_ALIVE
from shared.sightlines import SIGHT_HEIGHTS, sight_blocked
from shared.weapons import EYE_HEIGHT

ARENA = default_map()
ME, ENEMY = 0, 1
T0, T1 = 1.0, 1.0 + 1 / 30
HERE = np.array([[-8.0, 6.0, 0.0]])  # south of the wall from x -12 to -4 at y 8..9


def records(*players: tuple[int, float, float, float]) -> np.ndarray:
    """Alive players ``(id, x, y, vx)``."""
    out = np.zeros(len(players), dtype=ENTITY_DTYPE)
    for row, (player, x, y, vx) in enumerate(players):
        out[row]["id"], out[row]["x"], out[row]["y"], out[row]["vx"] = player, x, y, vx
        out[row]["flags"] = ENTITY_FLAG_ALIVE
    return out


def appear(enemy: tuple[int, float, float, float], events=(), near_m: float = 100.0):
    """The enemy absent at T0 and present at T1; one frame rendered between the two."""
    watch = PopInWatch(1, ARENA.box_min, ARENA.box_max, near_m)
    watch.snapshot(0, ME, (T0, records((ME, -8.0, 6.0, 0.0))), T1,
                   records((ME, -8.0, 6.0, 0.0), enemy), events)  # fmt: skip
    watch.frame(np.array([0]), np.array([T0 + 0.01]), HERE)
    return watch


def test_an_enemy_in_the_open_that_appears_late_popped_in():
    watch = appear((ENEMY, -2.0, 6.0, 0.0))
    assert (watch.appearances, watch.pop_ins) == (1, 1)
    assert watch.enemy_records == 1


def test_an_enemy_that_walks_out_from_behind_a_wall_did_not_pop_in():
    # At T1 he has just come out past the wall's end into the bot's sight (from the bot's
    # eye, the wall hides y 12 up to x 4); moving at 6 m/s along +x he was behind it at
    # the frame's render time.
    eye = HERE + (0.0, 0.0, EYE_HEIGHT)
    head = np.array([[4.05, 12.0, SIGHT_HEIGHTS[0]]])
    assert not sight_blocked(eye, head, ARENA.box_min, ARENA.box_max).any()
    watch = appear((ENEMY, 4.05, 12.0, 6.0))
    assert (watch.appearances, watch.pop_ins) == (1, 0)
    # Standing still there, he would have been in sight at that frame: a pop-in.
    assert appear((ENEMY, 4.05, 12.0, 0.0)).pop_ins == 1
    watch.frame(np.array([0]), np.array([T1]), HERE)  # drawn from T1 on
    assert not watch.pending[0]


def test_arrivals_and_players_beyond_interest_are_not_judged():
    assert appear((ENEMY, -2.0, 6.0, 0.0), events=(RespawnEvent(player=ENEMY),)).appearances == 0
    assert appear((ENEMY, -2.0, 6.0, 0.0), events=(JoinEvent(player=ENEMY),)).appearances == 0
    # 6 m to the east: outside a 5 m radius, whichever way the bot faces (interest's view
    # cone follows the aim the node last heard of, so it explains nothing here).
    assert appear((ENEMY, -2.0, 6.0, 0.0), near_m=5.0).appearances == 0
    # The bot itself respawned: the stretch before was drawn from another place.
    watch = appear((ENEMY, -2.0, 6.0, 0.0), events=(RespawnEvent(player=ME),))
    assert watch.appearances == 0


@settings(deadline=None, max_examples=200)
@given(
    st.sets(st.integers(0, 40), max_size=30),
    st.sets(st.integers(0, 40), max_size=30),
    st.sets(st.integers(0, 40)),
    st.integers(0, 40),
)
def test_arrivals_are_the_live_players_the_earlier_snapshot_lacked(
    before: set[int], after: set[int], dead: set[int], me: int
) -> None:
    # The kernel against set arithmetic: new = alive in after, not in before, not me.
    held = records(*((p, 0.0, 0.0, 0.0) for p in sorted(before)))
    now = records(*((p, 0.0, 0.0, 0.0) for p in sorted(after)))
    now["flags"] = [0 if p in dead else ENTITY_FLAG_ALIVE for p in sorted(after)]
    rows = np.empty(len(now), np.int64)
    count, others = arrivals(held, now, me, rows)
    assert sorted(now["id"][rows[:count]].tolist()) == sorted(
        p for p in after - before - dead if p != me
    )
    assert others == len(after - {me})
