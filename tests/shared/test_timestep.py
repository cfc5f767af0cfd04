"""The fixed-timestep loop, driven by a fake clock: no drift, catch-up, skipping after a stall,
and a time that never runs backwards."""

from __future__ import annotations

import asyncio
import time

import pytest

from shared.timestep import TickSchedule, run_tick_loop


class FakeTime:
    """A clock that only moves when the loop sleeps or a tick 'works'."""

    def __init__(self, now: float) -> None:
        self.now = now
        self.sleeps: list[tuple[float, float]] = []  # (when, how long)

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append((self.now, seconds))
        self.now += seconds


class Recorder:
    """An on_tick that records (tick, start time) and may take fake time to run."""

    def __init__(self, fake: FakeTime, work: dict[int, float] | None = None, default=0.0):
        self.fake = fake
        self.work = work or {}
        self.default = default
        self.ticks: list[int] = []
        self.starts: list[float] = []

    async def __call__(self, tick: int) -> None:
        self.ticks.append(tick)
        self.starts.append(self.fake.now)
        self.fake.now += self.work.get(len(self.ticks) - 1, self.default)


async def test_ten_thousand_ticks_start_on_schedule_without_drift() -> None:
    origin, rate = 1234.5678, 60
    fake = FakeTime(origin)
    schedule = TickSchedule(rate, origin)
    on_tick = Recorder(fake, default=0.3 / rate)  # each tick works for 30% of its period
    began = time.perf_counter()
    await run_tick_loop(schedule, on_tick, fake.clock, fake.sleep, max_ticks=10_000)
    elapsed = time.perf_counter() - began

    assert on_tick.ticks == list(range(10_000))
    worst = max(abs(s - (origin + n / rate)) for n, s in enumerate(on_tick.starts))
    assert worst < 1e-9
    assert schedule.skipped == 0
    assert elapsed < 1.0  # fake time: no real sleeping at all


async def test_oversleeping_never_accumulates_into_drift() -> None:
    origin, rate = 10.0, 60
    fake = FakeTime(origin)
    period = 1.0 / rate

    async def sloppy_sleep(seconds: float) -> None:  # every wake-up is 20% of a period late
        await fake.sleep(seconds + 0.2 * period if seconds > 0 else seconds)

    on_tick = Recorder(fake, default=0.1 * period)
    await run_tick_loop(TickSchedule(rate, origin), on_tick, fake.clock, sloppy_sleep, 5_000)
    lateness = [s - (origin + n / rate) for n, s in enumerate(on_tick.starts)]
    assert max(lateness) == pytest.approx(0.2 * period, abs=1e-9)
    assert min(lateness) >= -1e-9


async def test_first_tick_offset_keeps_server_time_tick_based() -> None:
    fake = FakeTime(100.0)
    schedule = TickSchedule(50, 100.0, first_tick=500)
    on_tick = Recorder(fake)
    await run_tick_loop(schedule, on_tick, fake.clock, fake.sleep, max_ticks=3)
    assert on_tick.ticks == [500, 501, 502]
    assert on_tick.starts == pytest.approx([100.0, 100.02, 100.04], abs=1e-12)
    assert schedule.deadline(500) == 100.0


async def test_a_slow_tick_is_caught_up_without_losing_ticks_or_sleeping_late() -> None:
    # A power-of-two rate keeps every fake time exact, so the checks can be exact too.
    rate = 64
    period = 1.0 / rate
    fake = FakeTime(0.0)
    schedule = TickSchedule(rate, 0.0)
    on_tick = Recorder(fake, work={3: 1.5 * period, 10: 1.5 * period, 11: 1.5 * period})
    await run_tick_loop(schedule, on_tick, fake.clock, fake.sleep, max_ticks=20)

    assert on_tick.ticks == list(range(20))
    assert schedule.skipped == 0
    expected = [n * period for n in range(20)]
    expected[4] = 4.5 * period  # right after slow tick 3, half a period late
    expected[11] = 11.5 * period  # right after slow tick 10
    expected[12] = 13.0 * period  # right after slow tick 11, which itself started late
    assert on_tick.starts == expected
    # Never a real sleep while behind schedule: every real sleep ends exactly at a
    # deadline still ahead; a loop with no time to spare only yields (zero-length sleeps
    # after ticks 0, 4, 11, 12 and 13, which all began at or after their deadline).
    for when, seconds in fake.sleeps:
        if seconds > 0:
            assert (when + seconds) * rate == round((when + seconds) * rate)
    assert [when for when, seconds in fake.sleeps if seconds == 0] == [
        0.0,
        4.5 * period,
        13.0 * period,
        13.0 * period,
        13.0 * period,
    ]
    assert all(seconds >= 0 for _, seconds in fake.sleeps)


async def test_sleeps_only_for_the_time_left_until_the_deadline() -> None:
    rate = 64
    fake = FakeTime(0.0)
    on_tick = Recorder(fake, default=0.25 / rate)
    await run_tick_loop(TickSchedule(rate, 0.0), on_tick, fake.clock, fake.sleep, max_ticks=5)
    # Tick 0 is due at once (a zero-length yield after it), then each wait is what is left.
    assert fake.sleeps == [(0.25 / rate, 0)] + [
        (n / rate + 0.25 / rate, 0.75 / rate) for n in range(4)
    ]


async def test_a_loop_that_is_always_slow_skips_ticks_and_bounds_its_lag() -> None:
    rate = 64
    fake = FakeTime(0.0)
    schedule = TickSchedule(rate, 0.0, max_lag_ticks=5)
    lateness: list[float] = []

    async def slow(tick: int) -> None:
        lateness.append(fake.now - schedule.deadline(tick))
        fake.now += 1.5 / rate

    await run_tick_loop(schedule, slow, fake.clock, fake.sleep, max_ticks=100)
    assert all(seconds == 0 for _, seconds in fake.sleeps)  # never sleeps while behind
    assert schedule.skipped > 0
    # Every tick number was either run or skipped, and time kept the clock's pace.
    assert schedule.next_tick == 100 + schedule.skipped
    assert max(lateness) < (schedule.max_lag_ticks + 1) / rate
    assert min(lateness) >= 0.0


async def test_a_long_stall_skips_the_missed_ticks_instead_of_running_a_burst() -> None:
    rate = 64
    period = 1.0 / rate
    fake = FakeTime(0.0)
    schedule = TickSchedule(rate, 0.0)
    on_tick = Recorder(fake, work={5: 1.0})  # tick 5 stalls the process for a whole second
    await run_tick_loop(schedule, on_tick, fake.clock, fake.sleep, max_ticks=12)

    lag = rate - 1  # tick 6 was due one period after tick 5, which ended 1 s after it began
    assert schedule.skipped == lag
    assert schedule.last_skip_at == 5 * period + 1.0
    # Ticks 6 to 68 never run: the next one is the tick due when the stall ended, at once.
    assert on_tick.ticks == [*range(6), *range(6 + lag, 12 + lag)]
    assert on_tick.starts[:6] == [n * period for n in range(6)]
    # ...and every tick starts at its own deadline again: tick n is time n / rate.
    assert on_tick.starts[6:] == [n * period for n in range(6 + lag, 12 + lag)]
    assert schedule.origin == 0.0


async def test_time_on_the_schedule_never_runs_backwards_through_stalls() -> None:
    rate = 60
    fake = FakeTime(50.0)
    schedule = TickSchedule(rate, 50.0)
    seen: list[tuple[float, float]] = []  # (time on the schedule, the tick's time)

    async def tick(n: int) -> None:
        seen.append((fake.now - schedule.origin, n / rate))
        fake.now += {7: 0.2, 20: 3.0, 33: 0.07}.get(len(seen), 0.001)

    await run_tick_loop(schedule, tick, fake.clock, fake.sleep, max_ticks=60)
    now = [t for t, _ in seen]
    assert now == sorted(now)
    # A tick never runs before its time, and never more than the catch-up limit after it.
    late = [t - tick_time for t, tick_time in seen]
    assert min(late) > -1e-9 and max(late) < (schedule.max_lag_ticks + 1) / rate
    assert schedule.skipped > 0


async def test_a_short_lag_within_the_limit_is_caught_up_not_skipped() -> None:
    rate = 64
    period = 1.0 / rate
    fake = FakeTime(0.0)
    schedule = TickSchedule(rate, 0.0, max_lag_ticks=5)
    on_tick = Recorder(fake, work={0: 4.0 * period})  # 4 periods late: within the limit
    await run_tick_loop(schedule, on_tick, fake.clock, fake.sleep, max_ticks=10)
    assert schedule.skipped == 0
    assert on_tick.starts == [n * period for n in (0, 4, 4, 4, 4, 5, 6, 7, 8, 9)]


async def test_the_loop_stops_when_cancelled() -> None:
    fake = FakeTime(0.0)
    on_tick = Recorder(fake)

    async def tick(n: int) -> None:
        await on_tick(n)
        if n == 3:
            raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        await run_tick_loop(TickSchedule(60, 0.0), tick, fake.clock, fake.sleep)
    assert on_tick.ticks == [0, 1, 2, 3]


def test_schedule_rejects_a_non_positive_rate() -> None:
    for rate in (0, -60):
        with pytest.raises(ValueError):
            TickSchedule(rate, 0.0)


def test_claim_counts_only_whole_lagging_periods() -> None:
    schedule = TickSchedule(64, 0.0, max_lag_ticks=2)
    assert schedule.claim(0.0) == 0
    assert schedule.claim(3.9 / 64) == 1  # lag int(2.9) = 2: not beyond the limit
    assert schedule.skipped == 0
    assert schedule.claim(6.0 / 64) == 6  # lag 4 > 2: ticks 2 to 5 are skipped
    assert schedule.skipped == 4
    assert schedule.last_skip_at == 6.0 / 64
    assert schedule.deadline() == 7.0 / 64
