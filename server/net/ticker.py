"""The primary's tick, top to bottom: inputs, simulation, replication, publication.

One function does it all in order, so a reader follows a tick without jumping between
modules: ticks the schedule skipped after a stall are noted; the intake's held inputs are
queued; every match advances and its shots are judged
(:class:`server.sim.matchset.MatchSet`); the tick goes to the standbys; it is shown to the
players once the commit set holds it and only while the lease those acknowledgements
granted lasts (synchronous replication, :mod:`server.replication.commit`), or, with no
standby in sync, while the coordinator says this node still leads; with the round-trip
probes that are due, a journal line and, when one is due, a checkpoint; then the tick's
cost is counted. A tick that is not shown is counted by reason, never silently. With
``--snapshot-rate`` below the tick rate only every n-th tick is a snapshot tick (its
snapshot carries the events of the ticks between); every tick is replicated all the same,
and the snapshot's writes are spread over the ticks up to the next one: the players of every
other seat get it at its tick, the rest one tick later (the same snapshot, under the same
lease, in the same epoch), so that no tick carries all the node's writes.
"""

from __future__ import annotations

import math
import time

from server.logs import EventLogger, Throttle
from server.net.sessions import Sessions
from server.net.state import NodeState
from server.replication import messages
from server.replication import state as records
from server.replication.checkpoint import Checkpoint
from server.replication.commit import Verdict
from server.sim.match import TickResult

__all__ = ["Ticker"]

log = EventLogger("arena.server")


class Ticker:
    """Runs the node's ticks while it leads (the tick loop calls :meth:`run_tick`)."""

    def __init__(self, node: NodeState, sessions: Sessions) -> None:
        self.node = node
        self.sessions = sessions
        self._skipped = 0  # the schedule's count when last looked at
        self._withheld = Throttle(5.0)
        self._overruns = Throttle(10.0)  # a busy machine overruns every tick: a line a while
        #: Whether the last tick shown was held by no standby (None: none shown yet).
        self.degraded: bool | None = None
        #: A snapshot shown to its first share of seats (its tick, epoch, results and
        #: lease): the other seats get it at the start of the next tick.
        self._rest: tuple[int, int, list[TickResult], float] | None = None

    async def run_tick(self, tick: int) -> None:
        node = self.node
        if node.shutting_down:
            return  # a stopping primary shows nothing more: its standbys hold all it showed
        began = node.clock()
        self._show_rest(tick)
        self._note_skips()
        node.intake.drain()
        node.metrics.count_inputs(*node.intake.take_tally())
        recorder = node.recorder
        if recorder is not None:
            recorder.before_tick()
        results = node.matches.tick(tick)
        if recorder is not None:
            recorder.after_tick(results)
        wait = node.config.replication == "sync"
        hub = node.hub
        if hub.links or hub.commit.members:
            events = [result.events for result in results]
            hashes = [result.state_hash for result in results]
            record = messages.encode(
                records.capture_tick(node.matches, events, node.matches.epoch, hashes)
            )
            decision = await hub.replicate(tick, record, wait)
        else:
            decision = hub.commit.decide(tick, node.clock(), wait=wait)
        node.metrics.standbys_in_sync.set(len(hub.commit.in_sync))
        fenced = hub.fenced_epoch
        if fenced is not None and fenced > node.matches.epoch:
            node.request_step_down(fenced)
        elif decision.verdict is not Verdict.PUBLISH:
            self._unpublished(tick, decision.verdict.value)
        elif decision.deadline is None and not await node.coordinator.confirm():
            self._unpublished(tick, "not_leading")
            if not node.coordinator.leading:
                node.request_step_down(node.matches.epoch)
        elif decision.deadline is not None and node.clock() >= decision.deadline:
            self._unpublished(tick, Verdict.LEASE_EXPIRED.value)
        elif not node.stepping_down.is_set():
            self._note_degraded(decision.deadline is None and wait)
            if results and results[0].body:  # a snapshot tick (--snapshot-rate)
                self._show(tick, results, decision.deadline, decision.synced)
        duration = node.clock() - began
        node.metrics.flush()
        node.stats.record(duration)
        node.metrics.tick_duration.observe(duration)
        node.metrics.ticks.inc()
        if duration > node.stats.period:
            node.metrics.tick_overruns.inc()
            held = self._overruns.allow("overrun")
            if held is not None:
                log.warning(
                    "tick_overrun",
                    tick=tick,
                    duration_ms=round(duration * 1e3, 2),
                    budget_ms=round(node.stats.period * 1e3, 2),
                    repeats=held,
                    **node.log_fields,
                )

    def _show(
        self, tick: int, results: list[TickResult], deadline: float | None, synced: bool
    ) -> None:
        """Send the tick's snapshot to every player while the lease lasts; note it in the
        journal and checkpoint it once shown."""
        node = self.node
        until = math.inf if deadline is None else deadline
        spread = node.config.snapshot_interval > 1
        sent, withheld = self.sessions.publish(
            results, until, (0, 2) if spread else (0, 1), tick / node.config.tick_rate
        )
        self._rest = (tick, node.matches.epoch, results, until) if spread else None
        if withheld:  # frozen mid-tick: the lease ran out between two players
            self._unpublished(tick, Verdict.LEASE_EXPIRED.value)
        if sent or not withheld:
            node.journal.published(
                node.matches.epoch, tick, [r.state_hash for r in results], synced
            )
            self._checkpoint()
        if "first_tick_at" not in node.failover and "promoted_at" in node.failover:
            node.failover["first_tick_at"] = time.time()

    def _show_rest(self, tick: int) -> None:
        """The last snapshot, to the seats its tick left for the next (``tick``, whose
        time its probes count from): while its lease lasts, in the epoch it was shown in,
        and never once this node is stepping down (it may be deposed). After a stall too:
        a snapshot carries the events of its interval, which its clients would never learn
        otherwise."""
        rest, self._rest = self._rest, None
        node = self.node
        if rest is None or node.shutting_down or node.stepping_down.is_set():
            return
        shown, epoch, results, until = rest
        fenced = node.hub.fenced_epoch
        if epoch != node.matches.epoch or (fenced is not None and fenced > epoch):
            return  # (a node that led before and leads again: that snapshot is long gone)
        _, withheld = self.sessions.publish(results, until, (1, 2), tick / node.config.tick_rate)
        if withheld:
            self._unpublished(shown, Verdict.LEASE_EXPIRED.value)

    def _checkpoint(self) -> None:
        """Checkpoint the tick just shown, when one is due (a copy: written off the loop)."""
        node = self.node
        writer = node.checkpoints
        if writer is None or not writer.due(node.clock()):
            return
        writer.write(
            Checkpoint(
                node.config.region,
                records.config_fingerprint(node.matches),
                time.time(),
                records.capture_full(node.matches, node.matches.epoch),
            )
        )

    def _unpublished(self, tick: int, reason: str) -> None:
        node = self.node
        node.metrics.ticks_unpublished.labels(reason).inc()
        held = self._withheld.allow(reason)
        if held is not None:
            log.warning(
                "tick_unpublished", tick=tick, reason=reason, repeats=held, **node.log_fields
            )

    def _note_degraded(self, degraded: bool) -> None:
        """Log and meter the moves in and out of degraded (no standby holds what is shown)."""
        if degraded == self.degraded:
            return
        self.degraded = degraded
        node = self.node
        node.metrics.degraded.set(1 if degraded else 0)
        if degraded:
            log.warning(
                "degraded",
                standbys_in_sync=0,
                hint="players are shown ticks no standby holds; a failover now would have "
                "no eligible standby",
                **node.log_fields,
            )
        else:
            log.info("replicated", standbys_in_sync=len(node.hub.commit.in_sync), **node.log_fields)

    def _note_skips(self) -> None:
        """Count the ticks a stall made the schedule skip, and tell the probes when."""
        node = self.node
        schedule = node.schedule
        skipped, self._skipped = schedule.skipped - self._skipped, schedule.skipped
        if skipped <= 0 or schedule.last_skip_at is None:
            return  # none (or a new schedule, after a promotion, counting from 0)
        node.metrics.ticks_skipped.inc(skipped)
        for match in node.matches.matches:
            match.probes.note_skip(schedule.last_skip_at)
        log.warning(
            "ticks_skipped",
            total=schedule.skipped,
            at=round(schedule.last_skip_at or 0.0, 3),
            **node.log_fields,
        )
