"""The per-bot delay lines: one-way delay, jitter, loss spikes, TCP ordering."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from client_sim.latency import BotParams, LinkProfile, LogNormal, draw_bot
from client_sim.link import MIN_RTO, BotLink, DelayLine, retransmission_timeout


def rng(seed: int = 5) -> np.random.Generator:
    return np.random.default_rng(seed)


def params(**overrides: float) -> BotParams:
    base = {"rtt": 0.06, "clock_offset": 0.0, "jitter": 0.002, "loss": 0.01}
    base.update(overrides)
    return BotParams(
        index=0, link_seed=99, rtt=base["rtt"], clock_offset=base["clock_offset"],
        jitter=base["jitter"], loss=base["loss"],
    )  # fmt: skip


@given(
    rtt=st.floats(0.0, 2.0),
    sends=st.lists(st.floats(0.0, 1e6), min_size=1, max_size=50).map(sorted),
)
def test_without_jitter_or_loss_the_delay_is_exactly_half_the_rtt(
    rtt: float, sends: list[float]
) -> None:
    line = DelayLine(rtt / 2)  # deterministic: no rng needed
    for now in sends:
        assert line.schedule(now) == now + rtt / 2


def test_randomness_needs_an_rng() -> None:
    with pytest.raises(ValueError, match="needs an rng"):
        DelayLine(0.03, jitter=0.002)
    with pytest.raises(ValueError, match="loss"):
        DelayLine(0.03, loss=1.5, rng=rng())
    with pytest.raises(ValueError, match="one_way"):
        DelayLine(-0.01)


@pytest.mark.parametrize(("rtt", "rto"), [(0.05, 0.2), (0.1, 0.2), (0.3, 0.6)])
def test_retransmission_timeout(rtt: float, rto: float) -> None:
    assert retransmission_timeout(rtt) == rto
    assert MIN_RTO == 0.2


@pytest.mark.parametrize("rtt", [0.05, 0.3])
def test_a_lost_packet_arrives_one_rto_late(rtt: float) -> None:
    rto = retransmission_timeout(rtt)
    line = DelayLine(rtt / 2, loss=1.0, rto=rto, rng=rng())
    for i in range(10):
        now = 10.0 * i  # far apart: no head-of-line blocking
        assert line.schedule(now) == pytest.approx(now + rtt / 2 + rto, abs=1e-12)


def test_loss_rate_and_spike_size() -> None:
    one_way, rto, n = 0.03, 0.2, 20_000
    line = DelayLine(one_way, loss=0.1, rto=rto, rng=rng())
    delays = np.array([line.schedule(10.0 * i) - 10.0 * i for i in range(n)])
    late = np.isclose(delays, one_way + rto, atol=1e-9)
    on_time = np.isclose(delays, one_way, atol=1e-9)
    assert np.all(late | on_time)
    assert np.count_nonzero(late) / n == pytest.approx(0.1, abs=0.01)


def test_jitter_is_exponential_with_the_given_mean() -> None:
    one_way, jitter, n = 0.02, 0.002, 20_000
    line = DelayLine(one_way, jitter=jitter, rng=rng())
    extra = np.array([line.schedule(10.0 * i) - 10.0 * i for i in range(n)]) - one_way
    assert extra.min() >= -1e-9
    assert extra.mean() == pytest.approx(jitter, rel=0.03)
    assert extra.std() == pytest.approx(jitter, rel=0.03)
    assert np.median(extra) == pytest.approx(jitter * np.log(2), rel=0.03)


@given(
    seed=st.integers(0, 2**32),
    one_way=st.floats(0.0, 0.2),
    jitter=st.floats(0.0, 0.05),
    loss=st.floats(0.0, 1.0),
    gaps=st.lists(st.floats(0.0, 0.05), min_size=1, max_size=200),
    block=st.integers(1, 8),
)
def test_tcp_delivers_in_order(
    seed: int, one_way: float, jitter: float, loss: float, gaps: list[float], block: int
) -> None:
    rto = 0.2
    line = DelayLine(one_way, jitter=jitter, loss=loss, rto=rto, rng=rng(seed), block=block)
    now, sends, dues = 0.0, [], []
    for gap in gaps:
        now += gap
        sends.append(now)
        dues.append(line.schedule(now))
    assert all(a <= b for a, b in itertools.pairwise(dues))  # never overtakes
    for i, (sent, due) in enumerate(zip(sends, dues, strict=True)):
        own = due - sent - one_way  # the packet's own extra delay, unless blocked
        blocked = i > 0 and due == dues[i - 1]
        assert blocked or own >= -1e-9
        assert blocked or own < (jitter * 50 + rto + 1e-9)


def test_head_of_line_blocking_holds_back_the_next_packet() -> None:
    one_way, rto = 0.03, 0.2
    line = DelayLine(one_way, loss=0.02, rto=rto, rng=rng())
    sends = [0.01 * i for i in range(2000)]
    dues = [line.schedule(t) for t in sends]
    held = spikes = 0
    for i in range(1, len(dues)):
        raw_on_time = sends[i] + one_way
        if dues[i] == dues[i - 1] and dues[i] > raw_on_time + 1e-9:
            held += 1
        elif dues[i] == pytest.approx(raw_on_time + rto, abs=1e-9):
            spikes += 1  # not blocked: its own spike
        else:  # not blocked: on time
            assert dues[i] == pytest.approx(raw_on_time, abs=1e-9)
    # Every spike holds back the packets sent during its RTO (up to 19 at 10 ms spacing).
    assert spikes > 20
    assert held > spikes * 10


def test_due_times_never_run_backwards() -> None:
    line = DelayLine(0.05)
    assert line.schedule(1.0) == 1.05
    assert line.schedule(1.01) == 1.06
    assert line.schedule(0.5) == 1.06  # sent "earlier" (a clock step): still not overtaking


def test_a_bot_link_is_deterministic_for_its_seed() -> None:
    def run(link: BotLink) -> tuple[list[float], list[float]]:
        up = [link.up.schedule(i / 60) for i in range(1000)]
        down = [link.down.schedule(i / 60) for i in range(1000)]
        return up, down

    a_up, a_down = run(BotLink.for_bot(params()))
    b_up, b_down = run(BotLink.for_bot(params()))
    assert a_up == b_up and a_down == b_down
    assert a_up != a_down  # each direction has its own stream
    c_up, _ = run(BotLink.for_bot(BotParams(0, 0.06, 0.0, 0.002, 0.01, link_seed=100)))
    assert c_up != a_up


def test_both_directions_share_the_bots_rtt() -> None:
    link = BotLink.for_bot(params(rtt=0.08, jitter=0.0, loss=0.0))
    assert link.up.schedule(1.0) == 1.04 and link.down.schedule(1.0) == 1.04


def test_population_links_round_trip_statistics() -> None:
    """A drawn bot's ping round trip is its base RTT plus two exponential jitters."""
    rtt, profile = LogNormal(0.05, 0.3), LinkProfile(jitter_ms=2)
    for bot in (draw_bot(i, seed=3, rtt=rtt, profile=profile) for i in range(4)):
        link = BotLink.for_bot(bot)
        rtts = []
        for i in range(5000):
            sent = float(i)
            arrived = link.up.schedule(sent)
            rtts.append(link.down.schedule(arrived) - sent)
        excess = np.array(rtts) - bot.rtt
        assert excess.min() >= -1e-9
        assert excess.mean() == pytest.approx(2 * 0.002, rel=0.05)
