"""A bot tells a slow node from a dead one before it fails over."""

from __future__ import annotations

import asyncio
import math
from types import SimpleNamespace

from client_sim.bot import (
    PROBE_REPEAT_S,
    PROBE_TIMEOUT_S,
    STALL_GIVE_UP_S,
    STALL_TIMEOUT_S,
    Bot,
    ProcessBeat,
)
from client_sim.latency import draw_bot, parse_distribution
from shared import protocol
from shared.arena_map import default_map as _default_map
from shared.protocol import EntityCodec as _EntityCodec

CODEC = _EntityCodec.for_bounds(_default_map().bounds_min, _default_map().bounds_max)


def seated_bot() -> Bot:
    params = draw_bot(0, seed=1, rtt=parse_distribution("40ms"))
    host = SimpleNamespace(
        config=SimpleNamespace(transport="ws"),
        pump=None,
        codec=CODEC,
        beat=ProcessBeat(),
        clock_changed=lambda *_: None,
    )
    bot = Bot(0, params, host, "ws://a/ws")
    bot.welcome = protocol.WelcomeMessage(1, 0, 60, 10, 0.2, "tok", "arena", "eu", 3)
    bot._welcomed_local = -1e9  # long ago
    bot._connections[0] = SimpleNamespace(closed=False, url="ws://a/ws")  # type: ignore[assignment]
    bot._active = 0
    return bot


async def test_a_stall_is_probed_before_anything_else() -> None:
    bot = seated_bot()
    now = asyncio.get_running_loop().time()
    bot._last_snapshot_at = now - STALL_TIMEOUT_S / 2
    assert bot._stall() == "ok"
    bot._last_snapshot_at = now - STALL_TIMEOUT_S - 0.1
    assert bot._stall() == "probe" and bot.needs_attention(now)
    bot._probe_at = bot._probe_sent_at = now  # probe sent: wait for its answer
    assert bot._stall() == "ok"


async def test_an_unanswered_probe_is_sent_again_before_the_node_is_given_up() -> None:
    """Over UDP a ping or its pong may be lost and is never resent: one lost must not
    pass for a dead node, so the probe is repeated while its time-out runs."""
    bot = seated_bot()
    now = asyncio.get_running_loop().time()
    bot._last_snapshot_at = now - STALL_TIMEOUT_S - 0.5
    bot._probe_at = bot._probe_sent_at = now - PROBE_REPEAT_S - 0.01
    assert bot._stall() == "reprobe" and bot.needs_attention(now)
    bot._probe_sent_at = now
    assert bot._stall() == "ok"
    bot._pong_at = now  # a repeat was answered: alive
    assert bot._stall() == "ok"


async def test_an_answered_probe_keeps_the_bot_a_dead_one_moves_it() -> None:
    bot = seated_bot()
    now = asyncio.get_running_loop().time()
    bot._last_snapshot_at = now - 2.0
    bot._probe_at = now - PROBE_TIMEOUT_S - 2 * bot.params.rtt - 0.1
    assert bot._stall() == "lost"  # unanswered: gone
    bot._pong_at = bot._probe_at + 0.01
    assert bot._stall() == "probe"  # answered: alive, only slow; asked again
    bot._last_snapshot_at = now - STALL_GIVE_UP_S - 0.1
    assert bot._stall() == "lost"  # answering, but showing nothing for too long


async def test_a_closed_socket_is_evidence_enough() -> None:
    bot = seated_bot()
    bot._last_snapshot_at = asyncio.get_running_loop().time()
    bot._connections[0].closed = True
    assert bot._stall() == "lost"


async def test_silence_through_a_stall_of_the_bots_own_process_is_no_evidence() -> None:
    """The process was stopped for 10 s: the node's snapshots wait unread in the sockets.
    The first look after it sees the gap and gives the node a fresh wait from the resume;
    still nothing after that wait, and the node is probed as usual."""
    bot = seated_bot()
    beat = bot.swarm.beat
    now = asyncio.get_running_loop().time()
    beat.beat(now - 10.0)  # the last look before the process was stopped
    bot._last_snapshot_at = now - 10.0
    assert bot._stall() == "ok"  # (10 s of silence, but the gap is the process's own)
    assert beat.resumed_at >= now
    beat.resumed_at -= STALL_TIMEOUT_S + 0.1  # nothing read a while after the resume
    assert bot._stall() == "probe"


def test_a_process_that_runs_on_never_resumes() -> None:
    beat = ProcessBeat()
    for k in range(50):
        assert beat.beat(k * 0.1) == -math.inf
    assert beat.beat(5.0 + STALL_TIMEOUT_S + 0.01) == 5.0 + STALL_TIMEOUT_S + 0.01
