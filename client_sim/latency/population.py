"""The bot population: what every link shares (:class:`LinkProfile`) and each bot's own
draw (:class:`BotParams`), seeded per bot so a worker process can draw its share alone
(sans-I/O; seconds throughout, except where a name says ``_ms``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from client_sim.latency.distributions import Distribution, Uniform

__all__ = ["DEFAULT_CLOCK_OFFSET", "BotParams", "BurstLoss", "LinkProfile", "draw_bot"]

DEFAULT_CLOCK_OFFSET: Distribution = Uniform(-0.2, 0.2)


@dataclass(frozen=True, slots=True)
class BurstLoss:
    """Gilbert-Elliott loss: a link that is either good (nothing lost) or bad (each packet
    lost with ``loss_bad``), moving good -> bad with ``p_good_bad`` and bad -> good with
    ``p_bad_good`` after each packet. Real losses come in runs (a queue overflowing, a Wi-Fi
    fade); the mean loss is ``loss_bad * p_good_bad / (p_good_bad + p_bad_good)`` and a bad
    spell lasts ``1 / p_bad_good`` packets on average."""

    p_good_bad: float
    p_bad_good: float
    loss_bad: float = 1.0

    def __post_init__(self) -> None:
        for name in ("p_good_bad", "p_bad_good", "loss_bad"):
            value = float(getattr(self, name))
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be a probability in [0, 1], got {value!r}")
            object.__setattr__(self, name, value)
        if self.p_bad_good == 0.0 and self.p_good_bad > 0.0:
            raise ValueError("p_bad_good must be > 0: a bad state that never ends loses all")

    @property
    def mean_loss(self) -> float:
        """The long-run share of packets lost."""
        total = self.p_good_bad + self.p_bad_good
        return self.loss_bad * self.p_good_bad / total if total > 0 else 0.0


@dataclass(frozen=True, slots=True)
class LinkProfile:
    """What every bot's link shares besides its base RTT.

    ``jitter_ms``: per packet and direction, an extra one-way delay drawn from an
    exponential distribution whose mean (and so standard deviation) is ``jitter_ms`` — a
    queueing delay: never negative, usually small, sometimes large.
    ``loss``: probability that a packet is lost; over TCP that is a retransmission, so the
    packet arrives one RTO = max(200 ms, 2 * RTT) late (and holds back those behind it).
    ``burst``: losses in runs instead (:class:`BurstLoss`), in place of ``loss``.
    ``duplicate``: probability that a datagram arrives twice (UDP only: TCP never delivers
    a segment twice).
    ``clock_offset``: distribution (seconds, may be negative) of each bot's local clock
    minus the server's clock.
    """

    jitter_ms: float = 2.0
    loss: float = 0.0
    clock_offset: Distribution = DEFAULT_CLOCK_OFFSET
    burst: BurstLoss | None = None
    duplicate: float = 0.0

    def __post_init__(self) -> None:
        jitter = float(self.jitter_ms)
        if not math.isfinite(jitter) or jitter < 0:
            raise ValueError(f"jitter_ms must be a finite number >= 0, got {self.jitter_ms!r}")
        loss = float(self.loss)
        if not 0.0 <= loss <= 1.0:
            raise ValueError(f"loss must be a probability in [0, 1], got {self.loss!r}")
        if not isinstance(self.clock_offset, Distribution):
            raise TypeError(f"clock_offset must be a Distribution, got {self.clock_offset!r}")
        if not 0.0 <= float(self.duplicate) <= 1.0:
            raise ValueError(f"duplicate must be a probability in [0, 1], got {self.duplicate!r}")
        if self.burst is not None and loss > 0:
            raise ValueError("give either a loss probability or burst loss, not both")
        object.__setattr__(self, "jitter_ms", jitter)
        object.__setattr__(self, "loss", loss)


@dataclass(frozen=True, slots=True)
class BotParams:
    """One bot's link, all in seconds; ``link_seed`` seeds its two delay lines."""

    index: int
    rtt: float
    clock_offset: float
    jitter: float
    loss: float
    link_seed: int
    burst: BurstLoss | None = None  # losses in runs, in place of ``loss``
    duplicate: float = 0.0  # probability a datagram arrives twice (UDP)

    def __post_init__(self) -> None:
        if self.index < 0:
            raise ValueError(f"bot index must be >= 0, got {self.index}")
        if not (math.isfinite(self.rtt) and self.rtt > 0):
            raise ValueError(f"rtt must be a finite number > 0, got {self.rtt!r}")
        if not math.isfinite(self.clock_offset):
            raise ValueError(f"clock_offset must be finite, got {self.clock_offset!r}")
        if not (math.isfinite(self.jitter) and self.jitter >= 0):
            raise ValueError(f"jitter must be a finite number >= 0, got {self.jitter!r}")
        if not 0.0 <= self.loss <= 1.0:
            raise ValueError(f"loss must be in [0, 1], got {self.loss!r}")
        if not 0 <= self.link_seed < 2**64:
            raise ValueError(f"link_seed must fit in 64 bits, got {self.link_seed}")


def _check_seed(seed: int) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    return int(seed)


def draw_bot(
    index: int, *, seed: int, rtt: Distribution, profile: LinkProfile | None = None
) -> BotParams:
    """Bot ``index`` of the population seeded by ``seed``.

    Each bot has its own streams (``SeedSequence(seed, spawn_key=(index, k))``), so a bot's
    parameters depend only on (seed, index, specs): a worker process can draw its share of
    the bots alone, growing the swarm keeps the existing bots, and the RTT spec does not
    shift the clock offsets.
    """
    seed = _check_seed(seed)
    if isinstance(index, bool) or not isinstance(index, (int, np.integer)) or index < 0:
        raise ValueError(f"bot index must be a non-negative integer, got {index!r}")
    if not rtt.positive:
        raise ValueError(f"round-trip time distribution can draw values <= 0: {rtt.describe()}")
    profile = profile if profile is not None else LinkProfile()
    index = int(index)

    def stream(k: int) -> np.random.SeedSequence:
        return np.random.SeedSequence(seed, spawn_key=(index, k))

    base = float(rtt.sample(np.random.default_rng(stream(0)), 1)[0])
    offset = float(profile.clock_offset.sample(np.random.default_rng(stream(1)), 1)[0])
    link_seed = int(stream(2).generate_state(1, np.uint64)[0])
    return BotParams(
        index=index,
        rtt=base,
        clock_offset=offset,
        jitter=profile.jitter_ms / 1000.0,
        loss=profile.loss,
        link_seed=link_seed,
        burst=profile.burst,
        duplicate=profile.duplicate,
    )
