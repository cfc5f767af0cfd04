"""The asyncio edge of a regional node: aiohttp app, WebSocket sessions and the tick task.

This layer moves bytes and calls the sans-I/O core (:class:`server.match.Match`). Its rules:

* One write path per connection (:meth:`Connection.send`), and it never waits: a frame is
  written only while the socket's send buffer has room for it, otherwise it is dropped and
  counted. Snapshots are the bulk of the traffic and the next tick carries a newer one, so
  "newest wins" needs no queue at all and a slow client can never stall the tick (the
  approach of websockets' ``broadcast``).
* The tick runs in one task owned by the app's ``cleanup_ctx``; sessions are the request
  handlers aiohttp owns. Shutdown tells every client (``error`` ``shutdown``) and closes
  with 1001 GOING_AWAY.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from aiohttp import WSCloseCode, WSMsgType, web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from shared import protocol
from shared.arena_map import ArenaMap, default_map
from shared.protocol import ErrorMessage, InputMessage, JoinMessage, PingMessage, PongMessage
from shared.timestep import TickSchedule, run_tick_loop

from .hitreg.backend import BackendName, make_validator
from .inputs import InputVerdict
from .lagcomp import LagCompensation
from .match import Match, MatchConfig, MatchFull, TickResult
from .metrics import NodeMetrics
from .tickstats import TickStats

__all__ = ["NODE", "Connection", "Node", "NodeConfig", "create_app"]

log = logging.getLogger("arena.server")

JOIN_TIMEOUT_S = 5.0
# aiohttp closes frames above this itself (1009); our codec's own, far smaller limit is
# what a client normally meets, with an error it can read.
WS_MAX_MESSAGE_BYTES = 64 * 1024


@dataclass(frozen=True, slots=True)
class NodeConfig:
    region: str = "local"
    node_id: str = "node-1"
    role: str = "primary"
    tick_rate: int = 60
    max_players: int = 300
    history_seconds: float = 1.0
    max_offences: int = 3
    epoch: int = 1
    arena: ArenaMap = field(default_factory=default_map)
    hitreg_backend: BackendName = "auto"
    lag_compensation: LagCompensation = field(default_factory=LagCompensation)

    def __post_init__(self) -> None:
        if not 20 <= self.tick_rate <= 128:
            raise ValueError(f"tick rate {self.tick_rate} Hz is outside 20-128 Hz")
        if self.max_players < 1 or self.max_players > 65535:
            raise ValueError("max players must be between 1 and 65535")
        if self.history_seconds <= 0:
            raise ValueError("history must hold a positive number of seconds")
        if self.lag_compensation.max_rewind > self.history_seconds:
            raise ValueError(
                f"the rewind cap ({self.lag_compensation.max_rewind * 1000:g} ms) must fit in "
                f"the history ({self.history_seconds * 1000:g} ms)"
            )


class Connection:
    """One player's socket: its single, non-blocking write path and its offence count."""

    def __init__(
        self,
        ws: web.WebSocketResponse,
        transport: asyncio.BaseTransport | None,
        slot: int,
        metrics: NodeMetrics,
    ) -> None:
        self.ws = ws
        self.transport = transport
        self.slot = slot
        self.offences = 0
        self._metrics = metrics

    def _has_room(self, size: int) -> bool:
        transport = self.transport
        if not isinstance(transport, asyncio.WriteTransport) or transport.is_closing():
            return False
        _low, high = transport.get_write_buffer_limits()
        return transport.get_write_buffer_size() + size <= high

    async def send(self, frame: bytes) -> bool:
        """Write ``frame`` now if the socket has room; never waits. True when written."""
        if self.ws.closed or not self._has_room(len(frame)):
            return False
        # With room in the buffer, aiohttp writes synchronously: this await never suspends.
        await self.ws.send_bytes(frame)
        self._metrics.bytes_out.inc(len(frame))
        return True


class Node:
    """A regional node's state: the match, the connected players and the tick driver."""

    def __init__(self, config: NodeConfig, clock: Callable[[], float] = time.perf_counter):
        self.config = config
        self.clock = clock
        self.metrics = NodeMetrics()
        self.validator = make_validator(
            config.hitreg_backend, box_min=config.arena.box_min, box_max=config.arena.box_max
        )
        self.match = Match(
            MatchConfig(
                arena=config.arena,
                tick_rate=config.tick_rate,
                max_players=config.max_players,
                history_seconds=config.history_seconds,
                lag_compensation=config.lag_compensation,
            ),
            epoch=config.epoch,
            validator=self.validator,
        )
        self.connections: dict[int, Connection] = {}
        self.schedule = TickSchedule(config.tick_rate, clock())
        self.stats = TickStats(period=1.0 / config.tick_rate)
        self.token_secret = secrets.token_bytes(32)
        self.started_at = time.time()

    def server_time(self) -> float:
        """Continuous server time now: tick T was due at ``T / rate`` on this scale."""
        return max(0.0, self.clock() - self.schedule.origin)

    async def run_tick(self, tick: int) -> None:
        began = self.clock()
        result = self.match.tick(tick)
        await self._publish(result)
        self.match.mark_sent(result.tick, self.server_time())
        duration = self.clock() - began
        self.stats.record(duration)
        self.metrics.tick_duration.observe(duration)
        self.metrics.ticks.inc()
        if duration > self.stats.period:
            self.metrics.tick_overruns.inc()
            log.warning(
                "event=tick_overrun tick=%d duration_ms=%.2f budget_ms=%.2f %s",
                tick,
                duration * 1e3,
                self.stats.period * 1e3,
                self.log_context,
            )

    async def _publish(self, result: TickResult) -> None:
        for slot, connection in list(self.connections.items()):
            frame = self.match.snapshot_for(result, slot)
            if not await connection.send(frame):
                self.metrics.snapshots_dropped.inc()

    @property
    def log_context(self) -> str:
        c = self.config
        return f"region={c.region} node={c.node_id} role={c.role} epoch={self.match.epoch}"

    def health(self) -> dict[str, object]:
        c = self.config
        return {
            "region": c.region,
            "node": c.node_id,
            "role": c.role,
            "epoch": self.match.epoch,
            "tick": self.match.tick_number,
            "tick_rate": c.tick_rate,
            "players": self.match.world.player_count,
            "max_players": c.max_players,
            "tick_ms_p50": round(self.stats.percentile_ms(50), 4),
            "tick_ms_p99": round(self.stats.percentile_ms(99), 4),
            "tick_overruns": self.stats.overruns,
            "hitreg_backend": self.validator.backend,
            "combat": dict(sorted(self.match.combat.counters.items())),
            "ticks_skipped": self.schedule.skipped,
            "uptime_s": round(time.time() - self.started_at, 3),
        }

    # -- one session ---------------------------------------------------------------------

    async def reject(self, ws: web.WebSocketResponse, code: str, text: str, close: int) -> None:
        await ws.send_bytes(protocol.encode(ErrorMessage(code, text, fatal=True)))
        await ws.close(code=close, message=code.encode())

    async def complain(self, connection: Connection, error: protocol.ProtocolError) -> None:
        """Answer a bad frame; disconnect a client that keeps sending them."""
        connection.offences += 1
        self.metrics.protocol_errors.labels(error.code).inc()
        fatal = connection.offences >= self.config.max_offences
        await connection.send(protocol.encode(ErrorMessage(error.code, str(error)[:256], fatal)))
        if fatal:
            log.info(
                "event=client_dropped player=%d reason=%s offences=%d %s",
                connection.slot,
                error.code,
                connection.offences,
                self.log_context,
            )
            await connection.ws.close(code=WSCloseCode.POLICY_VIOLATION, message=b"offences")

    async def handle_frame(self, connection: Connection, data: bytes) -> None:
        self.metrics.bytes_in.inc(len(data))
        try:
            message = protocol.decode_client(data)
        except protocol.ProtocolError as error:
            await self.complain(connection, error)
            return
        if isinstance(message, InputMessage):
            verdict = self.match.receive_input(connection.slot, message, self.server_time())
            if verdict is InputVerdict.ACCEPTED:
                self.metrics.inputs_applied.inc()
            elif verdict is InputVerdict.CLAMPED:
                self.metrics.inputs_applied.inc()
                self.metrics.inputs_clamped.inc()
            else:
                self.metrics.inputs_rejected.labels(verdict.value).inc()
        elif isinstance(message, PingMessage):
            pong = PongMessage(message.id, message.t, self.server_time())
            await connection.send(protocol.encode(pong))
        else:
            await self.complain(connection, protocol.InvalidField("join: already joined"))

    async def session(self, request: web.Request, ws: web.WebSocketResponse) -> None:
        try:
            async with asyncio.timeout(JOIN_TIMEOUT_S):
                first = await ws.receive()
        except TimeoutError:
            await self.reject(
                ws, "join_timeout", "no join within 5 s", WSCloseCode.POLICY_VIOLATION
            )
            return
        if first.type is not WSMsgType.BINARY:
            return
        try:
            join = protocol.decode_client(first.data)
        except protocol.ProtocolError as error:
            self.metrics.protocol_errors.labels(error.code).inc()
            await self.reject(ws, error.code, str(error), WSCloseCode.POLICY_VIOLATION)
            return
        if not isinstance(join, JoinMessage):
            await self.reject(
                ws, "join_first", "the first message must be join", WSCloseCode.POLICY_VIOLATION
            )
            return
        if join.v != protocol.PROTOCOL_VERSION:
            self.metrics.joins_refused.labels("version").inc()
            await self.reject(
                ws,
                protocol.VersionMismatch.code,
                f"server speaks protocol {protocol.PROTOCOL_VERSION}, client sent {join.v}",
                WSCloseCode.PROTOCOL_ERROR,
            )
            return
        if join.token is not None:
            self.metrics.joins_refused.labels("token").inc()
            await self.reject(
                ws,
                "invalid_token",
                "this node issued no such session token",
                WSCloseCode.POLICY_VIOLATION,
            )
            return
        try:
            seat = self.match.join(join.name, join.interp_delay)
        except MatchFull as full:
            self.metrics.joins_refused.labels("full").inc()
            await self.reject(ws, "server_full", str(full), WSCloseCode.TRY_AGAIN_LATER)
            return
        connection = Connection(ws, request.transport, seat.slot, self.metrics)
        welcome = protocol.WelcomeMessage(
            v=protocol.PROTOCOL_VERSION,
            player_id=seat.slot,
            tick_rate=self.config.tick_rate,
            tick=self.match.tick_number,
            server_time=self.server_time(),
            token=secrets.token_urlsafe(24),
            map=self.config.arena.name,
            region=self.config.region,
            epoch=self.match.epoch,
        )
        await ws.send_bytes(protocol.encode(welcome))
        self.connections[seat.slot] = connection
        self.metrics.players.set(self.match.world.player_count)
        log.info(
            "event=player_joined player=%d name=%s %s", seat.slot, join.name[:32], self.log_context
        )
        try:
            async for frame in ws:
                if frame.type is WSMsgType.BINARY:
                    await self.handle_frame(connection, frame.data)
                elif frame.type is WSMsgType.TEXT:
                    await self.complain(
                        connection, protocol.MalformedFrame("text frames are not used")
                    )
        finally:
            self.connections.pop(seat.slot, None)
            self.match.leave(seat.slot)
            self.metrics.players.set(self.match.world.player_count)
            log.info("event=player_left player=%d %s", seat.slot, self.log_context)

    async def close_all(self) -> None:
        bye = protocol.encode(ErrorMessage("shutdown", "the node is shutting down", fatal=True))
        for connection in list(self.connections.values()):
            with contextlib.suppress(Exception):
                await connection.send(bye)
                await connection.ws.close(code=WSCloseCode.GOING_AWAY, message=b"shutdown")


NODE = web.AppKey("node", Node)


async def _websocket(request: web.Request) -> web.StreamResponse:
    node = request.app[NODE]
    ws = web.WebSocketResponse(compress=False, max_msg_size=WS_MAX_MESSAGE_BYTES)
    await ws.prepare(request)
    await node.session(request, ws)
    return ws


async def _health(request: web.Request) -> web.Response:
    return web.json_response(request.app[NODE].health())


async def _metrics(request: web.Request) -> web.Response:
    body = generate_latest(request.app[NODE].metrics.registry)
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


async def _tick_task(app: web.Application) -> AsyncIterator[None]:
    node = app[NODE]
    began = time.perf_counter()
    node.validator.warm_up()  # compile (or load) the hit kernels before the first tick
    log.info(
        "event=hitreg_ready backend=%s warm_up_s=%.2f %s",
        node.validator.backend,
        time.perf_counter() - began,
        node.log_context,
    )
    node.schedule = TickSchedule(node.config.tick_rate, node.clock())
    task = asyncio.create_task(
        run_tick_loop(node.schedule, node.run_tick, node.clock), name="tick-loop"
    )
    log.info("event=node_started tick_rate=%d %s", node.config.tick_rate, node.log_context)
    yield
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def _on_shutdown(app: web.Application) -> None:
    await app[NODE].close_all()


def create_app(
    config: NodeConfig, clock: Callable[[], float] = time.perf_counter
) -> web.Application:
    """Build a node's aiohttp application (the tick starts with the app, stops with it)."""
    app = web.Application()
    app[NODE] = Node(config, clock)
    app.router.add_get("/ws", _websocket)
    app.router.add_get("/health", _health)
    app.router.add_get("/metrics", _metrics)
    app.cleanup_ctx.append(_tick_task)
    app.on_shutdown.append(_on_shutdown)
    return app
