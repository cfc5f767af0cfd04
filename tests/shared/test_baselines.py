"""What a client holds of the other players (:class:`shared.protocol.EntityBaselines`):
snapshot after snapshot, coded against whichever held base the server chose, it must hold
exactly what the server's account of it says, and show exactly each snapshot's records.
What it holds is, per player, the tick of a value in its world's
:class:`shared.protocol.PlayerValues`, which every client of a process in that world
shares."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.protocol import (
    BASELINES_KEPT,
    ENTITY_DTYPE,
    EntityBaselines,
    EntityCodec,
    InvalidField,
    MissingBaseline,
    PlayerValues,
)
from shared.protocol.deltas import FIELDS, KIND_DELTA, KIND_FULL, KIND_GONE, encode_records

CODEC = EntityCodec.for_bounds(np.array([-30.0, -30.0]), np.array([30.0, 30.0]))
N_FIELDS = len(FIELDS)
SIZES = [1 << int(b) for b in CODEC.bits]
EPOCH = 3

Players = dict[int, np.ndarray]  # id -> quantised values, (10,) int32
Record = tuple[int, int, np.ndarray, np.ndarray | None]  # id, kind, new, old (for a delta)


def encode(records: Sequence[Record]) -> bytes:
    """(id, kind, new, old) records, ascending by id, as the server codes them."""
    n = len(records)
    out = np.zeros(n * CODEC.max_record_bytes(), dtype=np.uint8)
    new = np.zeros((n, N_FIELDS), dtype=np.int32)
    old = np.zeros((n, N_FIELDS), dtype=np.int32)
    for k, (_, _, values, before) in enumerate(records):
        new[k] = values
        old[k] = values if before is None else before
    ids = np.array([r[0] for r in records], dtype=np.int64)
    kinds = np.array([r[1] for r in records], dtype=np.int64)
    size = encode_records(ids, kinds, new, old, CODEC.bits, out)
    return out[:size].tobytes()


def player(seed: int) -> np.ndarray:
    """A distinct valid state per seed."""
    return np.array([(seed * 7919 + 31 * f) % size for f, size in enumerate(SIZES)], np.int32)


def full(entity: int, values: np.ndarray) -> tuple[int, int, np.ndarray, None]:
    return entity, KIND_FULL, values, None


def delta(
    entity: int, values: np.ndarray, before: np.ndarray
) -> tuple[int, int, np.ndarray, np.ndarray]:
    return entity, KIND_DELTA, values, before


def gone(entity: int) -> tuple[int, int, np.ndarray, None]:
    return entity, KIND_GONE, np.zeros(N_FIELDS, np.int32), None


def store(interval: int = 1, players: int = 256) -> PlayerValues:
    return PlayerValues(CODEC, interval, players)


def as_players(values: PlayerValues, held: np.ndarray | None) -> dict[int, list[int]] | None:
    """What a client holds whose held ticks are ``held``: {id: values}."""
    if held is None:
        return None
    assert held.dtype == np.int64 and held.ndim == 1
    assert (held >= -1).all()
    ids, rows = values.held(held)
    assert ids.tolist() == np.flatnonzero(held >= 0).tolist()  # ascending
    assert rows.dtype == np.int32 and rows.shape == (len(ids), N_FIELDS)
    return {int(i): v.tolist() for i, v in zip(ids, rows, strict=True)}


def ticks_of(held: np.ndarray | None) -> dict[int, int] | None:
    """{id: the tick of the value held} for the players held."""
    if held is None:
        return None
    return {int(i): int(held[i]) for i in np.flatnonzero(held >= 0)}


def records_of(players: Players) -> np.ndarray:
    ids = sorted(players)
    values = np.array([players[i] for i in ids], dtype=np.int32).reshape(len(ids), N_FIELDS)
    return CODEC.records(np.array(ids, dtype=np.int64), values)


# -- chains of snapshots ------------------------------------------------------------------


STEPS = np.array([0, 0, 0, 1, -1, 100, -3000, 70_000])  # small, medium and full differences


def moved(before: np.ndarray, seed: int) -> np.ndarray:
    """A player's next state: each field the same, a little or a lot different."""
    steps = np.random.default_rng(seed).choice(STEPS, size=N_FIELDS)
    return ((before.astype(np.int64) + steps) % np.array(SIZES)).astype(np.int32)


POOL = [*range(10), 40_000, 65_535]  # a few ids, the largest one included


_CHAIN_STORES: dict[int, PlayerValues] = {}
_CHAIN_STARTS = itertools.count(0, 10_000)


@settings(max_examples=60)
@given(st.data())
def test_a_chain_of_snapshots_holds_what_the_server_coded(data: st.DataObject) -> None:
    """Each snapshot is coded against one of the client's newest held snapshots (or none):
    deltas of players it held there, full records of others, gone records of some who
    left; players not named are held as they were at the base (interest management did
    not send them). With every player sent, the client holds the server's world."""
    kept = data.draw(st.integers(1, 5), label="kept")
    everyone = data.draw(st.booleans(), label="everyone")
    interval = data.draw(st.sampled_from([1, 2, 5]), label="interval")
    # One store per interval for every example (a fresh one would grow to 65536 players
    # each time): each example's ticks are its own, later than any before.
    values = _CHAIN_STORES.setdefault(interval, store(interval))
    baselines = EntityBaselines(kept)
    # The server's account: per snapshot, what the client holds after it (id -> the value
    # and the tick it was sent at).
    account: dict[int, dict[int, tuple[np.ndarray, int]]] = {}
    world: Players = {}
    tick = interval * (next(_CHAIN_STARTS) + data.draw(st.integers(0, 1000)))
    for _ in range(data.draw(st.integers(1, 10))):
        tick += interval * data.draw(st.integers(1, 3))
        for entity in POOL:  # who is in the world now, and where
            if entity in world:
                if data.draw(st.integers(0, 5)) == 0:
                    del world[entity]
                else:
                    world[entity] = moved(world[entity], data.draw(st.integers(0, 2**32 - 1)))
            elif data.draw(st.integers(0, 2)) == 0:
                world[entity] = player(data.draw(st.integers(0, 10**6)))
        newest = sorted(account)[-kept:]
        base = data.draw(st.sampled_from([-1, *newest]), label="base")
        before = account.get(base, {})
        records: list[Record] = []
        for entity in sorted(set(world) | set(before)):
            sent = everyone or data.draw(st.booleans())
            if entity not in world:
                if sent:
                    records.append(gone(entity))
            elif sent and entity in before and data.draw(st.integers(0, 3)):
                records.append(delta(entity, world[entity], before[entity][0]))
            elif sent:
                records.append(full(entity, world[entity]))
        after = dict(before)
        for entity, kind, value, _ in records:
            if kind == KIND_GONE:
                after.pop(entity, None)
            else:
                after[entity] = (value, tick)
        account[tick] = after

        shown = baselines.apply(EPOCH, tick, base, encode(records), values)

        expected = {entity: value for entity, kind, value, _ in records if kind != KIND_GONE}
        assert shown.dtype == ENTITY_DTYPE
        assert shown.tobytes() == records_of(expected).tobytes()
        if everyone:
            held = as_players(values, baselines.held(tick))
            assert held == {i: v.tolist() for i, v in world.items()}
        for t in account:
            is_kept = t in sorted(account)[-kept:]
            want = {i: v.tolist() for i, (v, _) in account[t].items()}
            assert as_players(values, baselines.held(t)) == (want if is_kept else None)
            want_ticks = {i: at for i, (_, at) in account[t].items()}
            assert ticks_of(baselines.held(t)) == (want_ticks if is_kept else None)


def test_records_shown_are_the_snapshots_own_not_everyone_held() -> None:
    """A player the snapshot does not name is held but not shown: the client does not know
    where it is now (interest management left it out)."""
    values, baselines = store(), EntityBaselines()
    a, b, c, d = (player(k) for k in range(4))
    baselines.apply(EPOCH, 10, -1, encode([full(1, a), full(2, b), full(3, c)]), values)
    moved_c = player(99)
    blob = encode([gone(1), delta(3, moved_c, c), full(5, d)])
    shown = baselines.apply(EPOCH, 11, 10, blob, values)
    assert shown["id"].tolist() == [3, 5]
    assert shown.tobytes() == records_of({3: moved_c, 5: d}).tobytes()
    held = as_players(values, baselines.held(11))
    assert held == {2: b.tolist(), 3: moved_c.tolist(), 5: d.tolist()}
    assert ticks_of(baselines.held(11)) == {2: 10, 3: 11, 5: 11}
    held = as_players(values, baselines.held(10))
    assert held == {1: a.tolist(), 2: b.tolist(), 3: c.tolist()}
    assert ticks_of(baselines.held(10)) == {1: 10, 2: 10, 3: 10}


def test_a_delta_is_against_the_named_base_not_the_newest() -> None:
    values, baselines = store(), EntityBaselines()
    a, a2 = player(1), player(2)
    baselines.apply(EPOCH, 1, -1, encode([full(7, a)]), values)
    baselines.apply(EPOCH, 2, 1, encode([gone(7)]), values)
    shown = baselines.apply(EPOCH, 3, 1, encode([delta(7, a2, a)]), values)  # held at 1
    assert shown.tobytes() == records_of({7: a2}).tobytes()
    with pytest.raises(InvalidField) as info:
        baselines.apply(EPOCH, 4, 2, encode([delta(7, a2, a)]), values)  # not held at 2
    assert not isinstance(info.value, MissingBaseline)
    assert baselines.held(4) is None


def test_an_empty_snapshot_holds_its_base_unchanged() -> None:
    values, baselines = store(), EntityBaselines()
    baselines.apply(EPOCH, 1, -1, encode([full(4, player(4))]), values)
    assert len(baselines.apply(EPOCH, 2, 1, b"", values)) == 0
    assert as_players(values, baselines.held(2)) == as_players(values, baselines.held(1))
    assert ticks_of(baselines.held(2)) == {4: 1}
    assert len(baselines.apply(EPOCH, 3, -1, b"", values)) == 0
    assert as_players(values, baselines.held(3)) == {}


# -- what cannot be decoded ---------------------------------------------------------------


def test_a_base_not_held_is_a_missing_baseline() -> None:
    values, baselines = store(), EntityBaselines()
    with pytest.raises(MissingBaseline) as info:
        baselines.apply(EPOCH, 5, 3, b"", values)  # nothing held yet
    assert isinstance(info.value, InvalidField) and info.value.code == "invalid_field"
    baselines.apply(EPOCH, 3, -1, encode([full(1, player(1))]), values)
    with pytest.raises(MissingBaseline):
        baselines.apply(EPOCH, 5, 2, b"", values)  # 2 was never shown
    assert baselines.held(5) is None  # not held: the client does not acknowledge it
    assert ticks_of(baselines.held(3)) == {1: 3}  # and what it held is untouched
    baselines.apply(EPOCH, 5, 3, b"", values)


@pytest.mark.parametrize("base", [7, 8])
def test_a_base_at_or_after_the_snapshot_is_a_missing_baseline(base: int) -> None:
    """A snapshot is coded against an earlier one: even a held tick is no base of an
    earlier or the same snapshot."""
    values, baselines = store(), EntityBaselines()
    baselines.apply(EPOCH, 7, -1, encode([full(1, player(1))]), values)
    baselines.apply(EPOCH, 8, 7, b"", values)
    with pytest.raises(MissingBaseline):
        baselines.apply(EPOCH, 7, base, b"", values)


def test_a_blob_that_does_not_decode_is_invalid_and_not_held() -> None:
    values, baselines = store(), EntityBaselines()
    a = player(1)
    with pytest.raises(InvalidField) as info:
        baselines.apply(EPOCH, 1, -1, encode([delta(1, a, a)]), values)  # against nothing
    assert not isinstance(info.value, MissingBaseline)
    assert baselines.held(1) is None
    with pytest.raises(InvalidField) as info:
        baselines.apply(EPOCH, 2, -1, encode([full(1, a)])[:-1], values)  # cut short
    assert not isinstance(info.value, MissingBaseline)
    assert baselines.held(2) is None


def test_a_new_epoch_starts_afresh() -> None:
    """Another primary's snapshots name no base of the old one's, even at the same tick
    (and its values are another world's: a client takes a new store for it)."""
    values, baselines = store(), EntityBaselines()
    a = player(1)
    baselines.apply(EPOCH, 1, -1, encode([full(1, a)]), values)
    baselines.apply(EPOCH, 2, 1, encode([delta(1, a, a)]), values)
    fresh = store()
    with pytest.raises(MissingBaseline):
        baselines.apply(EPOCH + 1, 3, 2, encode([delta(1, a, a)]), fresh)
    assert baselines.held(1) is None and baselines.held(2) is None
    b = player(2)
    shown = baselines.apply(EPOCH + 1, 1, -1, encode([full(2, b)]), fresh)
    assert shown.tobytes() == records_of({2: b}).tobytes()
    assert as_players(fresh, baselines.held(1)) == {2: b.tolist()}  # the new epoch's tick 1


@pytest.mark.parametrize("kept", [1, 3, BASELINES_KEPT])
def test_only_the_newest_kept_snapshots_are_held(kept: int) -> None:
    values = store()
    baselines = EntityBaselines() if kept == BASELINES_KEPT else EntityBaselines(kept)
    baselines.apply(EPOCH, 1, -1, encode([full(1, player(1))]), values)
    last = kept + 4
    for tick in range(2, last + 1):
        blob = encode([delta(1, player(tick), player(tick - 1))])
        baselines.apply(EPOCH, tick, tick - 1, blob, values)
    for tick in range(1, last + 1):
        held = as_players(values, baselines.held(tick))
        assert held == ({1: player(tick).tolist()} if tick > last - kept else None)
    with pytest.raises(MissingBaseline):
        baselines.apply(EPOCH, last + 1, last - kept, b"", values)
    baselines.apply(EPOCH, last + 1, last - kept + 1, b"", values)  # the oldest still held


# -- clients sharing a world's values -------------------------------------------------------


def test_clients_sharing_a_world_s_values_decode_identical_values() -> None:
    """Two clients of one process in one world, coded against different bases (one acks
    every snapshot, the other one in five) and told different players: each shows and
    holds exactly what it was sent, the same values, bit for bit, as a client with a store
    of its own."""
    shared, own = store(2), store(2)
    rng = np.random.default_rng(5)
    world = {entity: player(entity) for entity in (0, 3, 4, 9, 200)}
    # Per client: its baselines, its store, its base, the server's account of it.
    names = ("every", "some", "alone")
    baselines = {name: EntityBaselines() for name in names}
    stores = {"every": shared, "some": shared, "alone": own}
    bases = dict.fromkeys(names, -1)
    accounts: dict[str, dict[int, Players]] = {name: {} for name in names}
    for tick in range(2, 120, 2):
        world = {e: moved(v, tick * 1000 + e) for e, v in world.items()}
        sent = {e for e in world if rng.random() < 0.7} | {0}
        shown: dict[str, np.ndarray] = {}
        for name in names:
            before = accounts[name].get(bases[name], {})
            told = sorted(sent - {4} if name == "some" else sent)
            records = [
                delta(e, world[e], before[e]) if e in before else full(e, world[e]) for e in told
            ]
            shown[name] = baselines[name].apply(
                EPOCH, tick, bases[name], encode(records), stores[name]
            )
            assert shown[name].tobytes() == records_of({e: world[e] for e in told}).tobytes()
            after = accounts[name][tick] = {**before, **{e: world[e] for e in told}}
            held = as_players(stores[name], baselines[name].held(tick))
            assert held == {i: v.tolist() for i, v in after.items()}
        assert shown["every"].tobytes() == shown["alone"].tobytes()
        told_some = np.isin(shown["every"]["id"], shown["some"]["id"])
        assert shown["every"][told_some].tobytes() == shown["some"].tobytes()
        bases["every"] = bases["alone"] = tick
        if tick % 10 == 0:
            bases["some"] = tick
    # Every snapshot still held decodes to the same values for each, whatever its base.
    for tick in range(120 - 2 * BASELINES_KEPT, 120, 2):
        every = as_players(shared, baselines["every"].held(tick))
        assert every == as_players(own, baselines["alone"].held(tick))
        some = as_players(shared, baselines["some"].held(tick))
        some_ticks = ticks_of(baselines["some"].held(tick))
        assert some is not None and some_ticks is not None and every is not None
        for entity, value in some.items():
            if some_ticks[entity] == tick:  # told at this tick: what "every" was told
                assert every[entity] == value


def test_a_base_value_overwritten_in_the_store_is_a_missing_baseline() -> None:
    """The store keeps RING snapshots: a client's frame that arrives more than that later
    than another client's newer one finds its base value overwritten (the same ring slot,
    a newer tick). Its delta is a MissingBaseline, never decoded against the newer value;
    a value not overwritten still decodes."""
    interval = 2
    values, late, prompt = store(interval), EntityBaselines(), EntityBaselines()
    a, b = player(1), player(2)
    first = encode([full(1, a), full(2, b)])
    late.apply(EPOCH, 10, -1, first, values)
    prompt.apply(EPOCH, 10, -1, first, values)
    newer = 10 + interval * PlayerValues.RING  # the ring slot of tick 10
    c = player(3)
    prompt.apply(EPOCH, newer, -1, encode([full(1, c)]), values)  # player 1's only
    assert as_players(values, prompt.held(newer)) == {1: c.tolist()}
    # The late client's snapshot 12, coded against 10 (held), arrives now.
    a2 = moved(a, 1)
    with pytest.raises(MissingBaseline):
        late.apply(EPOCH, 12, 10, encode([delta(1, a2, a)]), values)
    assert late.held(12) is None  # not shown, so not acknowledged
    assert as_players(values, prompt.held(newer)) == {1: c.tolist()}  # nor spoiling it
    # Player 2's value at 10 is still there: a delta of it decodes, as does a full record.
    b2 = moved(b, 2)
    shown = late.apply(EPOCH, 14, 10, encode([full(1, a2), delta(2, b2, b)]), values)
    assert shown.tobytes() == records_of({1: a2, 2: b2}).tobytes()
    assert as_players(values, late.held(14)) == {1: a2.tolist(), 2: b2.tolist()}


def test_an_id_beyond_the_store_grows_it() -> None:
    """A player id past the store's size grows it, in the middle of a blob too (the
    records before it decoded again), and the values held before are kept."""
    values, baselines = store(players=4), EntityBaselines()
    a, b, c = player(1), player(2), player(3)
    baselines.apply(EPOCH, 1, -1, encode([full(2, a), full(3, b)]), values)
    a2 = moved(a, 1)
    shown = baselines.apply(EPOCH, 2, 1, encode([delta(2, a2, a), full(300, c)]), values)
    assert values.values.shape[1] > 300 and values.ticks.shape[1] == values.values.shape[1]
    assert shown.tobytes() == records_of({2: a2, 300: c}).tobytes()
    assert as_players(values, baselines.held(2)) == {2: a2.tolist(), 3: b.tolist(), 300: c.tolist()}
    assert as_players(values, baselines.held(1)) == {2: a.tolist(), 3: b.tolist()}
    c2 = moved(c, 2)
    shown = baselines.apply(EPOCH, 3, 2, encode([delta(300, c2, c), full(65_535, a)]), values)
    assert values.values.shape[1] == 65_536
    assert shown.tobytes() == records_of({300: c2, 65_535: a}).tobytes()
    held = as_players(values, baselines.held(3))
    assert held == {2: a2.tolist(), 3: b.tolist(), 300: c2.tolist(), 65_535: a.tolist()}
