"""How bots shoot, and what they saw of each shot (sans-I/O).

A bot fires at the enemy its brain is tracking once it has seen it for its reaction time,
aiming at the chest as it renders it (interpolated, ``interp_delay`` in the past) with a
Gaussian angular error. For every shot it records its own verdict, computed with the shared
hitbox model on exactly what it was rendering, and later pairs it with the server's verdict
from the snapshot's ``shot`` event. That pairing is the fairness measurement: where client
and server disagree, somebody saw something the other did not.

Projectiles are judged the same way at the end of their flight: the bot keeps every
snapshot it rendered during the flight and flies the projectile through the players in
them (:func:`fly_projectile`, :func:`tracked_players`).
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass, field

import numpy as np

from client_sim.bot_random import OneBot
from client_sim.sight import segments_within_reach
from shared.arena_map import ArenaMap
from shared.hitbox import HIT_NONE, HIT_PLAYER
from shared.protocol import ENTITY_FLAG_ALIVE
from shared.protocol.inputs import quantize_angle
from shared.rayhits import first_hit
from shared.sightlines import sight_blocked
from shared.weapons import EYE_HEIGHT, LAUNCHER, RIFLE, Weapon, aim_direction

__all__ = ["AimSkill", "ShotRecord", "aim_at", "fly_projectile", "tracked_players"]

CHEST_HEIGHT = 1.2


@dataclass(frozen=True, slots=True)
class AimSkill:
    """A population's shooting: angular error (standard deviation), reaction, habits."""

    error_deg: float = 1.0
    reaction_s: float = 0.25
    fire_rate_hz: float = 3.0  # mean shots per second while a target is in sight
    launcher_share: float = 0.1  # share of shots fired with the projectile weapon

    def __post_init__(self) -> None:
        if self.error_deg < 0 or self.reaction_s < 0 or self.fire_rate_hz <= 0:
            raise ValueError("aim error and reaction must be >= 0 and the fire rate > 0")
        if not 0.0 <= self.launcher_share <= 1.0:
            raise ValueError("launcher share must be between 0 and 1")


@dataclass(slots=True)
class ShotRecord:
    """One shot as the shooter saw it, and (once it arrives) as the server judged it."""

    seq: int
    weapon: int
    rtt_ms: float  # the bot's measured RTT (pings) when it fired
    client_victim: int  # player id, -1 for no player
    client_hitbox: int
    view_time: float  # the time of the world the bot drew: its claim
    server_result: str | None = None  # "hit", "miss", "world", "rejected"
    server_victim: int = -1
    link_rtt_ms: float = math.nan  # the RTT the bot's link was configured with
    eye: tuple[float, float, float] | None = None  # where the bot fired from
    #: Hitscan: the players the bot drew when it fired (interest management sends each
    #: client only some: a hit on another is no verdict the bot could have made); a
    #: projectile: those it drew in every snapshot of the flight.
    drawn: frozenset[int] | None = None
    # From the server's ``shot`` event: the damage dealt, how the view time was decided,
    # the time judged, the eye it fired from, its RTT estimate of the shooter, and whether
    # the shooter had been killed before the input that fired (a trade, fired from where
    # it fell).
    server_damage: int = 0
    server_judged: str | None = None
    server_view_time: float = math.nan
    server_origin: tuple[float, float, float] | None = None
    server_rtt_ms: float = math.nan
    server_traded: bool = False
    #: The tick the server judged it at and the shooter's slot (where a match log has it).
    server_tick: int = -1
    shooter: int = -1
    # Projectiles only: what the bot needs to judge the flight once it is over.
    origin: np.ndarray | None = None
    velocity: np.ndarray | None = None
    # Every snapshot the bot rendered from the fire frame on, as entity records: any other
    # player in any of them (one who respawns or joins mid-flight too) may be hit.
    track_times: list[float] = field(default_factory=list)
    track_frames: list[np.ndarray] = field(default_factory=list)

    @property
    def client_hit(self) -> bool:
        return self.client_victim >= 0

    @property
    def server_hit(self) -> bool:
        return self.server_result == "hit"

    @property
    def agrees(self) -> bool:
        return self.client_hit == self.server_hit and (
            not self.client_hit or self.client_victim == self.server_victim
        )


def aim_at(
    eye: np.ndarray, target_feet: np.ndarray, error_rad: float, rng: OneBot
) -> tuple[float, float]:
    """Yaw and pitch towards the target's chest, off by a Gaussian angular error, kept to
    the node's step (so the ray this bot judges is the one the node judges)."""
    to = target_feet + (0.0, 0.0, CHEST_HEIGHT) - eye
    yaw = math.atan2(to[1], to[0]) + rng.normal(0.0, error_rad)
    pitch = math.atan2(to[2], math.hypot(to[0], to[1])) + rng.normal(0.0, error_rad)
    yaw = (yaw + math.pi) % (2.0 * math.pi) - math.pi
    pitch = max(-math.pi / 2, min(math.pi / 2, pitch))
    return quantize_angle(yaw, math.pi), quantize_angle(pitch, math.pi / 2)


def choose_weapon(skill: AimSkill, rng: OneBot) -> Weapon:
    return LAUNCHER if rng.random() < skill.launcher_share else RIFLE


def hitscan_verdict(
    eye: np.ndarray,
    yaw: float,
    pitch: float,
    ids: np.ndarray,
    positions: np.ndarray,
    present: np.ndarray,
    arena: ArenaMap,
) -> tuple[int, int]:
    """The shooter's own verdict: (victim player id or -1, hitbox id) on what it renders."""
    hit = first_hit(
        eye, aim_direction(yaw, pitch), RIFLE.max_range, positions, present,
        arena.box_min, arena.box_max,
    )  # fmt: skip
    if hit.kind != HIT_PLAYER:
        return -1, 0
    return int(ids[hit.victim]), int(hit.hitbox)


def tracked_players(
    frames: list[np.ndarray], shooter: int, killed_before: Collection[int] = ()
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The players of a flight's snapshots (entity records) but the shooter: their ids
    ``(C,)``, and per snapshot their feet ``(T, C, 3)`` and whether each was there and
    alive ``(T, C)``.

    The last snapshot is the one that carried the verdict: it shows the players killed in
    its tick dead, but the server judged that tick's shots before applying them, so a
    player alive in the snapshot before counts as alive in it (one killed by an earlier
    shot of that tick is hit for no damage, as the server's event says) unless it was
    killed in a tick before the snapshot's (``killed_before``, from the events' ticks: a
    snapshot tells two ticks at 30 a second), which the server's history shows dead."""
    every = np.unique(np.concatenate([f["id"] for f in frames]).astype(np.int64))
    ids = every[every != shooter]
    positions = np.zeros((len(frames), len(ids), 3))
    alive = np.zeros((len(frames), len(ids)), dtype=bool)
    for k, records in enumerate(frames):
        if not len(records) or not len(ids):
            continue
        found = np.minimum(np.searchsorted(records["id"], ids), len(records) - 1)
        here = records["id"][found] == ids
        rows = records[found]
        positions[k] = np.column_stack((rows["x"], rows["y"], rows["z"]))
        alive[k] = here & ((rows["flags"] & ENTITY_FLAG_ALIVE) != 0)
        if k == len(frames) - 1 and k > 0:
            revived = here & alive[k - 1]
            if killed_before:
                revived &= ~np.isin(ids, np.fromiter(killed_before, dtype=np.int64))
            alive[k] |= revived
    return ids, positions, alive


def fly_projectile(
    origin: np.ndarray,
    velocity: np.ndarray,
    gravity: float,
    start: float,
    expire: float,
    times: np.ndarray,
    positions: np.ndarray,
    alive: np.ndarray,
    arena: ArenaMap,
    step: float,
) -> tuple[int, int]:
    """Fly a projectile through rendered frames; returns (candidate index or -1, hitbox).

    ``times`` (T,) are snapshot times, ``positions`` (T, C, 3) and ``alive`` (T, C) the
    candidates in them. Between frames players are interpolated, as the bot renders them;
    the flight is cut into the server's chords of ``step`` seconds (the weapon's
    :attr:`~shared.weapons.Weapon.flight_step`), each tested against the players at its end.

    The exact test (:func:`~shared.rayhits.first_hit`) runs, in flight order, only on
    the chords that may hit something: a candidate within reach, or a (slightly padded)
    box or the floor. The first of those that hits decides, as if every chord were tested.
    """
    end = min(expire, float(times[-1])) if len(times) else start
    steps = _flight(origin, velocity, gravity, start, end, expire, step)
    if not len(steps):
        return -1, 0
    at, begin, finish = steps[:, 0], steps[:, 1:4], steps[:, 4:7]
    segment = finish - begin
    length = np.sqrt(np.einsum("sk,sk->s", segment, segment))
    moving = length > 0.0
    at, begin, segment, length = at[moving], begin[moving], segment[moving], length[moving]
    direction = segment / length[:, None]
    k = np.clip(np.searchsorted(times, at, side="left"), 1, len(times) - 1)
    t0, t1 = times[k - 1], times[k]
    same = t1 == t0
    weight = np.where(same, 0.0, np.clip((at - t0) / np.where(same, 1.0, t1 - t0), 0.0, 1.0))
    rendered = positions[k - 1] + (positions[k] - positions[k - 1]) * weight[:, None, None]
    present = alive[k - 1] & alive[k]
    near = present & segments_within_reach(begin, direction, length, rendered)
    pad = _WORLD_PAD
    world = sight_blocked(begin, begin + segment, arena.box_min - pad, arena.box_max + pad)
    world |= np.minimum(begin[:, 2], begin[:, 2] + segment[:, 2]) <= pad  # the floor
    for s in np.flatnonzero(near.any(axis=1) | world).tolist():
        hit = first_hit(
            begin[s], direction[s], float(length[s]), rendered[s], present[s],
            arena.box_min, arena.box_max,
        )  # fmt: skip
        if hit.kind == HIT_PLAYER:
            return int(hit.victim), int(hit.hitbox)
        if hit.kind != HIT_NONE:
            return -1, 0
    return -1, 0


#: Boxes are grown by this much when choosing which steps get the exact test.
_WORLD_PAD = 1e-6


def _flight(
    origin: np.ndarray,
    velocity: np.ndarray,
    gravity: float,
    start: float,
    end: float,
    expire: float,
    step: float,
) -> np.ndarray:
    """The chords of a flight from ``start`` to ``end``: rows of (time at the chord's end,
    start x y z, end x y z). Chords of ``step`` from the spawn, as the server cuts them
    (:attr:`~shared.weapons.Weapon.flight_step`): the whole ones that end by ``end``, and
    the shorter last one up to ``expire`` when the flight lives no longer."""
    whole = max(0, math.floor((end - start) / step))
    tau = np.arange(1, whole + 1, dtype=np.float64) * step
    if expire <= end and expire - start > whole * step:
        tau = np.append(tau, expire - start)
    tau = np.concatenate(([0.0], tau))
    points = (
        np.asarray(origin, dtype=np.float64)
        + tau[:, None] * np.asarray(velocity, dtype=np.float64)
        - np.outer(0.5 * gravity * tau * tau, (0.0, 0.0, 1.0))
    )
    return np.column_stack((start + tau[1:], points[:-1], points[1:]))


def eye_of(feet: np.ndarray) -> np.ndarray:
    return feet + (0.0, 0.0, EYE_HEIGHT)
