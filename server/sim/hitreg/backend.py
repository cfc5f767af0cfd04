"""The public face of hit registration: validated batches in, verdicts out, any backend.

A tick of a node resolves every shot of every match it hosts in one call per kind of weapon::

    validator = make_validator("auto", box_min=arena.box_min, box_max=arena.box_max)
    validator.warm_up()                       # at start-up, so tick 1 pays no compilation
    results = validator.resolve_hitscan(history, shots)

``auto`` runs on the GPU when numba.cuda sees one and on the CPU cores otherwise; ``reference``
runs the NumPy specification (slow, for tests and benchmarks). All backends give the same
verdicts (bit for bit on the CPU; see ``cuda.py`` for the GPU's last-bit caveat). The
batches (defined in ``batches.py``) are re-exported here.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Iterator
from dataclasses import fields
from typing import Literal, Protocol

import numpy as np

from server.sim.hitreg import reference
from server.sim.hitreg.batches import (
    History,
    HitscanResults,
    HitscanShots,
    ProjectileResults,
    ProjectileShots,
    World,
)
from server.sim.hitreg.reference import DEFAULT_MAX_SUBSTEPS
from shared.arena_map import default_map
from shared.weapons import LAUNCHER

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
_PARALLEL_MIN_SHOTS = 256

#: On the CPU, the broad-phase grid pays off from this many shots per match a call, by
#: kind. Building it costs about as much as testing every player for a few dozen hitscan
#: shots, or for a few projectiles (which fly many chords), whatever the match's size
#: (both grow with its players): on one thread, one match of 64 to 1,000 players, a single
#: hitscan shot took 33-60 µs without the grid and 46-271 µs with it; 64 shots 84-520
#: without and 86-270 with; 4 projectiles 120-372 without and 92-247 with.
_GRID_MIN_SHOTS = {"hitscan": 48, "projectiles": 4}


class BackendUnavailable(RuntimeError):
    """The requested backend cannot run on this machine (e.g. CUDA without a GPU)."""


class _Backend(Protocol):
    """What the modules ``reference``, ``cpu`` and ``cuda`` each provide: batches in, the
    verdicts written into ``out`` (already validated and sized by :class:`HitValidator`)."""

    def resolve_hitscan(
        self,
        history: History,
        world: World,
        shots: HitscanShots,
        out: HitscanResults,
        *,
        broad_phase: bool,
    ) -> None: ...

    def resolve_projectiles(
        self,
        history: History,
        world: World,
        projectiles: ProjectileShots,
        out: ProjectileResults,
        *,
        max_substeps: int,
        broad_phase: bool,
    ) -> None: ...


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
        module: _Backend,
        box_min: np.ndarray,
        box_max: np.ndarray,
        *,
        broad_phase: bool,
        max_substeps: int,
        requested: str | None = None,
    ) -> None:
        self.backend = backend
        #: The backend asked for: ``auto`` may fall back to the CPU (:meth:`warm_up`).
        self.requested = backend if requested is None else requested
        #: Why ``auto`` left the GPU (None: it did not).
        self.fallback_reason: str | None = None
        self._module = module
        self._world = World(box_min=box_min, box_max=box_max)
        self._broad_phase = broad_phase
        self._max_substeps = int(max_substeps)
        if self._max_substeps < 1:
            raise ValueError("max_substeps must be at least 1")

    def __repr__(self) -> str:
        return f"HitValidator(backend={self.backend!r}, broad_phase={self._broad_phase})"

    def _grid_for(self, kind: str, shots: int, history: History, asked: bool | None) -> bool:
        """The broad phase as asked, or by default when it pays off for this batch."""
        if asked is not None:
            return asked
        if self.backend != "cpu":
            return self._broad_phase
        return self._broad_phase and shots >= _GRID_MIN_SHOTS[kind] * history.matches

    @contextlib.contextmanager
    def _threads_for(self, shots: int) -> Iterator[None]:
        """One thread for a tick-sized batch: waking numba's worker threads costs
        milliseconds on a busy machine (measured under load: 3-5 ms a call with two threads,
        well under 0.1 ms with one), more than a few dozen shots take to judge."""
        if self.backend != "cpu" or shots >= _PARALLEL_MIN_SHOTS:
            yield
            return
        import numba

        before = numba.get_num_threads()
        if before == 1:  # (already one: setting it again costs more than a small batch)
            yield
            return
        numba.set_num_threads(1)
        try:
            yield
        finally:
            numba.set_num_threads(before)

    def resolve_hitscan(
        self,
        history: History,
        shots: HitscanShots,
        out: HitscanResults | None = None,
        *,
        broad_phase: bool | None = None,
    ) -> HitscanResults:
        """First thing each shot hits, with the players rewound to its view time."""
        history.check_match_indices(shots.match, "shots.match")
        n = len(shots)
        if out is None:
            out = HitscanResults.allocate(n)
        else:
            _check_out(out, n)
        with self._threads_for(n):
            self._module.resolve_hitscan(
                history,
                self._world,
                shots,
                out,
                broad_phase=self._grid_for("hitscan", n, history, broad_phase),
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
        history.check_match_indices(projectiles.match, "projectiles.match")
        n = len(projectiles)
        if out is None:
            out = ProjectileResults.allocate(n)
        else:
            _check_out(out, n)
        with self._threads_for(n):
            self._module.resolve_projectiles(
                history,
                self._world,
                projectiles,
                out,
                max_substeps=self._max_substeps,
                broad_phase=self._grid_for("projectiles", n, history, broad_phase),
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
        if self.backend == "cuda" and self.requested == "auto":
            # A GPU that numba sees may still fail to compile (a numba-cuda that does not
            # match the NumPy installed beside it): ``auto`` takes the CPU rather than die.
            try:
                self._warm_up(parts)
            except Exception as error:  # numba-cuda raises many unrelated types
                from server.sim.hitreg import cpu

                self.backend, self._module = "cpu", cpu
                self.fallback_reason = f"{type(error).__name__}: {error}".splitlines()[0]
            else:
                return
        self._warm_up(parts)

    def _warm_up(self, parts: Collection[str]) -> None:
        history, shots, projectiles = _tiny_scene()
        if "broad_phase" in parts and self.backend == "cpu":
            from server.sim.hitreg import cpu

            cpu.player_grid(history, True)
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
        step_time=LAUNCHER.flight_step,
    )
    return history, shots, projectiles


def _select(backend: str) -> tuple[str, _Backend]:
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
    max_substeps: int = DEFAULT_MAX_SUBSTEPS,
) -> HitValidator:
    """A validator on ``backend`` for the map whose boxes are ``box_min``/``box_max``
    (``(M, 3)``; the embedded default map when omitted).

    ``broad_phase`` allows the grid for calls that do not say; on the CPU they use it for
    batches big enough to pay for building it (``_GRID_MIN_SHOTS``). ``max_substeps`` caps
    the chords one call flies a projectile (the rest of its flight waits for the next call).
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
        max_substeps=max_substeps,
        requested=backend,
    )
