"""``arena-server``: run one regional node until SIGTERM or Ctrl-C."""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import signal
import socket
import ssl
import sys
from dataclasses import replace
from typing import get_args

from aiohttp import web

from server import limits
from server.coordination.base import (
    CoordinatorError,
    CoordinatorUnavailable,
    parse_coordinator_spec,
)
from server.coordination.etcd_config import DEFAULT_LEASE_TTL
from server.coordination.net.etcd_options import (
    add_etcd_arguments,
    etcd_access_from_args,
    etcd_options_given,
)
from server.lifecycle import STOPPING_STATUS, sdk_url_from_env, systemd_status
from server.logs import (
    EventLogger,
    add_log_arguments,
    announce,
    configure_logging,
    set_context,
)
from server.net import agones, sd_notify, tls
from server.net.app import NODE, NODE_TASK, NodeConfig, create_admin_app, create_app
from server.net.warmup import WarmUpError, warm_up_kernels
from server.replication.auth import SECRET_ENV, load_secret
from server.sim.hitreg.backend import (
    BackendName,
    BackendUnavailable,
    check_backend,
    make_validator,
)
from server.sim.interest import InterestConfig
from server.sim.lagcomp import LagCompensation
from shared import eventloop, jitcache
from shared.arena_map import MapError, default_map, load_map
from shared.commandline import OneLineParser, milliseconds, seconds
from shared.directory import directory_urls
from shared.lifetime import exit_with_parent_if_asked

__all__ = ["main"]

log = EventLogger("arena.server")


def port_number(text: str) -> int:
    """A TCP port for argparse: 0 (any free one) to 65535."""
    try:
        return limits.PORT.check(int(text))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a port (0-65535; 0 picks a free one)"
        ) from None


#: ``--udp-port off``: no UDP endpoint.
UDP_OFF = -1


def udp_port_number(text: str) -> int:
    """A UDP port for argparse: 0 (any free one) to 65535, or ``off`` (:data:`UDP_OFF`)."""
    if text == "off":
        return UDP_OFF
    try:
        return limits.PORT.check(int(text))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a UDP port (0-65535; 0 picks a free one; off: no UDP)"
        ) from None


def bind_udp(host: str, wanted: int | None, tcp_port: int) -> socket.socket | None:
    """The node's UDP socket: on ``wanted`` (None: the TCP port's number, or a free port if
    that number is taken and the TCP port was picked freely too); None for ``off``."""
    if wanted == UDP_OFF:
        return None
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_DGRAM)
    try:
        try:
            sock.bind((host, tcp_port if wanted is None else wanted))
        except OSError:
            if wanted is not None:
                raise
            sock.bind((host, 0))
    except OSError:
        sock.close()
        raise
    return sock


def admin_port(text: str) -> int | None:
    """``--admin-port``: a TCP port (0 picks a free one) or ``off`` (None: no admin port)."""
    if text.strip().lower() == "off":
        return None
    try:
        return limits.PORT.check(int(text))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a port (0-65535; 0 picks a free one) or 'off'"
        ) from None


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="arena-server",
        description="Run one authoritative Arena node: a fixed-tick match that players join "
        "over WebSocket (ws://HOST:PORT/ws), with a readiness /health for probes; the full "
        "/health (JSON), /metrics (Prometheus) and /view are on --admin-port.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--region", default="local", help="region name reported to clients")
    parser.add_argument("--node-id", default="node-1", help="this node's name in logs and /health")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument(
        "--port",
        type=port_number,
        default=7777,
        help="TCP port; 0 picks a free one (printed on start)",
    )
    parser.add_argument(
        "--udp-port",
        type=udp_port_number,
        default=None,
        metavar="N|off",
        help="UDP port of the players' datagram transport (connect tokens from POST /connect "
        "on the TCP port); default: the TCP port's number (with --port 0 a free one, printed "
        "on start as udp=); off: WebSocket only",
    )
    parser.add_argument(
        "--admin-port",
        type=admin_port,
        default="off",  # (argparse passes a string default through the type: None)
        metavar="PORT|off",
        help="the operators' port: the full /health, /metrics and /view (the player port "
        "serves none of them); 0 picks a free one (printed on start)",
    )
    parser.add_argument(
        "--admin-host",
        default="127.0.0.1",
        help="address the admin port listens on (keep it where only operators reach it)",
    )
    parser.add_argument(
        "--tick-rate", type=int, default=60, help="simulation ticks per second (20-128)"
    )
    parser.add_argument(
        "--snapshot-rate",
        type=int,
        default=None,
        metavar="HZ",
        help="snapshots a second sent to each player, a divisor of the tick rate (e.g. 60, "
        "30, 20 at 60 Hz; default: 30 where it divides the tick rate, else the tick rate); "
        "every tick is still simulated, judged and replicated, and a snapshot carries the "
        "events of the ticks since the last one",
    )
    defaults = InterestConfig()
    parser.add_argument(
        "--interest",
        choices=("on", "off"),
        default="on",
        help="interest management: each player is sent, every snapshot, the players near it, "
        "in its view cone or in a fight with it, and a few others by priority (off: everyone, "
        "every snapshot, less what --fog withholds); what is simulated and judged is the same "
        "either way",
    )
    parser.add_argument(
        "--interest-near-m",
        type=float,
        default=defaults.near_m,
        metavar="M",
        help="players within this distance are always sent",
    )
    parser.add_argument(
        "--interest-view-m",
        type=float,
        default=defaults.view_m,
        metavar="M",
        help=f"players in the view cone (+-{defaults.view_half_angle_deg:g} degrees of the aim) "
        "within this distance are always sent",
    )
    parser.add_argument(
        "--interest-background",
        type=int,
        default=defaults.background,
        metavar="N",
        help="players outside a player's interest sent to it per snapshot, by priority "
        "(nearer and longer unsent first)",
    )
    parser.add_argument(
        "--fog",
        choices=("on", "off"),
        default="on" if defaults.fog else "off",
        help="fog of war: of the players interest management selects, an enemy is sent "
        "only while the player may see him within its round trip, interpolation delay, a "
        "snapshot interval and the peek allowance (players in a fight are always sent); "
        "off: interest management alone. What is simulated and judged is the same either way",
    )
    parser.add_argument(
        "--fog-peek-ms",
        type=milliseconds,
        default=defaults.fog_peek_s * 1000.0,
        metavar="MS",
        help="fog of war's allowance added to each player's margin, 0-1000 (covers jitter, "
        "the input queue, clock error)",
    )
    parser.add_argument(
        "--max-players", type=int, default=300, help="seats in the match; joins beyond are refused"
    )
    parser.add_argument(
        "--matches",
        type=int,
        default=1,
        help="matches this node hosts, all run by one tick; a full match opens the next",
    )
    parser.add_argument(
        "--history-seconds",
        type=seconds,
        default=1.0,
        help="how much snapshot history the node keeps for lag compensation",
    )
    parser.add_argument(
        "--map", default=None, help="map JSON file (default: the embedded courtyard)"
    )
    parser.add_argument(
        "--hitreg-backend",
        default="auto",
        choices=get_args(BackendName),
        help="where shots are judged: auto takes cuda when a GPU is present and its kernels "
        "compile, else cpu",
    )
    parser.add_argument(
        "--max-rewind-ms",
        type=milliseconds,
        default=200.0,
        help="lag compensation never rewinds further back than this",
    )
    parser.add_argument(
        "--max-interp-ms",
        type=milliseconds,
        default=100.0,
        help="the most interpolation delay a client is granted (and so judged by): a client "
        "asking for more renders, and is judged, this far behind",
    )
    parser.add_argument(
        "--trade-window-ms",
        type=milliseconds,
        default=0.0,
        help="shots a player saw up to this long after its own death still count",
    )
    failover = parser.add_argument_group("failover")
    failover.add_argument(
        "--role",
        default="primary",
        choices=["primary", "standby"],
        help="start as the region's primary, or as a standby that follows one",
    )
    failover.add_argument(
        "--primary",
        default="",
        metavar="URL",
        help="a standby's primary, e.g. http://127.0.0.1:7777",
    )
    failover.add_argument(
        "--peer",
        action="append",
        default=[],
        metavar="URL",
        help="another node of the region (repeat); players are told of them",
    )
    failover.add_argument(
        "--public-url",
        default="",
        metavar="URL",
        help="this node's base URL for peers (default: http://HOST:PORT)",
    )
    failover.add_argument(
        "--cluster-secret",
        default=None,
        help="shared secret of the region's nodes (default: "
        "$ARENA_CLUSTER_SECRET; a lone node without one makes its own)",
    )
    failover.add_argument(
        "--coordinator",
        default="static",
        help="who decides leadership: static, or etcd://HOST:PORT[,HOST:PORT...] (the "
        "members of an etcd cluster, tried in turn; etcds:// for TLS; see the etcd options)",
    )
    failover.add_argument(
        "--etcd-lease-ttl",
        type=seconds,
        default=DEFAULT_LEASE_TTL,
        metavar="S",
        help="seconds the leader's etcd lease outlives its last keep-alive; with several etcd "
        "members use 5 or more, so that the lease outlasts the election that follows the "
        "loss of etcd's own raft leader (1-2 s with etcd's default timings)",
    )
    failover.add_argument(
        "--replication",
        default="sync",
        choices=["sync", "async"],
        help="sync: players see a tick only once every live standby holds "
        "it; async: no waiting (an acknowledged tick can be lost)",
    )
    failover.add_argument(
        "--directory",
        default="",
        metavar="URL[,URL...]",
        help="heartbeat to this arena-directory and admit players with its seat reservations; "
        "several comma-separated directories sharing one registry (arena-directory "
        "--registry etcd://...): when one fails, the beats go to the next",
    )
    failover.add_argument(
        "--failover-timeout-ms",
        type=milliseconds,
        default=200.0,
        help="a standby declares a primary silent this long dead",
    )
    failover.add_argument(
        "--ack-timeout-ms",
        type=milliseconds,
        default=100.0,
        help="a standby of the commit set slower than this to acknowledge a tick is told it "
        "is out of sync; the tick waits until it has answered or its link ended (below 3/4 "
        "of --failover-timeout-ms, the primary's lease)",
    )
    failover.add_argument(
        "--min-standbys",
        type=int,
        default=0,
        help="show no tick while fewer standbys than this hold it (0: a primary whose "
        "standbys are gone goes on alone, degraded, as /health says; 1: it stops instead)",
    )
    failover.add_argument(
        "--state-dir",
        default=os.path.join(
            os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state"), "arena"
        ),
        metavar="DIR",
        help="where a node keeps the epochs it used, so that a restart never repeats one "
        "(default: %(default)s; systemd: StateDirectory=)",
    )
    failover.add_argument(
        "--seat-grace-s",
        type=seconds,
        default=30.0,
        help="how long a seat waits for its player after the connection dropped or the "
        "node took over: the player's token resumes it here or on whichever node leads "
        "then (default: 30; 0 frees it at once)",
    )
    failover.add_argument(
        "--token-ttl-s",
        type=seconds,
        default=600.0,
        help="how long a session token proves its seat: a dropped player's token must outlive "
        "--seat-grace-s (more than twice it, 60 to 86400); it is renewed while the player "
        "stays connected (default: 600)",
    )
    failover.add_argument(
        "--journal",
        default="",
        metavar="PATH",
        help="write a JSON line for every tick published and every promotion (what "
        "arena-chaos torture audits)",
    )
    failover.add_argument(
        "--record",
        default="",
        metavar="DIR",
        help="write the match log here: configuration, seat changes, every tick's inputs, "
        "shots and world hash, in checksummed compressed blocks (arena-replay DIR replays it; "
        "a standby logs the ticks it receives; default: none)",
    )
    failover.add_argument(
        "--record-max-mb",
        type=float,
        default=64.0,
        metavar="MB",
        help="start a new match-log file once one reaches this size (default: 64)",
    )
    failover.add_argument(
        "--checkpoint-dir",
        default="",
        metavar="DIR",
        help="the primary writes the match here (atomically) every --checkpoint-interval "
        "seconds; a primary that starts when every node of its region has died resumes the "
        "newest one at a new epoch, seats kept for their players (default: none)",
    )
    failover.add_argument(
        "--checkpoint-interval",
        type=seconds,
        default=1.0,
        metavar="SECONDS",
        help="seconds between checkpoints: the ticks a total loss costs (default: 1)",
    )
    admission = parser.add_argument_group("admission")
    admission.add_argument(
        "--idle-kick-s",
        type=seconds,
        default=120.0,
        metavar="SECONDS",
        help="a seated player that sends no input for this long is told (error idle_kick) "
        "and its seat is freed at once (0: never)",
    )
    admission.add_argument(
        "--max-seats-per-address",
        type=int,
        default=0,
        metavar="N",
        help="refuse a join (error address_limit) from a peer address that already holds N "
        "seats, connected or waiting out --seat-grace-s (0: no limit; the address is the "
        "TCP peer's, so behind a proxy every player shares the proxy's)",
    )
    admission.add_argument(
        "--offender-holdoff-s",
        type=seconds,
        default=0.0,
        metavar="SECONDS",
        help="a source address whose connection ended in offences (closed for them, or a "
        "bad first frame) waits this long before its next WebSocket upgrade is served "
        "(HTTP 429 with Retry-After meanwhile), doubled with each further such end up to "
        "60 s (0: off; keep it off for load tests that run every bot from one address)",
    )
    admission.add_argument(
        "--handshake-timeout-s",
        type=seconds,
        default=5.0,
        metavar="SECONDS",
        help="close a connection that has not sent a whole HTTP request head (the WebSocket "
        "upgrade) this long after it opened or after its last response",
    )
    parser.add_argument(
        "--view-rate",
        type=float,
        default=10.0,
        metavar="HZ",
        help="frames a second of the live view at /view on the admin port (0: no /view; it "
        "shows every player's position, so it is never on the player port)",
    )
    admission.add_argument(
        "--open-join",
        action="store_true",
        help="with --directory: also seat players who join without the directory's seat "
        "reservation (otherwise refused, error reservation_required)",
    )
    secure = parser.add_argument_group("tls")
    secure.add_argument(
        "--tls-cert",
        default="",
        metavar="PATH",
        help="listen with TLS (https://, wss://) with this PEM certificate (chain); needs "
        "--tls-key; the public URL then defaults to https://HOST:PORT",
    )
    secure.add_argument("--tls-key", default="", metavar="PATH", help="the certificate's PEM key")
    secure.add_argument(
        "--tls-ca",
        default="",
        metavar="PATH",
        help="a PEM CA (or self-signed certificate) this node's connections to its peers "
        "trust besides the system's: a standby's link to an https:// primary, say",
    )
    platform = parser.add_argument_group("platform (systemd's Type=notify needs no flag)")
    platform.add_argument(
        "--agones",
        action="store_true",
        help="run as an Agones GameServer: speak the SDK (REST) to its sidecar: Ready once "
        "warm and the role decided, Health while the tick loop runs, labels region, role "
        "and epoch, Allocate when the match starts, Shutdown when it ends and on SIGTERM "
        "(docs/agones.md)",
    )
    platform.add_argument(
        "--agones-url",
        default=None,
        metavar="URL",
        help="with --agones: the SDK server's REST address (default: "
        "http://localhost:$AGONES_SDK_HTTP_PORT, which Agones sets, else "
        "http://localhost:9358)",
    )
    add_etcd_arguments(parser)
    add_log_arguments(parser)
    parser.add_argument(
        "--warm-cache",
        action="store_true",
        help="compile every kernel into numba's cache (NUMBA_CACHE_DIR, default "
        "~/.cache/arena/numba) and exit: what the install step runs, so a node starts in "
        "seconds",
    )
    return parser


async def _serve(
    config: NodeConfig,
    host: str,
    port: int,
    listener: ssl.SSLContext | None = None,
    udp_port: int | None = None,
    admin: tuple[str, int] | None = None,
) -> int:
    # Bind first, so that a node on port 0 knows its own URL before it campaigns; serve
    # /live and /health (503) during the warm-up, and say "listening" only once ready.
    sock = socket.create_server((host, port))
    try:
        admin_sock = None if admin is None else socket.create_server(admin)
    except OSError as error:
        sock.close()
        where = f"{admin[0]}:{admin[1]}" if admin else "?"
        raise AdminPortError(f"cannot listen on {where} (--admin-port): {error.strerror}") from None
    bound = sock.getsockname()[1]
    try:
        datagrams = bind_udp(host, udp_port, bound)
    except OSError:
        sock.close()
        if admin_sock is not None:
            admin_sock.close()
        raise
    secure = "s" if listener is not None else ""  # TLS: https:// and wss://
    if not config.public_url:
        config = replace(config, public_url=f"http{secure}://{host}:{bound}")
    app = create_app(config)
    node = app[NODE]
    udp = "off" if datagrams is None else str(node.open_udp(datagrams).port)
    if config.agones_url:  # the platform's view of the node: Agones' SDK, systemd's socket
        app.cleanup_ctx.append(agones.lifecycle_context(node))
    if systemd := sd_notify.status_context(node.platform_view, lambda: node.log_fields):
        app.cleanup_ctx.append(systemd)
    runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=2.0)
    await runner.setup()
    await web.SockSite(runner, sock, ssl_context=listener).start()
    admin_runner, admin_fields = None, {}
    if admin is not None and admin_sock is not None:
        admin_runner = web.AppRunner(create_admin_app(node), handle_signals=False)
        await admin_runner.setup()
        await web.SockSite(admin_runner, admin_sock, ssl_context=listener).start()
        admin_fields["admin"] = f"http{secure}://{admin[0]}:{admin_sock.getsockname()[1]}"
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    set_context(lambda: node.log_fields)  # this process is this node: every line says so
    stopping = asyncio.create_task(stop.wait())
    ready = asyncio.create_task(node.became_ready.wait())
    try:
        await asyncio.wait([stopping, ready, app[NODE_TASK]], return_when=asyncio.FIRST_COMPLETED)
        if ready.done() and not app[NODE_TASK].done():
            url = f"ws{secure}://{host}:{bound}/ws"
            announce("listening", url=url, udp=udp, **admin_fields, **node.log_fields)
            sd_notify.notify("READY=1", f"STATUS={systemd_status(node.platform_view())}")
            await asyncio.wait([stopping, app[NODE_TASK]], return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
        ready.cancel()
        sd_notify.notify("STOPPING=1", f"STATUS={STOPPING_STATUS}")
        announce("stopping", **node.log_fields)
        failed = app[NODE_TASK].done() and not app[NODE_TASK].cancelled()
        problem = app[NODE_TASK].exception() if failed else None
        if admin_runner is not None:
            await admin_runner.cleanup()
        await runner.cleanup()
    if problem is not None:
        print(f"arena-server: {describe_failure(problem)}", file=sys.stderr)
        return 1
    return 0


class AdminPortError(OSError):
    """The admin port could not be bound (its own line: the player port was fine)."""


def describe_failure(problem: BaseException) -> str:
    """One line for the reason the node stopped on its own."""
    if isinstance(problem, CoordinatorUnavailable):
        return f"the coordinator is unreachable: {problem}"
    if isinstance(problem, WarmUpError | CoordinatorError):
        return str(problem)
    return f"{type(problem).__name__}: {problem}"


def warm_cache(backend: str) -> int:
    """``--warm-cache``: fill the kernel cache (workers side by side), then exit."""
    validator = make_validator(backend)  # type: ignore[arg-type]
    print(f"arena-server: warming the kernel cache in {jitcache.cache_dir()} ...", flush=True)
    try:
        report = asyncio.run(warm_up_kernels(validator))
    except WarmUpError as error:
        print(f"arena-server: {error}", file=sys.stderr)
        return 1
    events = report.worker_compile_events + report.compile_events
    # (cold with no compile: the stamp was missing, and every kernel loaded from the cache)
    what = "compiled" if events else "already warm"
    line = f"kernel cache {what} in {report.seconds:.1f} s ({events} compile events)"
    print(f"arena-server: {line}", flush=True)
    return 0


def config_from_args(args: argparse.Namespace) -> NodeConfig:
    """The node's configuration from the command line; ValueError (one line) if it is off."""
    for flag in ("max_rewind_ms", "max_interp_ms", "trade_window_ms", "history_seconds",
                 "failover_timeout_ms", "ack_timeout_ms", "seat_grace_s",
                 "token_ttl_s"):  # fmt: skip
        value = getattr(args, flag)
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"--{flag.replace('_', '-')} must be a finite number >= 0")
    if args.token_ttl_s < 60:  # (tests run nodes with shorter ones, through NodeConfig)
        raise ValueError("--token-ttl-s must be at least 60")
    if not 0 <= args.fog_peek_ms <= 1000:
        raise ValueError("--fog-peek-ms must be between 0 and 1000")
    if args.record:
        try:
            os.makedirs(args.record, exist_ok=True)
        except OSError as error:
            raise ValueError(f"--record {args.record}: {error.strerror}") from None
        if not os.access(args.record, os.W_OK | os.X_OK):
            raise ValueError(f"--record {args.record}: not a folder this node may write in")
    kind, _ = parse_coordinator_spec(args.coordinator)
    if kind != "etcd" and (etcd_options_given(args) or args.etcd_lease_ttl != DEFAULT_LEASE_TTL):
        raise ValueError("the --etcd-* options need an etcd:// or etcds:// --coordinator")
    etcd_access = etcd_access_from_args(args)
    if not 2 <= args.etcd_lease_ttl <= 60:
        raise ValueError("--etcd-lease-ttl must be between 2 and 60 seconds")
    if args.directory:
        directory_urls(args.directory)
    if args.agones_url is not None and not args.agones:
        raise ValueError("--agones-url is for a node run with --agones; give both")
    tls.client_context(args.tls_ca)  # a CA file that cannot be read fails here, in one line
    arena = load_map(args.map) if args.map else default_map()
    return NodeConfig(
        region=args.region,
        node_id=args.node_id,
        tick_rate=args.tick_rate,
        snapshot_rate=args.snapshot_rate,
        max_players=args.max_players,
        matches=args.matches,
        history_seconds=args.history_seconds,
        arena=arena,
        hitreg_backend=args.hitreg_backend,
        interest=InterestConfig(
            enabled=args.interest == "on",
            near_m=args.interest_near_m,
            view_m=args.interest_view_m,
            background=args.interest_background,
            fog=args.fog == "on",
            fog_peek_s=args.fog_peek_ms / 1000.0,
        ),
        lag_compensation=LagCompensation(
            max_rewind=args.max_rewind_ms / 1000.0,
            max_interp_delay=args.max_interp_ms / 1000.0,
            trade_window=args.trade_window_ms / 1000.0,
        ),
        role=args.role,
        primary_url=args.primary,
        peers=tuple(dict.fromkeys([*args.peer, *([args.primary] if args.primary else [])])),
        public_url=args.public_url,
        cluster_secret=load_secret(args.cluster_secret),
        coordinator=args.coordinator,
        etcd_access=etcd_access,
        etcd_lease_ttl=math.ceil(args.etcd_lease_ttl),  # etcd grants whole seconds
        replication=args.replication,
        failover_timeout=args.failover_timeout_ms / 1000.0,
        ack_timeout=args.ack_timeout_ms / 1000.0,
        min_standbys=args.min_standbys,
        state_dir=args.state_dir,
        journal=args.journal,
        checkpoint_dir=args.checkpoint_dir,
        checkpoint_interval=args.checkpoint_interval,
        record=args.record,
        record_max_mb=args.record_max_mb,
        seat_grace=args.seat_grace_s,
        token_ttl=args.token_ttl_s,
        directory_url=args.directory,
        open_join=args.open_join,
        idle_kick=args.idle_kick_s,
        max_seats_per_address=args.max_seats_per_address,
        offender_holdoff=args.offender_holdoff_s,
        handshake_timeout=args.handshake_timeout_s,
        view_rate=args.view_rate,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        tls_ca=args.tls_ca,
        agones_url=(args.agones_url or sdk_url_from_env(os.environ)) if args.agones else "",
    )


def main(argv: list[str] | None = None) -> int:
    exit_with_parent_if_asked()  # a launcher's child: never outlive the launcher
    args = build_parser().parse_args(argv)
    configure_logging(args.log_level, args.log_format)
    try:
        check_backend(args.hitreg_backend)
        if args.warm_cache:
            return warm_cache(args.hitreg_backend)
        config = config_from_args(args)
        listener = tls.server_context(config.tls_cert, config.tls_key) if config.tls_cert else None
    except (MapError, ValueError, BackendUnavailable) as error:
        print(f"arena-server: {error}", file=sys.stderr)
        return 2
    has_peers = bool(config.peers or config.directory_url or config.role == "standby")
    if has_peers and args.cluster_secret is None and SECRET_ENV not in os.environ:
        log.warning(
            "no_cluster_secret",
            hint=f"set {SECRET_ENV} (the same on every node of the region) or "
            "--cluster-secret; this node made a random one, so its peers cannot authenticate "
            "with it",
            region=config.region,
            node=config.node_id,
            role="starting",  # (the node does not exist yet)
            epoch=0,
        )
    admin = None if args.admin_port is None else (args.admin_host, args.admin_port)
    try:
        return eventloop.run(_serve(config, args.host, args.port, listener, args.udp_port, admin))
    except AdminPortError as error:
        print(f"arena-server: {error}", file=sys.stderr)
        return 1
    except OSError as error:
        udp = "" if args.udp_port is None else f" (UDP {args.udp_port})"
        print(
            f"arena-server: cannot listen on {args.host}:{args.port}{udp}: {error.strerror}",
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
