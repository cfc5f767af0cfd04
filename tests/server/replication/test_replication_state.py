"""Replication records: a standby that applies them holds exactly the primary's match.

A primary ``Match`` is driven by a seeded random script of several players (joins, leaves,
moves, jumps, rifle and launcher fire, bursts, starvation, stale and bad inputs); a standby
``Match`` installs one full state and then applies every tick record. After every tick the
two must be identical in everything a promotion continues from, and a promoted standby must
go on producing the very snapshots the primary would have produced.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from typing import Any

import msgpack
import numpy as np
import pytest

from server.replication import messages
from server.replication.messages import FullState, MatchState, TickRecord
from server.replication.state import (
    HashMismatch,
    ReplicationGap,
    apply_match,
    capture_match,
    config_fingerprint,
    install_match,
)
from server.sim.match import Match, MatchConfig, TickResult
from shared.arena_map import default_map
from shared.movement import BUTTON_FIRE, BUTTON_JUMP
from shared.protocol import InputMessage, SnapshotMessage, decode_server
from shared.weapons import BUTTON_ALT_FIRE, EYE_HEIGHT
from tests.server.frames import snapshot_for

ARENA = default_map()
RATE = 60
MAX_PLAYERS = 8
EPOCH = 1
WORLD = ("active", "alive", "pos", "vel", "yaw", "pitch", "health", "move", "buttons", "seat_id")
COMBAT = ("death_time", "respawn_tick", "last_fired")
RING = ("times", "ticks", "positions", "alive")

Action = tuple[Any, ...]


def new_match(**config: Any) -> Match:
    return Match(MatchConfig(ARENA, **{"max_players": MAX_PLAYERS, **config}))


class Script:
    """Seeded random players; the actions for a tick are derived from the primary's state.

    Every input arrives half a tick before the tick that applies it and acknowledges a tick
    ``lag`` ticks old. Honest players claim a view time inside the window the server
    allows; liars (when enabled) claim one 60-300 ms outside it, which the server clamps.
    """

    def __init__(self, seed: int, liars: bool = True, prefix: str = "p") -> None:
        self.rng = np.random.default_rng(seed)
        self.liars = liars
        self.prefix = prefix
        self.players = 0
        self.next_seq: dict[str, int] = {}
        self.lag: dict[str, int] = {}

    def actions(self, match: Match) -> list[Action]:
        rng = self.rng
        tick = match.tick_number + 1
        arrival = (tick - 0.5) / RATE
        seats = sorted(match.seats.items())
        actions: list[Action] = []
        leaving = None
        if len(seats) > 2 and rng.random() < 0.02:
            leaving = seats[int(rng.integers(len(seats)))][0]
            actions.append(("leave", leaving))
        if len(seats) < MAX_PLAYERS and (len(seats) < 3 or rng.random() < 0.03):
            name = f"{self.prefix}{self.players}"
            self.players += 1
            self.next_seq[name] = 0
            self.lag[name] = int(rng.integers(0, 7))
            actions.append(("join", name, float(rng.choice([0.05, 0.1, 0.15]))))
        for slot, seat in seats:
            if slot == leaving:
                continue
            count = int(rng.choice([0, 1, 2, 6], p=[0.08, 0.84, 0.05, 0.03]))
            for _ in range(count):
                message = self._input(match, slot, seat.name, seat.interp_delay, tick, arrival)
                actions.append(("input", slot, message, arrival))
        return actions

    def _input(
        self, match: Match, slot: int, name: str, interp: float, tick: int, arrival: float
    ) -> InputMessage:
        rng, world = self.rng, match.world
        lag = self.lag[name]
        seq = self.next_seq[name]
        if seq > 0 and rng.random() < 0.01:
            seq -= 1  # a duplicate: refused as stale
        else:
            self.next_seq[name] = seq + 1
        ack_tick = tick - 1 - lag if tick - 1 - lag >= 1 else -1
        view = arrival - (lag + 0.5) / RATE / 2 - interp
        if self.liars and rng.random() < 0.1:
            view += float(rng.choice([-1.0, 1.0]) * rng.uniform(0.06, 0.3))
        others = [int(s) for s in np.flatnonzero(world.active & world.alive) if s != slot]
        if others and rng.random() < 0.85:
            target = others[int(rng.integers(len(others)))]
            delta = world.pos[target] + (0.0, 0.0, 1.2) - world.pos[slot] - (0, 0, EYE_HEIGHT)
            yaw = math.atan2(delta[1], delta[0]) + rng.normal(0.0, 0.01)
            pitch = math.atan2(delta[2], math.hypot(delta[0], delta[1])) + rng.normal(0, 0.01)
        else:
            yaw, pitch = rng.uniform(-math.pi, math.pi), rng.uniform(-0.3, 0.3)
        yaw = float(np.clip(yaw, -math.pi, math.pi))
        pitch = float(np.clip(pitch, -1.5, 1.5))
        if rng.random() < 0.01:
            yaw = 4.0  # out of range: refused
        buttons = 0
        if rng.random() < 0.05:
            buttons |= BUTTON_JUMP
        if rng.random() < 0.6:
            buttons |= BUTTON_FIRE
        if rng.random() < 0.015:
            buttons |= BUTTON_ALT_FIRE
        move = rng.uniform(-1.2, 1.2, 2)  # sometimes longer than 1: clamped
        return InputMessage(
            seq=seq,
            tick=tick,
            move=(float(move[0]), float(move[1])),
            yaw=yaw,
            pitch=pitch,
            buttons=buttons,
            view_time=max(0.0, view),
            ack_tick=ack_tick,
        )


def apply_actions(match: Match, actions: list[Action]) -> None:
    for action in actions:
        if action[0] == "join":
            match.join(action[1], action[2])
        elif action[0] == "leave":
            match.leave(action[1])
        else:
            match.receive_input(action[1], action[2], action[3])


def run_tick(match: Match, actions: list[Action]) -> TickResult:
    """What the node does on a primary's tick (inputs first)."""
    apply_actions(match, actions)
    return match.tick()


def over_the_wire(record: TickRecord | FullState) -> Any:
    return messages.decode(messages.encode(record))


def tick_record(match: Match, events: list[dict[str, Any]], epoch: int) -> TickRecord:
    """One match's tick, as a node sends it and a standby receives it."""
    record = TickRecord(epoch, match.tick_number, (capture_match(match, events),))
    received = over_the_wire(record)
    assert isinstance(received, TickRecord)
    return received


def full_state(match: Match, epoch: int) -> FullState:
    received = over_the_wire(
        FullState(epoch, match.tick_number, (capture_match(match, [], full=True),))
    )
    assert isinstance(received, FullState)
    return received


def apply_record(match: Match, record: TickRecord) -> None:
    apply_match(match, record.matches[0], record.epoch)


def install_full_state(match: Match, full: FullState) -> None:
    install_match(match, full.matches[0], full.epoch)


def replicate(primary: Match, result: TickResult, standby: Match) -> MatchState:
    record = tick_record(primary, result.events, primary.epoch)
    apply_record(standby, record)
    return record.matches[0]


def flying(match: Match) -> list[tuple[Any, ...]]:
    return [
        (
            p.slot,
            p.seq,
            p.weapon.id,
            p.position.tobytes(),
            p.velocity.tobytes(),
            p.time,
            p.expire_time,
            p.judged.view_time,
            p.judged.verdict,
            p.judged.origin.tobytes(),
            p.judged.shooter_rtt,
            p.judged.traded,
        )
        for p in match.combat.flying
    ]


def state_of(match: Match) -> dict[str, Any]:
    """Everything a promotion continues from, as comparable values (bytes: bit-exact)."""
    ring = match.history
    return {
        "tick": match.tick_number,
        "previous_tick": match.previous_tick,
        "epoch": match.epoch,
        "joins": match.joins,
        **{f"world.{n}": getattr(match.world, n).tobytes() for n in WORLD},
        **{f"combat.{n}": getattr(match.combat, n).tobytes() for n in COMBAT},
        "combat.flying": flying(match),
        "seats": {
            slot: (
                seat.name,
                seat.interp_delay,
                seat.inputs.acked,
                match.inputs.guesses(slot),
                match.inputs.credit(slot),
                match.inputs.surplus(slot),
            )
            for slot, seat in match.seats.items()
        },
        **{f"history.{n}": getattr(ring, n).tobytes() for n in RING},
        "history.start": ring.start,
        "history.count": ring.count,
        "hash": match.world.state_hash(),
    }


def assert_same(primary: Match, standby: Match) -> None:
    want, got = state_of(primary), state_of(standby)
    differing = [key for key in want if want[key] != got[key]]
    assert not differing, f"standby differs at tick {primary.tick_number}: {differing}"


def start_following(
    seed: int, install_at: int, liars: bool = True
) -> tuple[Match, Match, Script, Counter[str]]:
    """A primary ticked ``install_at`` times, and a standby that installed its full state.

    The standby had a stale match of its own first (other players, ticks): the full state
    must replace all of it.
    """
    primary, standby, script = new_match(), new_match(), Script(seed, liars)
    seen: Counter[str] = Counter()
    stale = Script(seed + 1000, prefix="stale")
    for _ in range(5):
        run_tick(standby, stale.actions(standby))
    for _ in range(install_at):
        note(seen, primary, run_tick(primary, script.actions(primary)))
    install_full_state(standby, full_state(primary, EPOCH))
    primary.epoch = EPOCH
    assert_same(primary, standby)
    return primary, standby, script, seen


def note(seen: Counter[str], match: Match, result: TickResult) -> None:
    for event in result.events:
        seen[event.KIND] += 1
        if event.KIND == "shot":
            seen[f"shot_{event.result}"] += 1
            seen["kill"] += bool(event.kill)
            seen[f"weapon_{event.weapon}"] += 1
    seen["flying_ticks"] += bool(match.combat.flying)
    seen["ring_wrapped"] += match.history.start != 0
    seen["starved"] = sum(seat.inputs.starved_ticks for seat in match.seats.values())


@pytest.mark.parametrize("install_at", [0, 90], ids=["from_the_start", "after_the_ring_wrapped"])
@pytest.mark.parametrize("seed", [1, 2])
def test_a_standby_that_applies_every_record_holds_the_primary_match(
    seed: int, install_at: int
) -> None:
    primary, standby, script, seen = start_following(seed, install_at)

    for _ in range(300):
        result = run_tick(primary, script.actions(primary))
        note(seen, primary, result)
        state = replicate(primary, result, standby)
        assert state.hash == primary.world.state_hash()
        assert_same(primary, standby)

    # The script did exercise what the records must carry.
    for what in (
        "join",
        "leave",
        "kill",
        "respawn",
        "weapon_0",
        "weapon_1",
        "shot_hit",
        "shot_rejected",
        "flying_ticks",
        "ring_wrapped",
        "starved",
    ):
        assert seen[what] > 0, (what, seen)


def canonical(frame: bytes) -> dict[str, Any]:
    """A client's snapshot frame as its fields, compared bit-exact (entities are raw bytes,
    floats compare exactly, events in the order the tick produced them)."""
    snapshot = decode_server(frame)
    assert isinstance(snapshot, SnapshotMessage)
    return {name: getattr(snapshot, name) for name in SnapshotMessage.FIELDS}


@pytest.mark.parametrize("install_at", [0, 90], ids=["from_the_start", "after_the_ring_wrapped"])
@pytest.mark.parametrize("seed", [4, 5])
def test_a_promoted_standby_produces_the_snapshots_the_primary_would_have(
    seed: int, install_at: int
) -> None:
    primary, standby, script, seen = start_following(seed, install_at, liars=False)
    for _ in range(100):
        replicate(primary, run_tick(primary, script.actions(primary)), standby)

    # Promotion, as Node._take_over does it, at a higher epoch (given to both, as it is the
    # one field meant to differ). Clients resend the inputs the old primary had not applied.
    for seat in standby.seats.values():
        seat.inputs.restore(seat.inputs.acked)
    primary.epoch = standby.epoch = EPOCH + 1
    for slot, seat in primary.seats.items():
        for message, arrival in seat.inputs.pending:
            standby.receive_input(slot, message, arrival)

    for _ in range(200):
        actions = script.actions(primary)
        expected = run_tick(primary, actions)
        got = run_tick(standby, actions)
        note(seen, primary, expected)
        assert set(standby.seats) == set(primary.seats)
        for slot in primary.seats:
            frame = snapshot_for(standby, got, slot)
            assert canonical(frame) == canonical(snapshot_for(primary, expected, slot))
        assert_same(primary, standby)
    assert seen["kill"] > 0 and seen["weapon_1"] > 0, seen


def test_a_full_state_replaces_a_stale_seat_that_has_the_same_name() -> None:
    primary, standby = new_match(), new_match()
    standby.join("ada", 0.15)  # e.g. a deposed primary's own, older seat 0
    primary.join("ada", 0.05)  # the new primary's player in seat 0
    primary.tick()

    install_full_state(standby, full_state(primary, EPOCH))

    assert standby.seats[0].interp_delay == 0.05


def test_a_seat_rejoined_under_the_same_name_within_a_tick_is_replaced() -> None:
    primary, standby = new_match(), new_match()
    primary.join("ada", 0.15)
    install_full_state(standby, full_state(primary, EPOCH))
    replicate(primary, primary.tick(), standby)
    primary.leave(0)
    assert primary.join("ada", 0.05).slot == 0  # a reconnect without its token

    replicate(primary, primary.tick(), standby)

    assert standby.seats[0].interp_delay == primary.seats[0].interp_delay


def test_a_seat_rejoined_under_the_same_name_and_delay_is_another_seat_there_too() -> None:
    primary, standby = new_match(), new_match()
    first = primary.join("ada", 0.1)
    install_full_state(standby, full_state(primary, EPOCH))
    replicate(primary, primary.tick(), standby)
    kept = standby.seats[0]
    primary.leave(0)
    again = primary.join("ada", 0.1)  # a new player: nothing to tell it by but its seat id
    assert again.slot == 0 and again.seat_id != first.seat_id

    replicate(primary, primary.tick(), standby)

    assert standby.seats[0].seat_id == again.seat_id
    assert standby.seats[0] is not kept  # afresh: the new player's buffer and round trips


def test_a_promoted_standby_orders_a_tick_events_as_the_primary_does() -> None:
    primary = new_match()
    for name in ("a", "b", "c"):
        primary.join(name, 0.1)
    primary.tick()
    primary.leave(1)
    assert primary.join("d", 0.1).slot == 1  # seat 1 again, now after seat 2 in the dict
    for _ in range(3):
        primary.tick()
    for slot in (1, 2):  # both were shot dead (set directly: the kills are not the point)
        primary.world.alive[slot] = False
        primary.combat.death_time[slot] = primary.server_time
        primary.combat.respawn_tick[slot] = primary.tick_number + 100
    standby = new_match()
    install_full_state(standby, full_state(primary, EPOCH))
    primary.epoch = EPOCH
    assert_same(primary, standby)

    results = []
    for match in (primary, standby):
        for slot in (1, 2):  # dead players' shots are refused, with an event each
            fire = InputMessage(10, 5, (0.0, 0.0), 0.0, 0.0, BUTTON_FIRE, 1.0, -1)
            match.receive_input(slot, fire, match.server_time)
        results.append(match.tick())

    assert [e.shooter for e in results[1].events] == [e.shooter for e in results[0].events]
    assert results[1].body == results[0].body


def test_a_skipped_record_is_a_gap_and_changes_nothing() -> None:
    primary, standby, script, _ = start_following(seed=6, install_at=20)
    skipped = run_tick(primary, script.actions(primary))
    skipped_record = tick_record(primary, skipped.events, EPOCH)
    after = run_tick(primary, script.actions(primary))
    before = state_of(standby)

    with pytest.raises(ReplicationGap):
        replicate(primary, after, standby)

    assert state_of(standby) == before
    # Given the missing record first, the standby catches up.
    apply_record(standby, skipped_record)
    replicate(primary, after, standby)
    assert_same(primary, standby)


def test_ticks_a_stall_skipped_are_no_gap_and_a_promotion_continues_the_clock() -> None:
    """After a stall the primary's schedule skips tick numbers (time never runs back): its
    next record follows the tick it last ran, and the standby takes it."""
    primary, standby, script, _ = start_following(seed=8, install_at=10)
    for skip in (0, 5, 0, 30, 1):
        apply_actions(primary, script.actions(primary))
        result = primary.tick(primary.tick_number + 1 + skip)
        replicate(primary, result, standby)
        assert_same(primary, standby)
    assert standby.server_time == primary.tick_number / RATE
    # A promoted standby's next tick is the very next one: no jump of its clock.
    assert standby.tick().tick == primary.tick_number + 1


def test_a_record_far_ahead_is_a_gap() -> None:
    primary, standby, script, _ = start_following(seed=7, install_at=3)
    for _ in range(30):
        result = run_tick(primary, script.actions(primary))

    with pytest.raises(ReplicationGap):
        replicate(primary, result, standby)


def test_a_record_whose_world_was_corrupted_is_a_hash_mismatch() -> None:
    primary, standby, script, _ = start_following(seed=8, install_at=20)
    result = run_tick(primary, script.actions(primary))
    state = tick_record(primary, result.events, EPOCH).matches[0]
    slot = int(np.flatnonzero(primary.world.active)[0])
    pos = bytearray(state.world["pos"])
    pos[slot * 24 + 3] ^= 0x01  # a low mantissa bit of an active player's x
    corrupted = dataclasses.replace(state, world={**state.world, "pos": bytes(pos)})

    with pytest.raises(HashMismatch):
        apply_match(standby, corrupted, EPOCH)


def test_a_full_state_whose_world_was_corrupted_is_a_hash_mismatch() -> None:
    primary, _standby, _, _ = start_following(seed=9, install_at=20)
    state = full_state(primary, EPOCH).matches[0]
    health = bytes(len(state.world["health"]))
    corrupted = dataclasses.replace(state, world={**state.world, "health": health})

    with pytest.raises(HashMismatch):
        install_match(new_match(), corrupted, EPOCH)


def test_a_record_already_held_is_ignored() -> None:
    primary, standby, script, _ = start_following(seed=10, install_at=20)
    records = [
        replicate(primary, run_tick(primary, script.actions(primary)), standby) for _ in range(3)
    ]
    held = state_of(standby)

    for record in (records[-1], records[0]):  # the newest again, and an older one
        apply_match(standby, record, EPOCH)
        assert state_of(standby) == held
    assert_same(primary, standby)


def test_a_promoted_standby_judges_by_the_links_its_primary_measured() -> None:
    """The primary's probe estimates travel with the seats: a standby that takes over
    judges its players' first shots by them, before its own probes have answered."""
    primary, standby, script, _ = start_following(seed=12, install_at=5)
    for slot in primary.seats:
        slots, ids = primary.probes.due(primary.server_time + 1.0)
        for probed, probe_id in zip(slots.tolist(), ids.tolist(), strict=True):
            primary.probes.echo(probed, probe_id, primary.server_time + 1.0 + 0.04 + 0.01 * slot)
    replicate(primary, run_tick(primary, script.actions(primary)), standby)
    for slot in primary.seats:
        assert standby.probes.estimate(slot) == primary.probes.estimate(slot) is not None


@pytest.mark.parametrize(
    "row",
    [["0", "a", 0.1, -1, 0, [0.0] * 6], [0, "a", 0.1, -1, 0, [0.0] * 5, -1.0, 0.0, 0, 0],
     [0, "a", 0.1, -1, 0, [0.0] * 6, None, 0.0, 0, 0],
     [0, "a", 0.1, -1, 0, [True] * 6, -1.0, 0.0, 0, 0],
     [0, "a", 0.1, -1, 0, [0.0] * 6, -1.0, 0.0, 0],
     [0, "a", 0.1, -1, 0, [0.0] * 6, -1.0, 0.0, 1.5, 0],
     [0, "a", 0.1, -1, 0, [0.0] * 6, -1.0, 0.0, True, 0],
     [0, "a", 0.1, -1, 0, [0.0] * 6, -1.0, 0.0, 0, 0.5],
     [0, "a", 0.1, -1, 0, [0.0] * 6, -1.0, 0.0, 0, False]],
    ids=repr,
)  # fmt: skip
def test_a_seat_row_of_the_wrong_shape_is_refused(row: list[Any]) -> None:
    primary = new_match()
    primary.join("a", 0.1)
    state = tick_record(primary, primary.tick().events, EPOCH).matches[0]
    with pytest.raises(messages.MessageError, match="match seats"):
        dataclasses.replace(state, seats=[row])


def test_records_and_full_states_are_not_interchangeable() -> None:
    primary, standby, script, _ = start_following(seed=11, install_at=5)
    result = run_tick(primary, script.actions(primary))

    with pytest.raises(ValueError):
        apply_match(standby, full_state(primary, EPOCH).matches[0], EPOCH)
    with pytest.raises(ValueError):
        install_match(standby, tick_record(primary, result.events, EPOCH).matches[0], EPOCH)
    with pytest.raises(messages.MessageError):  # and neither kind of record takes the other
        TickRecord(EPOCH, 1, full_state(primary, EPOCH).matches)
    with pytest.raises(messages.MessageError):
        FullState(EPOCH, 1, tick_record(primary, result.events, EPOCH).matches)


@pytest.mark.parametrize(
    "value",
    [[1, 2], {"tick": 3}, "tick", 7, {"type": "ticks", "epoch": 1, "tick": 1, "matches": [3]},
     {"type": "ack", "tick": -1}, {"type": "ticks", "epoch": 1, "tick": 1, "matches": []}],
    ids=repr,
)  # fmt: skip
def test_decode_refuses_what_is_not_a_message(value: object) -> None:
    with pytest.raises(messages.MessageError):
        messages.decode(msgpack.packb(value))


def test_a_match_state_with_fields_another_version_has_is_a_gap() -> None:
    primary, standby, script, _ = start_following(seed=13, install_at=3)
    result = run_tick(primary, script.actions(primary))
    state = tick_record(primary, result.events, EPOCH).matches[0]
    extra = dataclasses.replace(state, world={**state.world, "armour": b"\0" * MAX_PLAYERS})

    with pytest.raises(ReplicationGap, match="armour"):
        apply_match(standby, extra, EPOCH)


def test_a_record_raises_the_standby_epoch_but_never_lowers_it() -> None:
    primary, standby, script, _ = start_following(seed=12, install_at=5)
    primary.epoch = 4
    replicate(primary, run_tick(primary, script.actions(primary)), standby)
    assert standby.epoch == 4

    standby.epoch = 9
    replicate(primary, run_tick(primary, script.actions(primary)), standby)
    assert standby.epoch == 9


def test_the_config_fingerprint_names_what_peers_must_share() -> None:
    base = config_fingerprint(new_match())

    assert config_fingerprint(new_match()) == base
    assert config_fingerprint(new_match(max_players=MAX_PLAYERS + 1)) != base
    assert config_fingerprint(new_match(tick_rate=30)) != base
    assert config_fingerprint(new_match(history_seconds=2.0)) != base
    # Only what replication depends on: the input jitter depth is each node's own business.
    assert config_fingerprint(new_match(input_max_depth=8)) == base
