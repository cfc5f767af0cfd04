"""``arena-bots``: spawn load-test bots against a running node and report what they saw."""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import math
import multiprocessing
import os
import signal
import ssl
import sys
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit, urlunsplit

import aiohttp

from client_sim.brain import BEHAVIOURS
from client_sim.geography import DirectoryError
from client_sim.latency import (
    HELP_TEXT,
    BotParams,
    BurstLoss,
    LatencySpecError,
    LinkProfile,
    draw_bot,
    parse_distribution,
)
from client_sim.marksman import AimSkill
from client_sim.provenance import provenance, run_start
from client_sim.report import build_report, format_summary, node_account, report_of, tally_of
from client_sim.report_html import write_html_report
from client_sim.report_server import ServerWatch, server_figures
from client_sim.report_thresholds import (
    Threshold,
    breaches,
    check_known,
    parse_threshold,
)
from client_sim.routing import Directories, Route, route_bots, routing_figures
from client_sim.sight import POP_IN_NEAR_M
from client_sim.swarm import Swarm, SwarmConfig, SwarmResult, run_swarm
from client_sim.tally import PartError, Tally
from client_sim.websocket import TlsTrust
from shared import eventloop
from shared.commandline import OneLineParser, check_duration, milliseconds, seconds
from shared.geo import GeoError, parse_population
from shared.lifetime import exit_with_parent, exit_with_parent_if_asked, sigterm_as_interrupt

__all__ = [
    "TRANSPORTS",
    "BotRun",
    "add_transport",
    "main",
    "parse_burst_loss",
    "parse_thresholds",
    "run_bots",
    "verdict",
]

#: The bots' transports: WebSocket, or sealed datagrams over UDP.
TRANSPORTS = ("ws", "udp")

DEFAULT_POPULATION = "na:0.4,eu:0.3,asia:0.2,sa:0.05,oce:0.05"
#: How long a bot worker gets to stop after SIGTERM before it is killed.
WORKER_STOP_S = 5.0
#: What tells a worker to stop early and send its partial result (the parent's Ctrl-C).
FINISH_SIGNAL = signal.SIGUSR1
DEFAULT_LATENCY = "mix(0.6*lognormal(median=40ms,sigma=0.4), 0.4*lognormal(median=140ms,sigma=0.3))"


@dataclass(frozen=True, slots=True)
class BotRun:
    """Everything one ``arena-bots`` run needs, validated."""

    url: str
    count: int
    duration: float
    latency: str
    jitter_ms: float
    loss: float
    clock_offset: str
    seed: int
    workers: int
    interp_delay: float
    input_rate: float = 30.0  # command packets a second (each with the inputs since the last)
    pop_in_range_m: float = POP_IN_NEAR_M  # pop-ins judged within it, whatever the view
    skill: AimSkill = field(default_factory=AimSkill)
    behaviour: str = "play"
    directory: str = ""  # seat the bots through this arena-directory instead of --server
    population: str = DEFAULT_POPULATION
    record: str = ""  # a folder: every snapshot each bot accepted (arena-chaos torture)
    tls: TlsTrust = field(default_factory=TlsTrust)  # which wss:// servers to believe
    shard: int = 0  # this process runs the bots k with k % shards == shard
    shards: int = 1
    transport: str = "ws"  # "ws" or "udp"
    burst: BurstLoss | None = None  # losses in runs (Gilbert-Elliott), in place of loss
    duplicate: float = 0.0  # (UDP) probability a datagram arrives twice
    light: int = 0  # light players beside the full bots: population indices count..count+light-1

    def population_tag(self) -> dict[str, Any]:
        """Which swarm a part belongs to: the merge refuses parts of different ones."""
        return {"seed": self.seed, "count": self.count, "light": self.light,
                "of": self.shards, "shards": [self.shard]}  # fmt: skip

    # Each node's admin URL (its full /health and /metrics, for the report's server
    # figures) by the host:port players reach it on; a node not named here: n/a.
    admin: tuple[tuple[str, str], ...] = ()

    def admin_url(self, url: str) -> str:
        """The admin URL of the node players reach at ``url`` ("" when not known)."""
        return dict(self.admin).get(urlsplit(url).netloc, "")

    def profile(self) -> LinkProfile:
        return LinkProfile(
            jitter_ms=self.jitter_ms,
            loss=self.loss,
            clock_offset=parse_distribution(self.clock_offset, signed=True, label="clock offset"),
            burst=self.burst,
            duplicate=self.duplicate,
        )

    def swarm_configs(
        self, routed: tuple[list[BotParams], list[Route]] | None = None
    ) -> list[SwarmConfig]:
        """This shard's bots (``k % shards == shard``) split over the workers; bot ``k`` is
        the same bot (link, location, random draws) whatever the split."""
        rtt = parse_distribution(self.latency, label="latency")
        profile = self.profile()
        if routed is None:
            bots = [
                draw_bot(i, seed=self.seed, rtt=rtt, profile=profile)
                for i in range(self.shard, self.count + self.light, self.shards)
            ]
            routes: list[Route] = []
        else:
            bots, routes = routed
        shares = [bots[w :: self.workers] for w in range(self.workers)]
        route_shares = [routes[w :: self.workers] for w in range(self.workers)]
        return [
            SwarmConfig(
                url=self.url,
                bots=tuple(share),
                duration=self.duration,
                seed=self.seed,
                interp_delay=self.interp_delay,
                input_rate=self.input_rate,
                pop_in_range_m=self.pop_in_range_m,
                skill=self.skill,
                behaviour=self.behaviour,
                routes=tuple(route_shares[w]),
                record=self.record,
                tls=self.tls,
                transport=self.transport,
                light=tuple(bot.index >= self.count for bot in share),
            )
            for w, share in enumerate(shares)
            if share
        ]


def _health_url(admin_url: str) -> str:
    parts = urlsplit(admin_url)
    scheme = {"ws": "http", "wss": "https"}.get(parts.scheme, parts.scheme)
    return urlunsplit((scheme, parts.netloc, "/health", "", ""))


def admin_pair(ws_url: str, admin_url: str) -> tuple[str, str]:
    """An entry of :attr:`BotRun.admin`: the node players reach at ``ws_url`` has its admin
    port at ``admin_url``."""
    return urlsplit(ws_url).netloc, admin_url


async def fetch_health(admin_url: str, tls: TlsTrust) -> dict[str, Any] | None:
    """The node's full /health from its admin URL (https: verified as ``tls`` says), or
    None when it cannot be read or no admin URL is known (the report says n/a)."""
    if not admin_url:
        return None
    try:
        async with aiohttp.ClientSession() as session:
            async with session.get(
                _health_url(admin_url), timeout=aiohttp.ClientTimeout(total=5), ssl=tls.context()
            ) as r:
                return await r.json() if r.status == 200 else None
    except (aiohttp.ClientError, TimeoutError, ValueError):
        return None


def _progress(prefix: str, line: str) -> None:
    print(f"{prefix}{line}", file=sys.stderr, flush=True)


async def run_bots(
    run: BotRun,
    progress: bool = True,
    during: Callable[[], Coroutine[Any, Any, list[dict[str, Any]]]] | None = None,
) -> dict[str, Any]:
    """Run the bots and build the report (:func:`run_tally`)."""
    return report_of(await run_tally(run, progress, during))


async def run_tally(
    run: BotRun,
    progress: bool = True,
    during: Callable[[], Coroutine[Any, Any, list[dict[str, Any]]]] | None = None,
) -> Tally:
    """Run the bots (in-process, or over worker processes) and tally what they measured:
    the report's source, and the part a shard writes.

    ``during`` runs beside the bots (the demo kills the primary there) and returns the
    kills it made, for the report's failover timings. Cancelled while the bots play
    (Ctrl-C, SIGTERM), the bots stop at once and the report of what they did is still
    built, marked ``partial``; a second cancel abandons it.
    """
    routed = None
    if run.directory:
        routed = await route_bots(
            directory=run.directory,
            population=run.population,
            count=run.count,
            seed=run.seed,
            profile=run.profile(),
        )
    configs = run.swarm_configs(routed)
    before = await fetch_health(run.admin_url(run.url), run.tls) if not run.directory else None
    began = time.time()
    swarm = Swarm(configs[0]) if len(configs) == 1 else None
    watch = None
    if not run.directory:
        watch = ServerWatch(
            lambda: run.admin_url((swarm.busiest_node() if swarm else None) or run.url), run.tls
        )
    watching = asyncio.create_task(watch.run()) if watch is not None else None
    chaos = asyncio.create_task(during()) if during is not None else None
    try:
        if swarm is not None:
            callback = functools.partial(_progress, "arena-bots: ") if progress else None
            tally = tally_of(await _finish_when_cancelled(swarm.run(callback), swarm.finish))
        else:
            tally = await run_workers(configs, progress)
        kills = await chaos if chaos is not None and not tally.partial else []
    finally:
        for task in (watching, chaos):
            if task is not None and not task.done():
                task.cancel()
        await asyncio.gather(*(t for t in (watching, chaos) if t), return_exceptions=True)
    if tally.partial and chaos is not None and chaos.done() and not chaos.cancelled():
        kills = chaos.result() if chaos.exception() is None else []
    after = None
    # After a failover the region's primary is another node: the one the bots ended on
    # (also after a kill from outside), or the one this process saw take over (the kill
    # names its admin URL).
    ended = tally.group("ended_on")
    ended_on = sorted(ended, key=lambda url: -ended[url])
    survivors = [k["new_primary"] for k in reversed(kills) if k.get("new_primary")]
    admins = [run.admin_url(url) for url in ended_on] + survivors + [run.admin_url(run.url)]
    for url in dict.fromkeys(a for a in admins if a):
        if (after := await fetch_health(url, run.tls)) is not None:
            break
    tally.server = node_account(
        latency_spec=run.latency if not run.directory else f"geography({run.population})",
        server_before=before,
        server_after=after if not run.directory else None,
        kills=kills,
        server=server_figures(watch, began) if watch is not None else None,
        origin=began,
    )
    if routed is not None:
        tally.server["routing"] = routing_figures(routed[1])
    tally.population = run.population_tag()
    return tally


async def _finish_when_cancelled(
    run: Coroutine[Any, Any, SwarmResult], finish: Callable[[], None]
) -> SwarmResult:
    """Await ``run``; when this task is cancelled, ``finish`` it and await its (partial)
    result instead. A second cancel cancels ``run`` too."""
    task = asyncio.ensure_future(run)  # owned here: awaited on every path below
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        finish()
        _uncancel()
        return await task


def _uncancel() -> None:
    """The cancel was taken as "finish now": this task is no longer being cancelled."""
    current = asyncio.current_task()
    if current is not None:
        current.uncancel()


def _worker(config: SwarmConfig, prefix: str | None, reply: Connection) -> None:
    """A worker process: its share of the swarm, its result sent back whole. SIGUSR1
    (the parent's Ctrl-C) ends it early with a partial result."""
    exit_with_parent()  # never outlive arena-bots, even if it is SIGKILLed
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C: the parent decides
    signal.signal(FINISH_SIGNAL, signal.SIG_IGN)  # (until its loop handles it)
    callback = functools.partial(_progress, prefix) if prefix is not None else None
    reply.send(tally_of(run_swarm(config, callback, finish_on=FINISH_SIGNAL)).to_json())
    reply.close()


async def run_workers(configs: list[SwarmConfig], progress: bool) -> Tally:
    """One process per config, their tallies merged (as a merge of shards is). The
    processes are this function's:
    however it ends (a worker's failure, Ctrl-C, SIGTERM) they are stopped before it
    returns: terminated, then killed after a bound."""
    context = multiprocessing.get_context("spawn")
    loop = asyncio.get_running_loop()
    workers = []
    try:
        waits = []
        for w, config in enumerate(configs):
            receive, send = context.Pipe(duplex=False)
            prefix = f"arena-bots[w{w}]: " if progress else None
            process = context.Process(
                target=_worker, args=(config, prefix, send), name=f"arena-bots-w{w}"
            )
            process.start()
            send.close()
            workers.append(process)
            waits.append(_receive(loop, receive, process))
        gathered = asyncio.gather(*waits)
        try:
            results = await asyncio.shield(gathered)
        except asyncio.CancelledError:
            for process in workers:
                if process.is_alive() and process.pid is not None:
                    os.kill(process.pid, FINISH_SIGNAL)
            _uncancel()
            results = await gathered  # a second cancel ends this wait (and the workers)
        tally = Tally()
        for part in results:
            tally.merge(Tally.from_json(part))
        return tally
    finally:
        for process in workers:
            if process.is_alive():
                process.terminate()
        for process in workers:
            process.join(WORKER_STOP_S)
            if process.is_alive():
                process.kill()
                process.join()


async def _receive(
    loop: asyncio.AbstractEventLoop, receive: Connection, process: BaseProcess
) -> dict[str, Any]:
    """The worker's result, read once its pipe is readable (EOF: the worker died)."""
    ready: asyncio.Future[None] = loop.create_future()

    def readable() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(receive.fileno(), readable)
    try:
        await ready
        # The event loop made the pipe non-blocking; a big result arrives in pieces, so
        # it is read blocking, off the loop (the worker is writing it now).
        loop.remove_reader(receive.fileno())
        os.set_blocking(receive.fileno(), True)
        try:
            return cast(dict[str, Any], await asyncio.to_thread(receive.recv))
        except EOFError:
            process.join(WORKER_STOP_S)
            raise RuntimeError(
                f"bot worker {process.name} died (exit code {process.exitcode})"
            ) from None
    finally:
        loop.remove_reader(receive.fileno())
        receive.close()


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="arena-bots",
        description="Spawn load-test bots that play against an Arena node like real clients "
        "(prediction, reconciliation, interpolation) over modelled, latency-distributed links. "
        "Shards of one swarm (--shard, --part) are combined by 'arena-bots merge PART.json...' "
        "(see 'arena-bots merge --help').",
        epilog=HELP_TEXT,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--server",
        default="ws://127.0.0.1:7777/ws",
        help="the node's WebSocket URL (default: %(default)s)",
    )
    parser.add_argument(
        "--server-admin",
        default="",
        metavar="ADMIN_URL",
        help="the --server node's admin URL (arena-server --admin-port, e.g. "
        "http://127.0.0.1:9777): the report reads the node's full /health and /metrics "
        "there; without it the report's server figures are n/a",
    )
    parser.add_argument(
        "--count", type=int, default=40, help="full bots to run: the measuring ones (default: 40)"
    )
    parser.add_argument(
        "--light",
        type=int,
        default=0,
        metavar="N",
        help="also run N light players: they join, move, turn and fire as full bots do on "
        "average (the same input rate, fire rate and weapons) and acknowledge every snapshot "
        "from its head, but decode no players and judge nothing; they load the node as full "
        "bots do at a fraction of the bot process's CPU, and the report counts them apart "
        "(bots.light) (default: 0)",
    )
    parser.add_argument(
        "--duration", type=seconds, default=20.0, help="seconds to play (default: 20)"
    )
    parser.add_argument(
        "--latency",
        default=DEFAULT_LATENCY,
        help="distribution of each bot's base round-trip time (grammar below; "
        "default: a two-continent mix)",
    )
    parser.add_argument(
        "--jitter",
        type=milliseconds,
        default="2ms",
        help="mean per-packet extra one-way delay, at most 60 s (default: 2ms)",
    )
    parser.add_argument(
        "--loss",
        type=float,
        default=0.0,
        help="probability a packet is lost: over WebSocket it needs a TCP retransmission "
        "(one RTO late, holding back those behind it), over UDP it is gone (default: 0)",
    )
    parser.add_argument(
        "--burst-loss",
        default="",
        metavar="P_GB,P_BG[,LOSS_BAD]",
        help="losses in runs instead of --loss (Gilbert-Elliott): after each packet the "
        "link turns bad with P_GB and good again with P_BG, and in the bad state loses "
        "a packet with LOSS_BAD (default 1.0); over WebSocket each loss is a retransmission",
    )
    parser.add_argument(
        "--duplicate",
        type=float,
        default=0.0,
        metavar="P",
        help="over UDP: probability a datagram arrives twice (default: 0)",
    )
    add_transport(parser)
    parser.add_argument(
        "--clock-offset",
        default="uniform(-200ms,200ms)",
        help="distribution of each bot's clock error (default: %(default)s)",
    )
    parser.add_argument(
        "--interp-delay",
        type=milliseconds,
        default="100ms",
        help="how far in the past bots render others: at least two of the node's snapshot "
        "intervals (its welcome's snapshot_rate; 67 ms at the default 30 Hz) (default: 100ms)",
    )
    parser.add_argument(
        "--input-rate",
        type=float,
        default=30.0,
        metavar="HZ",
        help="command packets each bot sends a second, each with every input since the "
        "last (one input a tick; Source's cl_cmdrate); rounded to whole ticks, at most the "
        "tick rate (default: 30)",
    )
    parser.add_argument(
        "--pop-in-range-m",
        type=float,
        default=POP_IN_NEAR_M,
        metavar="M",
        help="fog of war's pop-ins are judged for enemies within this distance: inside the "
        "node's default interest radius, where distance culling cannot explain an absence. "
        "With no more players "
        "than the node's nearest rule (12), or a node run with --interest off, every absence "
        "is the fog's: give the map's size to judge every appearance",
    )
    parser.add_argument(
        "--behaviour",
        default="play",
        choices=BEHAVIOURS,
        help="play (wander, strafe, take cover, shoot); still or pace "
        "(targets that never shoot); marksman (stands and shoots)",
    )
    parser.add_argument(
        "--aim-error-deg",
        type=float,
        default=1.0,
        help="standard deviation of the bots' aim error (default: 1.0)",
    )
    parser.add_argument(
        "--reaction-ms",
        type=milliseconds,
        default=250.0,
        help="how long a bot sees an enemy before it fires (default: 250)",
    )
    parser.add_argument(
        "--fire-rate",
        type=float,
        default=3.0,
        help="mean shots per second while a target is in sight (default: 3)",
    )
    parser.add_argument(
        "--launcher-share",
        type=float,
        default=0.1,
        help="share of shots fired with the projectile weapon (default: 0.1)",
    )
    parser.add_argument("--seed", type=int, default=1, help="population seed (default: 1)")
    parser.add_argument(
        "--workers", type=int, default=1, help="processes to spread the bots over (default: 1)"
    )
    parser.add_argument(
        "--directory",
        default="",
        metavar="URL[,URL...]",
        help="seat the bots through this arena-directory (each measures every "
        "region's probe and asks for a seat) instead of joining --server; several "
        "comma-separated directories sharing one registry: a failed seat request is "
        "retried once on the next",
    )
    parser.add_argument(
        "--population",
        default=DEFAULT_POPULATION,
        help="with --directory: the bots' home locations (default: %(default)s)",
    )
    parser.add_argument(
        "--shard",
        default="0/1",
        metavar="I/N",
        help="run share I of N of the population (the bots k with k %% N == I; the same "
        "--seed gives each bot the same link, location and behaviour whichever shard runs "
        "it); write each shard's --part and combine them with 'arena-bots merge' "
        "(default: %(default)s, the whole swarm)",
    )
    parser.add_argument(
        "--part",
        default="",
        metavar="PATH",
        help="also write this run's mergeable tally (counts, sketches, fixed histograms, "
        "validity) here, for 'arena-bots merge'",
    )
    parser.add_argument("--json", metavar="PATH", help="also write the report as JSON here")
    parser.add_argument(
        "--report-dir",
        default="",
        metavar="DIR",
        help="also write report.html (self-contained: the summary and every picture), "
        "the pictures as PNGs and report.json into this folder (created if missing)",
    )
    add_replay_url(parser)
    add_fail_if(parser)
    parser.add_argument(
        "--record",
        default="",
        metavar="DIR",
        help="write, per bot, a JSON line for every snapshot it accepted (epoch, tick, world "
        "hash, ack) into this folder: what arena-chaos torture audits",
    )
    parser.add_argument(
        "--ca",
        default="",
        metavar="PATH",
        help="for a wss:// server: also trust this PEM CA (or self-signed certificate)",
    )
    parser.add_argument(
        "--insecure",
        action="store_true",
        help="for a wss:// server: accept any certificate (tests only: no protection "
        "against a man in the middle)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    parser.add_argument(
        "--allow-invalid",
        action="store_true",
        help="exit 0 on a run the report marks invalid (its figures are no measurement: "
        "the bot process fell behind, bots reconnected without a failover); by default "
        "such a run exits 1",
    )
    return parser


def add_transport(parser: argparse.ArgumentParser) -> None:
    """``--transport``, as arena-bots and arena-demo both take it."""
    parser.add_argument(
        "--transport",
        default="ws",
        choices=TRANSPORTS,
        help="how the bots reach the node: ws (WebSocket, TCP) or udp (a connect token "
        "from the node's /connect, then sealed datagrams: snapshots unreliable, inputs "
        "repeated until acknowledged) (default: %(default)s)",
    )


def parse_burst_loss(text: str) -> BurstLoss | None:
    """``P_GB,P_BG[,LOSS_BAD]`` (empty: none); ValueError with one line otherwise."""
    if not text:
        return None
    fields = text.split(",")
    try:
        numbers = [float(f) for f in fields]
        if len(numbers) not in (2, 3):
            raise ValueError
        return BurstLoss(*numbers)
    except (TypeError, ValueError) as error:
        why = f": {error}" if str(error) else ""
        raise ValueError(
            f"--burst-loss must be P_GB,P_BG[,LOSS_BAD], probabilities, got {text!r}{why}"
        ) from None


def add_fail_if(parser: argparse.ArgumentParser) -> None:
    """``--fail-if``, as arena-bots and arena-demo both take it."""
    parser.add_argument(
        "--fail-if",
        action="append",
        default=[],
        metavar="EXPR",
        help="exit 1 when the report's figure holds, e.g. 'shots.fair_agreement<0.99' or "
        "'ticks.p99_ms>16.7' (a dotted path into the JSON report, <, <=, >, >=, == or !=, "
        "a number; repeat for more)",
    )


def parse_thresholds(expressions: list[str]) -> list[Threshold]:
    """The ``--fail-if`` thresholds, each checked against the report's schema now
    (ThresholdError, a ValueError, with one line)."""
    thresholds = [parse_threshold(text) for text in expressions]
    skeleton = build_report(
        SwarmResult(), latency_spec="", workers=1, server_before=None, server_after=None
    )
    for threshold in thresholds:
        check_known(skeleton, threshold.path)
    return thresholds


def parse_run(args: argparse.Namespace) -> BotRun:
    """Validate the command line; raises ValueError with a one-line message."""
    if args.count < 0 or args.light < 0 or args.count + args.light < 1:
        raise ValueError("--count and --light must be >= 0, with at least one bot in all")
    if args.light and args.directory:
        raise ValueError("--light with --directory is not supported (light players join --server)")
    if not (math.isfinite(args.duration) and args.duration > 0):
        raise ValueError("--duration must be a positive number of seconds")
    if not 1 <= args.workers <= 64:
        raise ValueError("--workers must be between 1 and 64")
    for flag in ("aim_error_deg", "reaction_ms", "fire_rate", "launcher_share"):
        if not math.isfinite(getattr(args, flag)):
            raise ValueError(f"--{flag.replace('_', '-')} must be a finite number")
    if not (math.isfinite(args.pop_in_range_m) and args.pop_in_range_m >= 0):
        raise ValueError("--pop-in-range-m must be a finite distance >= 0")
    if not (math.isfinite(args.input_rate) and args.input_rate > 0):
        raise ValueError("--input-rate must be a positive number of packets a second")
    if not 0.0 <= args.loss <= 1.0:
        raise ValueError("--loss is a probability between 0 and 1")
    burst = parse_burst_loss(args.burst_loss)
    if burst is not None and args.loss > 0:
        raise ValueError("give --loss or --burst-loss, not both")
    if not 0.0 <= args.duplicate <= 1.0:
        raise ValueError("--duplicate is a probability between 0 and 1")
    if args.duplicate > 0 and args.transport != "udp":
        raise ValueError("--duplicate needs --transport udp (TCP never delivers twice)")
    if urlsplit(args.server).scheme not in ("ws", "wss"):
        raise ValueError(f"--server must be a ws:// or wss:// URL, got {args.server!r}")
    if args.server_admin and urlsplit(args.server_admin).scheme not in ("http", "https"):
        raise ValueError(f"--server-admin must be an http:// or https:// URL, got "
                         f"{args.server_admin!r}")  # fmt: skip
    if args.directory:
        Directories(args.directory)  # each URL checked, in one line
    shard, shards = parse_shard(args.shard)
    if shards > 1 and args.directory:
        raise ValueError(
            "--shard with --directory is not supported (each shard would seat the whole population)"
        )
    if shard >= args.count + args.light:
        raise ValueError(f"--shard {args.shard}: no bot of the {args.count + args.light} is in it")
    run = BotRun(
        url=args.server,
        count=args.count,
        duration=args.duration,
        latency=args.latency,
        jitter_ms=check_duration(args.jitter, "--jitter", "ms"),
        loss=args.loss,
        clock_offset=args.clock_offset,
        seed=args.seed,
        workers=min(args.workers, len(range(shard, args.count + args.light, shards))),
        interp_delay=check_duration(args.interp_delay, "--interp-delay", "ms") / 1000.0,
        input_rate=args.input_rate,
        pop_in_range_m=args.pop_in_range_m,
        skill=AimSkill(
            error_deg=args.aim_error_deg,
            reaction_s=args.reaction_ms / 1000.0,
            fire_rate_hz=args.fire_rate,
            launcher_share=args.launcher_share,
        ),
        behaviour=args.behaviour,
        directory=args.directory,
        population=args.population,
        record=args.record,
        tls=TlsTrust(args.ca, args.insecure),
        shard=shard,
        shards=shards,
        transport=args.transport,
        burst=burst,
        duplicate=args.duplicate,
        light=args.light,
        admin=(admin_pair(args.server, args.server_admin),) if args.server_admin else (),
    )
    try:
        run.tls.context()
    except (OSError, ssl.SSLError) as error:
        raise ValueError(f"--ca {args.ca}: not a readable PEM certificate ({error})") from None
    if args.record and not Path(args.record).is_dir():
        raise ValueError(f"--record {args.record}: not a folder (create it first)")
    parse_population(run.population)
    run.swarm_configs()  # parses the distributions now, so errors surface before connecting
    check_writable(args.json, "--json")
    check_writable(args.part, "--part")
    return run


def parse_shard(text: str) -> tuple[int, int]:
    """``I/N`` with 0 <= I < N; ValueError with one line otherwise."""
    index, slash, of = text.partition("/")
    try:
        shard, shards = int(index), int(of)
    except ValueError:
        shard = shards = -1
    if not slash or not 0 <= shard < shards:
        raise ValueError(f"--shard must be I/N with 0 <= I < N, got {text!r}")
    return shard, shards


def check_report_dir(path: str, flag: str = "--report-dir") -> None:
    """A report folder that cannot be made or written fails before the run."""
    if not path:
        return
    folder = Path(path)
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"{flag} {path}: not a folder")
    existing = next(p for p in (folder, *folder.resolve().parents) if p.exists())
    if not os.access(existing, os.W_OK):
        raise ValueError(f"{flag} {path}: {existing} is not writable")


def check_writable(path: str | None, flag: str) -> None:
    """A report path that cannot be written fails before the run, not after it."""
    if not path:
        return
    folder = Path(path).resolve().parent
    if not folder.is_dir():
        raise ValueError(f"{flag} {path}: the folder {folder} does not exist")
    if Path(path).is_dir():
        raise ValueError(f"{flag} {path}: is a folder; name a file")
    if not os.access(folder, os.W_OK) or (Path(path).exists() and not os.access(path, os.W_OK)):
        raise ValueError(f"{flag} {path}: not writable")


def write_report(report: dict[str, Any], path: str | None) -> None:
    if path:
        Path(path).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


def verdict(report: dict[str, Any], thresholds: list[Threshold], prog: str) -> bool:
    """Print why the run is invalid and which thresholds it breached (stderr, a line
    each); True when no threshold was breached."""
    for reason in report["invalid_reasons"]:
        print(f"{prog}: WARNING: invalid run: {reason}", file=sys.stderr)
    breached = breaches(report, thresholds)
    for line in breached:
        print(f"{prog}: {line}", file=sys.stderr)
    return not breached


def add_replay_url(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--replay-url",
        default="",
        metavar="BASE",
        help="in report.html, link each disputed shot to its place in the replay served by "
        "'arena-replay DIR --serve' at BASE (e.g. http://127.0.0.1:8780)",
    )


def publish(
    report: dict[str, Any], json_path: str | None, report_dir: str, prog: str, replay_url: str = ""
) -> int:
    """Print the summary and write the report where asked: 0, or 1 when it cannot be."""
    summary = format_summary(report)
    print(summary)
    try:
        write_report(report, json_path)
        if report_dir:
            folder = Path(report_dir)
            folder.mkdir(parents=True, exist_ok=True)
            write_report(report, str(folder / "report.json"))
            write_html_report(report, summary, folder / "report.html", folder, replay_url)
    except OSError as error:
        print(f"{prog}: cannot write the report: {error}", file=sys.stderr)
        return 1
    return 0


def build_merge_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="arena-bots merge",
        description="Combine the parts written by the shards of one swarm (arena-bots "
        "--shard I/N --part PATH) into the report one process running the whole swarm "
        "would have written: counts summed, rates per bot, percentiles from the merged "
        "sketches, any invalid part making the run invalid with its reasons.",
    )
    parser.add_argument("parts", nargs="+", metavar="PART.json", help="the shards' parts")
    parser.add_argument("--json", metavar="PATH", help="write the merged report as JSON here")
    parser.add_argument(
        "--report-dir",
        default="",
        metavar="DIR",
        help="also write report.html, the pictures and report.json of the merged report "
        "into this folder (created if missing)",
    )
    add_replay_url(parser)
    add_fail_if(parser)
    return parser


def merge_parts(paths: list[str]) -> Tally:
    """The parts' tallies merged, shard by shard; PartError naming the file otherwise."""
    tallies = []
    for path in paths:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as error:
            raise PartError(f"{path}: cannot be read ({error})") from None
        except json.JSONDecodeError as error:
            raise PartError(f"{path}: not JSON ({error})") from None
        try:
            tally = Tally.from_json(data)
        except PartError as error:
            raise PartError(f"{path}: {error}") from None
        try:
            report_of(tally)  # what the report reads of it (events, the node's account)
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            raise PartError(
                f"{path}: a malformed record ({type(error).__name__}: {error})"
            ) from None
        tallies.append(tally)
    tallies.sort(key=lambda t: t.population.get("shards", [0]) or [0])
    merged = Tally()
    for path, tally in zip(paths, tallies, strict=True):
        try:
            merged.merge(tally)
        except PartError as error:
            raise PartError(f"{path}: {error}") from None
    of = int(merged.population.get("of", 1) or 1)
    missing = sorted(set(range(of)) - set(merged.population.get("shards", [])))
    if missing:
        merged.invalid_reasons.append(
            f"shard(s) {', '.join(map(str, missing))} of {of} missing from the merge: the "
            "report covers part of the population"
        )
    return merged


def merge_main(argv: list[str]) -> int:
    """``arena-bots merge``: exit 0, 1 (a threshold breached, the run invalid is only
    warned about, as for a run), or 2 (a part that cannot be merged)."""
    args = build_merge_parser().parse_args(argv)
    try:
        thresholds = parse_thresholds(args.fail_if)
        check_report_dir(args.report_dir)
        check_writable(args.json, "--json")
        tally = merge_parts(args.parts)
    except ValueError as error:  # PartError and ThresholdError are ValueErrors
        print(f"arena-bots merge: {error}", file=sys.stderr)
        return 2
    report = report_of(tally)
    failed = publish(report, args.json, args.report_dir, "arena-bots merge", args.replay_url)
    if failed:
        return failed
    passed = verdict(report, thresholds, "arena-bots merge")
    return 0 if passed else 1


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["merge"]:
        return merge_main(argv[1:])
    sigterm_as_interrupt()  # SIGTERM stops the workers like Ctrl-C does
    exit_with_parent_if_asked()  # a launcher's child (a bench): never outlive it
    args = build_parser().parse_args(argv)
    start = run_start(sys.argv[1:] if argv is None else list(argv), args.seed)
    try:
        run = parse_run(args)
        thresholds = parse_thresholds(args.fail_if)
        check_report_dir(args.report_dir)
    except (LatencySpecError, GeoError, ValueError) as error:
        print(f"arena-bots: {error}", file=sys.stderr)
        return 2
    try:
        tally = eventloop.run(
            run_tally(replace(run), progress=not args.quiet),
            cancel_on=(signal.SIGINT, signal.SIGTERM),
        )
    except DirectoryError as error:
        print(f"arena-bots: {error}", file=sys.stderr)
        return 1
    except RuntimeError as error:  # a worker died
        print(f"arena-bots: {error}", file=sys.stderr)
        return 1
    except (KeyboardInterrupt, asyncio.CancelledError):
        print("arena-bots: interrupted", file=sys.stderr)
        return 130
    report = report_of(tally)
    tally.invalid_reasons = list(report["invalid_reasons"])  # what this part judged
    report["provenance"] = provenance(start)
    try:
        write_report(tally.to_json(), args.part)
    except OSError as error:
        print(f"arena-bots: cannot write the part: {error}", file=sys.stderr)
        return 1
    failed = publish(report, args.json, args.report_dir, "arena-bots", args.replay_url)
    if failed:
        return failed
    passed = verdict(report, thresholds, "arena-bots")
    status, why = exit_status(report, passed, args.allow_invalid)
    if why:
        print(f"arena-bots: {why.format(url=run.url)}", file=sys.stderr)
    return status


def exit_status(report: dict[str, Any], passed: bool, allow_invalid: bool) -> tuple[int, str]:
    """arena-bots' exit status for a finished run, and the line that says why ("" when
    nothing is to be said; ``{url}`` stands for the server): 130 interrupted, 1 when no bot
    joined, the run is invalid (unless ``allow_invalid``) or a ``--fail-if`` breached."""
    if report["partial"]:
        return 130, "interrupted; the report covers the part that ran"
    if report["bots"]["connected"] + report["bots"]["light"]["connected"] == 0:
        return 1, "no bot could join {url}"
    if not report["valid"] and not allow_invalid:
        return 1, "invalid run, its figures are no measurement (--allow-invalid: exit 0 anyway)"
    return (0, "") if passed else (1, "")


if __name__ == "__main__":
    sys.exit(main())
