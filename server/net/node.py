"""A regional node: its players, its role (primary or standby) and the moves between them.

A **primary** ticks the match, streams every tick to its standbys and shows tick T to the
players only once every live standby holds T (synchronous replication) or, when none is
live, once the coordinator confirms that it still leads. A **standby** follows the
primary's records; when the primary falls silent it deposes it, campaigns and, if it wins,
takes over at a higher epoch with the same players, history and tick numbering (continued
on the primary's clock, so server time stays wall-clock time). A primary that learns of a
higher epoch steps down and becomes a standby of the new primary.

Everything here is the asyncio edge: the match, the replication records, the tokens and the
view-time rules are sans-I/O modules this class drives.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import gc
import logging
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import aiohttp
import msgpack
import numpy as np
from aiohttp import WSCloseCode, WSMsgType, web

from server import jitcache, limits
from server.coordination.base import Coordinator, CoordinatorError
from server.coordination.net import make_coordinator
from server.directory import Heartbeat
from server.logs import Throttle
from server.net.connection import WS_MAX_MESSAGE_BYTES, Connection
from server.net.metrics import NodeMetrics
from server.net.registration import ClaimLedger, check_reservation
from server.net.warmup import WarmUpReport, warm_up_kernels
from server.replication import state
from server.replication.auth import verify_hello
from server.replication.net.follower import Follower
from server.replication.net.hub import ReplicationHub, StandbyLink
from server.sim.hitreg.backend import BackendName, make_validator
from server.sim.inbox import InputInbox
from server.sim.input_frames import InputColumns, decode_input_frames
from server.sim.inputs import InputVerdict
from server.sim.lagcomp import LagCompensation
from server.sim.match import MatchConfig, MatchFull, PlayerSeat, TickResult
from server.sim.matchset import MatchSet
from server.sim.tickstats import TickStats
from server.tokens import TokenError, issue_token, verify_token
from shared import protocol
from shared.arena_map import ArenaMap, default_map
from shared.protocol import ErrorMessage, InputMessage, JoinMessage, PingMessage, PongMessage
from shared.timestep import TickSchedule, run_tick_loop

__all__ = ["Node", "NodeConfig"]

log = logging.getLogger("arena.server")

JOIN_TIMEOUT_S = 5.0
ORPHAN_GRACE_S = 10.0  # a seat whose player has not come back after a failover is freed
PEER_POLL_S = 0.25


@dataclass(frozen=True, slots=True)
class NodeConfig:
    region: str = "local"
    node_id: str = "node-1"
    role: str = "primary"
    tick_rate: int = 60
    max_players: int = 300
    history_seconds: float = 1.0
    max_offences: int = 3
    arena: ArenaMap = field(default_factory=default_map)
    hitreg_backend: BackendName = "auto"
    matches: int = 1  # matches this node hosts; a full match opens the next
    lag_compensation: LagCompensation = field(default_factory=LagCompensation)
    # Failover.
    public_url: str = ""  # this node's base URL as peers and players reach it
    primary_url: str = ""  # a standby's primary at start-up
    peers: tuple[str, ...] = ()  # the other nodes of the region (base URLs)
    cluster_secret: bytes = b""
    coordinator: str = "static"
    replication: str = "sync"
    ack_timeout: float = 0.050  # a standby slower than this is dropped to lagging
    failover_timeout: float = 0.200  # a primary silent this long is declared dead
    # Routing.
    directory_url: str = ""  # heartbeat here; admit players with its seat reservations

    def __post_init__(self) -> None:
        limits.TICK_RATE.check(self.tick_rate)
        limits.MAX_PLAYERS.check(self.max_players)
        if self.history_seconds <= 0:
            raise ValueError("history must hold a positive number of seconds")
        if self.lag_compensation.max_rewind > self.history_seconds:
            raise ValueError(
                f"the rewind cap ({self.lag_compensation.max_rewind * 1000:g} ms) must fit in "
                f"the history ({self.history_seconds * 1000:g} ms)"
            )
        if self.role not in ("primary", "standby"):
            raise ValueError(f"role must be primary or standby, not {self.role!r}")
        if self.role == "standby" and not self.primary_url:
            raise ValueError("a standby needs --primary URL (the node it follows)")
        limits.MATCHES.check(self.matches)
        if self.replication not in ("sync", "async"):
            raise ValueError("replication must be sync or async")
        if self.ack_timeout <= 0 or self.failover_timeout <= 0:
            raise ValueError("acknowledgement and failover timeouts must be positive")


class Node:
    """One node's state and the tasks that run it; ``run()`` is owned by the app."""

    def __init__(self, config: NodeConfig, clock: Callable[[], float] = time.perf_counter):
        self.config = config
        self.clock = clock
        self.metrics = NodeMetrics()
        self.validator = make_validator(
            config.hitreg_backend, box_min=config.arena.box_min, box_max=config.arena.box_max
        )
        self.matches = MatchSet(
            MatchConfig(
                arena=config.arena,
                tick_rate=config.tick_rate,
                max_players=config.max_players,
                history_seconds=config.history_seconds,
                lag_compensation=config.lag_compensation,
            ),
            config.matches,
            self.validator,
        )
        self.role = "standby" if config.role == "standby" else "starting"
        self.connections: dict[tuple[int, int], Connection] = {}  # by (match, slot)
        self.schedule = TickSchedule(config.tick_rate, clock())
        self.stats = TickStats(period=1.0 / config.tick_rate)
        self.secret = config.cluster_secret or os.urandom(32)
        self.coordinator: Coordinator = make_coordinator(
            config.coordinator, node_id=config.node_id, peers=config.peers, region=config.region
        )
        self.hub = ReplicationHub(config.ack_timeout, self.metrics, "")
        #: Seated players' input frames, held for the next tick to decode as one batch.
        self.inbox: InputInbox[Connection] = InputInbox(self._take_inputs, clock)
        self.follower = Follower(
            self.matches,
            config.node_id,
            self.secret,
            config.failover_timeout,
            clock,
            lambda: self.log_context,
        )
        self.follower.public_url = config.public_url
        self.claims = ClaimLedger()  # reservations admitted, for the directory's accounting
        self.learned_peers: dict[str, str] = {}  # standbys that connected: node id -> URL
        self.started_at = time.time()
        self.failover: dict[str, Any] = {}
        self._orphaned_since: dict[tuple[int, int], float] = {}  # (match, slot) -> since
        self._step_down = asyncio.Event()
        self._promoted = asyncio.Event()  # set while this node leads (parked joins wait on it)
        self.parked = 0
        self.shutting_down = False
        self._fence_task: asyncio.Task[None] | None = None
        self.warm = False
        self.warm_up_report: WarmUpReport | None = None
        self._peer_refusals = Throttle()
        #: Set once the node first became ready (``arena-server`` then says it listens).
        self.became_ready = asyncio.Event()

    # -- time and identity ----------------------------------------------------------------

    def server_time(self) -> float:
        """Continuous server time now: tick T was due at ``T / rate`` on this scale."""
        return max(0.0, self.clock() - self.schedule.origin)

    @property
    def log_context(self) -> str:
        c = self.config
        return f"region={c.region} node={c.node_id} role={self.role} epoch={self.matches.epoch}"

    def directory_heartbeat(self) -> Heartbeat | None:
        """What the directory should know of this node now (None while starting)."""
        if self.role not in ("primary", "standby"):
            return None
        role: Literal["primary", "standby"] = "primary" if self.role == "primary" else "standby"
        c, base = self.config, self.config.public_url.rstrip("/")
        return Heartbeat(
            node_id=c.node_id,
            region=c.region,
            endpoint=base.replace("http", "ws", 1) + "/ws",
            probe=base + "/probe",
            role=role,
            epoch=self.matches.epoch,
            matches=len(self.matches),
            players=self.matches.player_count,
            capacity=0 if self.shutting_down else self.matches.capacity,
        )

    def peer_urls(self) -> list[str]:
        """The region's other nodes: configured, and standbys that connected (base URLs)."""
        peers = dict.fromkeys([*self.config.peers, *self.learned_peers.values()])
        peers.pop(self.config.public_url, None)
        return [peer for peer in peers if peer]

    def player_endpoints(self) -> tuple[str, ...]:
        """Where a player goes if this node disappears: the region's other nodes."""
        return tuple(peer.rstrip("/") + "/ws" for peer in self.peer_urls())

    # -- the role loop --------------------------------------------------------------------

    @property
    def ready(self) -> bool:
        """Ready to serve in its role: kernels warm, role decided, not shutting down (what
        ``/health`` answers 200 for; launchers and load balancers wait for it)."""
        return self.warm and self.role in ("primary", "standby") and not self.shutting_down

    async def warm_up(self) -> None:
        """Compile or load every kernel, off the event loop, before anyone is served."""
        log.info(
            "event=warming_up backend=%s cache=%s %s",
            self.validator.backend,
            jitcache.cache_dir(),
            self.log_context,
        )
        if (reason := jitcache.fallback_reason()) is not None:
            log.warning(
                'event=kernel_cache_fallback reason="%s" cache=%s hint="set NUMBA_CACHE_DIR '
                "to a writable folder (systemd: CacheDirectory=) so restarts load, not "
                'compile" %s',
                reason,
                jitcache.cache_dir(),
                self.log_context,
            )
        report = await warm_up_kernels(self.validator)
        # What exists now (modules, numba's compiled kernels) lives as long as the node:
        # out of the cyclic collector's sight. Before, a full collection walked all of it
        # and stalled a tick by about 85 ms every few seconds at 300 players.
        gc.freeze()
        self.warm = True
        self.warm_up_report = report
        log.info(
            "event=warmed_up backend=%s %s %s",
            self.validator.backend,
            report.log_fields(),
            self.log_context,
        )

    async def run(self) -> None:
        """Warm up, then lead or follow for as long as the app runs; moves between the two."""
        await self.warm_up()
        await self.coordinator.start()
        try:
            if self.config.role == "primary":
                epoch = await self.coordinator.claim_initial(
                    node_id=self.config.node_id, url=self.config.public_url
                )
                self._become_primary(epoch, first_tick=1, origin=self.clock())
            self.became_ready.set()
            while True:
                if self.role == "primary":
                    await self._lead()
                else:
                    await self._stand_by()
        finally:
            await self.follower.close()
            await self.hub.close()
            await self.coordinator.close()

    def _become_primary(self, epoch: int, first_tick: int, origin: float) -> None:
        """``origin``: when tick 0 was (or would have been) due, on this node's clock."""
        self.matches.epoch = epoch
        self.role = "primary"
        self.hub.log_context = self.log_context
        self.schedule = TickSchedule(
            self.config.tick_rate, origin + first_tick / self.config.tick_rate, first_tick
        )
        self._step_down.clear()
        self._promoted.set()
        log.info("event=primary epoch=%d first_tick=%d %s", epoch, first_tick, self.log_context)

    async def _lead(self) -> None:
        async with asyncio.TaskGroup() as group:
            ticking = group.create_task(
                run_tick_loop(self.schedule, self.run_tick, self.clock), name="tick-loop"
            )
            watching = group.create_task(self._watch_peers(), name="peer-watch")
            await self._step_down.wait()
            ticking.cancel()
            watching.cancel()
        await self._leave_leadership()

    async def _leave_leadership(self) -> None:
        self.role = "standby"
        self._promoted.clear()
        log.warning("event=stepped_down %s", self.log_context)
        bye = protocol.encode(
            ErrorMessage("not_primary", "this node is no longer the primary", fatal=True)
        )
        for connection in list(self.connections.values()):
            with contextlib.suppress(Exception):
                connection.send(bye)
                await connection.close(WSCloseCode.GOING_AWAY, b"not_primary")
        await self.hub.close()

    def step_down(self, epoch: int) -> None:
        """A higher epoch exists: stop publishing at once; the role loop does the rest."""
        if epoch > self.matches.epoch or self.role == "primary":
            self.matches.epoch = max(self.matches.epoch, epoch)
            self._step_down.set()

    async def _watch_peers(self) -> None:
        """A primary cut off from its standbys still hears of a newer primary this way."""
        async with aiohttp.ClientSession() as session:
            while True:
                await asyncio.sleep(PEER_POLL_S)
                for found in await self._peer_health(session):
                    if (
                        found.get("role") == "primary"
                        and int(found.get("epoch", 0)) > self.matches.epoch
                    ):
                        log.warning(
                            "event=newer_primary_seen peer=%s epoch=%s %s",
                            found.get("node"),
                            found.get("epoch"),
                            self.log_context,
                        )
                        self.step_down(int(found["epoch"]))
                self._free_orphans()

    async def _peer_health(self, session: aiohttp.ClientSession) -> list[dict[str, Any]]:
        async def ask(peer: str) -> dict[str, Any] | None:
            try:
                async with session.get(
                    peer.rstrip("/") + "/health", timeout=aiohttp.ClientTimeout(total=0.2)
                ) as response:
                    body = await response.json()
                    return {**body, "url": peer} if isinstance(body, dict) else None
            except (aiohttp.ClientError, TimeoutError, ValueError):
                return None

        answers = await asyncio.gather(*(ask(peer) for peer in self.peer_urls()))
        return [a for a in answers if a is not None]

    async def _find_primary(self) -> str | None:
        """The base URL of the region's primary with the highest epoch, if any answers."""
        async with aiohttp.ClientSession() as session:
            found = [h for h in await self._peer_health(session) if h.get("role") == "primary"]
        if not found:
            return None
        best = max(found, key=lambda h: int(h.get("epoch", 0)))
        return str(best["url"])

    async def _stand_by(self) -> None:
        """Follow the primary; on its silence campaign; return once this node leads."""
        target = self.config.primary_url
        while self.role != "primary":
            outcome = await self.follower.follow(target)
            if outcome.reason in ("silent", "closed") and self.follower.last_record_at is not None:
                if await self._take_over(outcome.primary, outcome.detected_at):
                    return
            else:
                await asyncio.sleep(0.1)
            target = await self._find_primary() or target

    async def _take_over(self, silent_primary: str, detected_at: float) -> bool:
        """The primary is gone: depose it, campaign, and promote if this node wins."""
        self.failover = {"detected_at": detected_at, "previous_primary": silent_primary}
        log.warning(
            "event=primary_silent primary=%s tick=%d %s",
            silent_primary,
            self.matches.tick_number,
            self.log_context,
        )
        try:
            await self.coordinator.depose(node_id=silent_primary)
            epoch = await self.coordinator.campaign(
                node_id=self.config.node_id,
                url=self.config.public_url,
                replicated_tick=self.matches.tick_number,
                known_epoch=self.matches.epoch,
            )
        except CoordinatorError as error:
            log.warning("event=campaign_failed error=%s %s", error, self.log_context)
            return False
        if epoch is None:
            log.info("event=campaign_lost %s", self.log_context)
            return False
        origin = self.follower.origin_estimate
        if origin is None:
            origin = self.clock() - self.matches.server_time
        rate = self.config.tick_rate
        first_tick = max(self.matches.tick_number + 1, math.ceil((self.clock() - origin) * rate))
        self.failover.update(
            promoted_at=time.time(),
            promoted_at_tick=self.matches.tick_number,
            first_tick=first_tick,
            # The primary's hash of the last tick it sent us, and ours of the same tick.
            primary_hash=self.follower.last_hash,
            promoted_hash="/".join(m.world.state_hash() for m in self.matches.matches),
            resyncs=self.follower.resyncs,
        )
        self.metrics.promotions.inc()
        now = time.monotonic()
        self._orphaned_since = {}
        for match in self.matches.matches:
            for slot, seat in match.seats.items():
                seat.inputs.restore(seat.inputs.acked)
                self._orphaned_since[(match.index, slot)] = now
        self._become_primary(epoch, first_tick, origin)
        self._fence_task = asyncio.create_task(self.follower.fence(epoch), name="fence-old")
        return True

    def _free_orphans(self) -> None:
        now = time.monotonic()
        for key, since in list(self._orphaned_since.items()):
            match, slot = self.matches[key[0]], key[1]
            if key in self.connections or slot not in match.seats:
                del self._orphaned_since[key]
            elif now - since > ORPHAN_GRACE_S:
                del self._orphaned_since[key]
                match.leave(slot)
                log.info(
                    "event=seat_freed match=%d player=%d reason=not_reclaimed %s",
                    key[0],
                    slot,
                    self.log_context,
                )

    # -- the tick (primary only) ----------------------------------------------------------

    async def run_tick(self, tick: int) -> None:
        began = self.clock()
        self.inbox.flush()
        results = self.matches.tick(tick)
        wait = self.config.replication == "sync"
        synced = False
        if self.hub.links:
            events = [result.events for result in results]
            record = state.encode_node_tick(self.matches, events, self.matches.epoch)
            synced = await self.hub.replicate(tick, record, wait)
        if self.hub.fenced_epoch is not None and self.hub.fenced_epoch > self.matches.epoch:
            self.step_down(self.hub.fenced_epoch)
        elif synced or await self.coordinator.confirm():
            self._publish(results)
            sent_at = self.server_time()
            for match in self.matches.matches:
                match.mark_sent(tick, sent_at)
            if "first_tick_at" not in self.failover and "promoted_at" in self.failover:
                self.failover["first_tick_at"] = time.time()
        else:
            self.metrics.ticks_unpublished.inc()
            log.warning("event=leadership_lost tick=%d %s", tick, self.log_context)
            self.step_down(self.matches.epoch)
        duration = self.clock() - began
        self.metrics.flush()
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

    def _publish(self, results: list[TickResult]) -> None:
        if self._step_down.is_set():
            return
        matches = self.matches.matches
        for (index, slot), connection in list(self.connections.items()):
            result = results[index]
            head = matches[index].snapshot_head(result, slot)
            if head is None:
                continue  # seated after this tick was computed: the next one is its first
            if not connection.send(head, result.body):
                self.metrics.snapshots_dropped.inc()

    @property
    def status(self) -> str:
        """``warming_up``, ``starting`` (warm, role not decided yet), ``ready`` or
        ``stopping``: the word beside ``ready`` in ``/health``."""
        if self.shutting_down:
            return "stopping"
        if not self.warm:
            return "warming_up"
        return "ready" if self.ready else "starting"

    def health(self) -> dict[str, object]:
        c = self.config
        return {
            "ready": self.ready,
            "status": self.status,
            "warm_up": None if self.warm_up_report is None else self.warm_up_report.as_dict(),
            "region": c.region,
            "node": c.node_id,
            "role": self.role,
            "epoch": self.matches.epoch,
            "tick": self.matches.tick_number,
            "replicated_tick": self.matches.tick_number,
            "tick_rate": c.tick_rate,
            "players": self.matches.player_count,
            "max_players": self.matches.capacity,
            "matches": [
                {"index": m.index, "players": m.world.player_count, "max_players": c.max_players}
                for m in self.matches.matches
            ],
            "tick_ms_p50": round(self.stats.percentile_ms(50), 4),
            "tick_ms_p99": round(self.stats.percentile_ms(99), 4),
            "tick_overruns": self.stats.overruns,
            "ticks_skipped": self.schedule.skipped,
            "hitreg_backend": self.validator.backend,
            "combat": dict(
                sorted(
                    sum(
                        (m.combat.counters for m in self.matches.matches), collections.Counter()
                    ).items()
                )
            ),
            "replication": c.replication,
            "coordinator": c.coordinator,
            "standbys": self.hub.describe(),
            "failover": self.failover,
            "parked_players": self.parked,
            "pid": os.getpid(),
            "uptime_s": round(time.time() - self.started_at, 3),
        }

    # -- players --------------------------------------------------------------------------

    async def reject(self, ws: web.WebSocketResponse, code: str, text: str, close: int) -> None:
        """Tell the client why, then close; a client that already hung up is left alone."""
        if ws.closed:
            return
        with contextlib.suppress(ConnectionError, aiohttp.ClientConnectionResetError):
            await ws.send_bytes(protocol.encode(ErrorMessage(code, text, fatal=True)))
            await ws.close(code=close, message=code.encode())

    def complain(self, connection: Connection, error: protocol.ProtocolError) -> bool:
        """Answer a bad frame; True when the client has offended too often and must go."""
        connection.offences += 1
        self.metrics.protocol_errors.labels(error.code).inc()
        fatal = connection.offences >= self.config.max_offences
        connection.send(protocol.encode(ErrorMessage(error.code, str(error)[:256], fatal)))
        if fatal:
            log.info(
                "event=client_dropped player=%d reason=%s offences=%d %s",
                connection.slot,
                error.code,
                connection.offences,
                self.log_context,
            )
        return fatal

    def handle_frame(self, connection: Connection, data: bytes) -> bool:
        """One frame from a seated player (synchronous: this runs for every input);
        True when the player must be disconnected for repeated offences."""
        self.metrics.tally_bytes_in += len(data)
        try:
            message = protocol.decode_client(data)
        except protocol.ProtocolError as error:
            return self.complain(connection, error)
        if type(message) is InputMessage:
            match = self.matches.matches[connection.match]
            self._count(match.receive_input(connection.slot, message, self.server_time()))
        elif isinstance(message, PingMessage):
            pong = PongMessage(message.id, message.t, self.server_time())
            connection.send(protocol.encode(pong))
        else:
            return self.complain(connection, protocol.InvalidField("join: already joined"))
        return False

    def _take_inputs(
        self, connections: list[Connection], reads: list[bytes], arrivals: list[float]
    ) -> None:
        """The inbox's held reads, decoded as one batch and queued in arrival order; a read
        the batch decoder cannot vouch for is read the ordinary way, in its turn."""
        columns = decode_input_frames(reads)
        live = self.connections
        count = len(connections)
        kept = np.fromiter(  # (a connection gone since may have lost its seat to another)
            (
                c.stream is not None and not c.stream.closing and live.get((c.match, c.slot)) is c
                for c in connections
            ),
            np.bool_,
            count,
        )
        sizes = np.fromiter(map(len, reads), np.int64, count)
        rows_kept = int(np.count_nonzero(kept[columns.read_of]))
        # Payload bytes, as handle_frame counts them: each frame less its 6-byte header.
        self.metrics.tally_bytes_in += int(sizes[kept & columns.read_ok].sum()) - 6 * rows_kept
        owners = (
            np.fromiter((c.match for c in connections), np.int64, count),
            np.fromiter((c.slot for c in connections), np.int64, count),
            np.asarray(arrivals) - self.schedule.origin,
        )
        done = 0  # the rows before this one are queued
        for read in np.flatnonzero(~columns.read_ok).tolist():  # (usually none)
            upto = int(np.searchsorted(columns.read_of, read))
            self._queue_rows(columns, done, upto, kept, owners)
            done = upto
            stream = connections[read].stream
            if kept[read] and stream is not None:
                stream.feed(reads[read])
                if stream.closing:  # dropped for offences: its later reads go with it
                    kept &= np.fromiter((c is not connections[read] for c in connections), bool)
        self._queue_rows(columns, done, len(columns.read_of), kept, owners)

    def _queue_rows(
        self,
        columns: InputColumns,
        start: int,
        stop: int,
        kept: np.ndarray,
        owners: tuple[np.ndarray, np.ndarray, np.ndarray],
    ) -> None:
        """Queue decoded rows ``start:stop`` of kept reads, match by match."""
        read_of = columns.read_of[start:stop]
        mine = kept[read_of]
        if not mine.any():
            return
        read_of = read_of[mine]
        ints, floats = columns.ints[start:stop][mine], columns.floats[start:stop][mine]
        match_of, slots, arrivals = (column[read_of] for column in owners)
        arrivals = np.maximum(arrivals, 0.0)
        matches = self.matches.matches
        for index in np.unique(match_of).tolist():
            rows = match_of == index
            verdicts = matches[index].receive_decoded(
                slots[rows], ints[rows], floats[rows], arrivals[rows]
            )
            for verdict, times in verdicts.items():
                self._count(verdict, times)

    def _count(self, verdict: InputVerdict, times: int = 1) -> None:
        metrics = self.metrics
        if verdict is InputVerdict.ACCEPTED:
            metrics.tally_inputs_applied += times
        elif verdict is InputVerdict.CLAMPED:
            metrics.tally_inputs_applied += times
            metrics.tally_inputs_clamped += times
        else:
            metrics.inputs_rejected.labels(verdict.value).inc(times)

    async def _park(self, ws: web.WebSocketResponse) -> bool:
        """A player's spare connection to this standby: hold it until this node leads.

        True once promoted (the caller then admits the player with its token at once, with
        no connection set-up on the player's side); False if the player hangs up first.
        """
        self.parked += 1
        promoted = asyncio.ensure_future(self._promoted.wait())
        hung_up = asyncio.ensure_future(ws.receive())
        try:
            await asyncio.wait({promoted, hung_up}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self.parked -= 1
            for waiter in (promoted, hung_up):
                waiter.cancel()
            await asyncio.gather(promoted, hung_up, return_exceptions=True)
        return promoted.done() and not promoted.cancelled() and not ws.closed

    async def _admit(
        self, ws: web.WebSocketResponse, join: JoinMessage
    ) -> tuple[int, PlayerSeat] | None:
        """A seat for this join: a new one (with a seat reservation from the directory, if
        it came with one), or the one its session token proves is the player's."""
        if join.token is not None and self.config.directory_url:
            refusal = self._reservation_refusal(join)
            if refusal == "":  # a valid reservation: a new seat
                join = dataclasses.replace(join, token=None)
            elif refusal is not None:
                self.metrics.joins_refused.labels("reservation").inc()
                await self.reject(
                    ws,
                    "invalid_reservation",
                    f"reservation {refusal}; ask the directory for a new seat",
                    WSCloseCode.POLICY_VIOLATION,
                )
                return None
        if join.token is None:
            try:
                return self.matches.join(join.name, join.interp_delay)
            except MatchFull as full:
                self.metrics.joins_refused.labels("full").inc()
                await self.reject(ws, "server_full", str(full), WSCloseCode.TRY_AGAIN_LATER)
                return None
        try:
            claim = verify_token(self.secret, join.token, self.config.region)
        except TokenError:
            claim = None
        key = (claim.match, claim.slot) if claim is not None else None
        seat = None
        if claim is not None and 0 <= claim.match < len(self.matches):
            seat = self.matches[claim.match].seats.get(claim.slot)
        if claim is None or seat is None or seat.name != claim.name or key in self.connections:
            self.metrics.joins_refused.labels("token").inc()
            await self.reject(
                ws,
                "invalid_token",
                "this region issued no such live session",
                WSCloseCode.POLICY_VIOLATION,
            )
            return None
        self._orphaned_since.pop((claim.match, claim.slot), None)
        log.info(
            "event=player_resumed match=%d player=%d ack=%d %s",
            claim.match,
            claim.slot,
            seat.inputs.acked,
            self.log_context,
        )
        return claim.match, seat

    def _reservation_refusal(self, join: JoinMessage) -> str | None:
        """None: the token is a session token; "": a valid seat reservation; else why not."""
        assert join.token is not None
        try:
            verify_token(self.secret, join.token, self.config.region)
            return None
        except TokenError:
            pass
        code = check_reservation(
            self.secret,
            join.token,
            self.config.node_id,
            time.time(),
            player=join.name,
            claims=self.claims,
        )
        return "" if code is None else code

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
        if self.role != "primary" and (join.token is None or not await self._park(ws)):
            self.metrics.joins_refused.labels("not_primary").inc()
            await self.reject(
                ws,
                "not_primary",
                "this node is a standby; try the others",
                WSCloseCode.TRY_AGAIN_LATER,
            )
            return
        admitted = await self._admit(ws, join)
        if admitted is None:
            return
        index, seat = admitted
        key = (index, seat.slot)
        connection = Connection(ws, request.transport, seat.slot, self.metrics, match=index)
        welcome = protocol.WelcomeMessage(
            v=protocol.PROTOCOL_VERSION,
            player_id=seat.slot,
            tick_rate=self.config.tick_rate,
            tick=self.matches.tick_number,
            server_time=self.server_time(),
            token=issue_token(self.secret, self.config.region, seat.slot, seat.name, match=index),
            map=self.config.arena.name,
            region=self.config.region,
            epoch=self.matches.epoch,
            standbys=self.player_endpoints(),
            ack=seat.inputs.acked,
            match=index,
        )
        # From here on this player's frames are read off the socket by a PlayerStream
        # (taken over before the welcome: a client sends nothing else until it has one).
        stream = connection.take_over(
            lambda data: self.handle_frame(connection, data),
            lambda: self.complain(connection, protocol.MalformedFrame("text frames are not used")),
            WS_MAX_MESSAGE_BYTES,
            self.inbox,
        )
        connection.send(protocol.encode(welcome))
        self.connections[key] = connection
        self.metrics.players.set(self.matches.player_count)
        log.info(
            "event=player_joined match=%d player=%d name=%s %s",
            index,
            seat.slot,
            join.name[:32],
            self.log_context,
        )
        try:
            if stream is not None:
                await stream.closed
        finally:
            if self.connections.get(key) is connection:
                del self.connections[key]
                if self.role == "primary" and not self.shutting_down:
                    # A node that shuts down keeps its seats: the standby that takes over
                    # gives them back to the players who come back with their tokens.
                    self.matches[index].leave(seat.slot)
            self.metrics.players.set(self.matches.player_count)
            log.info("event=player_left match=%d player=%d %s", index, seat.slot, self.log_context)

    async def _announce_standbys(self) -> None:
        """Tell every player the region's current standbys (for their spare connections)."""
        frame = protocol.encode(
            protocol.StandbysMessage(self.player_endpoints(), self.matches.epoch)
        )
        for connection in list(self.connections.values()):
            connection.send(frame)

    async def close_all(self) -> None:
        self.shutting_down = True
        bye = protocol.encode(ErrorMessage("shutdown", "the node is shutting down", fatal=True))
        for connection in list(self.connections.values()):
            with contextlib.suppress(Exception):
                connection.send(bye)
                await connection.close(WSCloseCode.GOING_AWAY, b"shutdown")

    # -- standbys (primary only) ----------------------------------------------------------

    async def replication_session(self, request: web.Request, ws: web.WebSocketResponse) -> None:
        """A standby's link: authenticate it, then stream it every tick."""
        try:
            async with asyncio.timeout(JOIN_TIMEOUT_S):
                first = await ws.receive()
            hello = msgpack_loads(first.data) if first.type is WSMsgType.BINARY else None
        except (TimeoutError, ValueError):
            hello = None
        if not isinstance(hello, dict) or not verify_hello(self.secret, hello, time.time()):
            await ws.send_bytes(msgpack_dumps({"type": "error", "code": "unauthenticated"}))
            await ws.close(code=WSCloseCode.POLICY_VIOLATION, message=b"unauthenticated")
            self.metrics.peers_refused.labels("unauthenticated").inc()
            held = self._peer_refusals.allow("unauthenticated")
            if held is not None:
                log.warning(
                    'event=peer_refused reason=unauthenticated repeats=%d hint="a peer does not '
                    "share this node's cluster secret (ARENA_CLUSTER_SECRET)\" %s",
                    held,
                    self.log_context,
                )
            return
        if int(hello["epoch"]) > self.matches.epoch and self.role == "primary":
            self.step_down(int(hello["epoch"]))
        if self.role != "primary" or self._step_down.is_set():
            await ws.send_bytes(msgpack_dumps({"type": "not_primary", "epoch": self.matches.epoch}))
            await ws.close()
            return
        if hello.get("fingerprint") != state.config_fingerprint(self.matches):
            await ws.send_bytes(msgpack_dumps({"type": "error", "code": "config_mismatch"}))
            await ws.close(code=WSCloseCode.POLICY_VIOLATION, message=b"config_mismatch")
            return
        await ws.send_bytes(msgpack_dumps({"type": "welcome_standby", "node": self.config.node_id}))
        link = StandbyLink(str(hello["node"]), ws, request.transport)
        if hello.get("url") and self.learned_peers.get(link.node) != hello["url"]:
            self.learned_peers[link.node] = str(hello["url"])
            await self._announce_standbys()
        await self.hub.serve(link, lambda: state.encode_node_full(self.matches, self.matches.epoch))


def msgpack_loads(data: bytes) -> Any:
    try:
        return msgpack.unpackb(data, raw=False)
    except Exception:  # garbage from an unauthenticated peer
        raise ValueError("not msgpack") from None


def msgpack_dumps(value: Any) -> bytes:
    return msgpack.packb(value, use_bin_type=True)
