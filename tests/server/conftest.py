"""Compile the node's numba kernels once, before any test times itself (hypothesis has a
deadline per example, and a fresh clone has no kernel cache yet)."""

from __future__ import annotations

import pytest

from server.sim import inputs
from server.sim.input_frames import decode_input_frames


@pytest.fixture(scope="session", autouse=True)
def compiled_input_kernels() -> None:
    decode_input_frames([])
    inputs.warm_up()
