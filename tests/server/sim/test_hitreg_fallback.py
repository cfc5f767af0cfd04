"""``auto`` on a machine whose GPU kernels do not compile: it takes the CPU kernels rather
than stop the node (stop 38 saw numba-cuda fail on a NumPy newer than it: ``np.row_stack``)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from server.sim.hitreg import HitValidator, make_validator
from server.sim.hitreg.backend import _tiny_scene
from shared.arena_map import default_map

ERROR = "module 'numpy' has no attribute 'row_stack'"


def broken(*args: Any, **kwargs: Any) -> None:
    raise AttributeError(f"{ERROR}\n(and numba-cuda's traceback after it)")


def validator_on_a_broken_gpu(requested: str) -> HitValidator:
    arena = default_map()
    gpu = SimpleNamespace(resolve_hitscan=broken, resolve_projectiles=broken)
    return HitValidator(
        "cuda", gpu, arena.box_min, arena.box_max, broad_phase=True,
        max_substeps=64, requested=requested,
    )  # fmt: skip


def test_auto_takes_the_cpu_when_the_gpu_kernels_do_not_compile() -> None:
    validator = validator_on_a_broken_gpu("auto")
    validator.warm_up()
    assert validator.backend == "cpu"
    assert validator.fallback_reason == f"AttributeError: {ERROR}"
    history, shots, _ = _tiny_scene()
    judged = validator.resolve_hitscan(history, shots)
    expected = make_validator("reference").resolve_hitscan(history, shots)
    assert judged.kind.tolist() == expected.kind.tolist()
    assert judged.victim.tolist() == expected.victim.tolist()
    np.testing.assert_array_equal(judged.distance, expected.distance)


def test_cuda_asked_for_by_name_fails_loudly() -> None:
    validator = validator_on_a_broken_gpu("cuda")
    with pytest.raises(AttributeError, match="row_stack"):
        validator.warm_up()
    assert validator.backend == "cuda" and validator.fallback_reason is None


def test_a_working_backend_never_falls_back() -> None:
    validator = make_validator("auto")  # (no GPU here: the CPU kernels)
    validator.warm_up()
    assert validator.fallback_reason is None and validator.requested == "auto"
