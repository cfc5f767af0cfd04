"""The speed hack's yardstick: every window of a track, those across a gap included."""

from __future__ import annotations

import pytest

from launch.adversary import speed_over_windows, window_speeds


def walk(
    start: float, seconds: float, speed: float, x0: float = 0.0
) -> list[tuple[float, float, float]]:
    """Samples at 30 Hz of a player walking along x at ``speed`` from ``x0``."""
    return [(start + k / 30, x0 + speed * k / 30, 0.0) for k in range(round(seconds * 30) + 1)]


def test_every_window_of_a_steady_walk_is_its_speed() -> None:
    track = walk(0.0, 3.0, 6.0)
    speeds = window_speeds(track, 1.0)
    assert len(speeds) == len(track) - 30  # one from each sample with a second after it
    assert all(speed == pytest.approx(6.0) for _, speed in speeds)


def test_a_catch_up_after_a_gap_shows_in_the_window_that_starts_at_the_resume() -> None:
    before = walk(0.0, 1.0, 6.0)
    # Away 0.5 s, standing; its first snapshot back shows it where it stood, the next ones
    # 1.2 m further (12 ticks caught up at once) and walking on.
    back = (1.5, before[-1][1], 0.0)
    after = [(t + 1 / 30, x + 1.2 + 6.0 / 30, y) for t, x, y in walk(1.5, 1.5, 6.0, back[1])]
    track = [*before, back, *after]
    starts = dict(window_speeds(track, 1.0))
    assert starts[1.5] == pytest.approx(7.2)  # the second after the resume
    assert starts[before[15][0]] == pytest.approx(3.0)  # across the gap: half of it standing
    assert speed_over_windows(track, 1.0) == pytest.approx(7.2)


def test_a_track_shorter_than_a_window_has_none() -> None:
    assert window_speeds(walk(0.0, 0.5, 6.0), 1.0) == []
    assert speed_over_windows(walk(0.0, 0.5, 6.0), 1.0) == 0.0
