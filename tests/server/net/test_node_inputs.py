"""The node's batch of held input reads: queued in arrival order, a read the batch decoder
cannot vouch for read the ordinary way in its turn, and nothing from a player who left."""

from __future__ import annotations

from typing import Any

import msgpack
import numpy as np

from server.net.node import Node, NodeConfig
from shared import protocol
from shared.protocol import InputMessage
from shared.wsframe import OP_BINARY, frame


class FakeStream:
    def __init__(self, node: Node, connection: FakeConnection) -> None:
        self.node, self.connection = node, connection
        self.closing = False
        self.fed: list[bytes] = []

    def feed(self, data: bytes) -> None:
        """Reads the frame as PlayerStream would: one payload to the node's handler."""
        self.fed.append(data)
        payload = bytes(b ^ data[2 + i % 4] for i, b in enumerate(data[6:]))
        if self.node.handle_frame(self.connection, payload):  # type: ignore[arg-type]
            self.closing = True


class FakeConnection:
    def __init__(self, node: Node, slot: int) -> None:
        self.match, self.slot, self.offences = 0, slot, 0
        self.stream = FakeStream(node, self)
        self.sent: list[bytes] = []

    def send(self, data: bytes, tail: bytes = b"") -> bool:
        self.sent.append(data + tail)
        return True


def seated(count: int) -> tuple[Node, list[FakeConnection]]:
    node = Node(NodeConfig(max_players=8, max_offences=1))
    connections = []
    for i in range(count):
        _, seat = node.matches.join(f"p{i}", 0.1)
        connection = FakeConnection(node, seat.slot)
        node.connections[(0, seat.slot)] = connection  # type: ignore[assignment]
        connections.append(connection)
    return node, connections


def read(*messages: Any) -> bytes:
    return b"".join(frame(OP_BINARY, protocol.encode(m), masked=True) for m in messages)


def an_input(seq: int, yaw: float = 0.0) -> InputMessage:
    return InputMessage(seq, seq, (0.5, 0.0), yaw, 0.0, 0, 1.0, -1)


def pending(node: Node, slot: int) -> list[int]:
    return [message.seq for message, _ in node.matches[0].seats[slot].inputs.pending]


async def test_held_reads_are_queued_in_arrival_order_with_their_arrival_times() -> None:
    node, (a, b) = seated(2)
    origin = node.schedule.origin
    node._take_inputs(  # type: ignore[arg-type]
        [a, b, a],
        [read(an_input(1)), read(an_input(5)), read(an_input(2), an_input(3))],
        [origin + 0.5, origin + 0.6, origin + 0.7],
    )
    assert pending(node, a.slot) == [1, 2, 3] and pending(node, b.slot) == [5]
    arrivals = [arrival for _, arrival in node.matches[0].seats[a.slot].inputs.pending]
    assert np.allclose(arrivals, [0.5, 0.7, 0.7])
    assert node.metrics.tally_inputs_applied == 4
    assert a.stream.fed == [] and b.stream.fed == []


async def test_a_read_the_batch_cannot_vouch_for_is_read_in_its_turn() -> None:
    node, (a,) = seated(1)
    odd = {**an_input(2).to_wire(), "yaw": 0}  # an int where a float goes: valid, unusual
    unusual = frame(OP_BINARY, msgpack.packb(odd), masked=True)
    t = node.schedule.origin
    reads = [read(an_input(1)), unusual, read(an_input(3))]
    node._take_inputs([a, a, a], reads, [t, t, t])  # type: ignore[arg-type]
    assert a.stream.fed == [unusual]
    assert pending(node, a.slot) == [1, 2, 3]  # not 1, 3, then a stale 2


async def test_nothing_is_queued_for_a_player_who_left_or_was_dropped() -> None:
    node, (a, b) = seated(2)
    t = node.schedule.origin
    del node.connections[(0, b.slot)]  # b left; its seat may go to someone else
    bad_angle_twice = read(InputMessage(1, 1, (0, 0), 9.0, 0.0, 0, 1.0, -1))
    garbage = frame(OP_BINARY, b"\xc1" * 100, masked=True)  # not msgpack: an offence
    node._take_inputs(  # type: ignore[arg-type]
        [b, a, a, a], [read(an_input(1)), garbage, read(an_input(2)), bad_angle_twice], [t] * 4
    )
    assert pending(node, b.slot) == []
    assert a.stream.fed == [garbage] and a.stream.closing  # one offence drops (max_offences=1)
    assert pending(node, a.slot) == []  # what it sent after its offence is not read
