"""What one node's jobs share: its matches, role, clocks, links and identity.

The node is split by job (:mod:`.sessions` the players, :mod:`.ticker` the tick,
:mod:`.leadership` the role loop, :mod:`server.replication.net.handshake` the standbys'
hello); each job is a small class over this shared state, which has no job of its own
beyond the few questions every job asks (what time is it on the server, who are the
region's other nodes, how do I label a log line).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from typing import Any

from server.coordination.base import Coordinator
from server.coordination.net import make_coordinator
from server.net.checkpoints import CheckpointWriter
from server.net.config import NodeConfig
from server.net.journal import Journal
from server.net.metrics import NodeMetrics
from server.net.recording import Recorder
from server.net.registration import ClaimLedger
from server.net.tls import client_context
from server.node_phases import Tenure, TenureEvent, is_ready, lifecycle, tenure
from server.replication.commit import CommitSet
from server.replication.net.follower import Follower
from server.replication.net.hub import ReplicationHub
from server.replication.roles import Role, RoleEvent, RoleMachine
from server.sim.hitreg.backend import HitValidator, make_validator
from server.sim.intake import InputIntake
from server.sim.match import MatchConfig
from server.sim.matchset import MatchSet
from server.sim.tickstats import TickStats
from server.view.tap import ViewTap
from shared.timestep import TickSchedule

__all__ = ["NodeState"]


class NodeState:
    """One node's shared state (see the module)."""

    def __init__(self, config: NodeConfig, clock: Callable[[], float]) -> None:
        self.config = config
        self.clock = clock
        self.metrics = NodeMetrics()
        self.validator: HitValidator = make_validator(
            config.hitreg_backend, box_min=config.arena.box_min, box_max=config.arena.box_max
        )
        self.matches = MatchSet(
            MatchConfig(
                arena=config.arena,
                tick_rate=config.tick_rate,
                snapshot_interval=config.snapshot_interval,
                max_players=config.max_players,
                history_seconds=config.history_seconds,
                lag_compensation=config.lag_compensation,
                interest=config.interest,
            ),
            config.matches,
            self.validator,
        )
        self.roles = RoleMachine()
        if config.role == "standby":
            self.roles.apply(RoleEvent.FOLLOW)
        self.metrics.watch(config.region, lambda: self.roles.role, lambda: self.matches.epoch)
        self.schedule = TickSchedule(config.tick_rate, clock())
        self.stats = TickStats(period=1.0 / config.tick_rate)
        self.secret = config.cluster_secret or os.urandom(32)
        #: How this node's connections to its peers verify an https:// peer (``--tls-ca``).
        self.peer_tls = client_context(config.tls_ca)
        self.coordinator: Coordinator = make_coordinator(
            config.coordinator,
            node_id=config.node_id,
            peers=config.peers,
            region=config.region,
            state_dir=config.state_dir,
            tls=self.peer_tls,
            etcd_access=config.etcd_access,
            etcd_lease_ttl=config.etcd_lease_ttl,
        )
        self.hub = ReplicationHub(
            CommitSet(
                lease=config.lease,
                ack_timeout=config.ack_timeout,
                min_standbys=config.min_standbys,
            ),
            self.metrics,
            {},
            clock,
        )
        self.journal = Journal(config.journal, config.node_id)
        self.checkpoints = (
            CheckpointWriter(
                config.checkpoint_dir,
                config.region,
                config.checkpoint_interval,
                self.metrics,
                {"region": config.region, "node": config.node_id},
            )
            if config.checkpoint_dir
            else None
        )
        #: The match log (``--record``): the ticker and the follower feed it.
        self.recorder = (
            Recorder(
                config.record,
                self.matches,
                backend=self.validator.backend,
                region=config.region,
                node=config.node_id,
                max_bytes=max(1, int(config.record_max_mb * 1e6)),
            )
            if config.record
            else None
        )
        #: Seated players' input reads, held for the next tick to decode as one batch.
        self.intake = InputIntake(self.matches)
        #: The live view's tap: shots traced while someone watches ``/view``.
        self.view = ViewTap(self.matches)
        self.follower = Follower(
            self.matches,
            config.node_id,
            self.secret,
            config.failover_timeout,
            clock,
            lambda: self.log_fields,
            tls=self.peer_tls,
        )
        self.follower.public_url = config.public_url
        if self.recorder is not None:
            self.follower.applied = self.recorder.followed
            self.metrics.watch_recording(self.recorder)
        self.claims = ClaimLedger()  # reservations admitted, for the directory's accounting
        self.learned_peers: dict[str, str] = {}  # standbys that connected: node id -> URL
        self.started_at = time.time()
        self.failover: dict[str, Any] = {}
        #: Warming up, warm, stopping (:data:`server.node_phases.LIFECYCLE`).
        self.lifecycle = lifecycle()
        #: Leading, stepping down, superseded (:data:`server.node_phases.TENURE`); the two
        #: events below follow it, for the tasks that wait on it.
        self.tenure = tenure()
        #: Set while this node must stop leading: the lead loop ends.
        self.stepping_down = asyncio.Event()
        #: Set while this node leads (parked joins wait on it).
        self.leading = asyncio.Event()

    # -- time and identity ----------------------------------------------------------------

    @property
    def role(self) -> Role:
        return self.roles.role

    @property
    def warm(self) -> bool:
        """Kernels warm: the node can serve (in a role, once it has one)."""
        return self.lifecycle.state.warm

    @property
    def shutting_down(self) -> bool:
        return self.lifecycle.state.stopping

    def move_tenure(self, event: TenureEvent) -> Tenure:
        """Apply ``event`` to the tenure and wake whatever waits on it."""
        now = self.tenure.apply(event)
        for flag, on in ((self.leading, now.leading), (self.stepping_down, now.stepping_down)):
            if on:
                flag.set()
            else:
                flag.clear()
        return now

    def server_time(self) -> float:
        """Continuous server time now: tick T was due at ``T / rate`` on this scale."""
        return max(0.0, self.clock() - self.schedule.origin)

    @property
    def log_fields(self) -> dict[str, object]:
        """Who says a log line: every line of a node carries these (:mod:`server.logs`)."""
        c = self.config
        return {
            "region": c.region, "node": c.node_id, "role": self.role.value,
            "epoch": self.matches.epoch,
        }  # fmt: skip

    @property
    def ready(self) -> bool:
        """Ready to serve in its role: kernels warm, role decided, not shutting down (what
        ``/health`` answers 200 for; launchers and load balancers wait for it)."""
        return is_ready(self.lifecycle.state, self.role)

    def peer_urls(self) -> list[str]:
        """The region's other nodes: configured, and standbys that connected (base URLs)."""
        peers = dict.fromkeys([*self.config.peers, *self.learned_peers.values()])
        peers.pop(self.config.public_url, None)
        return [peer for peer in peers if peer]

    def player_endpoints(self) -> tuple[str, ...]:
        """Where a player goes if this node disappears: the region's other nodes."""
        return tuple(peer.rstrip("/") + "/ws" for peer in self.peer_urls())

    def request_step_down(self, epoch: int) -> None:
        """Stop publishing at once; the role loop does the rest. ``epoch`` above ours: a
        successor exists (this node's state is no longer the region's)."""
        if epoch > self.matches.epoch or self.roles.primary:
            superseded = epoch > self.matches.epoch
            self.matches.epoch = max(self.matches.epoch, epoch)
            self.move_tenure(TenureEvent.SUCCESSOR_SEEN if superseded else TenureEvent.STEP_DOWN)
