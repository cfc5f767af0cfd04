"""The delta encoder: each client's players coded against the snapshot it acknowledged.

The core check is a simulated population (random movement, acks lost and late, players
leaving and joining) in which every client decodes every blob with its own
:class:`EntityBaselines` (the values in one :class:`PlayerValues` of the world, shared by
all the clients, as a swarm's are) and must hold, bit for bit, what the encoder quantised;
the small tests pin the base each client is coded against, gone records, fights and the
payload saved."""

from __future__ import annotations

import collections
import itertools
import math
from dataclasses import dataclass, field

import numpy as np
import pytest

from server.sim.deltas import VALUE_RING, DeltaEncoder
from server.sim.interest import InterestConfig
from server.sim.match import Match, MatchConfig
from shared.arena_map import default_map
from shared.protocol import (
    EntityBaselines,
    InputMessage,
    PlayerValues,
    ShotEvent,
    SnapshotEvent,
    SnapshotMessage,
    decode_server,
)
from shared.protocol.deltas import POSITION_STEP_M, EntityCodec
from tests.server.frames import snapshot_for

CODEC = EntityCodec.for_bounds(np.array([-64.0, -64.0]), np.array([64.0, 64.0]))
FULL_BYTES = (16 + 2 + int(CODEC.bits.sum()) + 7) // 8  # a full record
STILL_BYTES = 3  # a delta of a player that did not change (or a gone record)
LIMIT = 60.0  # players stay within +-LIMIT m
RATE = 60
#: Interest by radius and view alone (no nearest players): what most scenes here are about.
RADIUS_ONLY = InterestConfig(near_m=12.0, view_m=30.0, nearest=0, background=6)
#: ... and no background: a far player behind is never sent (unless fought).
NO_BACKGROUND = InterestConfig(
    near_m=12.0, view_m=30.0, nearest=0, background=0, fight_memory_s=3.0
)


# -- a small world for the hand-made tests -----------------------------------------------


class Scene:
    """A few players in ``capacity`` slots, one encoder and a client per seat."""

    def __init__(
        self,
        capacity: int = 4,
        interval: int = 1,
        interest: InterestConfig | None = None,
        kept: int = 16,
    ) -> None:
        self.encoder = DeltaEncoder(CODEC, capacity, interval, interest or RADIUS_ONLY, kept)
        self.kept = kept
        self.world = PlayerValues(CODEC, interval)  # the values every client decodes into
        self.pos = np.zeros((capacity, 3))
        self.yaw = np.zeros(capacity)
        self.present = np.zeros(capacity, dtype=np.bool_)
        self.seats = np.full(capacity, -1, dtype=np.int64)
        self.clients: dict[int, EntityBaselines] = {}
        self._seat_ids = itertools.count(100)

    def seat(self, slot: int, x: float = 0.0, y: float = 0.0) -> None:
        self.encoder.forget(slot)  # (as Match.join does)
        self.present[slot] = True
        self.seats[slot] = next(self._seat_ids)
        self.pos[slot, :2] = (x, y)
        self.clients[slot] = EntityBaselines(self.kept)

    def vacate(self, slot: int) -> None:
        self.encoder.forget(slot)  # (as Match.leave does)
        self.present[slot] = False
        self.seats[slot] = -1
        del self.clients[slot]

    def ack(self, slot: int, tick: int) -> None:
        self.encoder.note_acks(np.array([slot]), np.array([tick]))

    def values(self) -> np.ndarray:
        n = len(self.present)
        return CODEC.quantise(
            self.pos, np.zeros((n, 3)), self.yaw, np.zeros(n), np.full(n, 100), self.present
        )

    def snapshot(
        self, tick: int, now: float | None = None
    ) -> dict[int, tuple[int, bytes, list[int]]]:
        """Encode ``tick`` for every seat; each client decodes it: (base, blob, ids shown)."""
        slots = np.array(sorted(self.clients), dtype=np.int64)
        values = self.values()
        bases, blobs, selected = self.encoder.encode(
            tick, tick / RATE if now is None else now, slots, self.seats[slots],
            self.present.copy(), self.pos.copy(), self.yaw.copy(), values,
        )  # fmt: skip
        assert selected.dtype == np.bool_ and selected.shape[0] == len(slots)
        out = {}
        for c, (slot, base, blob) in enumerate(
            zip(slots.tolist(), bases.tolist(), blobs, strict=True)
        ):
            records = self.clients[slot].apply(0, tick, base, blob, self.world)
            ids = records["id"]
            assert np.flatnonzero(selected[c]).tolist() == ids.tolist()  # who it was sent
            held = self.clients[slot].held(tick)
            assert held is not None and (held[ids] == tick).all()
            held_ids, held_values = self.world.held(held)
            assert held_values[np.isin(held_ids, ids)].tobytes() == values[ids].tobytes()
            assert records.tobytes() == CODEC.records(ids, values[ids]).tobytes()
            out[slot] = (base, blob, ids.tolist())
        return out

    def held_ids(self, slot: int, tick: int) -> list[int]:
        held = self.clients[slot].held(tick)
        assert held is not None
        return np.flatnonzero(held >= 0).tolist()


def test_bases_start_at_minus_one_and_then_follow_the_acks() -> None:
    """No ack: every record full; then each client is coded against its own newest ack
    (np.maximum: a late, older ack does not move it back)."""
    scene = Scene()
    scene.seat(0)
    scene.seat(1, 3.0)
    first = scene.snapshot(1)
    assert [first[s][0] for s in (0, 1)] == [-1, -1]
    assert len(first[0][1]) == 2 * FULL_BYTES
    scene.ack(0, 1)
    second = scene.snapshot(2)
    assert [second[s][0] for s in (0, 1)] == [1, -1]
    assert len(second[0][1]) == 2 * STILL_BYTES  # nothing moved: two empty deltas
    assert len(second[1][1]) == 2 * FULL_BYTES
    scene.ack(0, 2)
    scene.ack(0, 1)  # late
    scene.ack(1, 2)
    third = scene.snapshot(3)
    assert [third[s][0] for s in (0, 1)] == [2, 2]


def test_an_ack_older_than_the_kept_snapshots_gives_a_full_snapshot() -> None:
    """``tick - base <= kept * interval``: the client still holds the base; beyond it
    it may not, so everything is sent in full."""
    scene = Scene(interval=2, kept=4)
    scene.seat(0)
    scene.snapshot(2)
    scene.ack(0, 2)
    for tick in (4, 6, 8, 10):  # 10 - 2 = 8 = kept * interval: still coded against 2
        assert scene.snapshot(tick)[0][0] == 2
    assert scene.snapshot(12)[0][0] == -1
    scene.ack(0, 10)
    assert scene.snapshot(14)[0][0] == 10


def test_an_ack_of_a_snapshot_not_sent_to_that_client_gives_a_full_snapshot() -> None:
    """A tick sent only to others, a tick that was no snapshot, one not yet sent."""
    scene = Scene(interval=2)
    scene.seat(0)
    scene.snapshot(2)
    scene.seat(1, 5.0)
    scene.snapshot(4)
    scene.ack(1, 2)  # sent to 0, before 1 was seated
    scene.ack(0, 3)  # never a snapshot tick
    assert [scene.snapshot(6)[s][0] for s in (0, 1)] == [-1, -1]
    scene.ack(0, 6)
    scene.ack(1, 6)
    assert [scene.snapshot(8)[s][0] for s in (0, 1)] == [6, 6]
    scene.ack(1, 20)  # a tick not sent yet (the ack only grows: until 20 is sent and old)
    assert [scene.snapshot(10)[s][0] for s in (0, 1)] == [6, -1]


def test_another_player_in_a_seat_starts_its_account_afresh() -> None:
    """The slot's acks, held players and priorities were the last player's: the new one
    gets a full snapshot (its client holds nothing), and its own acks work after."""
    scene = Scene()
    scene.seat(0)
    scene.seat(1, 4.0)
    scene.snapshot(1)
    scene.ack(1, 1)
    assert scene.snapshot(2)[1][0] == 1
    scene.ack(1, 2)
    scene.vacate(1)
    scene.seat(1, 4.0)  # no snapshot between: only the seat id tells
    fresh = scene.snapshot(3)
    assert fresh[1][0] == -1 and len(fresh[1][1]) == 2 * FULL_BYTES
    scene.ack(1, 3)
    assert scene.snapshot(4)[1][0] == 3


def test_a_player_who_left_is_forgotten_by_a_gone_record_until_acknowledged() -> None:
    """Coded against a base that holds the departed player, every snapshot names it gone;
    once a snapshot without it is acknowledged, nothing more is said."""
    scene = Scene()
    scene.seat(0)
    scene.seat(1, 2.0)
    scene.seat(2, -2.0)
    scene.snapshot(1)
    scene.ack(0, 1)
    scene.vacate(2)
    gone = scene.snapshot(2)
    assert gone[0][0] == 1 and gone[0][2] == [0, 1]
    assert scene.held_ids(0, 2) == [0, 1]
    assert len(gone[0][1]) == 3 * STILL_BYTES  # two empty deltas and a gone record
    again = scene.snapshot(3)  # the ack is still 1: said again
    assert again[0][0] == 1 and len(again[0][1]) == 3 * STILL_BYTES
    assert scene.held_ids(0, 3) == [0, 1]
    scene.ack(0, 3)
    quiet = scene.snapshot(4)
    assert quiet[0][0] == 3 and len(quiet[0][1]) == 2 * STILL_BYTES
    scene.seat(2, -2.0)  # a new player there: in full, against a base without it
    back = scene.snapshot(5)
    assert back[0][2] == [0, 1, 2] and len(back[0][1]) == 2 * STILL_BYTES + FULL_BYTES


def test_a_value_held_from_longer_ago_than_the_ring_is_sent_in_full() -> None:
    """A far player is held as last sent; when it is sent again, a delta against its held
    value if that is still in the ring of recent ticks, else a full record."""
    scene = Scene(interest=NO_BACKGROUND)
    scene.seat(0)
    scene.seat(1, 5.0)
    tick = 1
    scene.snapshot(tick)
    for gap in (10, VALUE_RING + 5):
        scene.pos[1, :2] = (-40.0, 0.0)  # behind, far: not sent, held as it was
        for _ in range(gap):
            scene.ack(0, tick)
            tick += 1
            shown = scene.snapshot(tick)[0]
            assert shown[2] == [0] and scene.held_ids(0, tick) == [0, 1]
        scene.pos[1, :2] = (5.1, 0.0)
        scene.ack(0, tick)
        tick += 1
        base, blob, ids = scene.snapshot(tick)[0]
        assert base == tick - 1 and ids == [0, 1]
        if gap < VALUE_RING:
            assert len(blob) < STILL_BYTES + FULL_BYTES  # a delta
        else:
            assert len(blob) == STILL_BYTES + FULL_BYTES


def test_a_fight_keeps_shooter_and_victim_relevant_to_each_other_for_the_memory() -> None:
    """Only hits count (victim >= 0), both ways, until ``fight_memory_s`` after."""
    scene = Scene(capacity=3, interest=NO_BACKGROUND)
    scene.seat(0)
    scene.seat(1, -100.0)  # behind each other, far apart
    scene.seat(2, 100.0, 50.0)
    scene.yaw[1] = math.pi / 2
    miss = ShotEvent(shooter=2, seq=1, weapon=0, result="miss", view_time=0.0)
    hit = ShotEvent(shooter=1, seq=1, weapon=0, result="hit", view_time=0.0, victim=0)
    scene.snapshot(1, now=0.5)  # the seats' accounts start at their first snapshot
    scene.encoder.note_fights([miss, hit], now=1.0)
    during = scene.snapshot(2, now=3.99)
    assert [during[s][2] for s in (0, 1, 2)] == [[0, 1], [0, 1], [2]]
    after = scene.snapshot(3, now=4.0)
    assert [after[s][2] for s in (0, 1, 2)] == [[0], [1], [2]]


@pytest.mark.parametrize("victim", [0, 70], ids=["within-the-accounts", "beyond-them"])
def test_a_fight_noted_before_a_seat_s_first_snapshot_keeps_them_relevant(victim: int) -> None:
    """A player who joins and fights (or is hit) before its first snapshot: that fight is
    its own, not a previous occupant's, and its first snapshot already shows the other
    (victim 70: a slot past the accounts' first size, which the fight grows them to)."""
    scene = Scene(capacity=100, interest=NO_BACKGROUND)
    scene.seat(victim)
    scene.seat(1, -100.0)  # behind each other, far apart
    scene.seat(2, 100.0, 50.0)
    scene.yaw[1] = math.pi / 2
    hit = ShotEvent(shooter=1, seq=1, weapon=0, result="hit", view_time=0.0, victim=victim)
    scene.encoder.note_fights([hit], now=1.0)  # before anybody's first snapshot
    first = scene.snapshot(1, now=1.5)
    assert [first[s][2] for s in (victim, 1, 2)] == [sorted([victim, 1])] * 2 + [[2]]
    assert first[1][0] == -1  # (its first snapshot: in full)
    during = scene.snapshot(2, now=3.99)
    assert [during[s][2] for s in (victim, 1, 2)] == [sorted([victim, 1])] * 2 + [[2]]
    after = scene.snapshot(3, now=4.0)
    assert [after[s][2] for s in (victim, 1, 2)] == [[victim], [1], [2]]
    # A seat filled later, hit before its first snapshot, also sees its shooter at once.
    scene.seat(3, 100.0, -50.0)
    late = ShotEvent(shooter=2, seq=2, weapon=0, result="hit", view_time=4.0, victim=3)
    scene.encoder.note_fights([late], now=4.1)
    joined = scene.snapshot(4, now=4.2)
    assert [joined[s][2] for s in (2, 3)] == [[2, 3], [2, 3]]


def test_a_fight_noted_before_a_changed_seat_s_first_snapshot_keeps_them_relevant() -> None:
    """As above for a slot another player had: the fights of the last player are gone,
    the new player's own (noted after it joined, before its first snapshot) are not."""
    scene = Scene(capacity=3, interest=NO_BACKGROUND)
    scene.seat(0)
    scene.seat(1, -100.0)
    scene.seat(2, 100.0, 50.0)
    scene.yaw[1] = math.pi / 2
    scene.snapshot(1, now=0.5)
    scene.vacate(1)
    scene.seat(1, -100.0)  # the next player in slot 1, no snapshot between
    hit = ShotEvent(shooter=1, seq=1, weapon=0, result="hit", view_time=0.0, victim=0)
    scene.encoder.note_fights([hit], now=1.0)
    first = scene.snapshot(2, now=1.5)
    assert [first[s][2] for s in (0, 1, 2)] == [[0, 1], [0, 1], [2]]


# -- a simulated population --------------------------------------------------------------


@dataclass(frozen=True)
class Scenario:
    seed: int
    capacity: int = 40
    seated: int = 28  # at the start, in slots below ``first_slots``
    first_slots: int = 40
    snapshots: int = 160
    interval: int = 2
    kept: int = 16
    interest: InterestConfig = RADIUS_ONLY
    ack_chance: float = 0.6  # each snapshot's chance to be acknowledged at all
    max_delay: int = 5  # snapshots an ack takes at most to arrive (1: before the next)
    churn: float = 0.02  # a seat's chance per snapshot to empty, and an empty one's to fill
    swap: float = 0.01  # a seat's chance to change player with no snapshot between
    skip: float = 0.05  # a snapshot tick's chance to be skipped (a stall)
    speed: float = 0.4  # m per snapshot at most
    turn: float = 0.3  # a player's chance per snapshot to change its velocity
    look: float = 0.2  # rad a yaw changes by per snapshot at most (a pitch, a quarter)
    fight_chance: float = 0.3  # a snapshot's chance to see a hit (and a miss)
    start: int = 0  # the tick before the first snapshot (a multiple of ``interval``)
    shared: bool = True  # the clients' values in one store (else one each)


@dataclass
class Client:
    seat: int
    baselines: EntityBaselines
    values: PlayerValues
    told: int = -1  # the newest ack the encoder was told
    first: bool = True


@dataclass
class Outcome:
    payload: int = 0
    counts: collections.Counter[str] = field(default_factory=collections.Counter)


def near_bound(config: InterestConfig, d2_others: np.ndarray) -> float:
    """The squared distance within which another player is near: the radius, or farther
    to take in the ``nearest`` others (all of them when there are fewer)."""
    bound = config.near_m**2
    if config.nearest == 0:
        return bound
    if len(d2_others) < config.nearest:
        return math.inf
    return max(bound, float(np.sort(d2_others)[config.nearest - 1]))


def simulate(sc: Scenario) -> Outcome:
    """Run ``sc``; every client checks every snapshot; returns the bytes sent and how
    often each case came up (so a test can tell its scenario covered them)."""
    rng = np.random.default_rng(sc.seed)
    n, out = sc.capacity, Outcome()
    encoder = DeltaEncoder(CODEC, n, sc.interval, sc.interest, kept=sc.kept)
    world = PlayerValues(CODEC, sc.interval)  # the process's values of this world
    pos, step_xy = np.zeros((n, 3)), np.zeros((n, 2))
    yaw, pitch = np.zeros(n), np.zeros(n)
    health = np.full(n, 100)
    present = np.zeros(n, dtype=np.bool_)
    seat_ids = np.full(n, -1, dtype=np.int64)
    clients: dict[int, Client] = {}
    acks: list[tuple[int, int, int, int]] = []  # (due snapshot, slot, seat, tick)
    fights: dict[tuple[int, int], float] = {}
    coded: set[int] = set()  # the slots coded a snapshot at least once
    quantised: dict[int, np.ndarray] = {}  # the encoder's world per snapshot tick
    seat_counter = itertools.count()
    rate = RATE / sc.interval
    config = sc.interest
    cos_half = math.cos(math.radians(config.view_half_angle_deg))

    def seat(slot: int) -> None:
        encoder.forget(slot)  # (as Match.join does)
        seat_ids[slot] = next(seat_counter)
        present[slot] = True
        pos[slot] = (*rng.uniform(-LIMIT, LIMIT, 2), 0.0)
        step_xy[slot] = rng.uniform(-sc.speed, sc.speed, 2)
        values = world if sc.shared else PlayerValues(CODEC, sc.interval)
        clients[slot] = Client(int(seat_ids[slot]), EntityBaselines(sc.kept), values)

    def vacate(slot: int) -> None:
        encoder.forget(slot)  # (as Match.leave does)
        present[slot] = False
        seat_ids[slot] = -1
        del clients[slot]
        for pair in [pair for pair in fights if slot in pair]:
            del fights[pair]

    for slot in rng.choice(sc.first_slots, sc.seated, replace=False).tolist():
        seat(slot)
    tick = sc.start
    for snapshot in range(sc.snapshots):
        tick += sc.interval * (2 if rng.random() < sc.skip else 1)
        now = (tick - sc.start) / RATE
        # Acks due now, in any order (a late old one may follow a newer one).
        due = [ack for ack in acks if ack[0] <= snapshot]
        acks = [ack for ack in acks if ack[0] > snapshot]
        rng.shuffle(due)
        told = [(s, t) for _, s, seat_id, t in due if s in clients and clients[s].seat == seat_id]
        if told:
            encoder.note_acks(np.array([s for s, _ in told]), np.array([t for _, t in told]))
            for s, t in told:
                clients[s].told = max(clients[s].told, t)
        # Leaves and joins; a seat may change hands with no snapshot between.
        for slot in range(n):
            if present[slot]:
                if rng.random() < sc.churn:
                    vacate(slot)
                    out.counts["left"] += 1
                elif rng.random() < sc.swap:
                    vacate(slot)
                    seat(slot)
                    out.counts["swapped"] += 1
            elif rng.random() < sc.churn:
                seat(slot)
        live = np.flatnonzero(present)
        # Movement: a velocity per player, now and then changed, bouncing off the walls.
        turning = live[rng.random(len(live)) < sc.turn]
        step_xy[turning] = rng.uniform(-sc.speed, sc.speed, (len(turning), 2))
        moved = pos[live, :2] + step_xy[live]
        bounce = np.abs(moved) > LIMIT
        step_xy[live] = np.where(bounce, -step_xy[live], step_xy[live])
        pos[live, :2] = np.clip(moved, -LIMIT, LIMIT)
        jumping = live[rng.random(len(live)) < 0.05]
        pos[jumping, 2] = rng.uniform(0.0, 2.0, len(jumping))
        yaw[live] = np.mod(yaw[live] + rng.uniform(-sc.look, sc.look, len(live)), 2 * math.pi)
        nod = rng.uniform(-sc.look / 4, sc.look / 4, len(live))
        pitch[live] = np.clip(pitch[live] + nod, -1.5, 1.5)
        hurt = live[rng.random(len(live)) < 0.03]
        health[hurt] = rng.integers(0, 101, len(hurt))
        alive = health > 0
        vel = np.zeros((n, 3))
        vel[:, :2] = step_xy * rate
        # Hits and misses (no fights). Seats not yet sent a snapshot fight only in slots
        # never coded (this scene frees no seat through the encoder's forget(), which a
        # match calls), and those fight first when there are some.
        fighters = [s for s in live.tolist() if not clients[s].first or s not in coded]
        newcomers = [s for s in fighters if clients[s].first]
        events: list[SnapshotEvent] = []
        if len(fighters) >= 2 and rng.random() < sc.fight_chance:
            a, b = rng.choice(fighters, 2, replace=False).tolist()
            if newcomers and rng.random() < 0.5:
                a = int(rng.choice(newcomers))
                b = int(rng.choice([s for s in fighters if s != a]))
            hit = ShotEvent(shooter=a, seq=0, weapon=0, result="hit", view_time=now, victim=b)
            miss = ShotEvent(shooter=b, seq=0, weapon=0, result="miss", view_time=now)
            events += [hit, miss]
            fights[a, b] = fights[b, a] = now + config.fight_memory_s
            if clients[a].first or clients[b].first:
                out.counts["fought_first"] += 1
        encoder.note_fights(events, now)

        values = CODEC.quantise(pos, vel, yaw, pitch, health, alive)
        quantised[tick] = values
        slots = np.array(sorted(clients), dtype=np.int64)
        bases, blobs, selected = encoder.encode(
            tick, now, slots, seat_ids[slots], present.copy(), pos.copy(), yaw.copy(), values
        )
        coded.update(slots.tolist())
        assert len(bases) == len(blobs) == len(selected) == len(slots)
        assert bases.dtype == np.int64 and selected.dtype == np.bool_
        for c, (slot, base, blob) in enumerate(
            zip(slots.tolist(), bases.tolist(), blobs, strict=True)
        ):
            client = clients[slot]
            check_base(sc, client, tick, base, out)
            client.first = False
            before = client.baselines.held(base) if base >= 0 else np.empty(0, dtype=np.int64)
            assert before is not None  # the client holds every base it is coded against
            records = client.baselines.apply(0, tick, base, blob, client.values)
            held = client.baselines.held(tick)
            assert held is not None and held.dtype == np.int64
            held_ids, held_values = client.values.held(held)
            shown = records["id"].astype(np.int64)
            out.payload += len(blob)
            # What is shown is the encoder's quantised world, bit for bit, and who it was
            # sent; the client's account is the encoder's.
            assert np.flatnonzero(selected[c]).tolist() == shown.tolist()
            assert held_values[np.isin(held_ids, shown)].tobytes() == values[shown].tobytes()
            assert records.tobytes() == CODEC.records(shown, values[shown]).tobytes()
            assert (held[shown] == tick).all()
            row = (tick // sc.interval) % sc.kept
            account = encoder.known[slot, row]
            assert account[: len(held)].tolist() == held.tolist()
            assert (account[len(held) :] == -1).all()
            # The rest is held as it was at the base; nobody who left is held.
            before_ids = np.flatnonzero(before >= 0)
            kept_ids = before_ids[present[before_ids] & ~np.isin(before_ids, shown)]
            assert held_ids.tolist() == sorted({*shown.tolist(), *kept_ids.tolist()})
            assert held[kept_ids].tolist() == before[kept_ids].tolist()
            assert present[held_ids].all()
            # Every value held is what the encoder quantised at the tick it was sent.
            for entity, value in zip(held_ids.tolist(), held_values, strict=True):
                assert value.tobytes() == quantised[int(held[entity])][entity].tobytes()
            out.counts["forgotten"] += int(np.count_nonzero(~present[before_ids]))
            # Who is shown: interest management, checked against the scene.
            if not config.enabled:
                assert shown.tolist() == live.tolist()
                continue
            d = pos[live, :2] - pos[slot, :2]
            d2 = (d**2).sum(axis=1)
            bound = near_bound(config, d2[live != slot])
            ahead = d[:, 0] * math.cos(yaw[slot]) + d[:, 1] * math.sin(yaw[slot])
            fought = np.array([fights.get((slot, int(e)), -1.0) > now for e in live])
            in_view = (d2 <= config.view_m**2) & (ahead > 0) & (ahead**2 >= cos_half**2 * d2)
            relevant = (live == slot) | (d2 <= bound) | fought | in_view
            assert np.isin(live[relevant], shown).all()
            others = int(np.count_nonzero(~relevant))
            assert len(shown) == np.count_nonzero(relevant) + min(config.background, others)
            out.counts["fought"] += int(np.count_nonzero(fought))
            nearest_only = (d2 <= bound) & (d2 > config.near_m**2) & ~fought & ~in_view
            out.counts["nearest"] += int(np.count_nonzero(nearest_only))
            out.counts["all_near"] += int(bound == math.inf)
        # Each client acknowledges some of its snapshots, late.
        for slot in slots.tolist():
            if rng.random() < sc.ack_chance:
                delay = int(rng.integers(1, sc.max_delay + 1))
                acks.append((snapshot + delay, slot, clients[slot].seat, tick))
    return out


def check_base(sc: Scenario, client: Client, tick: int, base: int, out: Outcome) -> None:
    """The base is the client's newest ack the encoder was told, if recent enough."""
    if client.first:
        assert base == -1
        out.counts["first"] += 1
    elif client.told < 0:
        assert base == -1
    elif tick - client.told > sc.kept * sc.interval:
        assert base == -1
        out.counts["too_old"] += 1
    else:
        assert base == client.told
        out.counts["delta"] += 1


@pytest.mark.parametrize(("seed", "kept"), [(1, 16), (2, 6), (3, 4)])
def test_every_client_decodes_exactly_what_the_encoder_quantised(seed: int, kept: int) -> None:
    """Random movement, lost and late acks, leaves, joins and seat swaps: every client
    decodes every blob against the base named, holds exactly the encoder's values, and
    forgets whoever left."""
    out = simulate(Scenario(seed=seed, kept=kept))
    cases = ["first", "delta", "left", "swapped", "forgotten", "fought", "fought_first"]
    for case in cases + (["too_old"] if kept < 16 else []):
        assert out.counts[case] > 0, (case, out.counts)
    assert out.counts["nearest"] == out.counts["all_near"] == 0  # (radius only)


@pytest.mark.parametrize(
    ("seated", "case"), [(28, "nearest"), (6, "all_near")], ids=["crowded", "sparse"]
)
def test_with_the_default_interest_a_client_s_nearest_players_are_always_shown(
    seated: int, case: str
) -> None:
    """The default config: the nearest 12 others are near however far (all the others,
    in a sparse match), which the radius alone would not show."""
    out = simulate(Scenario(seed=7, seated=seated, interest=InterestConfig(), snapshots=100))
    for each in ("delta", "fought", case):
        assert out.counts[each] > 0, (each, out.counts)


def test_clients_with_a_store_each_decode_the_same_as_sharing_one() -> None:
    """The clients' values in a store each (a bot alone in its process) instead of one."""
    out = simulate(Scenario(seed=1, shared=False, snapshots=80))
    assert out.counts["delta"] > 0 and out.counts["swapped"] > 0


def test_ticks_past_32_bits_are_held_and_acknowledged() -> None:
    """A long-lived node's ticks pass 2**31 (and 2**32): the accounts hold them whole."""
    out = simulate(Scenario(seed=9, start=2**32 - 40, snapshots=60, kept=6))
    assert out.counts["delta"] > 0 and out.counts["too_old"] > 0


def test_the_accounts_grow_with_the_seats_and_tolerate_a_small_ring_of_bases() -> None:
    """Seats above the first accounts' size join later; kept 4 makes old acks common."""
    out = simulate(
        Scenario(seed=4, capacity=72, seated=20, first_slots=40, kept=4, max_delay=6, churn=0.04)
    )
    assert out.counts["too_old"] > 0 and out.counts["delta"] > 0


def test_with_interest_disabled_every_present_player_is_shown() -> None:
    simulate(Scenario(seed=5, interest=InterestConfig(enabled=False), snapshots=80))


def test_acknowledged_snapshots_cost_much_less_than_full_ones() -> None:
    """Slow players, everyone shown: deltas against acked snapshots take under half the
    bytes of full records (an unchanged player is 3 bytes against 21)."""
    slow = Scenario(
        seed=6, interest=InterestConfig(enabled=False), snapshots=60, churn=0.0, swap=0.0,
        skip=0.0, speed=0.02, turn=0.02, look=0.005, fight_chance=0.0, ack_chance=1.0,
        max_delay=1,
    )  # fmt: skip
    with_acks = simulate(slow)
    without = simulate(Scenario(**{**slow.__dict__, "ack_chance": 0.0}))
    assert with_acks.counts["delta"] == 59 * slow.seated
    assert without.counts["delta"] == 0
    assert with_acks.payload < 0.5 * without.payload, (with_acks.payload, without.payload)


# -- through a match ---------------------------------------------------------------------


def test_a_match_codes_each_client_against_the_snapshot_its_inputs_acknowledge() -> None:
    """End to end: inputs carry ``ack_tick``, snapshots come coded against it, clients
    decode them bit for bit; a player who leaves is forgotten; acks shrink the bytes."""
    arena = default_map()

    def play(acking: bool) -> int:
        # (Fog off: every player is in every snapshot, whoever stands behind a wall.)
        config = MatchConfig(
            arena=arena, tick_rate=RATE, max_players=4, snapshot_interval=2,
            interest=InterestConfig(fog=False),
        )  # fmt: skip
        match = Match(config)
        seats = [match.join(f"p{i}", 0.1) for i in range(3)]
        held = {seat.slot: EntityBaselines() for seat in seats}
        values = PlayerValues(match.codec, config.snapshot_interval)  # the bots' world
        newest = {seat.slot: -1 for seat in seats}
        rng = np.random.default_rng(8)
        payload = 0
        for seq in range(40):
            if seq == 30:
                match.leave(seats[2].slot)
                seats.pop()
            for seat in seats:
                move = tuple(rng.uniform(-1.0, 1.0, 2).tolist())
                message = InputMessage(
                    seq=seq, tick=seq, move=move, yaw=0.1 * seq - 2.0, pitch=0.0, buttons=0,
                    view_time=0.0, ack_tick=newest[seat.slot] if acking else -1,
                )  # fmt: skip
                match.receive_input(seat.slot, message, match.server_time)
            result = match.tick()
            if result.shown is None:
                assert result.tick % 2
                continue
            for seat in seats:
                snapshot = decode_server(snapshot_for(match, result, seat.slot))
                assert isinstance(snapshot, SnapshotMessage) and snapshot.ack == result.tick - 1
                expected = newest[seat.slot] if acking else -1
                assert snapshot.base == expected
                records = held[seat.slot].apply(
                    snapshot.epoch, snapshot.tick, snapshot.base, snapshot.entities, values
                )
                ids = records["id"]
                assert ids.tolist() == sorted(s.slot for s in seats)
                state = held[seat.slot].held(snapshot.tick)
                assert state is not None
                held_ids, held_values = values.held(state)
                assert held_ids.tolist() == ids.tolist()
                assert held_values.tobytes() == result.shown.quantised[ids].tobytes()
                error = np.abs(records["x"] - match.world.pos[ids, 0])
                assert (error <= POSITION_STEP_M / 2 + 1e-9).all()
                payload += len(snapshot.entities)
                newest[seat.slot] = snapshot.tick
        return payload

    with_acks, without = play(True), play(False)
    assert with_acks < 0.7 * without, (with_acks, without)
