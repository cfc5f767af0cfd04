"""A bot's launcher verdict and the server's agree on the same frames.

The server flies a projectile on tick by tick, each tick up to its newest snapshot; the bot
flies it in one go through the frames it rendered, once the verdict arrives. Both cut the
flight into the weapon's chords from its spawn (``Weapon.flight_step``), so on the same
frames they test the same chords against the same interpolated players: a near miss is a
miss for both. (Before the shared grid, the server cut each tick's piece into equal chords
of its own, and grazes went either way: the residue of unexplained launcher verdicts.)
"""

from __future__ import annotations

import math

import numpy as np

from client_sim.marksman import fly_projectile
from server.sim.hitreg import History, ProjectileShots, make_validator
from shared.arena_map import default_map
from shared.hitbox import HIT_NONE, HIT_PLAYER, HITBOX_TORSO, HITBOXES
from shared.weapons import EYE_HEIGHT, LAUNCHER

ARENA = default_map()
SNAPSHOT_RATE = 30.0
TICK_RATE = 60.0
SERVER = make_validator("reference", box_min=ARENA.box_min, box_max=ARENA.box_max)
TORSO_RADIUS = HITBOXES[HITBOX_TORSO - 1].radius


def server_verdict(
    times: np.ndarray, positions: np.ndarray, origin: np.ndarray, velocity: np.ndarray
) -> tuple[int, int]:
    """(victim candidate or -1, hitbox) as the node judges it: slot 0 is the shooter, far
    off; each tick flies on to the newest snapshot of that tick, from where the last left
    it."""
    frames, players = positions.shape[:2]
    feet = np.concatenate((np.full((frames, 1, 3), (0.0, 0.0, -50.0)), positions), axis=1)
    spawn, expire = float(times[0]), float(times[0]) + LAUNCHER.lifetime
    position, speed = origin, velocity
    for tick in range(int(times[0] * TICK_RATE) + 1, int(times[-1] * TICK_RATE) + 2):
        shown = times <= tick / TICK_RATE + 1e-12  # the snapshots taken by this tick
        history = History(
            times=times[shown][None],
            positions=feet[shown][None],
            alive=np.ones((1, int(shown.sum()), players + 1), dtype=np.uint8),
            start=[0],
            count=[int(shown.sum())],
        )
        result = SERVER.resolve_projectiles(
            history,
            ProjectileShots(
                match=[0], shooter=[0], origin=[position], velocity=[speed],
                gravity=LAUNCHER.gravity, spawn_time=[spawn],
                end_time=float(times[shown][-1]), expire_time=expire,
                step_time=LAUNCHER.flight_step,
            ),
        )  # fmt: skip
        if result.kind[0] == HIT_PLAYER:
            return int(result.victim[0]) - 1, int(result.hitbox[0])
        if result.kind[0] != HIT_NONE or result.expired[0]:
            return -1, 0
        position, speed, spawn = result.position[0], result.velocity[0], float(result.time[0])
    return -1, 0


def test_the_bot_and_the_server_judge_a_grazing_launcher_shot_alike():
    """60 shots that graze a candidate walking off the line of fire at 8 m/s: its torso's
    edge within millimetres of the flight as the projectile passes. Whether it is hit
    turns on where it stands at each chord's end: a bot cutting other chords (0.97 of the
    step, say) disagrees with the server on 6 of these 60."""
    hits = 0
    for seed in range(60):
        rng = np.random.default_rng(seed)
        origin = np.array([*rng.uniform(-20, 20, 2), EYE_HEIGHT])
        tau = rng.uniform(0.2, 0.6)  # when it passes the candidate, at torso height
        climb = (1.2 - EYE_HEIGHT + 0.5 * LAUNCHER.gravity * tau * tau) / tau
        yaw = rng.uniform(-math.pi, math.pi)
        flat = math.sqrt(LAUNCHER.speed**2 - climb**2)
        velocity = np.array([flat * math.cos(yaw), flat * math.sin(yaw), climb])
        times = (rng.integers(0, 30) + np.arange(40)) / SNAPSHOT_RATE  # the snapshots
        side = np.array([-math.sin(yaw), math.cos(yaw), 0.0]) * rng.choice([-1.0, 1.0])
        passed = origin + velocity * tau
        passed[2] = 0.0
        there = passed + side * (TORSO_RADIUS + rng.uniform(-0.006, 0.002))
        positions = (there + (times - times[0] - tau)[:, None] * side * 8.0)[:, None, :]
        bot = fly_projectile(
            origin, velocity, LAUNCHER.gravity, float(times[0]),
            float(times[0]) + LAUNCHER.lifetime, times, positions,
            np.ones((len(times), 1), dtype=bool), ARENA, LAUNCHER.flight_step,
        )  # fmt: skip
        server = server_verdict(times, positions, origin, velocity)
        assert bot == server, seed
        hits += server[0] >= 0
    assert 10 < hits < 50  # grazes both ways, not all hits or all misses
