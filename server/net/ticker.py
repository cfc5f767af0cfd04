"""The primary's tick, top to bottom: inputs, simulation, replication, publication.

One function does it all in order, so a reader follows a tick without jumping between
modules: ticks the schedule skipped after a stall are noted; the intake's held inputs are
queued; every match advances and its shots are judged
(:class:`server.sim.matchset.MatchSet`); the tick goes to the standbys; it is shown to the
players once they hold it (synchronous replication), or when the coordinator confirms this
node still leads, with the round-trip probes that are due; then the tick's cost is counted.
"""

from __future__ import annotations

import logging
import time

from server.net.sessions import Sessions
from server.net.state import NodeState
from server.replication import messages
from server.replication import state as records

__all__ = ["Ticker"]

log = logging.getLogger("arena.server")


class Ticker:
    """Runs the node's ticks while it leads (the tick loop calls :meth:`run_tick`)."""

    def __init__(self, node: NodeState, sessions: Sessions) -> None:
        self.node = node
        self.sessions = sessions
        self._skipped = 0  # the schedule's count when last looked at

    async def run_tick(self, tick: int) -> None:
        node = self.node
        began = node.clock()
        self._note_skips()
        node.intake.drain()
        node.metrics.count_inputs(*node.intake.take_tally())
        results = node.matches.tick(tick)
        synced = False
        if node.hub.links:
            events = [result.events for result in results]
            record = messages.encode(records.capture_tick(node.matches, events, node.matches.epoch))
            synced = await node.hub.replicate(tick, record, node.config.replication == "sync")
        fenced = node.hub.fenced_epoch
        if fenced is not None and fenced > node.matches.epoch:
            node.request_step_down(fenced)
        elif synced or await node.coordinator.confirm():
            if not node.stepping_down.is_set():
                self.sessions.publish(results)
                self.sessions.probe(tick / node.config.tick_rate)
            if "first_tick_at" not in node.failover and "promoted_at" in node.failover:
                node.failover["first_tick_at"] = time.time()
        else:
            node.metrics.ticks_unpublished.inc()
            log.warning("event=leadership_lost tick=%d %s", tick, node.log_context)
            node.request_step_down(node.matches.epoch)
        duration = node.clock() - began
        node.metrics.flush()
        node.stats.record(duration)
        node.metrics.tick_duration.observe(duration)
        node.metrics.ticks.inc()
        if duration > node.stats.period:
            node.metrics.tick_overruns.inc()
            log.warning(
                "event=tick_overrun tick=%d duration_ms=%.2f budget_ms=%.2f %s",
                tick,
                duration * 1e3,
                node.stats.period * 1e3,
                node.log_context,
            )

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
            "event=ticks_skipped total=%d at=%.3f %s",
            schedule.skipped,
            schedule.last_skip_at or 0.0,
            node.log_context,
        )
