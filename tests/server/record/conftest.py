from __future__ import annotations

import pytest

from server.sim.matchset import MatchSet
from tests.server.record.scenes import recorded_match


@pytest.fixture(scope="session")
def recorded() -> tuple[MatchSet, list[bytes]]:
    """One small match, logged (blocks: the configuration's, then the ticks')."""
    return recorded_match()
