"""Each replicated component names every array it has: replicated or derived, no other.

A world array that is in neither list would be left behind on standbys (and a promoted
standby would play on with it at zero): this is the test that stops it."""

from __future__ import annotations

import numpy as np
import pytest

from server.sim.combat import Combat
from server.sim.history import HistoryRing
from server.sim.lagcomp import LagCompensation
from server.sim.replica import ArrayState, StateMismatch
from server.sim.world import World


def components() -> list[ArrayState]:
    world = World(4)
    return [world, Combat(world, 60, LagCompensation()), HistoryRing(8, 4)]


def arrays_of(component: object) -> set[str]:
    names = {name for name in dir(component) if not name.startswith("__")}
    return {name for name in names if isinstance(getattr(component, name, None), np.ndarray)}


@pytest.mark.parametrize("component", components(), ids=lambda c: type(c).__name__)
def test_every_array_is_replicated_or_derived(component: ArrayState) -> None:
    declared = set(component.REPLICATED) | set(component.DERIVED)
    assert not set(component.REPLICATED) & set(component.DERIVED)
    assert arrays_of(component) <= declared, arrays_of(component) - declared
    assert declared <= arrays_of(component)  # (and no stale name)


@pytest.mark.parametrize("component", components(), ids=lambda c: type(c).__name__)
def test_the_state_restores_every_replicated_array_bit_for_bit(component: ArrayState) -> None:
    rng = np.random.default_rng(3)
    for name in component.REPLICATED:
        array = getattr(component, name)
        array[...] = rng.integers(0, 2, array.shape).astype(array.dtype)
    blobs = component.array_state()
    copy = components()[[type(c) for c in components()].index(type(component))]
    copy.restore_arrays(blobs)
    for name in component.REPLICATED:
        assert getattr(copy, name).tobytes() == getattr(component, name).tobytes(), name


def test_a_state_of_other_names_or_sizes_is_refused_and_changes_nothing() -> None:
    world, other = World(4), World(5)
    before = world.array_state()
    with pytest.raises(StateMismatch, match="pos"):
        world.restore_arrays({**before, "pos": other.array_state()["pos"]})
    with pytest.raises(StateMismatch, match="names"):
        world.restore_arrays({**before, "armour": b""})
    assert world.array_state()["active"] == before["active"]


@pytest.mark.parametrize("name", World.REPLICATED)
def test_the_world_hash_covers_every_replicated_array(name: str) -> None:
    world = World(4)
    world.seat(0, 1.0, 2.0)
    base = world.state_hash()
    array = getattr(world, name)
    array.flat[0] = not array.flat[0] if array.dtype == bool else array.flat[0] + 1
    assert world.state_hash() != base


def test_the_world_hash_ignores_the_leftovers_of_vacant_slots() -> None:
    world = World(4)
    world.seat(0, 1.0, 2.0)
    base = world.state_hash()
    world.pos[3] = 9.0  # slot 3 was never seated: seating it rewrites its row
    assert world.state_hash() == base
    world.seat(3, 5.0, 5.0)
    assert world.state_hash() != base
