"""While a swarm ticks the cyclic collector is set aside; afterwards it is as it was."""

from __future__ import annotations

import gc

from client_sim.swarm import YOUNG_COLLECTION_THRESHOLD, collector_aside


def test_the_collector_is_set_aside_while_ticking_and_restored_after() -> None:
    before = gc.get_threshold()
    with collector_aside():
        assert gc.get_threshold() == (YOUNG_COLLECTION_THRESHOLD, *before[1:])
        assert gc.get_freeze_count() > 0
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0  # what the swarm left in cycles can be collected


def test_the_collector_is_restored_when_the_run_fails() -> None:
    before = gc.get_threshold()
    try:
        with collector_aside():
            raise RuntimeError("a bot's bug")
    except RuntimeError:
        pass
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0
