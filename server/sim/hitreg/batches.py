"""The hit kernels' inputs and outputs as validated, struct-of-arrays batches.

Every backend module (``reference``, ``cpu``, ``cuda``) takes these and spreads them into
positional arrays only where a numba kernel is launched (numba kernels take arrays, not
objects). Each batch converts its inputs once, at construction, to C-contiguous arrays of the
kernels' dtypes (without a copy when they already are) and checks them; a mistake raises a
one-line ValueError naming the field. The ``arrays()`` methods give the fields in the
kernels' parameter order.

They live apart from ``backend.py`` so that the backend modules can import them while
``backend.py`` imports the backend modules: no import cycle.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = [
    "History",
    "HitscanResults",
    "HitscanShots",
    "ProjectileResults",
    "ProjectileShots",
    "World",
]

#: How far from 1 a hitscan direction's length may be before it is refused as misuse.
_UNIT_TOLERANCE = 1e-6


def _array(
    value: npt.ArrayLike, dtype: type, name: str, shape: tuple[int | None, ...]
) -> np.ndarray:
    """``value`` as a C-contiguous array of ``dtype``, its shape checked (None: any size)."""
    array: np.ndarray = np.ascontiguousarray(value, dtype=dtype)
    if array.ndim != len(shape) or any(
        want is not None and got != want for got, want in zip(array.shape, shape, strict=True)
    ):
        wanted = "(" + ", ".join("n" if s is None else str(s) for s in shape) + ")"
        raise ValueError(f"{name}: expected shape {wanted}, got {array.shape}")
    return array


def _finite(array: np.ndarray, name: str) -> None:
    if not np.isfinite(array).all():
        raise ValueError(f"{name}: values must be finite")


def _broadcast(value: npt.ArrayLike, n: int, name: str) -> np.ndarray:
    array: np.ndarray = np.asarray(value, dtype=np.float64)
    if array.ndim == 0:
        return np.full(n, float(array))
    return _array(array, np.float64, name, (n,))


@dataclass(frozen=True, slots=True, eq=False, init=False)
class World:
    """A map's static boxes, ``(M, 3)`` float64 corners with min <= max on each axis."""

    box_min: np.ndarray
    box_max: np.ndarray

    def __init__(self, *, box_min: npt.ArrayLike, box_max: npt.ArrayLike) -> None:
        low = _array(box_min, np.float64, "box_min", (None, 3))
        high = _array(box_max, np.float64, "box_max", (low.shape[0], 3))
        if (low > high).any():
            raise ValueError("box_min/box_max: every box needs min <= max on each axis")
        object.__setattr__(self, "box_min", low)
        object.__setattr__(self, "box_max", high)


@dataclass(frozen=True, slots=True, eq=False, init=False)
class History:
    """The history rings of ``Mt`` matches (layout documented in ``reference.py``)."""

    times: np.ndarray  # (Mt, H) float64
    positions: np.ndarray  # (Mt, H, P, 3) float64
    alive: np.ndarray  # (Mt, H, P) uint8
    start: np.ndarray  # (Mt,) int64
    count: np.ndarray  # (Mt,) int64

    def __init__(
        self,
        *,
        times: npt.ArrayLike,
        positions: npt.ArrayLike,
        alive: npt.ArrayLike,
        start: npt.ArrayLike,
        count: npt.ArrayLike,
        values_checked: bool = False,
    ) -> None:
        """``values_checked``: the rings' times and positions were checked finite as they
        were written (a node's own rings, :meth:`server.sim.history.HistoryRing.append`), so
        judging a tick's shots does not scan every snapshot again."""
        times = _array(times, np.float64, "history.times", (None, None))
        matches, capacity = times.shape
        positions = _array(positions, np.float64, "history.positions", (matches, capacity, None, 3))
        players = positions.shape[2]
        alive = _array(alive, np.uint8, "history.alive", (matches, capacity, players))
        start = _array(start, np.int64, "history.start", (matches,))
        count = _array(count, np.int64, "history.count", (matches,))
        if ((start < 0) | (start >= max(capacity, 1))).any():
            raise ValueError(f"history.start: indices must lie in [0, {capacity})")
        if ((count < 0) | (count > capacity)).any():
            raise ValueError(f"history.count: counts must lie in [0, {capacity}]")
        if not values_checked:
            _finite(times, "history.times")
            _finite(positions, "history.positions")
        for name, value in (("times", times), ("positions", positions), ("alive", alive)):
            object.__setattr__(self, name, value)
        object.__setattr__(self, "start", start)
        object.__setattr__(self, "count", count)

    @property
    def matches(self) -> int:
        return int(self.times.shape[0])

    @property
    def players(self) -> int:
        return int(self.positions.shape[2])

    def arrays(self) -> tuple[np.ndarray, ...]:
        return self.times, self.positions, self.alive, self.start, self.count

    def newest_times(self) -> np.ndarray:
        """Per match, the time of the newest snapshot its ring holds (-inf for none)."""
        capacity = self.times.shape[1]
        if not capacity:
            return np.full(self.matches, -np.inf)
        newest = (self.start + self.count - 1) % capacity
        return np.where(self.count > 0, self.times[np.arange(self.matches), newest], -np.inf)

    def check_match_indices(self, match: np.ndarray, name: str) -> None:
        """Refuse a batch that names a match these rings do not hold."""
        if match.size and (int(match.min()) < 0 or int(match.max()) >= self.matches):
            raise ValueError(f"{name}: match indices must lie in [0, {self.matches})")


@dataclass(frozen=True, slots=True, eq=False, init=False)
class HitscanShots:
    """``S`` instant-hit shots; ``view_time`` is the already validated time to rewind to."""

    match: np.ndarray  # (S,) int32
    shooter: np.ndarray  # (S,) int32, slot in its match; never hit by its own shot
    origin: np.ndarray  # (S, 3) float64
    direction: np.ndarray  # (S, 3) float64, unit length
    max_range: np.ndarray  # (S,) float64 (a scalar is broadcast)
    view_time: np.ndarray  # (S,) float64

    def __init__(
        self,
        *,
        match: npt.ArrayLike,
        shooter: npt.ArrayLike,
        origin: npt.ArrayLike,
        direction: npt.ArrayLike,
        max_range: npt.ArrayLike,
        view_time: npt.ArrayLike,
    ) -> None:
        match = _array(match, np.int32, "shots.match", (None,))
        n = match.shape[0]
        values = {
            "match": match,
            "shooter": _array(shooter, np.int32, "shots.shooter", (n,)),
            "origin": _array(origin, np.float64, "shots.origin", (n, 3)),
            "direction": _array(direction, np.float64, "shots.direction", (n, 3)),
            "max_range": _broadcast(max_range, n, "shots.max_range"),
            "view_time": _array(view_time, np.float64, "shots.view_time", (n,)),
        }
        for name in ("origin", "direction", "max_range", "view_time"):
            _finite(values[name], f"shots.{name}")
        length = np.sqrt(np.sum(values["direction"] ** 2, axis=1))
        if (np.abs(length - 1.0) > _UNIT_TOLERANCE).any():
            raise ValueError("shots.direction: every direction must be a unit vector")
        if (values["max_range"] < 0.0).any():
            raise ValueError("shots.max_range: ranges must not be negative")
        for name, value in values.items():
            object.__setattr__(self, name, value)

    def __len__(self) -> int:
        return int(self.match.shape[0])

    def arrays(self) -> tuple[np.ndarray, ...]:
        return self.match, self.shooter, self.origin, self.direction, self.max_range, self.view_time


@dataclass(frozen=True, slots=True, eq=False)
class HitscanResults:
    """Per shot: kind (0 miss, 1 player, 2 world), victim slot or -1, hitbox id or 0,
    distance along the ray (the range on a miss) and (player, hitbox) pairs considered."""

    kind: np.ndarray  # (S,) int32
    victim: np.ndarray  # (S,) int32
    hitbox: np.ndarray  # (S,) int32
    distance: np.ndarray  # (S,) float64
    hitbox_tests: np.ndarray  # (S,) int64

    @classmethod
    def allocate(cls, n: int) -> HitscanResults:
        return cls(
            kind=np.zeros(n, dtype=np.int32),
            victim=np.zeros(n, dtype=np.int32),
            hitbox=np.zeros(n, dtype=np.int32),
            distance=np.zeros(n, dtype=np.float64),
            hitbox_tests=np.zeros(n, dtype=np.int64),
        )

    def arrays(self) -> tuple[np.ndarray, ...]:
        return self.kind, self.victim, self.hitbox, self.distance, self.hitbox_tests


@dataclass(frozen=True, slots=True, eq=False, init=False)
class ProjectileShots:
    """``S`` projectiles to fly from ``spawn_time`` (the view time, or where the last call
    left one still in flight) towards ``end_time`` (now: the newest snapshot's time), in
    whole chords of ``step_time`` (the weapon's :attr:`~shared.weapons.Weapon.flight_step`):
    a flight stops at the last chord that ends by ``end_time`` and goes on from there, so
    flown in pieces it is cut into the same chords as flown in one go."""

    match: np.ndarray  # (S,) int32
    shooter: np.ndarray  # (S,) int32
    origin: np.ndarray  # (S, 3) float64, position at spawn_time
    velocity: np.ndarray  # (S, 3) float64, velocity at spawn_time, m/s
    gravity: np.ndarray  # (S,) float64 (a scalar is broadcast), m/s^2 pulling towards -z
    spawn_time: np.ndarray  # (S,) float64
    end_time: np.ndarray  # (S,) float64 (a scalar is broadcast)
    expire_time: np.ndarray  # (S,) float64 (a scalar is broadcast): end of its life
    step_time: np.ndarray  # (S,) float64 (a scalar is broadcast), > 0: seconds per chord

    def __init__(
        self,
        *,
        match: npt.ArrayLike,
        shooter: npt.ArrayLike,
        origin: npt.ArrayLike,
        velocity: npt.ArrayLike,
        gravity: npt.ArrayLike,
        spawn_time: npt.ArrayLike,
        end_time: npt.ArrayLike,
        expire_time: npt.ArrayLike,
        step_time: npt.ArrayLike,
    ) -> None:
        match = _array(match, np.int32, "projectiles.match", (None,))
        n = match.shape[0]
        values = {
            "match": match,
            "shooter": _array(shooter, np.int32, "projectiles.shooter", (n,)),
            "origin": _array(origin, np.float64, "projectiles.origin", (n, 3)),
            "velocity": _array(velocity, np.float64, "projectiles.velocity", (n, 3)),
            "gravity": _broadcast(gravity, n, "projectiles.gravity"),
            "spawn_time": _array(spawn_time, np.float64, "projectiles.spawn_time", (n,)),
            "end_time": _broadcast(end_time, n, "projectiles.end_time"),
            "expire_time": _broadcast(expire_time, n, "projectiles.expire_time"),
            "step_time": _broadcast(step_time, n, "projectiles.step_time"),
        }
        for name, value in values.items():
            if name not in ("match", "shooter"):
                _finite(value, f"projectiles.{name}")
            object.__setattr__(self, name, value)
        if not (values["step_time"] > 0.0).all():
            raise ValueError("projectiles.step_time: every chord must last a positive time")

    def __len__(self) -> int:
        return int(self.match.shape[0])

    def arrays(self) -> tuple[np.ndarray, ...]:
        return (
            self.match,
            self.shooter,
            self.origin,
            self.velocity,
            self.gravity,
            self.spawn_time,
            self.end_time,
            self.expire_time,
            self.step_time,
        )


@dataclass(frozen=True, slots=True, eq=False)
class ProjectileResults:
    """Per projectile: kind (0 none, 1 player, 2 world), victim, hitbox id, time of the hit
    (or of the stop), position and velocity there, ``expired`` (1 when its life ended before
    ``end_time`` without a hit) and (player, hitbox) pairs considered. A projectile with
    kind 0 and expired 0 is still flying: continue it from ``position``/``velocity``/``time``.
    """

    kind: np.ndarray  # (S,) int32
    victim: np.ndarray  # (S,) int32
    hitbox: np.ndarray  # (S,) int32
    time: np.ndarray  # (S,) float64
    position: np.ndarray  # (S, 3) float64
    velocity: np.ndarray  # (S, 3) float64
    expired: np.ndarray  # (S,) uint8
    hitbox_tests: np.ndarray  # (S,) int64

    @classmethod
    def allocate(cls, n: int) -> ProjectileResults:
        return cls(
            kind=np.zeros(n, dtype=np.int32),
            victim=np.zeros(n, dtype=np.int32),
            hitbox=np.zeros(n, dtype=np.int32),
            time=np.zeros(n, dtype=np.float64),
            position=np.zeros((n, 3), dtype=np.float64),
            velocity=np.zeros((n, 3), dtype=np.float64),
            expired=np.zeros(n, dtype=np.uint8),
            hitbox_tests=np.zeros(n, dtype=np.int64),
        )

    def arrays(self) -> tuple[np.ndarray, ...]:
        return (
            self.kind,
            self.victim,
            self.hitbox,
            self.time,
            self.position,
            self.velocity,
            self.expired,
            self.hitbox_tests,
        )
