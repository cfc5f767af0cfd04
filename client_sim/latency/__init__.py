"""Latency specs and the bot population they draw (sans-I/O; seconds, nothing reads a clock).

A spec names the distribution of each bot's *base round-trip time*; per-packet jitter, loss
and the bot's clock offset come from :class:`LinkProfile`. Three modules, one job each:

- :mod:`.distributions`: the distributions, frozen and validated, each able to describe
  itself as spec text that parses back to an equal object;
- :mod:`.grammar`: the ``--latency`` grammar, its one-line errors and :data:`HELP_TEXT`;
- :mod:`.population`: the link profile and the seeded per-bot draw.

Import from here; the names below are the package's public API.
"""

from __future__ import annotations

from client_sim.latency.distributions import (
    Constant,
    Distribution,
    LogNormal,
    Mix,
    Normal,
    Uniform,
)
from client_sim.latency.grammar import (
    DEFAULT_FLOOR,
    HELP_TEXT,
    MAX_DURATION_S,
    LatencySpecError,
    parse_distribution,
    parse_duration,
)
from client_sim.latency.population import (
    DEFAULT_CLOCK_OFFSET,
    BotParams,
    BurstLoss,
    LinkProfile,
    draw_bot,
)

__all__ = [
    "DEFAULT_CLOCK_OFFSET",
    "DEFAULT_FLOOR",
    "HELP_TEXT",
    "MAX_DURATION_S",
    "BotParams",
    "BurstLoss",
    "Constant",
    "Distribution",
    "LatencySpecError",
    "LinkProfile",
    "LogNormal",
    "Mix",
    "Normal",
    "Uniform",
    "draw_bot",
    "parse_distribution",
    "parse_duration",
]
