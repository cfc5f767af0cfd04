"""Settings every test shares.

Hypothesis: no per-example deadline. Its default (200 ms) measures wall time, and on a
busy machine (CI's two cores running a node and bots beside the tests, or a laptop
compiling) one example took 379 ms without anything being wrong: a deadline there only
tests the machine. Slow code is found by the benches under ``bench/``, not by timing tests.
``HYPOTHESIS_PROFILE=thorough`` runs ten times the examples.

Every test gets its own ``$XDG_STATE_HOME``, where nodes keep the epochs they used.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "arena", deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True
)
settings.register_profile("thorough", settings.get_profile("arena"), max_examples=1000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "arena"))


@pytest.fixture(autouse=True)
def _own_state_dir(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each test's nodes keep their epochs (``--state-dir``'s default, under
    ``$XDG_STATE_HOME``) in a folder of its own: a test starting node ``a`` must not find
    the epochs an earlier test's node ``a`` used."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state")))
