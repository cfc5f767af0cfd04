"""The client's server-time estimate: converges, ignores queueing outliers, never runs back."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from client_sim.clock_sync import ClockSync, server_times
from client_sim.latency import BotParams
from client_sim.link import BotLink

OFFSET = 0.137  # server clock minus the client's local clock


def pong(sync: ClockSync, send: float, up: float, down: float, offset: float = OFFSET) -> float:
    """Ping at local ``send``; the legs take ``up`` and ``down``; returns the receive time."""
    arrive = send + up
    recv = arrive + down
    sync.observe(send, arrive + offset, recv)
    return recv


def test_symmetric_path_gives_the_offset_at_once() -> None:
    sync = ClockSync()
    recv = pong(sync, 10.0, 0.04, 0.04)
    assert sync.target_offset == pytest.approx(OFFSET, abs=1e-12)
    assert sync.server_time(recv) == pytest.approx(recv + OFFSET, abs=1e-12)
    assert sync.rtt_estimate == pytest.approx(0.08)
    assert not sync.synced and sync.samples == 1


def test_converges_within_2ms_despite_asymmetric_queueing() -> None:
    """Downlink queueing (30 % of pongs wait up to 150 ms) biases naive averaging by ~11 ms."""
    rng = np.random.default_rng(2024)
    sync = ClockSync()
    naive = []
    now = 0.0
    for _ in range(100):
        now += 0.1
        up = 0.03 + rng.exponential(0.002)
        down = 0.03 + rng.exponential(0.002) + (rng.random() < 0.3) * rng.uniform(0, 0.15)
        recv = pong(sync, now, up, down)
        naive.append((now + up + OFFSET) + (up + down) / 2 - recv)
        now = recv
    assert sync.synced
    assert abs(float(np.mean(naive)) - OFFSET) > 0.008  # what the filter is for
    assert sync.target_offset == pytest.approx(OFFSET, abs=0.002)
    assert sync.server_time(now + 1.0) - (now + 1.0) == pytest.approx(OFFSET, abs=0.002)
    assert len(sync.rtt_samples) == 100


def test_converges_over_the_modelled_link() -> None:
    """Pings and pongs through a bot's two delay lines (jitter and TCP loss spikes)."""
    bot = BotParams(index=0, rtt=0.07, clock_offset=-OFFSET, jitter=0.003, loss=0.05, link_seed=8)
    link = BotLink.for_bot(bot)
    sync = ClockSync()
    now, seen = 0.0, []
    for _ in range(60):
        now += 0.25
        arrive = link.up.schedule(now)
        recv = link.down.schedule(arrive)
        sync.observe(now, arrive - bot.clock_offset, recv)
        seen.append(sync.server_time(recv))
    assert sync.target_offset == pytest.approx(OFFSET, abs=0.002)
    assert sync.server_time(now) - now == pytest.approx(OFFSET, abs=0.002)
    assert max(sync.rtt_samples) > 0.2  # some pongs paid an RTO (200 ms)
    assert sync.min_rtt == pytest.approx(0.07, abs=0.003)


def test_slow_outliers_do_not_drag_the_estimate() -> None:
    sync = ClockSync()
    now = 0.0
    for _ in range(16):
        now = pong(sync, now + 0.1, 0.025, 0.025)
    before = sync.target_offset
    assert before == pytest.approx(OFFSET, abs=1e-12)
    for _ in range(15):  # congested downlink: 200 ms extra, all on one leg
        now = pong(sync, now + 0.1, 0.025, 0.225)
    assert sync.target_offset == pytest.approx(before, abs=1e-12)  # only fast samples count
    assert sync.rtt_estimate is not None and sync.rtt_estimate > 0.15  # SRTT does see them


def test_window_forgets_old_fast_samples() -> None:
    """After a route change (slower but symmetric), the new samples take over."""
    sync = ClockSync(window=16)
    now = 0.0
    for _ in range(16):
        now = pong(sync, now + 0.1, 0.02, 0.02)
    for _ in range(16):
        now = pong(sync, now + 0.1, 0.09, 0.09, offset=OFFSET + 0.005)
    assert sync.min_rtt == pytest.approx(0.18)
    assert sync.target_offset == pytest.approx(OFFSET + 0.005, abs=1e-12)


def test_snaps_first_then_slews() -> None:
    sync = ClockSync(snap_samples=3, max_slew=0.05)
    # The first samples snap, even backwards: before sync nobody relies on the estimate.
    pong(sync, 0.0, 0.05, 0.05, offset=0.5)
    assert sync.offset(0.1) == pytest.approx(0.5)
    pong(sync, 1.0, 0.01, 0.01, offset=0.3)  # faster, so trusted alone
    assert sync.offset(1.02) == pytest.approx(0.3)
    recv = pong(sync, 2.0, 0.01, 0.01, offset=0.3)
    assert sync.synced and sync.offset(recv) == pytest.approx(0.3)
    # After sync a new estimate is approached at 5 % of elapsed time.
    recv = pong(sync, 3.0, 0.001, 0.001, offset=0.32)  # far faster: trusted alone
    assert sync.target_offset == pytest.approx(0.32)
    assert sync.offset(recv) == pytest.approx(0.3)
    assert sync.offset(recv + 0.2) == pytest.approx(0.31)  # 0.05 * 0.2 s
    assert sync.offset(recv + 0.4) == pytest.approx(0.32)
    assert sync.offset(recv + 10.0) == pytest.approx(0.32)
    assert sync.server_time(recv + 0.2) == pytest.approx(recv + 0.2 + 0.31)


def test_a_pong_stamped_before_a_query_cannot_rewrite_what_was_shown() -> None:
    sync = ClockSync(snap_samples=3, max_slew=0.05)
    for send in (0.0, 1.0, 2.0):
        pong(sync, send, 0.01, 0.01, offset=0.3)
    pong(sync, 2.998, 0.001, 0.001, offset=0.32)  # received at 3.0: slew up from 0.3
    shown = sync.server_time(3.1)
    assert shown == pytest.approx(3.1 + 0.305)
    # Received (stamped) at 3.06, processed after the query at 3.1; it pulls the target down.
    sync.observe(3.059, 3.0595 + 0.28, 3.06)
    assert sync.target_offset == pytest.approx(0.30)
    assert sync.server_time(3.1) == pytest.approx(shown)  # not 3.1 + 0.301
    assert sync.server_time(3.2) == pytest.approx(3.2 + 0.30)


@given(
    st.lists(
        st.tuples(
            st.floats(0.0, 0.3),  # wait before the next event
            st.booleans(),  # a pong (else a render-time query)
            st.floats(0.0, 0.5),  # its rtt
            st.floats(0.0, 1.0),  # the share of the rtt spent on the way up
            st.floats(-1.0, 1.0),  # server clock offset it reports (a wild peer)
            st.floats(0.0, 0.05),  # how long before "now" it was received
        ),
        min_size=1,
        max_size=60,
    )
)
def test_server_time_never_runs_back_after_sync(events: list[tuple]) -> None:
    slew = 0.05
    sync = ClockSync(max_slew=slew, snap_samples=3)
    now = last_recv = 0.0
    last: tuple[float, float] | None = None  # (local, server) of the previous query
    for wait, is_pong, rtt, up_share, offset, late in events:
        now += wait
        if is_pong:
            # Pongs are processed in order, possibly stamped a bit before the last query.
            recv = last_recv = max(now - late, last_recv)
            send = recv - rtt
            sync.observe(send, send + rtt * up_share + offset, recv)
            if sync.samples <= 3:
                last = None  # a snapping sample: the estimate may jump
            continue
        if not sync.samples:
            continue
        shown = sync.server_time(now)
        if last is not None:
            dt = now - last[0]
            step = shown - last[1]
            assert step >= (1 - slew) * dt - 1e-9  # never backwards, never frozen
            assert step <= (1 + slew) * dt + 1e-9  # and never leaps forward
        last = (now, shown)


@given(
    st.lists(
        st.lists(
            st.tuples(st.floats(0.0, 0.3), st.floats(0.0, 0.5), st.floats(-5.0, 5.0)),
            min_size=1,
            max_size=12,
        ),
        min_size=1,
        max_size=8,
    ),
    st.floats(0.0, 5.0),
)
def test_many_clocks_at_once_read_as_each_one_alone(
    pongs: list[list[tuple[float, float, float]]], ahead: float
) -> None:
    """server_times over every clock's slew gives each clock's server_time bit for bit
    (a swarm reads all its bots' clocks in one pass a tick)."""
    clocks, locals_ = [], []
    for clock_pongs in pongs:
        clock, now = ClockSync(), 0.0
        for wait, rtt, offset in clock_pongs:
            now += wait + rtt
            clock.observe(now - rtt, now - rtt / 2 + offset, now)
        clocks.append(clock)
        locals_.append(now + ahead)
    slews = np.array([clock.slew() for clock in clocks])
    expected = [clock.server_time(local) for clock, local in zip(clocks, locals_, strict=True)]
    assert server_times(np.array(locals_), slews).tolist() == expected
    assert ClockSync().slew() is None


def test_reports_every_raw_rtt_and_a_smoothed_one() -> None:
    sync = ClockSync()
    for i, rtt in enumerate([0.1, 0.2, 0.05]):
        pong(sync, float(i), rtt / 2, rtt / 2)
    assert sync.rtt_samples == pytest.approx((0.1, 0.2, 0.05))
    srtt = 0.1 + (0.2 - 0.1) / 8
    srtt += (0.05 - srtt) / 8
    assert sync.rtt_estimate == pytest.approx(srtt)
    assert sync.min_rtt == pytest.approx(0.05)


def test_misuse_is_refused() -> None:
    sync = ClockSync()
    assert sync.rtt_estimate is None and sync.min_rtt is None and sync.target_offset is None
    with pytest.raises(RuntimeError, match="no pong"):
        sync.server_time(1.0)
    with pytest.raises(ValueError, match="before its ping"):
        sync.observe(2.0, 5.0, 1.0)
    with pytest.raises(ValueError, match="finite"):
        sync.observe(1.0, float("nan"), 2.0)
    with pytest.raises(ValueError, match="max_slew"):
        ClockSync(max_slew=1.0)
    with pytest.raises(ValueError, match="best"):
        ClockSync(window=4, best=5)
