"""What a bot counts of the snapshots it shows: the longest wait between two, and the
snapshots it never received (from the ticks' gaps, less the late ones)."""

from __future__ import annotations

from types import SimpleNamespace

from client_sim.bot import Bot
from shared import protocol
from tests.client_sim.test_bot_tokens import deliver, playing_bot


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def time(self) -> float:
        return self.now


def bot_with_clock() -> tuple[Bot, Clock]:
    bot = playing_bot()  # welcomed at epoch 3, 60 Hz ticks
    bot.snapshot_interval = 6  # (as a 10 Hz welcome sets it)
    clock = Clock()
    bot._loop = SimpleNamespace(time=clock.time)  # type: ignore[assignment]
    return bot, clock


async def test_the_longest_gap_is_the_longest_wait_between_two_snapshots_shown() -> None:
    bot, clock = bot_with_clock()
    for tick, at in ((6, 100.0), (12, 100.1), (18, 100.35), (24, 100.45)):
        clock.now = at
        assert bot.accept_snapshot(3, tick, -1)
    assert bot.longest_gap == 0.25
    clock.now = 101.0
    assert not bot.accept_snapshot(3, 20, -1)  # older: not shown
    assert bot.longest_gap == 0.25


async def test_missing_ticks_count_as_lost_unless_they_came_late() -> None:
    bot, clock = bot_with_clock()
    for tick in (6, 12, 30, 36, 48):  # 18 and 24 missing, then 42
        clock.now += 0.1
        bot.accept_snapshot(3, tick, -1)
    assert bot.snapshot_gaps == 3
    assert bot.snapshots_lost == 3
    bot.note_unshown(3, 42)  # overtaken: it did arrive
    assert bot.snapshots_lost == 2
    bot.note_unshown(2, 5)  # a deposed primary's: not ours
    assert bot.snapshots_lost == 2


async def test_a_new_epoch_is_not_a_gap() -> None:
    bot, clock = bot_with_clock()
    bot.accept_snapshot(3, 6, -1)
    clock.now += 0.1
    bot.accept_snapshot(4, 600, -1)  # the promoted standby
    assert bot.snapshots_lost == 0
    # The next primary's welcome comes before its first snapshot: still no gap.
    deliver(bot, 0, lambda: bot.welcomed(protocol.WelcomeMessage(
        1, 0, 60, 10, 0.2, "t1", "arena", "eu", 5, snapshot_rate=10)))  # fmt: skip
    assert bot.epoch == 5
    bot.accept_snapshot(5, 660, -1)
    assert bot.snapshots_lost == 0


async def test_the_welcome_sets_the_snapshot_interval() -> None:
    bot = playing_bot()
    welcome = protocol.WelcomeMessage(1, 0, 60, 10, 0.2, "t1", "arena", "eu", 3, snapshot_rate=20)
    deliver(bot, 0, lambda: bot.welcomed(welcome))
    assert bot.snapshot_interval == 3


async def test_a_second_copy_of_a_snapshot_counts_for_nothing() -> None:
    # A node repeats each snapshot on a lossy path: a copy may come after a newer one.
    bot, clock = bot_with_clock()
    for tick in (6, 12, 24):  # 18 missing
        clock.now += 0.1
        bot.accept_snapshot(3, tick, -1)
    for copy in (12, 24, 18, 18):  # copies of shown ones; 18's copy (its first arrival
        assert not bot.accept_snapshot(3, copy, -1)  # was the lost one) comes late, twice
        bot.note_unshown(3, copy)
    assert bot.snapshots_late == 1
    assert bot.snapshots_lost == 0
