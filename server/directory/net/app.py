"""The directory's aiohttp edge: HTTP in, :class:`server.directory.service.Directory`, JSON out.

Endpoints (``docs/routing.md`` has every field):

* ``POST /nodes/heartbeat``: a node registers and reports load; HMAC-signed body.
* ``GET /regions``: live primaries, standbys, load and probe URLs per region.
* ``POST /seat``: a player's measured RTTs in, a node and a signed reservation out.
* ``GET /health`` (JSON) and ``GET /metrics`` (Prometheus).

With ``etcd`` the registry and reservations live in etcd (:mod:`.etcd`), shared by every
directory pointed at it; without, in this process (:class:`~server.directory.registry.
Registry`).

Every error is JSON ``{"error": code, "message": one line}``, including 404/405/413; the
message never echoes secrets or stack traces. 503 answers carry ``Retry-After``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from server.coordination.etcd_config import EtcdCluster
from server.directory.net.etcd import EtcdDirectory, EtcdRegistry
from server.directory.service import Answer, Directory, DirectoryConfig
from server.logs import EventLogger
from shared.directory import ErrorAnswer

__all__ = ["DIRECTORY", "SHARED", "create_app"]

log = EventLogger("arena.directory")

_MAX_BODY_BYTES = 64 * 1024
_RETRY_AFTER_S = 1

DIRECTORY = web.AppKey("directory", Directory)
#: Present with ``--registry etcd://``: requests are answered over the shared registry.
SHARED = web.AppKey("shared", EtcdDirectory)

_Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _error(status: int, code: str, message: str) -> web.Response:
    return web.json_response(ErrorAnswer(code, message).to_json(), status=status)


@web.middleware
async def _json_errors(request: web.Request, handler: _Handler) -> web.StreamResponse:
    """aiohttp's own 404/405/413 as JSON errors, like every other answer."""
    try:
        return await handler(request)
    except web.HTTPRequestEntityTooLarge:
        return _error(413, "too_large", f"the body is larger than {_MAX_BODY_BYTES} bytes")
    except web.HTTPNotFound:
        return _error(404, "not_found", f"no such endpoint: {request.path[:64]}")
    except web.HTTPMethodNotAllowed as error:
        allowed = ", ".join(sorted(error.allowed_methods))
        return _error(405, "method_not_allowed", f"{request.method} not allowed; use {allowed}")


def _json(result: Answer) -> web.Response:
    status, body = result
    headers = {"Retry-After": str(_RETRY_AFTER_S)} if status == 503 else None
    return web.json_response(body, status=status, headers=headers)


async def _heartbeat(request: web.Request) -> web.Response:
    body = await request.read()
    remote = request.remote or "-"
    if (shared := request.app.get(SHARED)) is not None:
        return _json(await shared.heartbeat(body, request.headers, remote))
    return _json(request.app[DIRECTORY].heartbeat(body, request.headers, remote))


async def _seat(request: web.Request) -> web.Response:
    body = await request.read()
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        request.app[DIRECTORY].metrics.seat_requests.labels("bad_request").inc()
        return _error(400, "malformed", "the body is not valid JSON")
    if (shared := request.app.get(SHARED)) is not None:
        return _json(await shared.seat(document))
    return _json(request.app[DIRECTORY].seat(document))


async def _regions(request: web.Request) -> web.Response:
    if (shared := request.app.get(SHARED)) is not None:
        return _json(await shared.regions())
    return web.json_response(request.app[DIRECTORY].regions())


async def _health(request: web.Request) -> web.Response:
    if (shared := request.app.get(SHARED)) is not None:
        return _json(await shared.health())
    return web.json_response(request.app[DIRECTORY].health())


async def _metrics(request: web.Request) -> web.Response:
    directory = request.app[DIRECTORY]
    if (shared := request.app.get(SHARED)) is not None:
        await shared.refresh_gauges()
    else:
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
        "directory_started",
        heartbeat_timeout_s=c.heartbeat_timeout,
        reservation_ttl_s=c.reservation_ttl,
        overflow_slack_ms=c.overflow_slack_ms,
    )
    yield
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def _shared_registry(app: web.Application) -> AsyncIterator[None]:
    """Connect to etcd before serving (its errors end the start-up) and close at the end."""
    registry = app[SHARED].registry
    await registry.start()
    log.info(
        "shared_registry",
        etcd=",".join(registry.client.endpoints),
        node_lease_ttl_s=registry.node_ttl,
    )
    yield
    await registry.close()


def create_app(
    config: DirectoryConfig,
    clock: Callable[[], float] = time.monotonic,
    wall: Callable[[], float] = time.time,
    *,
    etcd: EtcdCluster | str | None = None,
) -> web.Application:
    """Build the directory's aiohttp application (clocks injectable for tests). ``etcd``:
    the etcd cluster of the shared registry (or its members' comma-separated base URLs,
    ``http://HOST:PORT,...``); None or empty keeps it in this process's memory."""
    app = web.Application(client_max_size=_MAX_BODY_BYTES, middlewares=[_json_errors])
    app[DIRECTORY] = directory = Directory(config, clock, wall)
    if etcd:
        registry = EtcdRegistry(
            etcd,
            heartbeat_timeout=config.heartbeat_timeout,
            reservation_ttl=config.reservation_ttl,
        )
        app[SHARED] = EtcdDirectory(directory, registry)
        app.cleanup_ctx.append(_shared_registry)
    app.router.add_post("/nodes/heartbeat", _heartbeat)
    app.router.add_post("/seat", _seat)
    app.router.add_get("/regions", _regions)
    app.router.add_get("/health", _health)
    app.router.add_get("/metrics", _metrics)
    app.cleanup_ctx.append(_sweeper)
    return app
