"""The input intake: held reads queued in arrival order with their arrival times, a read
the batch decoder cannot vouch for read the ordinary way in its turn, nothing from a
reader that stopped reading; the generation a stream uses to keep its order."""

from __future__ import annotations

from typing import Any

import msgpack
import numpy as np

from server.sim.hitreg import make_validator
from server.sim.inputs import InputVerdict
from server.sim.intake import InputIntake
from server.sim.match import MatchConfig
from server.sim.matchset import MatchSet
from shared import protocol
from shared.arena_map import default_map
from shared.protocol import InputMessage
from shared.wsframe import OP_BINARY, frame


class Reader:
    """A seated player as the intake sees it; reads the ordinary way into ``intake``."""

    def __init__(self, intake: InputIntake, slot: int, max_offences: int = 1) -> None:
        self.intake, self.match, self.slot = intake, 0, slot
        self.seated, self.offences, self.max_offences = True, 0, max_offences
        self.fed: list[bytes] = []

    def reading(self) -> bool:
        return self.seated and self.offences < self.max_offences

    def read_now(self, data: bytes) -> None:
        """As the player's stream and the sessions would: decode, queue or complain."""
        self.fed.append(data)
        payload = bytes(b ^ data[2 + i % 4] for i, b in enumerate(data[6:]))
        try:
            message = protocol.decode_client(payload)
        except protocol.ProtocolError:
            self.offences += 1
            return
        assert isinstance(message, InputMessage)
        self.intake.receive(self, message, 0.0)


def seated(count: int, matches_per_node: int = 1) -> tuple[InputIntake, list[Reader]]:
    """``count`` players, filling the node's matches of 2 seats each in turn when it has
    more than one (of 8 otherwise)."""
    seats = 8 if matches_per_node == 1 else 2
    config = MatchConfig(arena=default_map(), max_players=seats)
    matches = MatchSet(config, matches_per_node, make_validator("reference"))
    intake = InputIntake(matches)
    readers = []
    for i in range(count):
        index, seat = matches.join(f"p{i}", 0.1)
        reader = Reader(intake, seat.slot)
        reader.match = index
        readers.append(reader)
    return intake, readers


def read(*messages: Any) -> bytes:
    return b"".join(frame(OP_BINARY, protocol.encode(m), masked=True) for m in messages)


def an_input(seq: int, yaw: float = 0.0) -> InputMessage:
    return InputMessage(seq, seq, (0.5, 0.0), yaw, 0.0, 0, 1.0, -1)


def pending(intake: InputIntake, reader: Reader) -> list[int]:
    seat = intake.matches[reader.match].seats[reader.slot]
    return [message.seq for message, _ in seat.inputs.pending]


def test_held_reads_are_queued_in_arrival_order_with_their_arrival_times() -> None:
    intake, (a, b) = seated(2)
    intake.hold(a, read(an_input(1)), 0.5)
    intake.hold(b, read(an_input(5)), 0.6)
    intake.hold(a, read(an_input(2), an_input(3)), 0.7)
    intake.drain()
    assert pending(intake, a) == [1, 2, 3] and pending(intake, b) == [5]
    arrivals = [arrival for _, arrival in intake.matches[0].seats[a.slot].inputs.pending]
    assert np.allclose(arrivals, [0.5, 0.7, 0.7])
    verdicts, payload_bytes = intake.take_tally()
    assert verdicts == {InputVerdict.ACCEPTED: 4}
    assert payload_bytes == sum(len(protocol.encode(an_input(s))) for s in (1, 5, 2, 3))
    assert a.fed == [] and b.fed == []
    assert intake.take_tally() == ({}, 0)  # taken: zero until more comes


def test_a_node_of_several_matches_queues_each_read_in_its_own_match() -> None:
    intake, (a, b, c) = seated(3, matches_per_node=2)
    assert [r.match for r in (a, b, c)] == [0, 0, 1] and c.slot == a.slot
    intake.hold(c, read(an_input(7)), 0.1)
    intake.hold(a, read(an_input(1), an_input(2)), 0.2)
    intake.hold(b, read(an_input(4)), 0.3)
    intake.hold(c, read(an_input(8)), 0.4)
    intake.drain()
    assert (pending(intake, a), pending(intake, b), pending(intake, c)) == ([1, 2], [4], [7, 8])
    arrivals = [arrival for _, arrival in intake.matches[1].seats[c.slot].inputs.pending]
    assert np.allclose(arrivals, [0.1, 0.4])
    assert intake.take_tally()[0] == {InputVerdict.ACCEPTED: 5}


def test_a_read_the_batch_cannot_vouch_for_is_read_in_its_turn() -> None:
    intake, (a,) = seated(1)
    # "type" as a str 8, not a fixstr: valid msgpack, and no shape the batch decodes
    odd = msgpack.packb(an_input(2).to_wire()).replace(b"\xa4type", b"\xd9\x04type")
    assert protocol.decode_client(odd) == an_input(2)
    unusual = frame(OP_BINARY, odd, masked=True)
    for data in (read(an_input(1)), unusual, read(an_input(3))):
        intake.hold(a, data, 0.0)
    intake.drain()
    assert a.fed == [unusual]
    assert pending(intake, a) == [1, 2, 3]  # not 1, 3, then a stale 2


def test_nothing_is_queued_for_a_reader_who_left_or_was_dropped() -> None:
    intake, (a, b) = seated(2)
    bad_angle = read(InputMessage(1, 1, (0, 0), 9.0, 0.0, 0, 1.0, -1))
    garbage = frame(OP_BINARY, b"\xc1" * 100, masked=True)  # not msgpack: an offence
    for owner, data in (
        (b, read(an_input(1))),
        (a, garbage),
        (a, read(an_input(2))),
        (a, bad_angle),
    ):
        intake.hold(owner, data, 0.0)
    b.seated = False  # b left before the tick; its seat may go to someone else
    intake.drain()
    assert pending(intake, b) == []
    assert a.fed == [garbage] and not a.reading()  # one offence drops it (max 1)
    assert pending(intake, a) == []  # what it sent after its offence is not read


def test_a_drain_hands_over_every_held_read_and_counts_a_generation() -> None:
    intake, (a,) = seated(1)
    assert intake.hold(a, read(an_input(1)), 0.0) == intake.hold(a, read(an_input(2)), 0.0) == 0
    assert len(intake) == 2
    intake.drain()
    assert intake.generation == 1 and len(intake) == 0
    intake.drain()  # nothing held: nothing to do, same generation
    assert intake.generation == 1


def test_a_full_intake_drains_without_waiting_for_the_tick() -> None:
    intake, (a,) = seated(1)
    intake = InputIntake(intake.matches, limit=3)
    generations = [intake.hold(a, read(an_input(seq)), 0.0) for seq in range(1, 5)]
    # The third read went with the drain it caused; the fourth waits for the next.
    assert generations == [0, 0, 0, 1] and len(intake) == 1
    assert pending(intake, a) == [1, 2, 3]
