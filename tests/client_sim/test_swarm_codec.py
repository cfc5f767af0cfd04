"""The bots decode players as the node's welcome says (its map's bounds and the record
widths), not as their own copy of the map would: a node on another map is still read
right. A welcome that does not say leaves them with their own map's coding."""

from __future__ import annotations

import dataclasses

import numpy as np

from client_sim.latency import draw_bot, parse_distribution
from client_sim.swarm import Swarm, SwarmConfig
from shared import protocol
from shared.protocol.deltas import KIND_FULL, encode_records
from tests.client_sim.test_bot_tokens import welcome

OTHER_MIN, OTHER_MAX = (-100.0, 0.0), (100.0, 40.0)  # not the embedded map's -30..30


def _swarm() -> Swarm:
    params = (draw_bot(0, seed=3, rtt=parse_distribution("40ms")),)
    return Swarm(SwarmConfig(url="ws://a/ws", bots=params, duration=1.0, seed=3))


def test_a_welcome_s_bounds_and_widths_decode_the_node_s_records() -> None:
    node = protocol.EntityCodec.for_bounds(np.array(OTHER_MIN), np.array(OTHER_MAX))
    told = dataclasses.replace(
        welcome("t"), bounds_min=OTHER_MIN, bounds_max=OTHER_MAX,
        entity_bits=tuple(node.bits.tolist()),
    )  # fmt: skip
    swarm = _swarm()
    assert not np.array_equal(swarm.codec.bits, node.bits)  # (the test's premise)
    world = swarm._world(told, told.epoch)
    assert np.array_equal(world.codec.bits, node.bits)
    assert np.array_equal(world.codec.origin, node.origin)
    position = np.array([[95.0, 37.5, 0.0]])
    values = node.quantise(position, np.zeros((1, 3)), np.zeros(1), np.zeros(1),
                           np.full(1, 100), np.ones(1, dtype=bool))  # fmt: skip
    out = np.zeros(node.max_record_bytes(), dtype=np.uint8)
    size = encode_records(np.zeros(1, np.int64), np.full(1, KIND_FULL), values, values,
                          node.bits, out)  # fmt: skip
    records = protocol.EntityBaselines().apply(told.epoch, 2, -1, out[:size].tobytes(), world)
    assert (records["x"][0], records["y"][0]) == (95.0, 37.5)


def test_a_welcome_that_does_not_say_leaves_the_bots_own_map() -> None:
    swarm = _swarm()
    world = swarm._world(welcome("t"), 3)
    assert world.codec is swarm.codec
