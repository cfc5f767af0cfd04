"""The aiohttp applications of a node: routes, lifecycle and graceful shutdown.

The player port serves what players and peers need and nothing more: ``/ws`` for
players, ``/probe`` (the latency probe), ``/replicate`` and ``/peer`` for the region's
other nodes, ``/health`` (readiness for probes: ready, status, role and epoch; 503 until
the node can serve) and ``/live`` (liveness). The operators' surfaces are on the admin
port (``--admin-port``, :func:`create_admin_app`): the full ``/health``, ``/metrics``
(Prometheus) and ``/view`` (the live view, :mod:`server.view.net.feed`, which shows every
player through walls). The node's role loop
(:meth:`server.net.node.Node.run`) is one task owned by the app's ``cleanup_ctx``: started
with the app, cancelled and awaited with it.
Shutdown tells every player (``error`` ``shutdown``) and closes with 1001 GOING_AWAY.
With ``--offender-holdoff-s``, an upgrade to ``/ws`` from an address still held off for
offences is answered 429 with ``Retry-After`` before any WebSocket exists.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator, Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from server.net.node import Node, NodeConfig
from server.net.registration import heartbeat_loop
from server.net.udp.connect import connect_handler
from server.net.ws_link import WS_MAX_MESSAGE_BYTES
from server.view.net.feed import add_view_routes

__all__ = ["NODE", "NODE_TASK", "Node", "NodeConfig", "create_admin_app", "create_app"]

REPLICATION_MAX_MESSAGE_BYTES = 64 * 1024 * 1024

NODE = web.AppKey("node", Node)
NODE_TASK = web.AppKey("node_task", asyncio.Task)


def _not_ready(node: Node) -> web.Response:
    """503 before the node can serve: a client or a standby tries again (or elsewhere)."""
    return web.json_response(
        {"ready": False, "status": node.status}, status=503, headers={"Retry-After": "1"}
    )


async def _websocket(request: web.Request) -> web.StreamResponse:
    node = request.app[NODE]
    if not node.warm:
        return _not_ready(node)
    if (wait := node.sessions.handshake_wait(request.remote)) > 0:
        return _held_off(node, wait)
    ws = web.WebSocketResponse(compress=False, max_msg_size=WS_MAX_MESSAGE_BYTES)
    await ws.prepare(request)
    await request.app[NODE].session(request, ws)
    return ws


def _held_off(node: Node, wait: float) -> web.Response:
    """429 before the upgrade for an address whose connections keep ending in offences
    (``--offender-holdoff-s``): no WebSocket, no join to read, a few bytes written."""
    node.metrics.joins_refused.labels("offender_holdoff").inc()
    return web.Response(
        status=429,
        text="held off: this address's connections ended in offences\n",
        headers={"Retry-After": str(max(1, math.ceil(wait)))},
    )


async def _replicate(request: web.Request) -> web.StreamResponse:
    if not request.app[NODE].warm:
        return _not_ready(request.app[NODE])
    ws = web.WebSocketResponse(compress=False, max_msg_size=REPLICATION_MAX_MESSAGE_BYTES)
    await ws.prepare(request)
    await request.app[NODE].replication_session(request, ws)
    return ws


async def _probe(request: web.Request) -> web.Response:
    """The cheap latency probe players time to choose a region (nothing to compute)."""
    return web.Response(status=204)


def _readiness(node: Node, body: dict[str, object]) -> web.Response:
    """200 once the node can serve in its role, 503 before (warming up) and while it
    stops, as Kubernetes' readiness probes expect."""
    return web.json_response(body, status=200 if node.ready else 503)


async def _public_health(request: web.Request) -> web.Response:
    """Readiness for probes on the player port (:meth:`Node.public_health`)."""
    node = request.app[NODE]
    return _readiness(node, node.public_health())


async def _peer_health(request: web.Request) -> web.Response:
    """What the region's other nodes read of this one to agree on a primary."""
    node = request.app[NODE]
    return _readiness(node, node.peer_health())


async def _health(request: web.Request) -> web.Response:
    """Readiness with the node's whole state, for operators (the admin port)."""
    node = request.app[NODE]
    return _readiness(node, node.health())


async def _live(request: web.Request) -> web.Response:
    """Liveness: the process answers (cheap; during the warm-up too)."""
    return web.json_response({"alive": True, "status": request.app[NODE].status})


async def _metrics(request: web.Request) -> web.Response:
    body = generate_latest(request.app[NODE].metrics.registry)
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


async def _pause_recording(request: web.Request) -> web.Response:
    """Stop the match log (``--record``) after this tick; 409 on a node that records
    nothing. ``changed`` is false when it was paused already."""
    recorder = request.app[NODE].recorder
    if recorder is None:
        return _not_recording()
    return web.json_response({"paused": True, "changed": recorder.pause()})


async def _resume_recording(request: web.Request) -> web.Response:
    """Log again from the next tick, in a new file."""
    recorder = request.app[NODE].recorder
    if recorder is None:
        return _not_recording()
    return web.json_response({"paused": False, "changed": recorder.resume()})


def _not_recording() -> web.Response:
    return web.json_response({"error": "this node records nothing (no --record)"}, status=409)


async def _node_task(app: web.Application) -> AsyncIterator[None]:
    node = app[NODE]
    task = asyncio.create_task(node.run(), name="node")
    app[NODE_TASK] = task
    yield
    task.cancel()
    # Its outcome, a failure included, was read by whoever ran the app (arena-server
    # reports it in one line); here it only has to be over.
    await asyncio.gather(task, return_exceptions=True)


async def _heartbeats(app: web.Application) -> AsyncIterator[None]:
    """Keep the directory informed (only with ``--directory``); a fenced answer means a
    newer primary exists."""
    node = app[NODE]
    task = None
    if node.config.directory_url:
        task = asyncio.create_task(
            heartbeat_loop(
                directory_url=node.config.directory_url,
                secret=node.secret,
                describe=node.directory_heartbeat,
                claims=node.claims,
                on_ack=lambda ack: (
                    node.request_step_down(ack.group_epoch) if ack.status == "fenced" else None
                ),
            ),
            name="heartbeats",
        )
    yield
    if task is not None:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def _on_shutdown(app: web.Application) -> None:
    await app[NODE].close_all()


def create_app(
    config: NodeConfig, clock: Callable[[], float] = time.perf_counter
) -> web.Application:
    """Build a node's aiohttp application (its role loop starts and stops with the app).

    ``--handshake-timeout-s`` is aiohttp's keep-alive timeout. Its timer starts when the
    connection opens (aio-libs/aiohttp#13681, in the 3.14.5 we run) and only a whole
    request head stops it, not bytes trickled in: a client that has not sent its request
    head in time (the upgrade to ``/ws`` included) is closed, as is a keep-alive connection
    idle that long. An upgraded WebSocket is not subject to it (aiohttp turns keep-alive
    off for it); the join has its own bound (:data:`~server.net.sessions.JOIN_TIMEOUT_S`).
    """
    app = web.Application(handler_args={"keepalive_timeout": config.handshake_timeout})
    app[NODE] = Node(config, clock)
    app.router.add_get("/ws", _websocket)
    app.router.add_get("/replicate", _replicate)
    app.router.add_get("/health", _public_health)
    app.router.add_get("/peer", _peer_health)
    app.router.add_get("/live", _live)
    app.router.add_get("/probe", _probe)
    app.router.add_post("/connect", connect_handler(app[NODE]))
    app.cleanup_ctx.append(_node_task)
    app.cleanup_ctx.append(_heartbeats)
    app.on_shutdown.append(_on_shutdown)
    return app


def create_admin_app(node: Node) -> web.Application:
    """The operators' application of ``node`` (built by :func:`create_app`): the full
    ``/health``, ``/live``, ``/metrics``, ``POST /record/pause`` and ``/record/resume``
    and, unless ``--view-rate 0``, ``/view``. It
    neither starts nor stops the node: serve it beside the player app, on an address only
    operators reach."""
    app = web.Application()
    app[NODE] = node
    app.router.add_get("/health", _health)
    app.router.add_get("/live", _live)
    app.router.add_get("/metrics", _metrics)
    app.router.add_post("/record/pause", _pause_recording)
    app.router.add_post("/record/resume", _resume_recording)
    if node.config.view_rate > 0:
        add_view_routes(app, node, node.config.view_rate)
    return app
