"""``arena-directory``: run the regional directory until SIGTERM or Ctrl-C.

``--registry etcd://HOST:PORT[,HOST:PORT...]`` keeps nodes and reservations in etcd, so
several directories serve the same regions (``docs/routing.md``, "Several directories over
etcd"); the ``--etcd-*`` options (TLS, user) are the node's own.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys

from server.coordination.base import CoordinatorError
from server.coordination.etcd_config import EtcdCluster, parse_etcd_address
from server.coordination.net.etcd_options import (
    add_etcd_arguments,
    etcd_access_from_args,
    etcd_options_given,
)
from server.directory.auth import DEV_SECRET
from server.directory.net.app import create_app
from server.directory.service import DirectoryConfig
from server.http_site import serving, stop_on_signals
from server.logs import (
    EventLogger,
    add_log_arguments,
    announce,
    configure_logging,
    set_context,
)
from server.signing import SECRET_ENV
from shared.commandline import OneLineParser, milliseconds, seconds
from shared.lifetime import exit_with_parent_if_asked

__all__ = ["main"]

PROG = "arena-directory"
_MIN_SECRET_CHARS = 16
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog=PROG,
        description="Run the Arena directory: nodes register and heartbeat (POST "
        "/nodes/heartbeat, HMAC-signed), clients list regions (GET /regions) and ask for a "
        "seat with their measured RTTs (POST /seat). /health is JSON, /metrics Prometheus.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument(
        "--port", type=int, default=7700, help="TCP port; 0 picks a free one (printed on start)"
    )
    parser.add_argument(
        "--heartbeat-timeout",
        type=seconds,
        default=1.5,
        metavar="S",
        help="seconds of silence after which a node is no longer routed to",
    )
    parser.add_argument(
        "--reservation-ttl",
        type=seconds,
        default=10.0,
        metavar="S",
        help="seconds a seat reservation stays valid (and counts against its node)",
    )
    parser.add_argument(
        "--overflow-slack-ms",
        type=milliseconds,
        default=40.0,
        metavar="MS",
        help="when the nearest region is full, use another one at most this much farther",
    )
    parser.add_argument(
        "--registry",
        default="memory",
        metavar="WHERE",
        help="where nodes and seat reservations are kept: memory (this process; one "
        "directory) or etcd://HOST:PORT[,HOST:PORT...] (an etcd cluster's members, tried in "
        "turn; etcds:// for TLS), shared by every directory given the same one, so any of "
        "them answers and one dying changes nothing for players",
    )
    parser.add_argument(
        "--secret-env",
        default=SECRET_ENV,
        metavar="NAME",
        help=f"environment variable holding the cluster secret (>= {_MIN_SECRET_CHARS} chars)",
    )
    parser.add_argument(
        "--insecure-dev-secret",
        action="store_true",
        help="when the secret variable is unset, use the fixed, published development secret "
        "(server.directory.DEV_SECRET); never in production",
    )
    parser.add_argument(
        "--heartbeat-window",
        type=seconds,
        default=10.0,
        metavar="S",
        help="a heartbeat signed more than this many seconds before or after the directory's "
        "clock is refused as stale (allow for clock skew between hosts)",
    )
    add_etcd_arguments(parser)
    add_log_arguments(parser)
    return parser


def _secret(args: argparse.Namespace) -> tuple[bytes, bool]:
    """The cluster secret and whether it is the development one; ValueError with one line."""
    name = args.secret_env
    if not _ENV_NAME.fullmatch(name):
        raise ValueError(f"--secret-env: {name!r} is not an environment variable name")
    value = os.environ.get(name)
    if value is None:
        if args.insecure_dev_secret:
            return DEV_SECRET.encode(), True
        raise ValueError(
            f"{name} is not set: export the cluster secret (>= {_MIN_SECRET_CHARS} characters, "
            "the same on every node) or pass --insecure-dev-secret for local development"
        )
    if len(value) < _MIN_SECRET_CHARS:
        raise ValueError(f"{name} is shorter than {_MIN_SECRET_CHARS} characters; use a longer one")
    return value.encode(), False


def _registry(args: argparse.Namespace) -> EtcdCluster | None:
    """``--registry``: None for memory, else the etcd cluster; ValueError with one line."""
    spec = args.registry
    if spec == "memory":
        if etcd_options_given(args):
            raise ValueError("the --etcd-* options need an etcd:// or etcds:// --registry")
        return None
    if not spec.startswith(("etcd://", "etcds://")):
        raise ValueError(
            f"--registry: {spec!r} is neither 'memory' nor etcd://HOST:PORT[,HOST:PORT...]"
        )
    access = etcd_access_from_args(args)
    try:
        return EtcdCluster(parse_etcd_address(spec, tls=access.tls), access)
    except ValueError as error:
        raise ValueError(f"--registry: {error}") from None


async def _serve(config: DirectoryConfig, host: str, port: int, etcd: EtcdCluster | None) -> None:
    app = create_app(config, etcd=etcd)
    stop = stop_on_signals()
    async with serving(app, host, port, shutdown_timeout=2.0) as url:
        announce(
            "listening",
            url=url,
            heartbeat_timeout_s=config.heartbeat_timeout,
            reservation_ttl_s=config.reservation_ttl,
            overflow_slack_ms=config.overflow_slack_ms,
        )
        await stop.wait()
        announce("stopping")


def main(argv: list[str] | None = None) -> int:
    exit_with_parent_if_asked()  # a launcher's child: never outlive the launcher
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if not 0 <= args.port <= 65535:
            raise ValueError(f"--port: {args.port} is outside 0-65535")
        secret, development = _secret(args)
        etcd = _registry(args)
        config = DirectoryConfig(
            secret=secret,
            heartbeat_window=args.heartbeat_window,
            heartbeat_timeout=args.heartbeat_timeout,
            reservation_ttl=args.reservation_ttl,
            overflow_slack_ms=args.overflow_slack_ms,
        )
    except ValueError as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 2
    configure_logging(args.log_level, args.log_format)
    set_context(lambda: {"role": "directory"})  # (a line about a node names the node's)
    if development:
        EventLogger("arena.directory").warning(
            "insecure_dev_secret",
            message=f"{args.secret_env} unset; using the published development secret",
        )
    try:
        asyncio.run(_serve(config, args.host, args.port, etcd))
    except CoordinatorError as error:
        print(f"{PROG}: error: --registry {args.registry}: {error}", file=sys.stderr)
        return 2
    except OSError as error:
        reason = error.strerror or str(error)
        print(f"{PROG}: cannot listen on {args.host}:{args.port}: {reason}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # a second Ctrl-C during shutdown
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
