"""A regional node: its shared state and its jobs, wired together; its start and its health.

The jobs each have a module: the players (:mod:`.sessions`), the tick (:mod:`.ticker`),
the role loop (:mod:`.leadership`), the standbys' hello
(:mod:`server.replication.net.handshake`). This class builds them over one
:class:`~server.net.state.NodeState`, warms the kernels up before anything is served, and
answers ``/health``. Everything here is the asyncio edge: the match, the replication
records, the tokens and the view-time rules are sans-I/O modules the jobs drive.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import gc
import os
import socket
import time
from collections.abc import Callable
from typing import Any, Literal
from urllib.parse import urlsplit

from aiohttp import web

from server.directory import Heartbeat
from server.lifecycle import NodeView
from server.logs import EventLogger
from server.net.config import NodeConfig
from server.net.leadership import Leadership
from server.net.links import TRY_AGAIN_LATER
from server.net.sessions import Sessions, reject
from server.net.state import NodeState
from server.net.ticker import Ticker
from server.net.udp.endpoint import UdpEndpoint
from server.net.udp.link import UdpLink
from server.net.udp.tokens import region_connect_token
from server.net.warmup import WarmUpReport, warm_up_kernels
from server.net.ws_link import WebSocketLink
from server.node_phases import LifecycleEvent, node_status
from server.region_key import region_key
from server.replication.net.handshake import StandbyDoor
from server.replication.roles import Role
from shared import jitcache
from shared.datagram import ServerHandshake
from shared.datagram.mmsg import set_buffer_sizes
from shared.lifetime import pid_namespace

__all__ = ["Node", "NodeConfig"]

log = EventLogger("arena.server")

#: Receive and send buffers asked for the UDP socket: a tick's burst of every player's
#: datagrams must fit (the kernel caps it at net.core.rmem_max / wmem_max).
UDP_BUFFER_BYTES = 4 * 1024 * 1024


class Node(NodeState):
    """One node and the tasks that run it; ``run()`` is owned by the app."""

    def __init__(self, config: NodeConfig, clock: Callable[[], float] = time.perf_counter):
        super().__init__(config, clock)
        self.sessions = Sessions(self)
        self.ticker = Ticker(self, self.sessions)
        self.leadership = Leadership(self, self.sessions, self.ticker)
        self.standbys = StandbyDoor(self, self.sessions.announce_standbys)
        self.warm_up_report: WarmUpReport | None = None
        #: Set once the node first became ready (``arena-server`` then says it listens).
        self.became_ready = asyncio.Event()
        #: The UDP endpoint (:meth:`open_udp`; None: this node serves WebSocket only).
        self.udp: UdpEndpoint | None = None
        #: Seals and opens the region's connect tokens: the same on every node of the
        #: region, derived from the cluster secret.
        self.udp_key = region_key(self.secret, config.region)
        #: This node's UDP address as its connect tokens list it (set by :meth:`open_udp`).
        self.udp_address: tuple[str, int] = ("", 0)

    async def run(self) -> None:
        """Warm up, then lead or follow for as long as the app runs."""
        await self.warm_up()
        await self.leadership.run(self.became_ready)

    async def warm_up(self) -> None:
        """Compile or load every kernel, off the event loop, before anyone is served."""
        log.info(
            "warming_up",
            backend=self.validator.backend,
            cache=jitcache.cache_dir(),
            **self.log_fields,
        )
        if (reason := jitcache.fallback_reason()) is not None:
            log.warning(
                "kernel_cache_fallback",
                reason=reason,
                cache=jitcache.cache_dir(),
                hint="set NUMBA_CACHE_DIR to a writable folder (systemd: CacheDirectory=) "
                "so restarts load, not compile",
                **self.log_fields,
            )
        report = await warm_up_kernels(self.validator)
        if (reason := self.validator.fallback_reason) is not None:
            log.warning(
                "hitreg_fallback",
                asked=self.validator.requested,
                backend=self.validator.backend,
                reason=reason,
                hint="the GPU kernels did not compile; the CPU kernels judge the shots",
                **self.log_fields,
            )
        # What exists now (modules, numba's compiled kernels) lives as long as the node:
        # out of the cyclic collector's sight. Before, a full collection walked all of it
        # and stalled a tick by about 85 ms every few seconds at 300 players.
        gc.freeze()
        self.lifecycle.apply(LifecycleEvent.WARMED)
        self.warm_up_report = report
        log.info("warmed_up", backend=self.validator.backend, **report.as_dict(), **self.log_fields)

    # -- what the app serves --------------------------------------------------------------

    async def session(self, request: web.Request, ws: web.WebSocketResponse) -> None:
        await self.sessions.session(WebSocketLink.upgraded(request, ws, self.metrics))

    def open_udp(self, sock: socket.socket) -> UdpEndpoint:
        """Serve players over UDP on ``sock`` (bound) from now on: connect tokens from
        ``POST /connect``, then the handshake, then the same sessions as ``/ws``."""
        host, port = sock.getsockname()[:2]
        public = urlsplit(self.config.public_url).hostname or host
        self.udp_address = (public, port)
        own = list(dict.fromkeys([self.udp_address, (host, port)]))
        set_buffer_sizes(sock, UDP_BUFFER_BYTES, UDP_BUFFER_BYTES)
        handshake = ServerHandshake(self.udp_key, own)
        config = self.config
        self.udp = UdpEndpoint(
            sock, handshake, self.metrics, self.udp_session,
            issue=functools.partial(region_connect_token, self),
            repeat_after_s=config.snapshot_interval / config.tick_rate / 2,
        )  # fmt: skip
        self.udp.start()
        return self.udp

    async def udp_session(self, link: UdpLink) -> None:
        """A UDP client that answered its challenge: refused while warming up or held off
        (what ``/ws`` answers with HTTP 503 and 429 before its upgrade), else a session."""
        if not self.warm:
            await reject(link, "not_ready", "warming up; try again", TRY_AGAIN_LATER, 1.0)
            return
        if (wait := self.sessions.handshake_wait(link.address)) > 0:
            self.metrics.joins_refused.labels("offender_holdoff").inc()
            text = "held off: this address's connections ended in offences"
            await reject(link, "held_off", text, TRY_AGAIN_LATER, wait)
            return
        await self.sessions.session(link)

    async def replication_session(self, request: web.Request, ws: web.WebSocketResponse) -> None:
        await self.standbys.serve(request, ws)

    async def close_all(self) -> None:
        """Shutdown: the tick in flight waits for no standby any more (nothing is shown
        from now on), and every player is told (``shutdown``) and closed with 1001."""
        self.lifecycle.apply(LifecycleEvent.STOP)
        self.hub.stop_waiting()
        await self.sessions.close_all("shutdown", "the node is shutting down")
        if self.udp is not None:
            await self.udp.close()
        if self.recorder is not None:
            self.recorder.close()  # what memory holds of the match log, written

    @property
    def status(self) -> str:
        """``warming_up``, ``starting`` (warm, role not decided yet), ``ready`` or
        ``stopping``: the word beside ``ready`` in ``/health``."""
        return node_status(self.lifecycle.state, self.role)

    def platform_view(self) -> NodeView:
        """What Agones and systemd are told about (:mod:`server.lifecycle`)."""
        m = self.matches
        return NodeView(self.status, self.role.value, m.epoch, m.player_count, self.stats.recorded)

    def _snapshot_tally(self) -> dict[str, int]:
        """What every match's players were sent, summed (``DeltaEncoder.tally``)."""
        total: collections.Counter[str] = collections.Counter()
        for match in self.matches.matches:
            total.update(match.deltas.tally())
        return dict(total)

    def public_health(self) -> dict[str, object]:
        """The player port's ``/health``: enough for a load balancer's probe, nothing a
        stranger could use (no process, folder, coordinator or standby)."""
        return {
            "ready": self.ready,
            "status": self.status,
            "role": self.role.value,
            "epoch": self.matches.epoch,
        }

    def peer_health(self) -> dict[str, object]:
        """``/peer``: what the region's other nodes need to agree on a primary (who it
        is, what it holds, whether it may be promoted), on the port they reach."""
        return {
            **self.public_health(),
            "node": self.config.node_id,
            "replicated_tick": self.matches.tick_number,
            "eligible": self.roles.primary or self.follower.eligible,
        }

    def health(self) -> dict[str, object]:
        """The admin port's ``/health``: everything an operator reads about the node."""
        c, matches = self.config, self.matches
        combat = sum((m.combat.counters for m in matches.matches), collections.Counter())
        inputs = sum((m.counters for m in matches.matches), collections.Counter())
        return {
            "ready": self.ready,
            "status": self.status,
            "warm_up": None if self.warm_up_report is None else self.warm_up_report.as_dict(),
            "region": c.region,
            "node": c.node_id,
            "role": self.role.value,
            "epoch": matches.epoch,
            "tick": matches.tick_number,
            "replicated_tick": matches.tick_number,
            "tick_rate": c.tick_rate,
            "snapshot_rate": c.tick_rate // c.snapshot_interval,
            "players": matches.player_count,
            "max_players": matches.capacity,
            "matches": [
                {"index": m.index, "players": m.world.player_count, "max_players": c.max_players}
                for m in matches.matches
            ],
            "tick_ms_p50": round(self.stats.percentile_ms(50), 4),
            "tick_ms_p99": round(self.stats.percentile_ms(99), 4),
            "tick_overruns": self.stats.overruns,
            "ticks_skipped": self.schedule.skipped,
            "hitreg_backend": self.validator.backend,
            "combat": dict(sorted(combat.items())),
            # What each tick did with the players' inputs (``Match._release_inputs``):
            # dropped_late counts inputs a catch-up had no time for.
            "inputs": {k.removeprefix("input_"): v for k, v in sorted(inputs.items())},
            "snapshots": self._snapshot_tally(),
            "replication": c.replication,
            "coordinator": c.coordinator,
            # Whether this node holds every tick the region showed (a standby that may be
            # promoted), and whether the primary shows ticks no standby holds.
            "eligible": self.roles.primary or self.follower.eligible,
            "degraded": bool(self.roles.primary and self.ticker.degraded),
            "min_standbys": c.min_standbys,
            "standbys": self.hub.describe(),
            "standbys_in_sync": len(self.hub.commit.in_sync) if self.roles.primary else 0,
            # A standby: how long a silence of its primary must last before it campaigns
            # (its promise, or longer when the records have been irregular).
            "failover_wait_ms": round(self.follower.detector.wait() * 1000, 1),
            "failover": self.failover,
            "checkpoint": self._checkpoint_health(),
            "parked_players": self.sessions.parked,
            # The UDP port (None: --udp-port off) and its connected clients.
            "udp": None if self.udp is None else self.udp.port,
            "udp_clients": 0 if self.udp is None else len(self.udp.links),
            "pid": os.getpid(),
            "pid_namespace": pid_namespace(),
            "uptime_s": round(time.time() - self.started_at, 3),
        }

    def _checkpoint_health(self) -> dict[str, Any] | None:
        """The newest checkpoint this node wrote (None: no --checkpoint-dir)."""
        writer = self.checkpoints
        if writer is None:
            return None
        if writer.last is None:
            return {"dir": writer.folder.as_posix(), "epoch": None, "tick": None, "age_s": None}
        epoch, tick, wall = writer.last
        return {"dir": writer.folder.as_posix(), "epoch": epoch, "tick": tick,
                "age_s": round(time.time() - wall, 3)}  # fmt: skip

    def directory_heartbeat(self) -> Heartbeat | None:
        """What the directory should know of this node now (None while starting)."""
        if self.role is Role.STARTING:
            return None
        role: Literal["primary", "standby"] = "primary" if self.roles.primary else "standby"
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
