"""What the bots' view, sight-line and shot kernels save against the NumPy they replaced, as JSON.

Every bot draws what lies between two snapshots at each look (10 a second) and each shot,
and tests its sight lines against the map's boxes when it looks around and weighs cover.
With interest management the two snapshots around a render time often hold different
players, so each view matched them with a dozen small NumPy operations; the sight lines
built ``(lines, boxes, 3)`` arrays a dozen times over; each shot's own verdict ran the
shared NumPy ray test on the players within reach. All three are kernels now
(:mod:`shared.protocol.between`, :mod:`shared.sightlines`, :mod:`shared.rayhits`), checked
against those NumPy versions, which stay the references; this bench times them side by
side, in alternation (``bench/interleaved.py``), on the shapes a 300-bot swarm sees: 52
players a snapshot (3 of them swapped between the two), 150 sight lines against the
default map's boxes, one perception pass of 50 bots (each drawing its own 52 players: the
union of their views and the NumPy glance it replaced, against the one kernel that draws
and glances), and one rifle shot at one of 52 players.

    python bench/bot_kernels.py [--rounds 7] [--min-seconds 0.2] [--json PATH]
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.interleaved import interleave, median_timing
from bench.report import Start, add_json_option, emit
from client_sim import brain as brain_module
from client_sim.brain import Brain
from client_sim.interpolation import Bracket, drawn, seen
from client_sim.sight import segments_within_reach
from shared.arena_map import default_map
from shared.commandline import OneLineParser
from shared.hitbox import RayHit, ray_hit_player
from shared.protocol import ENTITY_DTYPE
from shared.protocol.between import players_between
from shared.protocol.between import warm_up as warm_between
from shared.rayhits import first_hit
from shared.rayhits import warm_up as warm_shots
from shared.sightlines import sight_blocked
from shared.sightlines import warm_up as warm_sight
from shared.weapons import EYE_HEIGHT, RIFLE
from tests.client_sim.test_interpolation import reference_view
from tests.client_sim.test_sight import reference_sight_blocked

PLAYERS_SHOWN = 52  # players a bot is sent a snapshot at 300 bots (bench/server_load.py)
SWAPPED = 3  # of them, not in the next snapshot
SIGHT_LINES = 150  # 50 lookers a tick, 3 glances each
LOOKERS = 50


def random_points(rng: np.random.Generator, n: int, height: float) -> np.ndarray:
    """``n`` points spread over the default map, ``height`` above the floor."""
    arena = default_map()
    lo, hi = arena.bounds_min, arena.bounds_max
    return np.column_stack(
        [rng.uniform(lo[0], hi[0], n), rng.uniform(lo[1], hi[1], n), np.full(n, height)]
    )


def snapshot_pair(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Two snapshots' records around a render time, a few players swapped between them."""
    arena = default_map()

    def records(ids: np.ndarray) -> np.ndarray:
        out = np.zeros(len(ids), dtype=ENTITY_DTYPE)
        out["id"] = ids
        for axis, name in enumerate("xy"):
            out[name] = rng.uniform(arena.bounds_min[axis], arena.bounds_max[axis], len(ids))
        out["flags"] = 1
        return out

    before = np.sort(rng.choice(300, PLAYERS_SHOWN, replace=False))
    others = np.setdiff1d(np.arange(300), before)
    after = np.sort(np.concatenate([before[:-SWAPPED], rng.choice(others, SWAPPED, replace=False)]))
    return records(before), records(after)


def brackets_of_lookers(rng: np.random.Generator) -> list[Bracket]:
    """Each of ``LOOKERS`` bots' bracket: two snapshots of its own (``PLAYERS_SHOWN`` of 300
    players, a few swapped), drawn part of the way between them."""
    return [
        Bracket(1.0, 1.0, *snapshot_pair(rng), float(rng.uniform(0.1, 0.9)), True)
        for _ in range(LOOKERS)
    ]


def numpy_glance(
    brain: Brain, own: np.ndarray, feet: np.ndarray, ids: np.ndarray, visible: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The glance as the bots took it before its kernel (``Brain.perceive_group``'s NumPy
    over the union of what the lookers draw): each looker's spotted id (-1 none) and feet."""
    count, players = visible.shape
    distance = np.hypot(feet[:, :, 0] - own[:, None, 0], feet[:, :, 1] - own[:, None, 1])
    distance = np.where(visible & (distance <= brain.engage_range), distance, np.inf)
    glances = min(brain_module.GLANCES, players)
    if players > glances:
        nearest = np.argpartition(distance, glances - 1, axis=1)[:, :glances]
    else:
        nearest = np.broadcast_to(np.arange(players), (count, players))
    near = np.take_along_axis(distance, nearest, axis=1)
    order = np.lexsort((nearest, near))
    nearest = np.take_along_axis(nearest, order, axis=1)
    rows, ranks = np.nonzero(np.isfinite(np.take_along_axis(near, order, axis=1)))
    targets = nearest[rows, ranks]
    eyes = own[rows] + (0.0, 0.0, EYE_HEIGHT)
    chests = feet[rows, targets] + (0.0, 0.0, brain_module.CHEST_HEIGHT)
    clear = ~sight_blocked(eyes, chests, brain.arena.box_min, brain.arena.box_max)
    spotters, first = np.unique(rows[clear], return_index=True)
    spotted = np.full(count, -1, dtype=np.int64)
    where = np.zeros((count, 3))
    spotted[spotters] = ids[targets[clear][first]]
    where[spotters] = feet[spotters, targets[clear][first]]
    return spotted, where


def perception(rng: np.random.Generator, fused: bool) -> Callable[[], np.ndarray]:
    """One perception pass of the swarm: ``LOOKERS`` bots, each drawing its own bracket.
    Before (``fused`` False): the union of their views (``seen``), masked, and
    :func:`numpy_glance`; now: each looker's own players, glanced at in one kernel call
    (``Brain.perceive_drawn``). Either notes what was spotted; returns the threats."""
    brain = Brain(300, default_map(), rng, cover_seeking=0.0)
    brackets = brackets_of_lookers(rng)
    bots = np.arange(LOOKERS) * 6
    own = random_points(rng, LOOKERS, 0.0)
    selves = bots  # (each looker's player id)
    friends = np.zeros(0, dtype=bool)

    def look() -> np.ndarray:
        if fused:
            brain.perceive_drawn(bots, own, *drawn(brackets), selves, friends, 1.0)
        else:
            ids, feet, visible = seen(brackets)
            visible &= ids[None] != selves[:, None]
            spotted, where = numpy_glance(brain, own, feet, ids, visible)
            brain._note(bots, own, spotted, where, 1.0)
        return brain.threat_id[bots].copy()

    return look


def numpy_shot(
    eye: np.ndarray,
    aim: np.ndarray,
    reach: float,
    feet: np.ndarray,
    present: np.ndarray,
    boxes: tuple[np.ndarray, np.ndarray],
) -> RayHit:
    """A shot's verdict as the bots reached it before the kernel: the shared NumPy ray test
    on the present players within reach of the segment."""
    within = segments_within_reach(eye[None], aim[None], np.array([reach]), feet)[0]
    near = np.flatnonzero(present & within)
    hit = ray_hit_player(eye, aim, reach, feet[near], *boxes)
    return hit._replace(victim=int(near[hit.victim])) if hit.victim >= 0 else hit


def a_shot(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A rifle shot from one player's eye at another's chest, ``PLAYERS_SHOWN`` around:
    (eye, unit aim, the players' feet)."""
    feet = random_points(rng, PLAYERS_SHOWN, 0.0)
    eye, chest = feet[0] + (0.0, 0.0, 1.6), feet[1] + (0.0, 0.0, 1.2)
    aim = (chest - eye) / np.linalg.norm(chest - eye)
    return eye, aim, feet


def run(rounds: int, min_seconds: float) -> dict[str, Any]:
    rng = np.random.default_rng(7)
    warm_between()
    warm_sight()
    warm_shots()
    arena = default_map()
    before, after = snapshot_pair(rng)
    weight = np.array([0.4])
    starts = random_points(rng, SIGHT_LINES, 1.6)  # eyes
    ends = random_points(rng, SIGHT_LINES, 1.2)  # chests
    boxes = (arena.box_min, arena.box_max)
    kernel_view = players_between(before, after, weight)
    numpy_view = reference_view(before, after, 0.4)
    assert np.array_equal(kernel_view[1][0], numpy_view[1])  # (the same answer, timed)
    assert np.array_equal(sight_blocked(starts, ends, *boxes),
                          reference_sight_blocked(starts, ends, *boxes))  # fmt: skip
    before_glance = perception(np.random.default_rng(8), fused=False)
    glance = perception(np.random.default_rng(8), fused=True)
    assert np.array_equal(before_glance(), glance())
    eye, aim, feet = a_shot(rng)
    others = np.arange(PLAYERS_SHOWN) > 0  # (not the shooter)
    shot = (eye, aim, RIFLE.max_range, feet, others, *boxes)
    assert first_hit(*shot) == numpy_shot(*shot[:5], boxes)
    samples = interleave(
        [
            lambda: reference_view(before, after, 0.4),
            lambda: players_between(before, after, weight),
            lambda: reference_sight_blocked(starts, ends, *boxes),
            lambda: sight_blocked(starts, ends, *boxes),
            before_glance,
            glance,
            lambda: numpy_shot(*shot[:5], boxes),
            lambda: first_hit(*shot),
        ],
        rounds,
        min_seconds,
    )
    (
        view_numpy, view_kernel, sight_numpy, sight_kernel, perceive_numpy, perceive,
        shot_numpy, shot_kernel,
    ) = (median_timing(s).cpu_seconds * 1e6 for s in samples)  # fmt: skip
    return {
        "bench": "bot_kernels",
        "rounds": rounds,
        "machine": {"cpus": os.cpu_count(), "loadavg_1m": round(os.getloadavg()[0], 2)},
        "view": {
            "players_shown": PLAYERS_SHOWN,
            "swapped": SWAPPED,
            "numpy_us": round(view_numpy, 2),
            "kernel_us": round(view_kernel, 2),
            "speedup": round(view_numpy / view_kernel, 1),
        },
        "sight_lines": {
            "lines": SIGHT_LINES,
            "boxes": len(arena.box_min),
            "numpy_us": round(sight_numpy, 1),
            "kernel_us": round(sight_kernel, 1),
            "speedup": round(sight_numpy / sight_kernel, 1),
        },
        "perception_pass": {
            "lookers": LOOKERS,
            "players_each_draws": PLAYERS_SHOWN,
            "union_and_numpy_glance_us": round(perceive_numpy, 1),
            "fused_kernel_us": round(perceive, 1),
            "speedup": round(perceive_numpy / perceive, 1),
        },
        "shot": {
            "players": PLAYERS_SHOWN,
            "boxes": len(arena.box_min),
            "numpy_us": round(shot_numpy, 2),
            "kernel_us": round(shot_kernel, 2),
            "speedup": round(shot_numpy / shot_kernel, 1),
        },
    }


def main() -> int:
    parser = OneLineParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7, help="alternations (default 7)")
    parser.add_argument(
        "--min-seconds", type=float, default=0.2, help="each timing's span (default 0.2)"
    )
    add_json_option(parser, "bot_kernels")
    args = parser.parse_args()
    start = Start.now("bot_kernels", "bench/bot_kernels.py", None)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    if not args.min_seconds > 0:
        parser.error("--min-seconds must be above 0")
    result = run(args.rounds, args.min_seconds)
    emit(result, args.json, start)
    return 0


if __name__ == "__main__":
    sys.exit(main())
