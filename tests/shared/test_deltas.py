"""The entity delta codec (:mod:`shared.protocol.deltas`): what a server codes against any
baseline, a client decodes back bit for bit (through :class:`PlayerValues`, the store of a
world's values its clients share); a blob that does not decode raises InvalidField, never
another exception (a bot's decoder faces whatever arrives)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.protocol import ENTITY_DTYPE, EntityCodec, InvalidField, MissingBaseline
from shared.protocol.deltas import (
    FIELDS,
    KIND_DELTA,
    KIND_FULL,
    KIND_GONE,
    POSITION_STEP_M,
    VALUE_RING,
    PlayerValues,
    encode_records,
)

#: The default map's codec, and one for a far larger map (wider position fields).
SMALL = EntityCodec.for_bounds(np.array([-30.0, -30.0]), np.array([30.0, 30.0]))
LARGE = EntityCodec.for_bounds(np.array([-1000.0, -600.0]), np.array([1000.0, 600.0]))
CODECS = (SMALL, LARGE)
N_FIELDS = len(FIELDS)
YAW, PITCH = FIELDS.index("yaw"), FIELDS.index("pitch")


def no_rows() -> np.ndarray:
    return np.zeros((0, N_FIELDS), dtype=np.int32)


def encode(
    codec: EntityCodec,
    ids: Sequence[int],
    kinds: Sequence[int],
    new: np.ndarray,
    old: np.ndarray | None = None,
) -> bytes:
    """encode_records as the server calls it: into a zeroed buffer of the stated size."""
    new = np.asarray(new, dtype=np.int32).reshape(len(ids), N_FIELDS)
    old = new if old is None else np.asarray(old, dtype=np.int32).reshape(len(ids), N_FIELDS)
    out = np.zeros(len(ids) * codec.max_record_bytes(), dtype=np.uint8)
    size = encode_records(
        np.asarray(ids, dtype=np.int64),
        np.asarray(kinds, dtype=np.int64),
        new,
        old,
        codec.bits,
        out,
    )
    assert 0 <= size <= len(out)
    assert not out[size:].any()  # nothing written past what it says it wrote
    return out[:size].tobytes()


# One store per codec for every decode here (a fresh one per decode would allocate room for
# 65536 players each time an id that high comes up): each decode seeds its base at a tick
# of its own and decodes the tick after, so no decode reads another's values.
_STORES: dict[int, PlayerValues] = {}
_TICKS = itertools.count(0, 2)


def seed(store: PlayerValues, tick: int, ids: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Players ``ids`` held with ``values`` at ``tick`` (full records decoded into the
    store, as a client's first snapshot): the held ticks, per id."""
    blob = encode(store.codec, ids.tolist(), [KIND_FULL] * len(ids), values)
    held, records = store.decode(tick, np.empty(0, dtype=np.int64), blob)
    assert records["id"].tolist() == ids.tolist()
    return held


def decode(
    codec: EntityCodec, blob: bytes, base_ids: np.ndarray, base_values: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(the players held after ``blob``: ids and values; the records it shows), ``blob``
    decoded against a base of those players held at the snapshot before."""
    store = _STORES.setdefault(id(codec), PlayerValues(codec, 1))
    base_tick = next(_TICKS)
    tick = base_tick + 1
    base = seed(store, base_tick, base_ids, base_values)
    held, records = store.decode(tick, base, blob)
    assert held.dtype == np.int64
    ids, values = store.held(held)
    # Each value held is the snapshot's (the records shown) or the base's (the rest).
    shown = records["id"].astype(np.int64)
    assert held[shown].tolist() == [tick] * len(shown)
    assert set(held[np.setdiff1d(ids, shown)].tolist()) <= {base_tick}
    return ids, values, records


def row(codec: EntityCodec, **fields: int) -> np.ndarray:
    """One player's quantised state: mid-range values, ``fields`` as given."""
    values = np.array([(1 << int(b)) // 3 for b in codec.bits], dtype=np.int32)
    for name, value in fields.items():
        values[FIELDS.index(name)] = value
    return values


# -- strategies ---------------------------------------------------------------------------


def values_of(codec: EntityCodec) -> st.SearchStrategy[np.ndarray]:
    """Any quantised state: each field anywhere within its width."""
    return st.tuples(*[st.integers(0, (1 << int(b)) - 1) for b in codec.bits]).map(
        lambda v: np.array(v, dtype=np.int32)
    )


@st.composite
def near(draw: st.DrawFn, codec: EntityCodec, old: np.ndarray) -> np.ndarray:
    """A state after ``old``: each field unchanged, a little or a lot different (across
    the wrap too), or anything: every class a delta codes a field with."""
    new = old.copy()
    for f, width in enumerate(codec.bits):
        size = 1 << int(width)
        step = draw(
            st.one_of(
                st.just(0), st.integers(-64, 63), st.integers(-4096, 4095), st.integers(0, size - 1)
            )
        )
        new[f] = (int(old[f]) + step) % size
    return new


@dataclass(frozen=True)
class Frame:
    """A baseline (what the client held) and the records of a snapshot against it."""

    codec: EntityCodec
    base: dict[int, np.ndarray]
    ids: list[int]
    kinds: list[int]
    new: np.ndarray  # (K, 10): the records' values (anything for a gone one)
    old: np.ndarray  # (K, 10): the base's value of each delta's player

    @property
    def base_ids(self) -> np.ndarray:
        return np.array(sorted(self.base), dtype=np.int64)

    @property
    def base_values(self) -> np.ndarray:
        rows = [self.base[i] for i in sorted(self.base)]
        return np.array(rows, dtype=np.int32).reshape(len(rows), N_FIELDS)

    def blob(self) -> bytes:
        return encode(self.codec, self.ids, self.kinds, self.new, self.old)

    def held_after(self) -> dict[int, np.ndarray]:
        """What the client holds after the frame: the base, the records applied."""
        held = dict(self.base)
        for entity, kind, values in zip(self.ids, self.kinds, self.new, strict=True):
            if kind == KIND_GONE:
                held.pop(entity, None)
            else:
                held[entity] = values
        return held

    def shown(self) -> np.ndarray:
        """The records the frame shows: its non-gone ones, dequantised."""
        keep = [k for k, kind in enumerate(self.kinds) if kind != KIND_GONE]
        ids = np.array([self.ids[k] for k in keep], dtype=np.int64)
        return self.codec.records(ids, self.new[keep].reshape(len(keep), N_FIELDS))


@st.composite
def frames(draw: st.DrawFn, max_players: int = 12) -> Frame:
    codec = draw(st.sampled_from(CODECS))
    player_ids = st.integers(0, 40) | st.integers(0, 65535)  # often shared, sometimes far
    base_ids = draw(st.lists(player_ids, unique=True, max_size=max_players))
    base = {entity: draw(values_of(codec)) for entity in base_ids}
    newcomers = draw(st.lists(player_ids, unique=True, max_size=max_players))
    candidates = sorted(set(base_ids) | set(newcomers))
    sent = sorted(draw(st.sets(st.sampled_from(candidates)))) if candidates else []
    kinds, new, old = [], [], []
    for entity in sent:
        if entity in base:
            kind = draw(st.sampled_from([KIND_DELTA, KIND_DELTA, KIND_FULL, KIND_GONE]))
            values = draw(near(codec, base[entity])) if kind == KIND_DELTA else None
            before = base[entity]
        else:
            kind, values, before = KIND_FULL, None, np.zeros(N_FIELDS, np.int32)
        if values is None:
            values = draw(values_of(codec))
        kinds.append(kind)
        new.append(values)
        old.append(before)
    shape = (len(sent), N_FIELDS)
    return Frame(
        codec,
        base,
        sent,
        kinds,
        np.array(new, dtype=np.int32).reshape(shape),
        np.array(old, dtype=np.int32).reshape(shape),
    )


def assert_held(held_ids: np.ndarray, held_values: np.ndarray, expected: dict[int, np.ndarray]):
    assert held_ids.tolist() == sorted(expected)
    assert held_values.dtype == np.int32
    want = np.array([expected[i] for i in sorted(expected)], dtype=np.int32)
    assert held_values.tolist() == want.reshape(len(expected), N_FIELDS).tolist()


# -- round trips --------------------------------------------------------------------------


@settings(max_examples=150)
@given(frames())
def test_every_record_decodes_back_bit_for_bit_against_its_baseline(frame: Frame) -> None:
    held_ids, held_values, records = decode(
        frame.codec, frame.blob(), frame.base_ids, frame.base_values
    )
    assert_held(held_ids, held_values, frame.held_after())
    expected = frame.shown()
    assert records.dtype == ENTITY_DTYPE
    assert records.tobytes() == expected.tobytes()


@settings(max_examples=60)
@given(frames())
def test_records_are_byte_aligned_so_a_frame_is_its_records_spliced(frame: Frame) -> None:
    """Each record starts on a byte: the server may code players one at a time."""
    one_by_one = b"".join(
        encode(frame.codec, [entity], [kind], frame.new[k], frame.old[k])
        for k, (entity, kind) in enumerate(zip(frame.ids, frame.kinds, strict=True))
    )
    assert one_by_one == frame.blob()


@pytest.mark.parametrize("codec", CODECS, ids=["small", "large"])
def test_extreme_values_round_trip_in_every_kind(codec: EntityCodec) -> None:
    """Zeros and every field's top value, full and as deltas each way (the widest jumps)."""
    top = ((1 << codec.bits) - 1).astype(np.int32)
    zero = np.zeros(N_FIELDS, dtype=np.int32)
    base_ids = np.array([1, 2], dtype=np.int64)
    base_values = np.array([zero, top], dtype=np.int32)
    blob = encode(
        codec,
        [0, 1, 2, 3],
        [KIND_FULL, KIND_DELTA, KIND_DELTA, KIND_FULL],
        np.array([top, top, zero, zero]),
        np.array([zero, zero, top, zero]),
    )
    held_ids, held_values, records = decode(codec, blob, base_ids, base_values)
    assert held_ids.tolist() == [0, 1, 2, 3]
    assert held_values.tolist() == [top.tolist(), top.tolist(), zero.tolist(), zero.tolist()]
    assert records["id"].tolist() == [0, 1, 2, 3]


def test_the_layout_is_the_documented_one() -> None:
    """id (16 bits) then kind (2 bits), least significant bit first; a full record is the
    ten fields at their widths, padded to a byte; a gone one is 3 bytes."""
    gone = encode(SMALL, [0x1234], [KIND_GONE], np.zeros((1, N_FIELDS)))
    assert gone == bytes([0x34, 0x12, KIND_GONE])
    full = encode(SMALL, [0xABCD], [KIND_FULL], np.zeros((1, N_FIELDS)))
    assert len(full) == (16 + 2 + int(SMALL.bits.sum()) + 7) // 8
    assert full[:3] == bytes([0xCD, 0xAB, KIND_FULL])
    assert not any(full[3:])


def test_an_unchanged_player_costs_three_bytes() -> None:
    values = row(SMALL)
    blob = encode(SMALL, [9], [KIND_DELTA], values, values)
    assert len(blob) == 3  # id, kind, an empty group mask
    held_ids, held_values, records = decode(
        SMALL, blob, np.array([9], dtype=np.int64), values.reshape(1, N_FIELDS)
    )
    assert held_ids.tolist() == [9] and held_values.tolist() == [values.tolist()]
    assert records.tobytes() == SMALL.records(np.array([9]), values.reshape(1, N_FIELDS)).tobytes()


@pytest.mark.parametrize(("old", "new"), [(65535, 0), (0, 65535), (65530, 5)])
def test_yaw_wraps_so_turning_past_the_seam_is_a_small_delta(old: int, new: int) -> None:
    """Yaw is a circle: 65535 -> 0 is one step, coded as a small difference (7 bits)."""
    before, after = row(SMALL, yaw=old), row(SMALL, yaw=new)
    blob = encode(SMALL, [4], [KIND_DELTA], after, before)
    one_step = encode(SMALL, [4], [KIND_DELTA], row(SMALL, yaw=101), row(SMALL, yaw=100))
    assert len(blob) == len(one_step) == 5  # 22 bits, the look group: 2 + 7 (yaw) + 2 (pitch)
    _, held_values, _ = decode(SMALL, blob, np.array([4], dtype=np.int64), before[None, :])
    assert held_values[0, YAW] == new
    assert held_values[0].tolist() == after.tolist()


@pytest.mark.parametrize("codec", CODECS, ids=["small", "large"])
def test_a_moving_player_costs_far_less_than_a_full_record(codec: EntityCodec) -> None:
    """A runner's snapshot-to-snapshot change (6 m/s over 1/30 s, turning a little): its
    position group and a small yaw change, not the whole state."""
    vel, pitch = np.array([[6.0, 0.0, 0.0]]), np.array([0.1])
    health, alive = np.array([100]), np.array([True])
    start, turned = np.array([0.3]), np.array([0.31])
    before = codec.quantise(np.array([[1.0, 2.0, 0.0]]), vel, start, pitch, health, alive)
    after = codec.quantise(np.array([[1.2, 2.0, 0.0]]), vel, turned, pitch, health, alive)
    full = encode(codec, [3], [KIND_FULL], after)
    delta = encode(codec, [3], [KIND_DELTA], after, before)
    assert len(full) == (16 + 2 + int(codec.bits.sum()) + 7) // 8
    assert 0.2 / POSITION_STEP_M > 64  # (a medium difference, 13 bits, for x)
    assert len(delta) <= len(full) // 2
    _, held_values, _ = decode(codec, delta, np.array([3], dtype=np.int64), before)
    assert held_values.tolist() == after.tolist()


# -- what does not decode ------------------------------------------------------------------


def raises_invalid(codec: EntityCodec, blob: bytes, base_ids: np.ndarray, base_values: np.ndarray):
    """InvalidField, and not MissingBaseline: every base value is in the store."""
    with pytest.raises(InvalidField) as info:
        decode(codec, blob, base_ids, base_values)
    assert info.value.code == "invalid_field"
    assert not isinstance(info.value, MissingBaseline)


def test_a_delta_of_a_player_absent_from_the_base_is_invalid() -> None:
    values = row(SMALL)
    blob = encode(SMALL, [4], [KIND_DELTA], values, values)
    raises_invalid(SMALL, blob, np.empty(0, dtype=np.int64), no_rows())
    base_values = np.array([values, values], dtype=np.int32)
    raises_invalid(SMALL, blob, np.array([3, 5], dtype=np.int64), base_values)
    # ... and as any record after valid ones.
    full = encode(SMALL, [1], [KIND_FULL], values)
    raises_invalid(SMALL, full + blob, np.array([3, 5], dtype=np.int64), base_values)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ((7, KIND_FULL), (3, KIND_FULL)),
        ((3, KIND_FULL), (3, KIND_FULL)),
        ((3, KIND_GONE), (3, KIND_FULL)),
        ((5, KIND_DELTA), (2, KIND_GONE)),
    ],
    ids=["descending", "repeated", "gone-then-full", "delta-then-lower-gone"],
)
def test_ids_not_ascending_are_invalid(first: tuple[int, int], second: tuple[int, int]) -> None:
    values = row(SMALL)
    base_ids = np.array([2, 3, 5, 7], dtype=np.int64)
    base_values = np.tile(values, (4, 1))
    a = encode(SMALL, [first[0]], [first[1]], values, values)
    b = encode(SMALL, [second[0]], [second[1]], values, values)
    decode(SMALL, a, base_ids, base_values)  # each alone decodes
    decode(SMALL, b, base_ids, base_values)
    raises_invalid(SMALL, a + b, base_ids, base_values)


def test_an_unknown_kind_is_invalid() -> None:
    raises_invalid(SMALL, bytes([1, 0, 3]), np.empty(0, dtype=np.int64), no_rows())
    raises_invalid(SMALL, bytes([1, 0, 3 | 0xFC]), np.empty(0, dtype=np.int64), no_rows())


@settings(max_examples=40)
@given(frames(max_players=6))
def test_a_blob_cut_inside_a_record_is_invalid_and_at_a_boundary_is_its_records(
    frame: Frame,
) -> None:
    """Records are byte-aligned and every byte of one carries its bits: a cut between two
    records leaves the first ones, a cut inside one leaves a record cut short."""
    sizes = [
        len(encode(frame.codec, [entity], [kind], frame.new[k], frame.old[k]))
        for k, (entity, kind) in enumerate(zip(frame.ids, frame.kinds, strict=True))
    ]
    boundaries = {int(b): k for k, b in enumerate(np.cumsum([0, *sizes]))}
    blob = frame.blob()
    for end in range(len(blob)):
        if end in boundaries:
            k = boundaries[end]
            prefix = Frame(
                frame.codec,
                frame.base,
                frame.ids[:k],
                frame.kinds[:k],
                frame.new[:k],
                frame.old[:k],
            )
            held_ids, held_values, _ = decode(
                frame.codec, blob[:end], frame.base_ids, frame.base_values
            )
            assert_held(held_ids, held_values, prefix.held_after())
        else:
            raises_invalid(frame.codec, blob[:end], frame.base_ids, frame.base_values)


@st.composite
def spoiled(draw: st.DrawFn, frame: Frame) -> bytes:
    """A valid blob with bytes replaced, or bytes added, or anything at all."""
    blob = bytearray(frame.blob())
    how = draw(st.sampled_from(["replace", "append", "any"]))
    if how == "replace" and blob:
        for _ in range(draw(st.integers(1, 3))):
            blob[draw(st.integers(0, len(blob) - 1))] = draw(st.integers(0, 255))
        return bytes(blob)
    if how == "append":
        return bytes(blob) + draw(st.binary(min_size=1, max_size=24))
    return draw(st.binary(max_size=200))


@settings(max_examples=200)
@given(st.data())
def test_garbage_raises_invalid_field_or_decodes_to_a_sane_state(data: st.DataObject) -> None:
    """Whatever the bytes, InvalidField or players each within their fields' widths,
    ascending, the records shown among them: never another exception, never a crash."""
    frame = data.draw(frames(max_players=8))
    blob = data.draw(spoiled(frame))
    codec = frame.codec
    try:
        held_ids, held_values, records = decode(codec, blob, frame.base_ids, frame.base_values)
    except InvalidField as error:
        assert not isinstance(error, MissingBaseline)  # every base value is in the store
        return
    assert np.all(np.diff(held_ids) > 0)
    assert held_values.shape == (len(held_ids), N_FIELDS)
    assert np.all((held_values >= 0) & (held_values < (1 << codec.bits)))
    shown = records["id"].astype(np.int64)
    assert np.all(np.diff(shown) > 0)
    rows = np.searchsorted(held_ids, shown)
    assert held_ids[rows].tolist() == shown.tolist()
    assert records.tobytes() == codec.records(shown, held_values[rows]).tobytes()


# -- the store of a world's values ---------------------------------------------------------


def test_the_store_slots_values_by_snapshot_number_not_tick() -> None:
    """Snapshot ticks ``interval`` apart take consecutive ring slots: a delta at tick 9
    against tick 6 (interval 3) reads tick 6's value, and both stay held."""
    store = PlayerValues(SMALL, 3)
    a, b, a2 = row(SMALL, x=5), row(SMALL, x=9), row(SMALL, x=6)
    base = seed(store, 6, np.array([1, 2], dtype=np.int64), np.array([a, b]))
    assert base.tolist() == [-1, 6, 6]
    held, records = store.decode(9, base, encode(SMALL, [1], [KIND_DELTA], a2, a))
    assert held.tolist() == [-1, 9, 6]
    assert records.tobytes() == SMALL.records(np.array([1]), a2[None, :]).tobytes()
    ids, values = store.held(held)
    assert ids.tolist() == [1, 2] and values.tolist() == [a2.tolist(), b.tolist()]
    ids, values = store.held(base)  # the older snapshot's values are still there
    assert ids.tolist() == [1, 2] and values.tolist() == [a.tolist(), b.tolist()]


@pytest.mark.parametrize("sized", [True, False])
def test_a_store_sized_for_a_stall_decodes_one_client_s_backlog_after_another_s(
    sized: bool,
) -> None:
    """After a bot process was stopped, its bots read their backlogs one after another: one
    client decodes 10 s of snapshots before another decodes its first, a delta against a
    value the node still keeps (VALUE_RING snapshots older). A ring from ``ring_for`` keeps
    that value; the default one has written a newer tick over it."""
    rate, interval = 30, 2
    store = PlayerValues(SMALL, interval, ring=PlayerValues.ring_for(rate) if sized else 128)
    assert not sized or store.ring == VALUE_RING + 300 + 1
    ids = np.array([3], dtype=np.int64)
    held_by_late = seed(store, 0, ids, row(SMALL, x=5)[None, :])  # 64 snapshots before
    first = VALUE_RING * interval  # the late client's first snapshot of its backlog
    for tick in range(first, first + 300 * interval + 1, interval):  # the other's backlog
        seed(store, tick, ids, row(SMALL, x=tick % 50)[None, :])
    now = row(SMALL, x=first % 50)  # (a player's value at a tick is the same for all)
    blob = encode(SMALL, [3], [KIND_DELTA], now, row(SMALL, x=5))
    if not sized:
        with pytest.raises(MissingBaseline):
            store.decode(first, held_by_late, blob)
        return
    held, records = store.decode(first, held_by_late, blob)
    assert held.tolist() == [-1, -1, -1, first]
    assert records.tobytes() == SMALL.records(ids, now[None, :]).tobytes()


def test_a_ring_no_longer_than_the_node_s_is_refused() -> None:
    with pytest.raises(ValueError, match="no more than the node's"):
        PlayerValues(SMALL, 1, ring=VALUE_RING)


def test_a_delta_whose_base_value_left_the_ring_is_a_missing_baseline() -> None:
    """A value overwritten by one a ring of snapshots later (in the same slot) is gone:
    a delta against it is a MissingBaseline, never decoded against the newer value."""
    store = PlayerValues(SMALL, 1)
    a, newer = row(SMALL, x=5), row(SMALL, x=700)
    old = seed(store, 7, np.array([3], dtype=np.int64), a[None, :])
    seed(store, 7 + PlayerValues.RING, np.array([3], dtype=np.int64), newer[None, :])
    blob = encode(SMALL, [3], [KIND_DELTA], row(SMALL, x=6), a)
    with pytest.raises(MissingBaseline):
        store.decode(8 + PlayerValues.RING, old, blob)
    # A full record needs no base value: it decodes.
    held, _ = store.decode(9 + PlayerValues.RING, old, encode(SMALL, [3], [KIND_FULL], a))
    assert held.tolist() == [-1, -1, -1, 9 + PlayerValues.RING]
