"""The seeded bot population and the link profile it shares."""

from __future__ import annotations

import numpy as np
import pytest

from client_sim.latency import (
    DEFAULT_CLOCK_OFFSET,
    BotParams,
    Constant,
    Distribution,
    LinkProfile,
    LogNormal,
    Normal,
    Uniform,
    draw_bot,
)


def test_link_profile_defaults_and_validation() -> None:
    profile = LinkProfile()
    assert (profile.jitter_ms, profile.loss) == (2.0, 0.0)
    assert profile.clock_offset == DEFAULT_CLOCK_OFFSET == Uniform(-0.2, 0.2)
    with pytest.raises(ValueError, match="jitter_ms"):
        LinkProfile(jitter_ms=-1)
    with pytest.raises(ValueError, match="loss"):
        LinkProfile(loss=1.5)
    with pytest.raises(TypeError, match="clock_offset"):
        LinkProfile(clock_offset="uniform(-1ms,1ms)")  # type: ignore[arg-type]


RTT = LogNormal(0.04, 0.4)


def population(
    n: int, *, seed: int, rtt: Distribution, profile: LinkProfile | None = None
) -> list[BotParams]:
    """Bots ``0 .. n-1`` of a population, drawn one by one as the workers draw them."""
    return [draw_bot(i, seed=seed, rtt=rtt, profile=profile) for i in range(n)]


def test_same_seed_same_population_bit_for_bit() -> None:
    profile = LinkProfile(jitter_ms=3.0, loss=0.01)
    a = population(50, seed=42, rtt=RTT, profile=profile)
    b = population(50, seed=42, rtt=RTT, profile=profile)
    assert a == b
    assert [x.rtt.hex() for x in a] == [x.rtt.hex() for x in b]
    assert [x.index for x in a] == list(range(50))
    assert all(x.jitter == 0.003 and x.loss == 0.01 for x in a)


def test_different_seed_different_population() -> None:
    a = population(50, seed=42, rtt=RTT)
    b = population(50, seed=43, rtt=RTT)
    assert all(x.rtt != y.rtt for x, y in zip(a, b, strict=True))
    assert all(x.clock_offset != y.clock_offset for x, y in zip(a, b, strict=True))
    assert all(x.link_seed != y.link_seed for x, y in zip(a, b, strict=True))


def test_a_bot_depends_only_on_seed_index_and_specs() -> None:
    many = population(30, seed=7, rtt=RTT)
    assert population(10, seed=7, rtt=RTT) == many[:10]  # growing keeps the bots
    assert draw_bot(17, seed=7, rtt=RTT) == many[17]  # a worker can draw its share alone
    other = population(30, seed=7, rtt=Constant(0.1))
    assert [b.clock_offset for b in other] == [b.clock_offset for b in many]
    assert [b.link_seed for b in other] == [b.link_seed for b in many]
    assert len({b.link_seed for b in many}) == 30


def test_population_follows_the_specs() -> None:
    bots = population(3000, seed=1, rtt=RTT, profile=LinkProfile(clock_offset=Uniform(-0.5, 0.5)))
    rtts = np.array([b.rtt for b in bots])
    offsets = np.array([b.clock_offset for b in bots])
    assert np.median(rtts) == pytest.approx(0.04, rel=0.05)
    assert offsets.min() >= -0.5 and offsets.max() <= 0.5
    assert np.mean(offsets < 0) == pytest.approx(0.5, abs=0.04)


def test_population_rejects_misuse() -> None:
    with pytest.raises(ValueError, match="values <= 0"):
        draw_bot(0, seed=0, rtt=Normal(0.05, 0.01))
    with pytest.raises(ValueError, match="seed"):
        draw_bot(0, seed=-1, rtt=RTT)
    with pytest.raises(ValueError, match="rtt must be"):
        BotParams(index=0, rtt=0.0, clock_offset=0.0, jitter=0.0, loss=0.0, link_seed=1)
