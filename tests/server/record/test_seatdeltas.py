"""Inputs stored as each seat's difference from its previous one come back bit for bit."""

from __future__ import annotations

import numpy as np

from server.record.seatdeltas import SeatDeltas


def test_rows_come_back_exactly_across_ticks_and_catch_up() -> None:
    rng = np.random.default_rng(1)
    writer, reader = SeatDeltas(8, 3), SeatDeltas(8, 3)
    for _ in range(50):
        counts = rng.integers(0, 4, size=8)  # rows per seat this tick (catch-up: several)
        slots = np.repeat(np.arange(8), counts)
        rows = rng.normal(size=(len(slots), 3))
        rows[rng.random(len(slots)) < 0.5] = 1.5  # repeats
        coded = writer.encode(slots, rows)
        assert np.array_equal(reader.decode(slots, coded).view(np.uint64), rows.view(np.uint64))


def test_a_repeated_row_is_stored_as_zeros_and_a_reset_starts_afresh() -> None:
    deltas = SeatDeltas(4, 2)
    slots = np.array([1, 2])
    rows = np.array([[0.25, -3.0], [7.0, 1e-9]])
    assert deltas.encode(slots, rows).view(np.uint64).any()
    assert not deltas.encode(slots, rows).view(np.uint64).any()
    deltas.reset()
    assert np.array_equal(deltas.encode(slots, rows), rows)
