"""The public face of hit registration: validated batches in, verdicts out, any backend.

A tick of a node resolves every shot of every match it hosts in one call per kind of weapon::

    validator = make_validator("auto", box_min=arena.box_min, box_max=arena.box_max)
    validator.warm_up()                       # at start-up, so tick 1 pays no compilation
    results = validator.resolve_hitscan(history, shots)

``auto`` runs on the GPU when numba.cuda sees one and on the CPU cores otherwise; ``reference``
runs the NumPy specification (slow, for tests and benchmarks). All backends give the same
verdicts (bit for bit on the CPU; see ``cuda.py`` for the GPU's last-bit caveat).
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Iterator
from dataclasses import dataclass, fields
from types import ModuleType
from typing import Literal

import numpy as np
import numpy.typing as npt

from server.sim.hitreg import reference
from server.sim.hitreg.reference import DEFAULT_MAX_SUBSTEPS
from shared.arena_map import default_map
from shared.hitbox import HITBOX_MIN_RADIUS

__all__ = [
    "WARM_UP_PARTS",
    "BackendName",
    "BackendUnavailable",
    "History",
    "HitValidator",
    "HitscanResults",
    "HitscanShots",
    "ProjectileResults",
    "ProjectileShots",
    "check_backend",
    "make_validator",
]

BackendName = Literal["auto", "cpu", "cuda", "reference"]

#: What :meth:`HitValidator.warm_up` can compile, separately or together.
WARM_UP_PARTS = ("hitscan", "projectiles", "broad_phase")

#: Batches smaller than this run on one thread (see ``HitValidator._threads_for``).
PARALLEL_MIN_SHOTS = 256

#: How far from 1 a hitscan direction's length may be before it is refused as misuse.
_UNIT_TOLERANCE = 1e-6


class BackendUnavailable(RuntimeError):
    """The requested backend cannot run on this machine (e.g. CUDA without a GPU)."""


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
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name}: values must be finite")


def _broadcast(value: npt.ArrayLike, n: int, name: str) -> np.ndarray:
    array: np.ndarray = np.asarray(value, dtype=np.float64)
    if array.ndim == 0:
        return np.full(n, float(array))
    return _array(array, np.float64, name, (n,))


@dataclass(frozen=True, slots=True, eq=False, init=False)
class History:
    """The history rings of ``Mt`` matches (layout documented in ``reference.py``).

    Inputs are converted (without a copy when they already are) to C-contiguous arrays of
    the kernels' dtypes and checked; a mistake raises ValueError naming the field.
    """

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
    ) -> None:
        times = _array(times, np.float64, "history.times", (None, None))
        matches, capacity = times.shape
        positions = _array(positions, np.float64, "history.positions", (matches, capacity, None, 3))
        players = positions.shape[2]
        alive = _array(alive, np.uint8, "history.alive", (matches, capacity, players))
        start = _array(start, np.int64, "history.start", (matches,))
        count = _array(count, np.int64, "history.count", (matches,))
        if np.any((start < 0) | (start >= max(capacity, 1))):
            raise ValueError(f"history.start: indices must lie in [0, {capacity})")
        if np.any((count < 0) | (count > capacity)):
            raise ValueError(f"history.count: counts must lie in [0, {capacity}]")
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

    def _check_matches(self, match: np.ndarray, name: str) -> None:
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
        if np.any(np.abs(length - 1.0) > _UNIT_TOLERANCE):
            raise ValueError("shots.direction: every direction must be a unit vector")
        if np.any(values["max_range"] < 0.0):
            raise ValueError("shots.max_range: ranges must not be negative")
        for name, value in values.items():
            object.__setattr__(self, name, value)

    def __len__(self) -> int:
        return int(self.match.shape[0])


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
    """``S`` projectiles to fly from ``spawn_time`` (the view time, or last tick's end for
    one still in flight) to ``end_time`` (now: the newest snapshot's time)."""

    match: np.ndarray  # (S,) int32
    shooter: np.ndarray  # (S,) int32
    origin: np.ndarray  # (S, 3) float64, position at spawn_time
    velocity: np.ndarray  # (S, 3) float64, velocity at spawn_time, m/s
    gravity: np.ndarray  # (S,) float64 (a scalar is broadcast), m/s^2 pulling towards -z
    spawn_time: np.ndarray  # (S,) float64
    end_time: np.ndarray  # (S,) float64 (a scalar is broadcast)
    expire_time: np.ndarray  # (S,) float64 (a scalar is broadcast): end of its life

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
        }
        for name, value in values.items():
            if name not in ("match", "shooter"):
                _finite(value, f"projectiles.{name}")
            object.__setattr__(self, name, value)

    def __len__(self) -> int:
        return int(self.match.shape[0])


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


def _check_out(out: HitscanResults | ProjectileResults, n: int) -> None:
    """Caller-provided outputs must be exactly what the kernels write into."""
    template = type(out).allocate(n)
    for field in fields(out):
        got = getattr(out, field.name)
        want = getattr(template, field.name)
        if (
            not isinstance(got, np.ndarray)
            or got.shape != want.shape
            or got.dtype != want.dtype
            or not got.flags.c_contiguous
            or not got.flags.writeable
        ):
            raise ValueError(
                f"out.{field.name}: expected a writable C-contiguous {want.dtype} array of "
                f"shape {want.shape}"
            )


class HitValidator:
    """Resolves batches of shots on one backend against one map's static boxes."""

    def __init__(
        self,
        backend: str,
        module: ModuleType,
        box_min: np.ndarray,
        box_max: np.ndarray,
        *,
        broad_phase: bool,
        max_step: float,
        max_substeps: int,
    ) -> None:
        self.backend = backend
        self._module = module
        self.box_min = _array(box_min, np.float64, "box_min", (None, 3))
        self.box_max = _array(box_max, np.float64, "box_max", (self.box_min.shape[0], 3))
        if np.any(self.box_min > self.box_max):
            raise ValueError("box_min/box_max: every box needs min <= max on each axis")
        self.broad_phase = broad_phase
        self.max_step = float(max_step)
        self.max_substeps = int(max_substeps)
        if not (self.max_step > 0.0 and self.max_substeps >= 1):
            raise ValueError("max_step must be positive and max_substeps at least 1")

    def __repr__(self) -> str:
        return f"HitValidator(backend={self.backend!r}, broad_phase={self.broad_phase})"

    @contextlib.contextmanager
    def _threads_for(self, shots: int) -> Iterator[None]:
        """One thread for a tick-sized batch: waking numba's worker threads costs
        milliseconds on a busy machine (measured under load: 3-5 ms a call with two threads,
        well under 0.1 ms with one), more than a few dozen shots take to judge."""
        if self.backend != "cpu" or shots >= PARALLEL_MIN_SHOTS:
            yield
            return
        import numba

        before = numba.get_num_threads()
        numba.set_num_threads(1)
        try:
            yield
        finally:
            numba.set_num_threads(before)

    def _options(self, broad_phase: bool | None) -> dict[str, bool]:
        if self.backend == "reference":
            return {}
        return {"broad_phase": self.broad_phase if broad_phase is None else broad_phase}

    def resolve_hitscan(
        self,
        history: History,
        shots: HitscanShots,
        out: HitscanResults | None = None,
        *,
        broad_phase: bool | None = None,
    ) -> HitscanResults:
        """First thing each shot hits, with the players rewound to its view time."""
        history._check_matches(shots.match, "shots.match")
        n = len(shots)
        if out is None:
            out = HitscanResults.allocate(n)
        else:
            _check_out(out, n)
        with self._threads_for(n):
            self._module.resolve_hitscan(
                *history.arrays(),
                self.box_min,
                self.box_max,
                shots.match,
                shots.shooter,
                shots.origin,
                shots.direction,
                shots.max_range,
                shots.view_time,
                *out.arrays(),
                **self._options(broad_phase),
            )
        return out

    def resolve_projectiles(
        self,
        history: History,
        projectiles: ProjectileShots,
        out: ProjectileResults | None = None,
        *,
        broad_phase: bool | None = None,
    ) -> ProjectileResults:
        """Fly each projectile through the history from its spawn time to its end time."""
        history._check_matches(projectiles.match, "projectiles.match")
        n = len(projectiles)
        if out is None:
            out = ProjectileResults.allocate(n)
        else:
            _check_out(out, n)
        with self._threads_for(n):
            self._module.resolve_projectiles(
                *history.arrays(),
                self.box_min,
                self.box_max,
                projectiles.match,
                projectiles.shooter,
                projectiles.origin,
                projectiles.velocity,
                projectiles.gravity,
                projectiles.spawn_time,
                projectiles.end_time,
                projectiles.expire_time,
                *out.arrays(),
                self.max_step,
                self.max_substeps,
                **self._options(broad_phase),
            )
        return out

    def warm_up(self, parts: Collection[str] = WARM_UP_PARTS) -> None:
        """Compile (or load from numba's cache) the kernels on a tiny scene, so the first
        real tick pays no compilation.

        ``parts`` (a subset of :data:`WARM_UP_PARTS`, all by default) lets several
        processes fill a cold cache side by side: ``hitscan`` and ``projectiles`` run those
        kernels without the broad phase, ``broad_phase`` builds the grid, and with a kernel
        also runs that kernel on it (the kernel is the same machine code either way).
        """
        unknown = set(parts) - set(WARM_UP_PARTS)
        if unknown:
            raise ValueError(f"unknown warm-up parts {sorted(unknown)}; known: {WARM_UP_PARTS}")
        history, shots, projectiles = _tiny_scene()
        if "broad_phase" in parts and self.backend == "cpu":
            from server.sim.hitreg import cpu

            times, positions, alive, start, count = history.arrays()
            cpu.player_grid(times, positions, alive, start, count, True)
        for broad_phase in (False, True) if "broad_phase" in parts else (False,):
            if "hitscan" in parts:
                self.resolve_hitscan(history, shots, broad_phase=broad_phase)
            if "projectiles" in parts:
                self.resolve_projectiles(history, projectiles, broad_phase=broad_phase)


def _tiny_scene() -> tuple[History, HitscanShots, ProjectileShots]:
    """Two players, one shot of each kind: enough to give every kernel its argument types."""
    times = np.array([[0.0, 1.0 / 60.0]])
    positions = np.zeros((1, 2, 2, 3))
    positions[0, :, 1, 0] = 5.0
    history = History(
        times=times,
        positions=positions,
        alive=np.ones((1, 2, 2), dtype=np.uint8),
        start=np.zeros(1, dtype=np.int64),
        count=np.full(1, 2, dtype=np.int64),
    )
    shots = HitscanShots(
        match=np.zeros(1, dtype=np.int32),
        shooter=np.zeros(1, dtype=np.int32),
        origin=np.array([[0.0, 0.0, 1.6]]),
        direction=np.array([[1.0, 0.0, 0.0]]),
        max_range=100.0,
        view_time=np.array([0.5 / 60.0]),
    )
    projectiles = ProjectileShots(
        match=np.zeros(1, dtype=np.int32),
        shooter=np.zeros(1, dtype=np.int32),
        origin=np.array([[0.0, 0.0, 1.6]]),
        velocity=np.array([[300.0, 0.0, 0.0]]),
        gravity=9.81,
        spawn_time=np.zeros(1),
        end_time=1.0 / 60.0,
        expire_time=1.0,
    )
    return history, shots, projectiles


def _select(backend: str) -> tuple[str, ModuleType]:
    if backend == "reference":
        return backend, reference
    if backend == "cpu":
        from server.sim.hitreg import cpu

        return backend, cpu
    from server.sim.hitreg import cuda

    if backend == "cuda":
        if not cuda.cuda_available():
            raise BackendUnavailable(
                "backend 'cuda' is unavailable: numba.cuda sees no usable GPU (needs the "
                "numba-cuda package and an NVIDIA driver); use backend 'cpu' or 'auto'"
            )
        return backend, cuda
    if backend == "auto":
        # The simulator is a correctness tool, never what "pick the fastest" means.
        if cuda.cuda_available() and not cuda.simulator_enabled():
            return "cuda", cuda
        from server.sim.hitreg import cpu

        return "cpu", cpu
    raise ValueError(f"unknown backend {backend!r}: use 'auto', 'cpu', 'cuda' or 'reference'")


def check_backend(backend: str) -> str:
    """The backend ``backend`` resolves to on this machine; :class:`BackendUnavailable` or
    ValueError (one line each) before anything is started."""
    return _select(backend)[0]


def make_validator(
    backend: BackendName = "auto",
    *,
    box_min: np.ndarray | None = None,
    box_max: np.ndarray | None = None,
    broad_phase: bool = True,
    max_step: float = HITBOX_MIN_RADIUS,
    max_substeps: int = DEFAULT_MAX_SUBSTEPS,
) -> HitValidator:
    """A validator on ``backend`` for the map whose boxes are ``box_min``/``box_max``
    (``(M, 3)``; the embedded default map when omitted).

    ``broad_phase`` is the default for calls that do not say (the grid pays off from a few
    hundred players per match up). ``max_step`` bounds a projectile's travel per sub-step.
    Raises :class:`BackendUnavailable` when ``cuda`` is asked for and cannot run.
    """
    name, module = _select(backend)
    if box_min is None or box_max is None:
        if box_min is not None or box_max is not None:
            raise ValueError("give both box_min and box_max, or neither for the default map")
        arena = default_map()
        box_min, box_max = arena.box_min, arena.box_max
    return HitValidator(
        name,
        module,
        box_min,
        box_max,
        broad_phase=broad_phase,
        max_step=max_step,
        max_substeps=max_substeps,
    )
