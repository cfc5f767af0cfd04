"""The directory's aiohttp edge: HTTP JSON in, the sans-I/O registry and policy, JSON out.

Endpoints (``docs/routing.md`` has every field):

* ``POST /nodes/heartbeat``: a node registers and reports load; HMAC-signed body.
* ``GET /regions``: live primaries, standbys, load and probe URLs per region.
* ``POST /seat``: a player's measured RTTs in, a node and a signed reservation out.
* ``GET /health`` (JSON) and ``GET /metrics`` (Prometheus).

Every error is JSON ``{"error": code, "message": one line}``, including 404/405/413; the
message never echoes secrets or stack traces. Two clocks are injected: a monotonic one for
liveness and reservation accounting, the wall clock for the unix times in tokens.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass

from aiohttp import web
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    generate_latest,
)

from server.directory.policy import NoCapacity, choose, routable_nodes
from server.directory.registry import Heartbeat, HeartbeatError, Registry, regions_summary
from server.directory.reservations import (
    SIGNATURE_HEADER,
    check_signature,
    issue,
    reservation_id,
)

__all__ = [
    "DIRECTORY",
    "Directory",
    "DirectoryConfig",
    "DirectoryMetrics",
    "SeatRequestError",
    "create_app",
    "parse_seat_request",
]

log = logging.getLogger("arena.directory")

MAX_BODY_BYTES = 64 * 1024
MAX_PLAYER_CHARS = 32
MAX_RTT_ENTRIES = 64
MAX_RTT_MS = 10_000.0
RETRY_AFTER_S = 1
_REJECT_LOG_INTERVAL_S = 10.0


@dataclass(frozen=True, slots=True)
class DirectoryConfig:
    """``secret``: the cluster secret (heartbeat signatures and reservation tokens)."""

    secret: bytes
    heartbeat_timeout: float = 1.5
    reservation_ttl: float = 10.0
    overflow_slack_ms: float = 40.0

    def __post_init__(self) -> None:
        if not self.secret:
            raise ValueError("the cluster secret must not be empty")
        if not math.isfinite(self.heartbeat_timeout) or not 0 < self.heartbeat_timeout <= 60:
            raise ValueError("heartbeat timeout must be > 0 and <= 60 seconds")
        if not math.isfinite(self.reservation_ttl) or not 0 < self.reservation_ttl <= 3600:
            raise ValueError("reservation TTL must be > 0 and <= 3600 seconds")
        if not math.isfinite(self.overflow_slack_ms) or not 0 <= self.overflow_slack_ms <= 10_000:
            raise ValueError("overflow slack must be between 0 and 10000 ms")


class SeatRequestError(ValueError):
    """A ``POST /seat`` body the directory refuses (400); ``code`` as in the JSON reply."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def parse_seat_request(document: object) -> tuple[str, dict[str, float]]:
    """``(player, rtt_ms)`` from a decoded ``POST /seat`` body, or :class:`SeatRequestError`."""
    if not isinstance(document, dict):
        raise SeatRequestError("malformed", "the request must be a JSON object")
    unknown = sorted(str(k)[:32] for k in document if k not in ("player", "rtt_ms"))
    if unknown:
        raise SeatRequestError("invalid_field", f"unknown field(s): {', '.join(unknown[:8])}")
    player = document.get("player")
    if (
        not isinstance(player, str)
        or not 1 <= len(player) <= MAX_PLAYER_CHARS
        or not player.isprintable()
    ):
        raise SeatRequestError(
            "invalid_field", f"player: expected 1-{MAX_PLAYER_CHARS} printable characters"
        )
    raw = document.get("rtt_ms")
    if not isinstance(raw, dict) or not raw:
        raise SeatRequestError(
            "invalid_field",
            "rtt_ms: expected an object of region -> measured RTT in ms (GET /regions lists "
            "the probes to time)",
        )
    if len(raw) > MAX_RTT_ENTRIES:
        raise SeatRequestError("invalid_field", f"rtt_ms: more than {MAX_RTT_ENTRIES} regions")
    rtts: dict[str, float] = {}
    for region, value in raw.items():
        where = f"rtt_ms.{str(region)[:32]}"
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise SeatRequestError("invalid_field", f"{where}: expected a number of ms")
        if not math.isfinite(value) or not 0 <= value <= MAX_RTT_MS:
            raise SeatRequestError("invalid_field", f"{where}: must be between 0 and 10000 ms")
        rtts[region] = float(value)
    return player, rtts


class DirectoryMetrics:
    """Prometheus metrics on a registry of the directory's own."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.seat_requests = Counter(
            "arena_directory_seat_requests",
            "POST /seat answers by outcome: granted (best region), overflow (a region within "
            "the slack), no_capacity, no_region, bad_request",
            ["outcome"],
            registry=r,
        )
        self.heartbeats = Counter(
            "arena_directory_heartbeats",
            "POST /nodes/heartbeat answers by outcome (accepted or the error code)",
            ["outcome"],
            registry=r,
        )
        self.nodes_live = Gauge(
            "arena_directory_nodes_live",
            "Live nodes by region and state (routable, standby, fenced)",
            ["region", "state"],
            registry=r,
        )
        self.reserved = Gauge(
            "arena_directory_reservations_outstanding",
            "Seats handed out and not yet shown in a heartbeat, by region",
            ["region"],
            registry=r,
        )
        self.nodes_expired = Counter(
            "arena_directory_nodes_expired", "Nodes forgotten after going silent", registry=r
        )


class Directory:
    """The directory's state and request logic; the aiohttp handlers only move bytes."""

    def __init__(
        self,
        config: DirectoryConfig,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self.clock = clock
        self.wall = wall
        self.registry = Registry(config.heartbeat_timeout)
        self.metrics = DirectoryMetrics()
        self.seats_granted = 0
        self.seats_refused = 0
        self.started_at = clock()
        self._status: dict[str, str] = {}
        self._reject_logged: dict[tuple[str, str], float] = {}

    # -- heartbeats ------------------------------------------------------------------------

    def heartbeat(
        self, body: bytes, signature: str | None, remote: str = "-"
    ) -> tuple[int, dict[str, object]]:
        """Authenticate, validate and record one heartbeat; ``(status, JSON body)``."""
        if not signature:
            return self._refuse(
                401, "unauthenticated", f"missing {SIGNATURE_HEADER} header", remote
            )
        if not check_signature(self.config.secret, body, signature):
            return self._refuse(
                401, "bad_signature", f"{SIGNATURE_HEADER} does not match the body", remote
            )
        try:
            beat = Heartbeat.parse(json.loads(body))
        except (ValueError, UnicodeDecodeError, RecursionError) as error:
            if isinstance(error, HeartbeatError):
                return self._refuse(400, error.code, str(error), remote)
            return self._refuse(400, "malformed", "the body is not valid JSON", remote)
        ack = self.registry.heartbeat(beat, self.clock())
        self.metrics.heartbeats.labels("accepted").inc()
        context = f"region={beat.region} node={beat.node_id} role={beat.role} epoch={beat.epoch}"
        if ack.new_node:
            log.info(
                "event=node_registered %s endpoint=%s capacity=%d",
                context,
                beat.endpoint,
                beat.capacity,
            )
        if ack.previous_group_epoch is not None and ack.group_epoch > ack.previous_group_epoch:
            log.info(
                "event=epoch_raised %s group=%s previous_epoch=%d",
                context,
                beat.group_key,
                ack.previous_group_epoch,
            )
        if self._status.get(beat.node_id) != ack.status:
            self._status[beat.node_id] = ack.status
            level = logging.WARNING if ack.status == "fenced" else logging.INFO
            log.log(
                level,
                "event=node_status status=%s group_epoch=%d %s",
                ack.status,
                ack.group_epoch,
                context,
            )
        return 200, {
            "ok": True,
            "node_id": beat.node_id,
            "status": ack.status,
            "group_epoch": ack.group_epoch,
            "reserved": ack.reserved,
            "heartbeat_timeout_s": self.config.heartbeat_timeout,
        }

    def _refuse(
        self, status: int, code: str, message: str, remote: str
    ) -> tuple[int, dict[str, object]]:
        self.metrics.heartbeats.labels(code).inc()
        now = self.clock()
        key = (remote, code)
        if now - self._reject_logged.get(key, -math.inf) >= _REJECT_LOG_INTERVAL_S:
            self._reject_logged[key] = now
            log.warning("event=heartbeat_refused remote=%s error=%s", remote, code)
        return status, {"error": code, "message": message}

    # -- seats -----------------------------------------------------------------------------

    def seat(self, document: object) -> tuple[int, dict[str, object]]:
        """Answer one ``POST /seat`` body (already JSON-decoded)."""
        try:
            player, rtts = parse_seat_request(document)
        except SeatRequestError as error:
            self.metrics.seat_requests.labels("bad_request").inc()
            return 400, {"error": error.code, "message": str(error)}
        config = self.config
        now = self.clock()
        decision = choose(
            self.registry.views(now), rtts, now=now, slack_ms=config.overflow_slack_ms
        )
        if isinstance(decision, NoCapacity):
            self.seats_refused += 1
            if decision.reason == "no_region":
                self.metrics.seat_requests.labels("no_region").inc()
                return 503, {
                    "error": "no_region",
                    "message": "none of the measured regions has a live primary node; "
                    "GET /regions and measure its probes",
                }
            self.metrics.seat_requests.labels("no_capacity").inc()
            return 503, {
                "error": "no_capacity",
                "message": f"every region within {config.overflow_slack_ms:g} ms of the best "
                f"({decision.best_region}, {decision.best_rtt_ms:g} ms) is full; retry shortly",
                "best_region": decision.best_region,
                "best_rtt_ms": decision.best_rtt_ms,
            }
        wall = self.wall()
        token = issue(
            config.secret, player, decision.node_id, decision.region, wall, config.reservation_ttl
        )
        self.registry.reserve(
            decision.node_id, reservation_id(token), player, now, config.reservation_ttl
        )
        self.seats_granted += 1
        self.metrics.seat_requests.labels("overflow" if decision.overflow else "granted").inc()
        log.debug(
            "event=seat_granted player=%s region=%s node=%s rtt_ms=%.1f best_region=%s",
            player,
            decision.region,
            decision.node_id,
            decision.rtt_ms,
            decision.best_region,
        )
        return 200, {
            "player": player,
            "region": decision.region,
            "node_id": decision.node_id,
            "endpoint": decision.endpoint,
            "epoch": decision.epoch,
            "rtt_ms": decision.rtt_ms,
            "best_region": decision.best_region,
            "best_rtt_ms": decision.best_rtt_ms,
            "overflow": decision.overflow,
            "reservation": token,
            "expires_at": round(wall + config.reservation_ttl, 3),
        }

    # -- views -----------------------------------------------------------------------------

    def regions(self) -> dict[str, object]:
        now = self.clock()
        return {
            "regions": regions_summary(self.registry.views(now), now),
            "heartbeat_timeout_s": self.config.heartbeat_timeout,
            "generated_at": round(self.wall(), 3),
        }

    def health(self) -> dict[str, object]:
        now = self.clock()
        views = self.registry.views(now)
        live = [n for r in views for n in r.nodes if n.live(now)]
        return {
            "status": "ok",
            "nodes_known": self.registry.known,
            "nodes_live": len(live),
            "regions": sorted({n.region for n in live}),
            "seats_granted": self.seats_granted,
            "seats_refused": self.seats_refused,
            "reservations_outstanding": sum(n.reserved for n in live),
            "heartbeat_timeout_s": self.config.heartbeat_timeout,
            "reservation_ttl_s": self.config.reservation_ttl,
            "overflow_slack_ms": self.config.overflow_slack_ms,
            "uptime_s": round(now - self.started_at, 3),
        }

    def refresh_gauges(self) -> None:
        """Set the per-region gauges from the registry (called on each scrape)."""
        now = self.clock()
        self.metrics.nodes_live.clear()
        self.metrics.reserved.clear()
        for region in self.registry.views(now):
            routable = routable_nodes(region, now)
            live = [n for n in region.nodes if n.live(now)]
            if not live:
                continue
            standbys = sum(1 for n in live if n.role == "standby")
            gauge = self.metrics.nodes_live
            gauge.labels(region.name, "routable").set(len(routable))
            gauge.labels(region.name, "standby").set(standbys)
            gauge.labels(region.name, "fenced").set(len(live) - standbys - len(routable))
            self.metrics.reserved.labels(region.name).set(sum(n.reserved for n in routable))

    def sweep(self) -> None:
        for beat in self.registry.sweep(self.clock()):
            self._status.pop(beat.node_id, None)
            self.metrics.nodes_expired.inc()
            log.warning(
                "event=node_expired region=%s node=%s role=%s epoch=%d timeout_s=%g",
                beat.region,
                beat.node_id,
                beat.role,
                beat.epoch,
                self.config.heartbeat_timeout,
            )
        stale = self.clock() - _REJECT_LOG_INTERVAL_S
        for key, when in list(self._reject_logged.items()):
            if when < stale:
                del self._reject_logged[key]


DIRECTORY = web.AppKey("directory", Directory)

_Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _error(status: int, code: str, message: str) -> web.Response:
    return web.json_response({"error": code, "message": message}, status=status)


@web.middleware
async def _json_errors(request: web.Request, handler: _Handler) -> web.StreamResponse:
    """aiohttp's own 404/405/413 as JSON errors, like every other answer."""
    try:
        return await handler(request)
    except web.HTTPRequestEntityTooLarge:
        return _error(413, "too_large", f"the body is larger than {MAX_BODY_BYTES} bytes")
    except web.HTTPNotFound:
        return _error(404, "not_found", f"no such endpoint: {request.path[:64]}")
    except web.HTTPMethodNotAllowed as error:
        allowed = ", ".join(sorted(error.allowed_methods))
        return _error(405, "method_not_allowed", f"{request.method} not allowed; use {allowed}")


def _json(result: tuple[int, Mapping[str, object]]) -> web.Response:
    status, body = result
    headers = {"Retry-After": str(RETRY_AFTER_S)} if status == 503 else None
    return web.json_response(body, status=status, headers=headers)


async def _heartbeat(request: web.Request) -> web.Response:
    body = await request.read()
    signature = request.headers.get(SIGNATURE_HEADER)
    return _json(request.app[DIRECTORY].heartbeat(body, signature, request.remote or "-"))


async def _seat(request: web.Request) -> web.Response:
    body = await request.read()
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        request.app[DIRECTORY].metrics.seat_requests.labels("bad_request").inc()
        return _error(400, "malformed", "the body is not valid JSON")
    return _json(request.app[DIRECTORY].seat(document))


async def _regions(request: web.Request) -> web.Response:
    return web.json_response(request.app[DIRECTORY].regions())


async def _health(request: web.Request) -> web.Response:
    return web.json_response(request.app[DIRECTORY].health())


async def _metrics(request: web.Request) -> web.Response:
    directory = request.app[DIRECTORY]
    directory.refresh_gauges()
    body = generate_latest(directory.metrics.registry)
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


async def _sweeper(app: web.Application) -> AsyncIterator[None]:
    """Forget silent nodes (and log it) a few times per heartbeat timeout."""
    directory = app[DIRECTORY]
    interval = min(1.0, directory.config.heartbeat_timeout / 3)

    async def sweep_forever() -> None:
        while True:
            await asyncio.sleep(interval)
            directory.sweep()

    task = asyncio.create_task(sweep_forever(), name="directory-sweeper")
    c = directory.config
    log.info(
        "event=directory_started heartbeat_timeout_s=%g reservation_ttl_s=%g overflow_slack_ms=%g",
        c.heartbeat_timeout,
        c.reservation_ttl,
        c.overflow_slack_ms,
    )
    yield
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


def create_app(
    config: DirectoryConfig,
    clock: Callable[[], float] = time.monotonic,
    wall: Callable[[], float] = time.time,
) -> web.Application:
    """Build the directory's aiohttp application."""
    app = web.Application(client_max_size=MAX_BODY_BYTES, middlewares=[_json_errors])
    app[DIRECTORY] = Directory(config, clock, wall)
    app.router.add_post("/nodes/heartbeat", _heartbeat)
    app.router.add_post("/seat", _seat)
    app.router.add_get("/regions", _regions)
    app.router.add_get("/health", _health)
    app.router.add_get("/metrics", _metrics)
    app.cleanup_ctx.append(_sweeper)
    return app
