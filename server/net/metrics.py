"""Prometheus metrics of one node, on a registry of its own (so tests can run many nodes).

Names follow Prometheus' naming guide: a unit in the name (``_seconds``, ``_bytes``), and
``_total`` on every counter (prometheus_client appends it: ``Counter("arena_ticks")`` is
exposed as ``arena_ticks_total``). A labelled counter has a series for every label value
the code can produce from the start, at 0, so ``rate()`` and ``increase()`` see its first
event and an alert on it never waits for a series to appear.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterator
from typing import Protocol

from prometheus_client import Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from server.exposition import Registry
from server.replication.commit import Verdict
from server.replication.roles import Role
from server.sim.inputs import InputVerdict
from shared.datagram.constants import CAUSES, LINK_CAUSE_MEANINGS
from shared.protocol import ProtocolError

__all__ = [
    "INPUT_REJECTIONS",
    "JOIN_REFUSALS",
    "PEER_REFUSALS",
    "PROTOCOL_ERROR_CODES",
    "UDP_REFUSALS",
    "UNPUBLISHED_REASONS",
    "NodeMetrics",
]

#: ``arena_inputs_rejected_total{reason}``: the verdicts that refuse an input.
INPUT_REJECTIONS = tuple(v.value for v in InputVerdict if not v.usable)
#: ``arena_joins_refused_total{reason}`` (:mod:`server.net.sessions` refuses with these).
JOIN_REFUSALS = (
    "version", "not_primary", "reservation_required", "reservation", "address_limit", "full",
    "token", "in_use", "held_off", "offender_holdoff",
)  # fmt: skip
#: ``arena_ticks_unpublished_total{reason}``: the commit set's refusals, and a lost lease.
UNPUBLISHED_REASONS = (
    Verdict.LEASE_EXPIRED.value, Verdict.HALTED.value, Verdict.STOPPING.value, "not_leading"
)  # fmt: skip
#: ``arena_peers_refused_total{reason}``.
PEER_REFUSALS = ("unauthenticated",)
#: ``arena_udp_refused_total{cause}``: the datagram core's causes, and ``flooding`` (a seated
#: address's datagrams dropped unopened while its flood pause lasts).
UDP_REFUSALS = (*CAUSES, *LINK_CAUSE_MEANINGS)


def _error_codes(error: type[ProtocolError]) -> list[str]:
    return [error.code, *(code for sub in error.__subclasses__() for code in _error_codes(sub))]


#: ``arena_protocol_errors_total{code}``: every code the codec refuses a frame with.
PROTOCOL_ERROR_CODES = tuple(dict.fromkeys(_error_codes(ProtocolError)))

# Fine where a node's ticks live (1-5 ms: a percentile read off the buckets is only as exact
# as they are), coarse towards the budget and beyond.
_TICK_BUCKETS = (
    0.0005, 0.001, 0.00125, 0.0015, 0.00175, 0.002, 0.0025, 0.003, 0.0035, 0.004, 0.005, 0.006,
    0.008, 0.010, 0.0125, 0.0167, 0.025, 0.05, 0.1,
)  # fmt: skip


class NodeMetrics:
    """The node's metrics. The per-message counts (bytes, inputs) are tallied in plain
    integers on the hot path and added to their counters once per tick (:meth:`flush`):
    a prometheus-client ``inc`` costs about a microsecond, three of them per player-tick."""

    def __init__(self) -> None:
        self.tally_bytes_in = 0
        self.tally_bytes_out = 0
        self.tally_inputs_applied = 0
        self.tally_inputs_clamped = 0
        self.tally_inputs_over_budget = 0
        self.tally_pings_over_budget = 0
        self.registry = Registry()
        r = self.registry
        self.tick_duration = Histogram(
            "arena_tick_duration_seconds",
            "Wall time spent computing and publishing one tick",
            buckets=_TICK_BUCKETS,
            registry=r,
        )
        self.ticks_skipped = Counter(
            "arena_ticks_skipped",
            "Ticks not run because a stall made them late (time keeps its pace)",
            registry=r,
        )
        self.tick_overruns = Counter(
            "arena_tick_overruns", "Ticks that took longer than the tick period", registry=r
        )
        self.ticks = Counter("arena_ticks", "Ticks simulated", registry=r)
        self.players = Gauge("arena_players", "Players connected", registry=r)
        self.inputs_applied = Counter(
            "arena_inputs_applied", "Inputs applied to the world", registry=r
        )
        self.inputs_rejected = Counter(
            "arena_inputs_rejected", "Inputs refused, by reason", ["reason"], registry=r
        )
        self.inputs_clamped = Counter(
            "arena_inputs_clamped", "Inputs accepted after clamping the move vector", registry=r
        )
        self.inputs_dropped = Counter(
            "arena_inputs_dropped",
            "Input frames dropped unread, by reason (over_budget: beyond the connection's "
            "input budget, the tick rate with a second's worth of burst)",
            ["reason"],
            registry=r,
        )
        self.pings_dropped = Counter(
            "arena_pings_dropped",
            "Frames other than inputs (pings, probe echoes, WebSocket control frames) dropped "
            "unread, by reason (over_budget: beyond the connection's budget of 20 a second)",
            ["reason"],
            registry=r,
        )
        # (made now, so the series read 0 before the first drop; kept for flush())
        self._inputs_over_budget = self.inputs_dropped.labels("over_budget")
        self._pings_over_budget = self.pings_dropped.labels("over_budget")
        self.protocol_errors = Counter(
            "arena_protocol_errors",
            "Frames refused by the codec, by error code",
            ["code"],
            registry=r,
        )
        self.bytes_in = Counter(
            "arena_received_bytes",
            "Message payload bytes received from players (WebSocket and UDP)",
            registry=r,
        )
        self.bytes_out = Counter(
            "arena_sent_bytes",
            "Message payload bytes sent to players (WebSocket and UDP)",
            registry=r,
        )
        self.udp_refused = Counter(
            "arena_udp_refused",
            "UDP datagrams dropped unanswered, by cause (bad_size, bad_version, expired, "
            "bad_token, not_listed, replayed, bad_challenge, out_of_window, pending_full, "
            "unknown_address, bad_packet, flooding)",
            ["cause"],
            registry=r,
        )
        self.udp_datagrams = Counter(
            "arena_udp_datagrams",
            "UDP datagrams received (in) and sent (out)",
            ["direction"],
            registry=r,
        )
        self.udp_bytes = Counter(
            "arena_udp_bytes",
            "UDP payload bytes of the datagrams received (in) and sent (out)",
            ["direction"],
            registry=r,
        )
        self.udp_send_failures = Counter(
            "arena_udp_send_failures",
            "UDP datagrams the kernel did not take (a full send buffer, an unreachable "
            "address): dropped, as a lossy link would",
            registry=r,
        )
        self.udp_snapshot_repeats = Counter(
            "arena_udp_snapshot_repeats",
            "snapshots sent a second time, half a snapshot interval later, to UDP clients "
            "whose path lost a datagram lately",
            registry=r,
        )
        self.udp_kernel_drops = Gauge(
            "arena_udp_kernel_drops",
            "Datagrams the kernel dropped for want of receive buffer, since the socket opened "
            "(SO_RXQ_OVFL; else the host's UDP RcvbufErrors)",
            registry=r,
        )
        self.udp_clients = Gauge(
            "arena_udp_clients", "UDP clients connected (handshake done)", registry=r
        )
        self.snapshots_dropped = Counter(
            "arena_snapshots_dropped",
            "Snapshots not sent because the client's socket buffer was full (newest wins)",
            registry=r,
        )
        self.replication_bytes = Counter(
            "arena_replication_sent_bytes", "Bytes of tick records sent to standbys", registry=r
        )
        self.standby_out_of_sync = Counter(
            "arena_standby_out_of_sync",
            "Times a standby of the commit set missed the acknowledgement bound and was told "
            "it is out of sync (the tick waited until it answered)",
            registry=r,
        )
        self.ticks_stalled = Counter(
            "arena_ticks_stalled",
            "Ticks that waited past the acknowledgement bound of a standby of the commit set",
            registry=r,
        )
        self.ticks_unpublished = Counter(
            "arena_ticks_unpublished",
            "Ticks computed but not shown to players, by reason (lease_expired: acknowledged "
            "too late to show safely; halted: fewer standbys in sync than --min-standbys; "
            "not_leading: the coordinator's lease is gone; stopping: computed as the node "
            "began to stop)",
            ["reason"],
            registry=r,
        )
        self.degraded = Gauge(
            "arena_degraded",
            "1 while this primary shows ticks that no standby holds (no standby in sync)",
            registry=r,
        )
        self.promotions = Counter("arena_promotions", "Times this node became primary", registry=r)
        self.promotions_spurious = Counter(
            "arena_promotions_spurious",
            "Promotions over a primary that turned out alive (it spoke after the takeover: "
            "slow, paused or cut off, not dead)",
            registry=r,
        )
        self.standbys_in_sync = Gauge(
            "arena_standbys_in_sync",
            "Standbys in sync with this primary (alert on 0: a failover now has nobody to promote)",
            registry=r,
        )
        self.checkpoints_written = Counter(
            "arena_checkpoints_written", "Checkpoints written to --checkpoint-dir", registry=r
        )
        self.checkpoints_failed = Counter(
            "arena_checkpoints_failed",
            "Checkpoints that could not be written (disk full, permissions: see the log)",
            registry=r,
        )
        self.checkpoints_skipped = Counter(
            "arena_checkpoints_skipped",
            "Checkpoints not taken because the last one was still being written",
            registry=r,
        )
        self.checkpoint_tick = Gauge(
            "arena_checkpoint_tick", "The tick of the newest checkpoint written", registry=r
        )
        self.checkpoint_seconds = Histogram(
            "arena_checkpoint_seconds",
            "Time to encode, write, fsync and rename one checkpoint (off the tick loop)",
            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
            registry=r,
        )
        self.checkpoint_resumes = Counter(
            "arena_checkpoint_resumes",
            "Times this node resumed its region's match from a checkpoint (every node had died)",
            registry=r,
        )
        self.joins_refused = Counter(
            "arena_joins_refused", "Joins refused, by reason", ["reason"], registry=r
        )
        self.idle_kicks = Counter(
            "arena_idle_kicks",
            "Seated players dropped and their seats freed for sending no input for --idle-kick-s",
            registry=r,
        )
        self.peers_refused = Counter(
            "arena_peers_refused",
            "Replication hellos refused, by reason (unauthenticated: another cluster secret)",
            ["reason"],
            registry=r,
        )
        self.role = Gauge(
            "arena_node_role",
            "1 for the role this node is in, 0 for the others (alert on no primary in a "
            'region: max by (region) (arena_node_role{role="primary"}) == 0)',
            ["region", "role"],
            registry=r,
        )
        self.epoch = Gauge(
            "arena_node_epoch",
            "The epoch this node is at (rises with every promotion in its region)",
            ["region"],
            registry=r,
        )
        self.viewers = Gauge(
            "arena_view_viewers", "Live-view viewers connected (/view/feed)", registry=r
        )
        self.view_frames_sent = Counter(
            "arena_view_frames_sent", "Live-view frames sent to viewers", registry=r
        )
        self.view_frames_missed = Counter(
            "arena_view_frames_missed",
            "Live-view frames a slow viewer did not get (a newer one replaced it)",
            registry=r,
        )
        for labelled, values in (
            (self.inputs_rejected, INPUT_REJECTIONS),
            (self.protocol_errors, PROTOCOL_ERROR_CODES),
            (self.joins_refused, JOIN_REFUSALS),
            (self.ticks_unpublished, UNPUBLISHED_REASONS),
            (self.peers_refused, PEER_REFUSALS),
            (self.udp_refused, UDP_REFUSALS),
            (self.udp_datagrams, ("in", "out")),
            (self.udp_bytes, ("in", "out")),
        ):
            for value in values:
                labelled.labels(value)

    def watch(self, region: str, role: Callable[[], Role], epoch: Callable[[], int]) -> None:
        """Read the node's role and epoch at each scrape: the gauges are never stale, and
        nothing has to remember to set them where the role machine moves."""
        for each in Role:
            self.role.labels(region, each.value).set_function(_is(role, each))
        self.epoch.labels(region).set_function(epoch)

    def watch_recording(self, recording: RecordingCounts) -> None:
        """The match log's counters (``--record``), read from its recorder at each scrape:
        its CPU on the tick's thread and the writer's, blocks and bytes written."""
        self.registry.register(_RecordingCollector(recording))

    def count_inputs(self, verdicts: collections.Counter[InputVerdict], payload_bytes: int) -> None:
        """The intake's tally: inputs applied (clamped among them) or rejected by reason."""
        self.tally_bytes_in += payload_bytes
        for verdict, times in verdicts.items():
            if verdict is InputVerdict.ACCEPTED:
                self.tally_inputs_applied += times
            elif verdict is InputVerdict.CLAMPED:
                self.tally_inputs_applied += times
                self.tally_inputs_clamped += times
            else:
                self.inputs_rejected.labels(verdict.value).inc(times)

    def flush(self) -> None:
        """Move the tallies into their counters (once per tick)."""
        self.bytes_in.inc(self.tally_bytes_in)
        self.bytes_out.inc(self.tally_bytes_out)
        self.inputs_applied.inc(self.tally_inputs_applied)
        self.inputs_clamped.inc(self.tally_inputs_clamped)
        self.tally_bytes_in = self.tally_bytes_out = 0
        self.tally_inputs_applied = self.tally_inputs_clamped = 0
        if self.tally_inputs_over_budget or self.tally_pings_over_budget:
            self._inputs_over_budget.inc(self.tally_inputs_over_budget)
            self._pings_over_budget.inc(self.tally_pings_over_budget)
            self.tally_inputs_over_budget = self.tally_pings_over_budget = 0


class RecordingCounts(Protocol):
    """What a recorder counts (:class:`server.net.recording.Recorder`)."""

    tick_cpu_s: float
    writer_cpu_s: float
    blocks_written: int
    bytes_written: int
    blocks_lost: int
    paused: bool


class _RecordingCollector(Collector):
    def __init__(self, recording: RecordingCounts) -> None:
        self.recording = recording

    def collect(self) -> Iterator[Metric]:
        recording = self.recording
        cpu = CounterMetricFamily(
            "arena_record_cpu_seconds",
            "CPU the match log took: on the tick's thread, and coding and writing blocks",
            labels=["part"],
        )
        cpu.add_metric(["tick"], recording.tick_cpu_s)
        cpu.add_metric(["writer"], recording.writer_cpu_s)
        yield cpu
        yield CounterMetricFamily(
            "arena_record_blocks", "Match log blocks written", value=recording.blocks_written
        )
        yield CounterMetricFamily(
            "arena_record_bytes", "Match log bytes written", value=recording.bytes_written
        )
        yield CounterMetricFamily(
            "arena_record_blocks_lost",
            "Match log blocks the disk did not take (full, gone, read-only)",
            value=recording.blocks_lost,
        )
        yield GaugeMetricFamily(
            "arena_record_paused",
            "1 while an operator has paused the match log (POST /record/pause)",
            value=1.0 if recording.paused else 0.0,
        )


def _is(role: Callable[[], Role], value: Role) -> Callable[[], float]:
    return lambda: 1.0 if role() is value else 0.0
