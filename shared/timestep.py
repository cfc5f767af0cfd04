"""Fixed-timestep scheduling that does not drift, with the clock injected.

Server and bots both tick on it.

:class:`TickSchedule` is the sans-I/O part: tick ``n`` is due at ``origin + n / rate``,
computed from the tick number rather than by adding periods, so rounding never accumulates
into drift, and the origin never moves: time on the schedule (``now - origin``) only runs
forwards, at the clock's pace, and tick ``n`` always belongs to time ``n / rate``. After a
stall the ticks it missed are caught up back to back when there are a few, and skipped
(their numbers are not run, and counted) when there are more.
:func:`run_tick_loop` is the thin asyncio driver; it takes the clock and the sleep function
as parameters, so tests drive ten thousand ticks in milliseconds.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from shared import eventloop

__all__ = ["TickSchedule", "run_tick_loop"]

Clock = Callable[[], float]
Sleep = Callable[[float], Awaitable[None]]


class TickSchedule:
    """When each tick is due. ``max_lag_ticks`` bounds catch-up after a stall (a paused
    process, a GC pause): beyond it the missed ticks are skipped instead of run in a burst.

    ``first_tick`` is due at ``origin``: tick 0 was (or would have been) due
    ``first_tick / rate`` earlier.
    """

    def __init__(self, rate: int, origin: float, first_tick: int = 0, max_lag_ticks: int = 5):
        if rate <= 0:
            raise ValueError("tick rate must be positive")
        self.rate = rate
        self.period = 1.0 / rate
        self.origin = origin - first_tick / rate
        self.next_tick = first_tick
        self.max_lag_ticks = max_lag_ticks
        self.skipped = 0
        #: Time on this schedule (``now - origin``) when ticks were last skipped: a
        #: measurement that spans it (a round trip, say) spans the stall too.
        self.last_skip_at: float | None = None

    def deadline(self, tick: int | None = None) -> float:
        return self.origin + (self.next_tick if tick is None else tick) / self.rate

    def claim(self, now: float) -> int:
        """Take the next tick number to run at ``now`` (called once its deadline has come)."""
        lag = int((now - self.deadline()) * self.rate)
        if lag > self.max_lag_ticks:
            # Skip the tick numbers the stall missed: tick n stays the tick of time n / rate,
            # and time on the schedule never jumps back.
            self.next_tick += lag
            self.skipped += lag
            self.last_skip_at = now - self.origin
        tick = self.next_tick
        self.next_tick += 1
        return tick


async def run_tick_loop(
    schedule: TickSchedule,
    on_tick: Callable[[int], Awaitable[None]],
    clock: Clock,
    sleep: Sleep = eventloop.sleep,
    max_ticks: int | None = None,
) -> None:
    """Await ``on_tick(tick)`` at each deadline until cancelled (or ``max_ticks`` ran)."""
    ran = 0
    while max_ticks is None or ran < max_ticks:
        wait = schedule.deadline() - clock()
        if wait > 0:
            await sleep(wait)
        await on_tick(schedule.claim(clock()))
        ran += 1
        if wait <= 0:
            await sleep(0)  # a late loop still yields, so sockets are served between ticks
