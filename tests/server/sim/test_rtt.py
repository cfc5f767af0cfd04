"""When each tick went out: what the server's RTT samples are measured against."""

from __future__ import annotations

import numpy as np

from server.sim.rtt import TickSendLog


def test_the_send_log_forgets_ticks_overwritten_in_its_ring() -> None:
    log = TickSendLog(capacity=4)
    log.record(1, 0.5)
    assert log.sent_at_each(np.array([1])).tolist() == [0.5]
    log.record(5, 0.9)  # same ring slot as tick 1
    sent = log.sent_at_each(np.array([1, 5]))
    assert np.isnan(sent[0]) and sent[1] == 0.9


def test_the_send_times_of_many_ticks_at_once() -> None:
    log = TickSendLog(capacity=4)
    log.record(1, 0.5)
    log.record(2, 0.75)
    sent = log.sent_at_each(np.array([2, 1, -1, 5, 6]))
    assert sent[:2].tolist() == [0.75, 0.5] and np.isnan(sent[2:]).all()
