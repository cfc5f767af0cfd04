"""One timer for all delayed packets: due order, ties, failures, re-arming and closing.

Most cases drive the pump with a hand-cranked loop (its clock and timers are plain data),
so they are exact and never wait; one case runs it on the real event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from client_sim.link import DelayLine
from client_sim.pump import DeliveryPump


class Timer:
    def __init__(self, when: float, callback: Callable[[], None]) -> None:
        self.when, self.callback, self.cancelled = when, callback, False

    def cancel(self) -> None:
        self.cancelled = True


class HandLoop:
    """The two loop methods the pump uses, with a clock the test sets."""

    def __init__(self) -> None:
        self.now = 0.0
        self.timers: list[Timer] = []

    def time(self) -> float:
        return self.now

    def call_at(self, when: float, callback: Callable[[], None]) -> Timer:
        timer = Timer(when, callback)
        self.timers.append(timer)
        return timer

    @property
    def armed(self) -> list[float]:
        return [t.when for t in self.timers if not t.cancelled]

    def run_until(self, now: float) -> None:
        """Advance the clock and run every live timer due by then, earliest first."""
        self.now = now
        while due := sorted(
            (t for t in self.timers if not t.cancelled and t.when <= now), key=lambda t: t.when
        ):
            self.run(due[0])

    def run(self, timer: Timer) -> None:
        timer.cancelled = True  # a timer handle runs once
        timer.callback()


def pump_on_hand_loop() -> tuple[DeliveryPump, HandLoop, list[tuple[str, float]]]:
    loop = HandLoop()
    return DeliveryPump(loop), loop, []  # type: ignore[arg-type]


def record(log: list[tuple[str, float]], name: str) -> Callable[[float], None]:
    """A callback that logs its name and its payload (these tests pass the due time)."""
    return lambda due: log.append((name, due))


def test_callbacks_run_in_due_order_with_their_due_time() -> None:
    pump, loop, log = pump_on_hand_loop()
    for name, due in (("c", 3.0), ("a", 1.0), ("b", 2.0)):
        pump.at(due, record(log, name), due)
    assert len(pump) == 3
    loop.run_until(5.0)
    assert log == [("a", 1.0), ("b", 2.0), ("c", 3.0)]
    assert len(pump) == 0


def test_equal_due_times_keep_their_scheduling_order() -> None:
    pump, loop, log = pump_on_hand_loop()
    for name in "qwertyuiop":
        pump.at(1.0, record(log, name), 1.0)
    loop.run_until(1.0)
    assert "".join(name for name, _ in log) == "qwertyuiop"


def test_only_due_callbacks_run_and_the_timer_is_rearmed_for_the_next() -> None:
    pump, loop, log = pump_on_hand_loop()
    for name, due in (("a", 1.0), ("b", 2.0), ("c", 3.0)):
        pump.at(due, record(log, name), due)
    assert loop.armed == [1.0]
    loop.run_until(2.5)
    assert log == [("a", 1.0), ("b", 2.0)]
    assert loop.armed == [3.0]
    loop.run_until(3.0)
    assert log[-1] == ("c", 3.0)
    assert loop.armed == []


def test_a_timer_run_slightly_early_still_delivers_what_it_was_armed_for() -> None:
    pump, loop, log = pump_on_hand_loop()
    pump.at(1.0, record(log, "a"), 1.0)
    pump.at(1.5, record(log, "b"), 1.5)
    loop.now = 0.9995  # asyncio may run a timer up to its clock resolution early
    loop.run(loop.timers[0])
    assert log == [("a", 1.0)]
    assert loop.armed == [1.5]


def test_an_earlier_item_rearms_the_timer() -> None:
    pump, loop, log = pump_on_hand_loop()
    pump.at(5.0, record(log, "late"), 5.0)
    assert loop.armed == [5.0]
    pump.at(3.0, record(log, "early"), 3.0)
    assert loop.armed == [3.0]  # the timer for 5 was cancelled
    pump.at(4.0, record(log, "middle"), 4.0)
    assert loop.armed == [3.0]  # a later item does not touch the timer
    loop.run_until(3.0)
    assert log == [("early", 3.0)]
    assert loop.armed == [4.0]


def test_one_failing_callback_does_not_stop_the_others(caplog: pytest.LogCaptureFixture) -> None:
    pump, loop, log = pump_on_hand_loop()

    def broken(due: float) -> None:
        raise RuntimeError("one bot's bug")

    pump.at(1.0, record(log, "a"), 1.0)
    pump.at(1.0, broken, 1.0)
    pump.at(1.0, record(log, "b"), 1.0)
    pump.at(2.0, record(log, "c"), 2.0)
    with caplog.at_level(logging.ERROR, logger="arena.bots"):
        loop.run_until(2.0)
    assert log == [("a", 1.0), ("b", 1.0), ("c", 2.0)]
    assert [r.getMessage() for r in caplog.records] == ["event=delivery_failed"]
    assert caplog.records[0].exc_info is not None


def test_a_callback_may_schedule_a_later_delivery() -> None:
    pump, loop, log = pump_on_hand_loop()

    def reply(due: float) -> None:
        log.append(("reply", due))
        pump.at(due + 0.5, record(log, "answer"), due + 0.5)

    pump.at(1.0, reply, 1.0)
    pump.at(3.0, record(log, "other"), 3.0)
    loop.run_until(1.0)
    assert log == [("reply", 1.0)]
    assert loop.armed == [1.5]
    loop.run_until(1.49)
    assert log == [("reply", 1.0)]
    loop.run_until(3.0)
    assert log == [("reply", 1.0), ("answer", 1.5), ("other", 3.0)]
    assert len(pump) == 0


def test_a_delivery_a_callback_schedules_for_now_runs_in_the_same_pass() -> None:
    pump, loop, log = pump_on_hand_loop()

    def echo(due: float) -> None:
        log.append(("echo", due))
        pump.at(due, record(log, "now"), due)  # a zero-delay link: due at once

    pump.at(1.0, echo, 1.0)
    loop.run(loop.timers[0])
    assert log == [("echo", 1.0), ("now", 1.0)]
    assert len(pump) == 0


def test_a_delivery_consumed_in_the_same_pass_does_not_make_later_ones_early() -> None:
    pump, loop, log = pump_on_hand_loop()

    def echo(due: float) -> None:
        log.append(("echo", due))
        pump.at(due, record(log, "now"), due)  # a zero-delay link: due at once
        pump.at(due + 9.0, record(log, "later"), due + 9.0)  # a slow link: due in 9 s

    pump.at(1.0, echo, 1.0)
    loop.run_until(1.0)  # runs every timer due by 1.0, as the event loop would
    assert log == [("echo", 1.0), ("now", 1.0)]  # "later" must wait for its time
    assert len(pump) == 1
    assert loop.armed == [10.0]


def test_close_cancels_the_timer_and_drops_everything() -> None:
    pump, loop, log = pump_on_hand_loop()
    pump.at(1.0, record(log, "a"), 1.0)
    pump.at(2.0, record(log, "b"), 2.0)
    pump.close()
    assert loop.armed == [] and len(pump) == 0
    loop.run_until(5.0)
    assert log == []
    pump.at(6.0, record(log, "c"), 6.0)  # usable again: arms afresh
    assert loop.armed == [6.0]


async def test_deliveries_on_the_real_event_loop() -> None:
    loop = asyncio.get_running_loop()
    pump = DeliveryPump(loop)
    done: asyncio.Future[None] = loop.create_future()
    log: list[Any] = []
    base = loop.time()

    def last(due: float) -> None:
        log.append(("last", due))
        done.set_result(None)

    pump.at(base + 0.003, last, base + 0.003)
    pump.at(base + 0.001, record(log, "first"), base + 0.001)
    pump.at(base + 0.002, record(log, "second"), base + 0.002)
    pump.at(base + 0.002, record(log, "third"), base + 0.002)
    try:
        async with asyncio.timeout(5.0):
            await done
    finally:
        pump.close()
    assert [name for name, _ in log] == ["first", "second", "third", "last"]
    assert [due for _, due in log] == [base + 0.001, base + 0.002, base + 0.002, base + 0.003]
    assert len(pump) == 0


def test_each_callback_gets_the_payload_scheduled_with_it() -> None:
    pump, loop, _ = pump_on_hand_loop()
    got: list[tuple[str, bytes]] = []
    pump.at(2.0, lambda packet: got.append(("down", packet)), b"snapshot")
    pump.at(1.0, lambda packet: got.append(("up", packet)), b"input")
    loop.run_until(2.0)
    assert got == [("up", b"input"), ("down", b"snapshot")]


@settings(max_examples=50, deadline=None)
@given(
    seed=st.integers(0, 2**32),
    jitter=st.floats(0.0, 0.05),
    loss=st.floats(0.0, 1.0),
    gaps=st.lists(st.floats(0.0, 0.05), min_size=1, max_size=100),
    drains=st.lists(st.floats(0.0, 0.3), min_size=1, max_size=20),
)
def test_a_link_through_the_pump_delivers_every_packet_once_in_send_order(
    seed: int, jitter: float, loss: float, gaps: list[float], drains: list[float]
) -> None:
    """TCP's order: the line's due times never decrease and the pump keeps ties in order."""
    pump, loop, _ = pump_on_hand_loop()
    line = DelayLine(
        0.02, jitter=jitter, loss=loss, rto=0.2, rng=np.random.default_rng(seed), block=4
    )
    got: list[int] = []
    now = 0.0
    for i, gap in enumerate(gaps):
        now += gap
        loop.run_until(now)
        pump.at(line.schedule(now), got.append, i)
    for drain in drains:  # the loop wakes at arbitrary times, then runs what is due
        now += drain
        loop.run_until(now)
    loop.run_until(now + 10.0)
    assert got == list(range(len(gaps)))
