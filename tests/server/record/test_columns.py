"""A block's inputs coded as columns come back bit for bit, whatever the values."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from server.record.columns import decode_inputs, encode_inputs
from server.record.entries import LogEntryError, decode_block, encode_block
from server.sim.inputs import ReleasedInputs


def _tick(rng: np.random.Generator, seats: int) -> ReleasedInputs:
    counts = rng.integers(0, 4, size=seats)  # rows per seat (catch-up: several; starved: 0)
    slot = np.repeat(np.sort(rng.choice(300, size=seats, replace=False)), counts)
    n = len(slot)
    ints = rng.integers(-(2**40), 2**40, size=(n, 4))
    ints[rng.random(n) < 0.5] = [7, 100, 95, 1]
    floats = rng.normal(size=(n, 6)) * 100
    floats[:, 4:] = np.round(floats[:, 4:], 6)  # times in whole microseconds, mostly
    special = [0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, 1e300, 2.0**60]
    floats[rng.random((n, 6)) < 0.1] = rng.choice(special)
    return ReleasedInputs(
        slot.astype(np.int64), rng.integers(0, 3, size=n), ints, floats,
        rng.integers(0, 4, size=seats), rng.integers(0, 2**33, size=seats),
        rng.integers(0, 5, size=seats),
    )  # fmt: skip


def _same(a: ReleasedInputs, b: ReleasedInputs) -> bool:
    names = ("slot", "depth", "ints", "floats", "guess", "guessed", "dropped")
    return all(
        getattr(a, name).dtype == getattr(b, name).dtype
        and np.array_equal(
            getattr(a, name).view(np.uint64).ravel(), getattr(b, name).view(np.uint64).ravel()
        )
        for name in names
    )


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 12), st.integers(1, 20))
def test_every_value_decodes_to_its_identical_bits(seed: int, ticks: int, seats: int) -> None:
    rng = np.random.default_rng(seed)
    logged = [_tick(rng, seats) for _ in range(ticks)]
    widths, planes = encode_inputs(logged)
    rows = [len(t.slot) for t in logged]
    seated = [len(t.guess) for t in logged]
    decoded = decode_inputs(rows, seated, widths, planes)
    assert len(decoded) == ticks
    assert all(_same(a, b) for a, b in zip(logged, decoded, strict=True))


def test_a_repeated_input_costs_zero_bytes_and_whole_steps_two() -> None:
    """Columns of repeats are zeros (which compress to nothing); a move, an angle or a time
    on its step is a difference of whole steps from the seat's last, not eight bytes of
    bits; a value off its step (an arrival here) goes by its bits."""
    slot = np.arange(4, dtype=np.int64)
    rows = np.tile([0.25, -1.0, 1.5, 0.0, 0.0, 0.0], (4, 1))
    ticks = []
    for tick in range(30):
        floats = rows.copy()
        floats[:, 4] = (1_000_000 + tick * 16_667 + slot * 3) / 1e6  # view times
        floats[:, 5] = tick / 60 + np.pi  # arrivals off the microsecond grid
        ints = np.tile([tick, tick, tick - 3, 0], (4, 1))
        zeros = np.zeros(4, dtype=np.int64)
        ticks.append(ReleasedInputs(slot, zeros, ints, floats, zeros, zeros, zeros))
    widths, planes = encode_inputs(ticks)
    #  slot depth guess guessed dropped | seq tick ack buttons
    assert widths[:9] == [1, 0, 0, 0, 0, 1, 1, 1, 0]
    #  per float column: on its step?, the steps' differences, the bits of the others
    move_x, move_y, yaw, pitch, view, arrival = (widths[i : i + 3] for i in range(9, 27, 3))
    assert move_x == move_y == yaw == [1, 2, 0]  # 256, -1024 and 24576 steps, then 0s
    assert pitch == [1, 0, 0]
    assert view == [1, 3, 0]  # (a seat's first view time: 3 bytes; then 2)
    assert arrival == [0, 0, 8]
    decoded = decode_inputs([4] * 30, [4] * 30, widths, planes)
    assert all(_same(a, b) for a, b in zip(ticks, decoded, strict=True))
    steps = planes[sum(widths[:10]) : sum(widths[:11])]  # move x's steps' byte planes
    firsts = {0, 30, 60, 90}  # seat by seat: only each seat's first row is not zeros
    assert all(set(np.flatnonzero(np.frombuffer(p, np.uint8)).tolist()) <= firsts for p in steps)


def test_a_block_whose_columns_do_not_fit_its_entries_is_refused() -> None:
    rng = np.random.default_rng(5)
    tick = {"k": "tick", "m": 0, "e": 0, "t": 1, "a": 0, "seats": [], "rtt": [],
            "in": _tick(rng, 4), "shots": [], "h": "0" * 32, "src": "p"}  # fmt: skip
    planes = encode_block([tick])
    (entry,) = decode_block(planes)
    assert _same(entry["in"], tick["in"])
    for broken in (planes[:-1], (*planes, b"x"), (planes[0], planes[1][:-1], *planes[2:])):
        with pytest.raises(LogEntryError):
            decode_block(broken)
