"""The UDP link model: loss rates, bursts, duplicates, reordering, determinism; and the
TCP line's burst loss as retransmissions."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from client_sim.latency import BotParams, BurstLoss, LinkProfile
from client_sim.link import DatagramLine, DatagramLink, DelayLine, LossDraw

N = 40_000


def rng(seed: int = 3) -> np.random.Generator:
    return np.random.default_rng(seed)


def fates(line: DatagramLine, count: int = N, spacing: float = 0.01) -> list[tuple[float, ...]]:
    return [line.fates(i * spacing) for i in range(count)]


def runs_of_losses(lost: list[bool]) -> list[int]:
    """The lengths of the runs of consecutive losses."""
    runs, current = [], 0
    for gone in lost:
        if gone:
            current += 1
        elif current:
            runs.append(current)
            current = 0
    if current:
        runs.append(current)
    return runs


def test_independent_loss_drops_the_asked_share_and_nothing_else_changes() -> None:
    line = DatagramLine(0.05, rng=rng(), loss=0.05)
    out = fates(line)
    lost = sum(not f for f in out)
    # Binomial(40000, 0.05): sd ~ 44; 5 sd either side.
    assert abs(lost - 0.05 * N) < 5 * math.sqrt(N * 0.05 * 0.95)
    assert all(len(f) <= 1 for f in out)
    assert all(f[0] == pytest.approx(i * 0.01 + 0.05) for i, f in enumerate(out) if f)


def test_no_loss_no_jitter_is_a_plain_delay() -> None:
    line = DatagramLine(0.03, rng=rng())
    assert fates(line, 1000) == [(i * 0.01 + 0.03,) for i in range(1000)]


def test_burst_loss_comes_in_runs_of_the_chains_mean_length() -> None:
    burst = BurstLoss(0.01, 0.25)  # mean loss 0.01 / 0.26 ~ 3.8 %, runs of 4 on average
    lost = [not f for f in fates(DatagramLine(0.05, rng=rng(), burst=burst), 200_000)]
    share = sum(lost) / len(lost)
    assert share == pytest.approx(burst.mean_loss, rel=0.1)
    runs = runs_of_losses(lost)
    assert np.mean(runs) == pytest.approx(1 / 0.25, rel=0.1)
    # Independent loss at the same rate: runs barely longer than one.
    independent = [not f for f in fates(DatagramLine(0.05, rng=rng(), loss=share), 200_000)]
    assert np.mean(runs_of_losses(independent)) < 1.1


def test_the_bad_state_loses_only_its_share() -> None:
    burst = BurstLoss(0.02, 0.1, loss_bad=0.5)
    lost = [not f for f in fates(DatagramLine(0.05, rng=rng(), burst=burst), 200_000)]
    assert sum(lost) / len(lost) == pytest.approx(burst.mean_loss, rel=0.1)


def test_the_chains_state_carries_across_blocks() -> None:
    """Blocks of 1 and of 256 draw the same packets' fates from the same stream only
    when the chain's state is kept between blocks: the loss share must agree."""
    burst = BurstLoss(0.05, 0.2)
    small = LossDraw(burst=burst)
    generator = rng()
    states = np.concatenate([small.block(generator, 1) for _ in range(50_000)])
    assert states.mean() == pytest.approx(burst.mean_loss, rel=0.1)
    assert np.mean(runs_of_losses(states.tolist())) == pytest.approx(5.0, rel=0.1)


def test_duplicates_arrive_twice_each_copy_with_its_own_delay() -> None:
    line = DatagramLine(0.05, rng=rng(), jitter=0.004, duplicate=0.1)
    out = fates(line)
    twice = [f for f in out if len(f) == 2]
    assert abs(len(twice) - 0.1 * N) < 5 * math.sqrt(N * 0.1 * 0.9)
    assert sum(f[0] != f[1] for f in twice) == len(twice)
    assert not any(len(f) == 0 for f in out)


def test_jitter_reorders_datagrams_nothing_holds_one_back() -> None:
    line = DatagramLine(0.05, rng=rng(), jitter=0.004)
    dues = [f[0] for f in fates(line, 5000, spacing=0.002)]
    overtaken = sum(later < earlier for earlier, later in itertools.pairwise(dues))
    assert overtaken > 500  # 2 ms apart, 4 ms mean jitter: many are overtaken
    assert min(d - i * 0.002 for i, d in enumerate(dues)) >= 0.05


def test_the_tcp_line_turns_burst_losses_into_retransmissions() -> None:
    burst = BurstLoss(0.01, 0.25)
    line = DelayLine(0.05, rto=0.2, rng=rng(), burst=burst)
    dues = [line.schedule(i * 0.01) for i in range(N)]
    late = sum(d - i * 0.01 > 0.1 for i, d in enumerate(dues))
    assert late > 0.03 * N  # each lost packet, and those held behind it, come late
    assert all(b >= a for a, b in itertools.pairwise(dues))  # never reordered


def test_a_bots_datagram_link_is_the_same_for_the_same_seed() -> None:
    params = BotParams(4, 0.1, 0.0, 0.002, 0.05, link_seed=99, duplicate=0.05)
    one, two = DatagramLink.for_bot(params), DatagramLink.for_bot(params)
    assert fates(one.up, 3000) == fates(two.up, 3000)
    assert fates(one.down, 3000) == fates(two.down, 3000)
    assert fates(one.up, 3000) != fates(one.down, 3000)  # the directions differ
    other = DatagramLink.for_bot(BotParams(4, 0.1, 0.0, 0.002, 0.05, link_seed=100))
    assert fates(DatagramLink.for_bot(params).up, 3000) != fates(other.up, 3000)


def test_bad_link_settings_are_refused() -> None:
    with pytest.raises(ValueError):
        DatagramLine(0.05, rng=rng(), duplicate=1.5)
    with pytest.raises(ValueError):
        LossDraw(0.1, BurstLoss(0.1, 0.5))
    with pytest.raises(ValueError):
        BurstLoss(0.1, 0.0)
    with pytest.raises(ValueError):
        BurstLoss(1.2, 0.5)
    with pytest.raises(ValueError):
        LinkProfile(loss=0.1, burst=BurstLoss(0.1, 0.5))
