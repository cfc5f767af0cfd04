"""The per-bot link model: one delay line per direction (sans-I/O).

The kernel here has no netem, so latency is modelled in the bot process: a message the bot
sends is written to the socket at the due time its ``up`` line gives it, and a message the
bot reads is handed to the game at the due time of its ``down`` line. A line only computes
due times (time is always a parameter); the swarm's :class:`~client_sim.pump.DeliveryPump`
holds the packets and releases them, equal due times in the order they were sent.

Over WebSocket (:class:`DelayLine`) each packet's one-way delay is ``RTT/2`` + exponential
jitter + (when it is lost) one retransmission timeout, and since the transport is TCP a
packet never overtakes the one before it: its due time is at least the previous one's
(head-of-line blocking). Over UDP (:class:`DatagramLine`) a lost datagram is gone, nothing
is retransmitted, each datagram's delay is its own (so a late one is overtaken: reordering
comes from the jitter), and a datagram may arrive twice. Losses are independent
(``loss``) or in runs (:class:`~client_sim.latency.BurstLoss`, Gilbert-Elliott), drawn by
:class:`LossDraw` for either kind of line.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from client_sim.latency import BotParams, BurstLoss

__all__ = [
    "DOWN",
    "MIN_RTO",
    "UP",
    "BotLink",
    "DatagramLine",
    "DatagramLink",
    "DelayLine",
    "LossDraw",
    "retransmission_timeout",
]

#: Linux's minimum retransmission timeout (RFC 6298 recommends 1 s; Linux uses 200 ms).
MIN_RTO = 0.2

#: Direction indices, also the spawn keys of the two RNG streams derived from a bot's seed.
UP = 0  # bot -> server
DOWN = 1  # server -> bot


def retransmission_timeout(rtt: float) -> float:
    """The extra delay of a lost packet: ``max(200 ms, 2 * RTT)``.

    A simplification of RFC 6298 (``SRTT + 4 * RTTVAR``, floored at Linux's 200 ms) for a
    connection whose RTT barely varies; a lost retransmission (probability ``loss**2``)
    is not modelled.
    """
    return max(MIN_RTO, 2.0 * rtt)


class LossDraw:
    """Which packets of a line are lost: independently with ``loss``, or by a
    Gilbert-Elliott chain (``burst``), whose state carries over from one block to the next.
    The draws come from ``rng`` only, so a line's losses depend on its seed alone."""

    __slots__ = ("_bad", "_burst", "_loss")

    def __init__(self, loss: float = 0.0, burst: BurstLoss | None = None) -> None:
        if not 0.0 <= loss <= 1.0:
            raise ValueError(f"loss must be a probability in [0, 1], got {loss!r}")
        if burst is not None and loss > 0:
            raise ValueError("give either a loss probability or burst loss, not both")
        self._loss = float(loss)
        self._burst = burst
        self._bad = False  # the chain starts in the good state

    @property
    def lossy(self) -> bool:
        burst = self._burst
        return self._loss > 0 or (burst is not None and burst.p_good_bad > 0 and burst.loss_bad > 0)

    def block(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """Whether each of the next ``n`` packets is lost (booleans)."""
        burst = self._burst
        if burst is None:
            if self._loss <= 0:
                return np.zeros(n, dtype=bool)
            return rng.random(n) < self._loss
        moves = rng.random(n).tolist()
        chances = rng.random(n) < burst.loss_bad
        bad_states = np.zeros(n, dtype=bool)
        bad, p_gb, p_bg = self._bad, burst.p_good_bad, burst.p_bad_good
        for i, u in enumerate(moves):  # (a chain: each state depends on the one before)
            bad = (u >= p_bg) if bad else (u < p_gb)
            bad_states[i] = bad
        self._bad = bad
        return bad_states & chances


class DelayLine:
    """One direction of one bot's link: the due time of each packet sent on it, in order.

    Random draws come from ``rng`` in blocks of ``block`` packets (one exponential and one
    uniform array per block), so the per-packet cost is a few Python operations, and the
    sequence of delays depends only on the RNG state, not on when packets are sent.
    """

    __slots__ = (
        "_block",
        "_extra",
        "_i",
        "_jitter",
        "_last",
        "_losses",
        "_one_way",
        "_random",
        "_rng",
        "_rto",
    )

    def __init__(
        self,
        one_way: float,
        *,
        jitter: float = 0.0,
        loss: float = 0.0,
        rto: float = MIN_RTO,
        rng: np.random.Generator | None = None,
        block: int = 256,
        burst: BurstLoss | None = None,
    ) -> None:
        if not (math.isfinite(one_way) and one_way >= 0):
            raise ValueError(f"one_way delay must be a finite number >= 0, got {one_way!r}")
        if not (math.isfinite(jitter) and jitter >= 0):
            raise ValueError(f"jitter must be a finite number >= 0, got {jitter!r}")
        if not (math.isfinite(rto) and rto >= 0):
            raise ValueError(f"rto must be a finite number >= 0, got {rto!r}")
        if block < 1:
            raise ValueError(f"block must be >= 1, got {block!r}")
        self._losses = LossDraw(loss, burst)
        self._random = jitter > 0 or self._losses.lossy
        if self._random and rng is None:
            raise ValueError("a delay line with jitter or loss needs an rng")
        self._one_way = float(one_way)
        self._jitter = float(jitter)
        self._rto = float(rto)
        self._rng = rng
        self._block = int(block)
        self._extra: list[float] = []
        self._i = self._block  # empty: the first packet refills
        self._last = -math.inf

    def _refill(self) -> None:
        rng = self._rng
        assert rng is not None
        n = self._block
        if self._jitter > 0:
            extra = rng.exponential(self._jitter, n)
        else:
            extra = np.zeros(n)
        if self._losses.lossy:
            extra += self._losses.block(rng, n) * self._rto
        self._extra = extra.tolist()
        self._i = 0

    def schedule(self, now: float) -> float:
        """A packet sent at ``now``: when it is delivered (never before the previous one)."""
        due = now + self._one_way
        if self._random:
            if self._i == self._block:
                self._refill()
            i = self._i
            due += self._extra[i]
            self._i = i + 1
        if due < self._last:
            due = self._last  # TCP: nothing overtakes the packet before it
        self._last = due
        return due


@dataclass(frozen=True, slots=True)
class BotLink:
    """Both directions of one bot's link: same RTT, independent RNG streams."""

    up: DelayLine  # bot -> server
    down: DelayLine  # server -> bot

    def __post_init__(self) -> None:
        if not isinstance(self.up, DelayLine) or not isinstance(self.down, DelayLine):
            raise TypeError("BotLink needs two DelayLine objects")

    @classmethod
    def for_bot(cls, params: BotParams, *, block: int = 256) -> BotLink:
        """The link of a drawn bot; the same params give the same delays, packet by packet."""

        def line(direction: int) -> DelayLine:
            seq = np.random.SeedSequence(params.link_seed, spawn_key=(direction,))
            return DelayLine(
                params.rtt / 2.0,
                jitter=params.jitter,
                loss=params.loss,
                rto=retransmission_timeout(params.rtt),
                rng=np.random.default_rng(seq),
                block=block,
                burst=params.burst,
            )

        return cls(up=line(UP), down=line(DOWN))


class DatagramLine:
    """One direction of one bot's UDP link: what becomes of each datagram sent on it.

    :meth:`fates` gives the due times of its copies: none (lost), one, or two (duplicated,
    each copy with its own delay). Every copy's delay is ``one_way`` + exponential jitter,
    drawn independently, so a datagram delayed more than the gap to the next is overtaken.
    Draws come in blocks, like :class:`DelayLine`'s.
    """

    __slots__ = ("_block", "_copies", "_duplicate", "_i", "_jitter", "_losses", "_one_way", "_rng")

    def __init__(
        self,
        one_way: float,
        *,
        rng: np.random.Generator,
        jitter: float = 0.0,
        loss: float = 0.0,
        burst: BurstLoss | None = None,
        duplicate: float = 0.0,
        block: int = 256,
    ) -> None:
        if not (math.isfinite(one_way) and one_way >= 0):
            raise ValueError(f"one_way delay must be a finite number >= 0, got {one_way!r}")
        if not (math.isfinite(jitter) and jitter >= 0):
            raise ValueError(f"jitter must be a finite number >= 0, got {jitter!r}")
        if not 0.0 <= duplicate <= 1.0:
            raise ValueError(f"duplicate must be a probability in [0, 1], got {duplicate!r}")
        if block < 1:
            raise ValueError(f"block must be >= 1, got {block!r}")
        self._one_way = float(one_way)
        self._jitter = float(jitter)
        self._losses = LossDraw(loss, burst)
        self._duplicate = float(duplicate)
        self._rng = rng
        self._block = int(block)
        self._copies: list[tuple[float, ...]] = []
        self._i = self._block

    def _refill(self) -> None:
        rng, n, one_way = self._rng, self._block, self._one_way
        if self._jitter > 0:
            first = (one_way + rng.exponential(self._jitter, n)).tolist()
            second = (one_way + rng.exponential(self._jitter, n)).tolist()
        else:
            first = second = [one_way] * n
        lost = self._losses.block(rng, n).tolist()
        twice = (rng.random(n) < self._duplicate).tolist() if self._duplicate > 0 else [False] * n
        self._copies = [
            () if gone else (a, b) if dup else (a,)
            for gone, dup, a, b in zip(lost, twice, first, second, strict=True)
        ]
        self._i = 0

    def fates(self, now: float) -> tuple[float, ...]:
        """A datagram sent at ``now``: the due time of each copy that arrives."""
        if self._i == self._block:
            self._refill()
        delays = self._copies[self._i]
        self._i += 1
        return tuple(now + d for d in delays)


@dataclass(frozen=True, slots=True)
class DatagramLink:
    """Both directions of one bot's UDP link: same RTT, independent RNG streams (the same
    seeds as its :class:`BotLink`, so a bot's link is one draw whatever the transport)."""

    up: DatagramLine
    down: DatagramLine

    @classmethod
    def for_bot(cls, params: BotParams, *, block: int = 256) -> DatagramLink:
        def line(direction: int) -> DatagramLine:
            seq = np.random.SeedSequence(params.link_seed, spawn_key=(direction,))
            return DatagramLine(
                params.rtt / 2.0,
                rng=np.random.default_rng(seq),
                jitter=params.jitter,
                loss=params.loss,
                burst=params.burst,
                duplicate=params.duplicate,
                block=block,
            )

        return cls(up=line(UP), down=line(DOWN))
