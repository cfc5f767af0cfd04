"""The distributions: constructors validate, samples match the analytic statistics."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pytest

from client_sim.latency import Constant, LogNormal, Mix, Normal, Uniform, parse_distribution

N = 20_000


def rng(seed: int = 12345) -> np.random.Generator:
    return np.random.default_rng(seed)


def test_constructors_validate_too() -> None:
    with pytest.raises(ValueError, match="greater than max"):
        Uniform(2.0, 1.0)
    with pytest.raises(ValueError, match="finite"):
        Constant(math.inf)
    with pytest.raises(ValueError, match="sigma must be > 0"):
        LogNormal(0.04, 0.0)
    with pytest.raises(ValueError, match="at least one"):
        Mix(())
    with pytest.raises(ValueError, match="cannot contain a mix"):
        Mix(((1.0, Mix(((1.0, Constant(0.1)),))),))
    with pytest.raises(ValueError, match="must be a non-negative integer"):
        Constant(0.1).sample(rng(), -1)


# --------------------------------------------------------------------------------------------
# Sampled statistics match the analytic ones


def test_samples_are_float64_seconds_of_the_asked_size() -> None:
    for dist in (
        Constant(0.08),
        Uniform(0.02, 0.12),
        Normal(0.08, 0.015, 0.001),
        LogNormal(0.04, 0.4),
        Mix(((1.0, Constant(0.01)), (1.0, LogNormal(0.1, 0.2)))),
    ):
        out = dist.sample(rng(), 7)
        assert out.dtype == np.float64 and out.shape == (7,)
        assert dist.sample(rng(), 0).shape == (0,)
        assert np.array_equal(out, dist.sample(rng(), 7))  # deterministic for the rng state


def test_constant() -> None:
    assert np.all(Constant(0.08).sample(rng(), N) == 0.08)


def test_uniform_bounds_and_quantiles() -> None:
    x = Uniform(0.02, 0.12).sample(rng(), N)
    assert x.min() >= 0.02 and x.max() <= 0.12
    assert x.min() < 0.0201 and x.max() > 0.1199
    q = np.quantile(x, [0.25, 0.5, 0.75])
    assert np.allclose(q, [0.045, 0.07, 0.095], rtol=0.03)


def test_normal_mean_and_sd() -> None:
    x = parse_distribution("normal(mean=80ms,sd=15ms)").sample(rng(), N)
    assert x.mean() == pytest.approx(0.08, rel=0.03)
    assert x.std() == pytest.approx(0.015, rel=0.03)
    assert np.quantile(x, 0.9) == pytest.approx(NormalDist(0.08, 0.015).inv_cdf(0.9), rel=0.03)


def test_normal_is_truncated_not_clipped() -> None:
    mu, sd, floor = 0.005, 0.010, 0.001
    x = Normal(mu, sd, floor).sample(rng(), N)
    assert x.min() >= floor
    assert np.count_nonzero(x == floor) == 0  # redrawn: no spike of mass at the floor
    std = NormalDist()
    alpha = (floor - mu) / sd
    truncated_mean = mu + sd * std.pdf(alpha) / (1 - std.cdf(alpha))
    assert x.mean() == pytest.approx(truncated_mean, rel=0.03)


def test_lognormal_median_and_tail() -> None:
    x = parse_distribution("lognormal(median=40ms,sigma=0.4)").sample(rng(), N)
    assert np.median(x) == pytest.approx(0.04, rel=0.03)
    p99 = 0.04 * math.exp(0.4 * NormalDist().inv_cdf(0.99))
    assert np.quantile(x, 0.99) == pytest.approx(p99, rel=0.05)
    assert x.mean() == pytest.approx(0.04 * math.exp(0.4**2 / 2), rel=0.03)


def test_mix_weights_are_normalised() -> None:
    x = parse_distribution("mix(3*10ms, 1*100ms)").sample(rng(), N)
    assert np.isin(x, [0.01, 0.1]).all()
    assert np.mean(x == 0.01) == pytest.approx(0.75, abs=0.02)


def test_mix_of_lognormals_matches_its_cdf() -> None:
    spec = "mix(0.6*lognormal(median=40ms,sigma=0.4), 0.4*lognormal(median=140ms,sigma=0.3))"
    x = parse_distribution(spec).sample(rng(), N)
    std = NormalDist()
    for t in (0.02, 0.04, 0.07, 0.1, 0.14, 0.25):
        cdf = 0.6 * std.cdf(math.log(t / 0.04) / 0.4) + 0.4 * std.cdf(math.log(t / 0.14) / 0.3)
        assert np.mean(x <= t) == pytest.approx(cdf, abs=0.02)
    # The two modes are well apart: below 80 ms is (nearly) all of the first component.
    assert np.mean(x < 0.08) == pytest.approx(0.6 * 0.9584 + 0.4 * 0.0310, abs=0.02)
