"""The node's role loop: lead or follow, and the moves between the two.

A **primary** ticks the match (:class:`~server.net.ticker.Ticker`) and watches its peers'
``/peer`` for a newer primary. A **standby** follows the primary's records; when the
primary falls silent it deposes it, campaigns and, if it wins, takes over at a higher
epoch with the same players, history and tick numbering (continued on the primary's clock,
so server time stays wall-clock time). A primary that learns of a higher epoch steps down
and becomes a standby of the new primary. Every move is a transition of the node's
:class:`~server.replication.roles.RoleMachine`.
"""

from __future__ import annotations

import asyncio
import math
import time
from typing import Any

import aiohttp

from server.coordination.base import CoordinatorError, RegionTaken
from server.coordination.net.peers import ask_peers
from server.logs import EventLogger
from server.net.checkpoints import newest_checkpoint
from server.net.sessions import Sessions
from server.net.state import NodeState
from server.net.ticker import Ticker
from server.node_phases import Tenure, TenureEvent
from server.replication import state as records
from server.replication.checkpoint import Checkpoint
from server.replication.roles import Role, RoleEvent
from shared.timestep import TickSchedule, run_tick_loop

__all__ = ["Leadership"]

log = EventLogger("arena.server")

PEER_POLL_S = 0.25
PEER_TIMEOUT_S = 0.2  # a peer's /peer answer counts only this soon
RETRY_S = 0.1  # between a standby's attempts to find or follow a primary
RECLAIM_S = 0.5  # between a --role primary node's claims of a region left empty


class Leadership:
    """Runs the role loop of one node (see the module)."""

    def __init__(self, node: NodeState, sessions: Sessions, ticker: Ticker) -> None:
        self.node = node
        self.sessions = sessions
        self.ticker = ticker
        self._follow_first = ""  # a claim found this primary: follow it first
        self._next_claim_at = 0.0
        # What the coordinator's campaign asks is asked while the last of the silence runs.
        node.follower.foresee = node.coordinator.foresee_campaign
        node.follower.foresight = node.coordinator.foresight

    async def run(self, became_ready: asyncio.Event) -> None:
        """Claim or follow, then lead or follow for as long as the app runs."""
        node = self.node
        await node.coordinator.start()
        try:
            fence: int | None = None  # after a promotion: the epoch to fence the old one with
            if node.config.role == "primary":
                await self._claim()
            became_ready.set()
            while True:
                if node.role is Role.PRIMARY:
                    await self._lead(fence)
                    fence = None
                else:
                    fence = await self._stand_by()
        finally:
            await node.follower.close()
            if node.checkpoints is not None:
                await node.checkpoints.close()
            await node.hub.close()
            await node.coordinator.close()
            node.journal.close()

    async def _claim(self) -> bool:
        """Lead a new match, or the one the newest checkpoint holds (every node of the
        region had died), or, when the region already has a primary or a standby holding
        its match (a restart after a takeover, as a supervisor does), follow it instead.
        True when this node leads now."""
        node = self.node
        checkpoint = None
        if node.config.checkpoint_dir:
            checkpoint = await asyncio.to_thread(
                newest_checkpoint,
                node.config.checkpoint_dir,
                node.config.region,
                records.config_fingerprint(node.matches),
                node.log_fields,
            )
        try:
            epoch = await node.coordinator.claim_initial(
                node_id=node.config.node_id,
                url=node.config.public_url,
                known_epoch=checkpoint.epoch if checkpoint is not None else 0,
            )
        except RegionTaken as taken:
            log.warning(
                "joining_as_standby",
                primary=taken.primary_url or "-",
                reason=str(taken),
                **node.log_fields,
            )
            if node.role is Role.STARTING:
                node.roles.apply(RoleEvent.FOLLOW)
            self._follow_first = taken.primary_url
            return False
        if checkpoint is not None:
            self._resume(checkpoint, epoch)
        else:
            self._become_primary(RoleEvent.CLAIM, epoch, first_tick=1, origin=node.clock())
        return True

    def _resume(self, checkpoint: Checkpoint, epoch: int) -> None:
        """Lead the checkpoint's match at ``epoch``: its seats wait ``--seat-grace-s`` for
        their players' tokens, and server time goes on from the checkpoint's tick by the
        wall-clock time since (the outage is a stall to the players, never time going back)."""
        node = self.node
        records.apply(node.matches, checkpoint.state)
        rate = node.config.tick_rate
        age = max(0.0, time.time() - checkpoint.wall_time)
        server_time = checkpoint.tick / rate + age
        first_tick = max(checkpoint.tick + 1, math.ceil(server_time * rate))
        node.failover = {
            "resumed_from": {"epoch": checkpoint.epoch, "tick": checkpoint.tick},
            "checkpoint_age_s": round(age, 3),
            "promoted_at": time.time(),
            "first_tick": first_tick,
        }
        node.metrics.checkpoint_resumes.inc()
        node.journal.resumed(
            epoch,
            checkpoint.epoch,
            checkpoint.tick,
            [m.world.state_hash() for m in node.matches.matches],
        )
        log.warning(
            "resumed_from_checkpoint",
            from_epoch=checkpoint.epoch,
            from_tick=checkpoint.tick,
            age_s=round(age, 2),
            seats=node.matches.player_count,
            **node.log_fields,
        )
        self.sessions.orphan_all()
        self._become_primary(RoleEvent.CLAIM, epoch, first_tick, node.clock() - server_time)

    def _become_primary(self, how: RoleEvent, epoch: int, first_tick: int, origin: float) -> None:
        """``origin``: when tick 0 was (or would have been) due, on this node's clock."""
        node = self.node
        from_epoch = node.matches.epoch
        node.matches.epoch = epoch
        node.roles.apply(how)
        node.hub.log_fields = node.log_fields
        node.schedule = TickSchedule(
            node.config.tick_rate, origin + first_tick / node.config.tick_rate, first_tick
        )
        node.hub.fenced_epoch = None  # a fence from the last time this node led is old news
        node.move_tenure(TenureEvent.LEAD)
        if how is RoleEvent.PROMOTE:
            node.journal.promoted(
                epoch,
                from_epoch,
                node.matches.tick_number,
                [m.world.state_hash() for m in node.matches.matches],
            )
        log.info("primary", first_tick=first_tick, **node.log_fields)  # (at the new epoch)

    async def _lead(self, fence: int | None) -> None:
        node = self.node
        async with asyncio.TaskGroup() as group:
            tasks = [
                group.create_task(
                    run_tick_loop(node.schedule, self.ticker.run_tick, node.clock),
                    name="tick-loop",
                ),
                group.create_task(self._watch_peers(), name="peer-watch"),
            ]
            if fence is not None:  # the old primary, if it was only paused, hears of us
                tasks.append(group.create_task(self._fence(fence), name="fence-old"))
            await node.stepping_down.wait()
            for task in tasks:
                task.cancel()
        await self._leave_leadership()

    async def _fence(self, epoch: int) -> None:
        node = self.node
        try:
            alive = await node.follower.fence(epoch)
        except Exception as error:
            log.info("fence_failed", error=type(error).__name__, **node.log_fields)
            return
        if alive:  # the primary we took over from was only slow, paused or cut off
            node.metrics.promotions_spurious.inc()
            log.warning(
                "spurious_promotion",
                previous=node.failover.get("previous_primary", "-"),
                **node.log_fields,
            )

    async def _leave_leadership(self) -> None:
        node = self.node
        node.roles.apply(RoleEvent.STEP_DOWN)
        successor_known = node.tenure.state is Tenure.SUPERSEDED
        node.move_tenure(TenureEvent.LEFT)
        node.metrics.standbys_in_sync.set(0)
        # With no successor, this node still holds every tick it showed: it may lead again.
        node.follower.stepped_down(successor_known)
        log.warning("stepped_down", successor_known=successor_known, **node.log_fields)
        await node.coordinator.step_down()
        await self.sessions.close_all("not_primary", "this node is no longer the primary")
        await node.hub.close()

    async def _watch_peers(self) -> None:
        """A primary cut off from its standbys still hears of a newer primary this way (its
        lease has stopped it from publishing long before)."""
        node = self.node
        tls = aiohttp.TCPConnector(ssl=self.node.peer_tls)
        async with aiohttp.ClientSession(connector=tls) as session:
            while True:
                await asyncio.sleep(PEER_POLL_S)
                answers, _silent = await self._peer_health(session)
                for found in answers:
                    if (
                        found.get("role") == "primary"
                        and int(found.get("epoch", 0)) > node.matches.epoch
                    ):
                        log.warning(
                            "newer_primary_seen",
                            peer=found.get("node"),
                            peer_epoch=found.get("epoch"),
                            **node.log_fields,
                        )
                        node.request_step_down(int(found["epoch"]))
                self.sessions.free_orphans()

    async def _peer_health(
        self, session: aiohttp.ClientSession
    ) -> tuple[list[dict[str, Any]], list[str]]:
        """The peers' ``/peer`` answers (each with its ``url``), and the peers that may be
        alive but did not answer in time (a refused connection: nothing listens)."""
        answers, silent = await ask_peers(session, self.node.peer_urls(), PEER_TIMEOUT_S)
        return [{**body, "url": url} for url, body in answers], silent

    async def _survey(self) -> tuple[str | None, bool]:
        """The base URL of the region's primary at our epoch or above (if one answers),
        and whether every peer answered or is plainly gone (none silent)."""
        tls = aiohttp.TCPConnector(ssl=self.node.peer_tls)
        async with aiohttp.ClientSession(connector=tls) as session:
            answers, silent = await self._peer_health(session)
        found = [
            h
            for h in answers
            if h.get("role") == "primary" and int(h.get("epoch", 0)) >= self.node.matches.epoch
        ]
        if not found:
            return None, not silent
        best = max(found, key=lambda h: int(h.get("epoch", 0)))
        return str(best["url"]), True

    async def _stand_by(self) -> int | None:
        """Follow the primary; when it is gone, campaign if this node is eligible; return
        the new epoch once this node leads (its predecessor is to be fenced with it; None
        when there is none to fence).

        The primary is gone when its link fell silent past the lease (a paused, cut-off or
        dead process), or when the link ended or was refused and no peer leads while none
        is silent (a killed process, a primary that stepped down, a region of standbys). A
        node that is not eligible never campaigns: it looks for a primary to catch up from,
        except that a ``--role primary`` node holding nothing, whose region has nobody
        left, claims it again (its checkpoint, if any, is the newest state there is).
        """
        node = self.node
        follower = node.follower
        target = self._follow_first or node.config.primary_url
        while True:
            outcome = await follower.follow(target)
            if outcome.reason == "silent" and follower.eligible:
                epoch = await self._take_over(outcome.primary, outcome.detected_at)
                if epoch is not None:
                    return epoch
            found, all_answered = await self._survey()
            if found is not None:
                target = found
            elif all_answered and outcome.reason != "silent":
                if follower.eligible:
                    epoch = await self._take_over(outcome.primary, outcome.detected_at)
                    if epoch is not None:
                        return epoch
                elif self._may_claim_again() and await self._claim():
                    return None
            await asyncio.sleep(RETRY_S)

    def _may_claim_again(self) -> bool:
        """A ``--role primary`` node that holds nothing of the region (it found the region
        taken at start and never caught up), not oftener than every :data:`RECLAIM_S`. A
        node that led or followed holds ticks it must not start over from: it waits for an
        eligible node instead, as every other non-eligible standby does."""
        node = self.node
        now = node.clock()
        if node.config.role != "primary" or node.matches.tick_number > 0:
            return False
        if now < self._next_claim_at:
            return False
        self._next_claim_at = now + RECLAIM_S
        return True

    async def _take_over(self, silent_primary: str, detected_at: float) -> int | None:
        """The primary is gone: depose it, campaign, and promote if this node wins (the new
        epoch; None when it did not)."""
        node = self.node
        node.failover = {"detected_at": detected_at, "previous_primary": silent_primary}
        log.warning(
            "primary_gone",
            primary=silent_primary or "-",
            tick=node.matches.tick_number,
            **node.log_fields,
        )
        try:
            if silent_primary:
                await node.coordinator.depose(node_id=silent_primary)
            epoch = await node.coordinator.campaign(
                node_id=node.config.node_id,
                url=node.config.public_url,
                replicated_tick=node.matches.tick_number,
                known_epoch=node.matches.epoch,
            )
        except CoordinatorError as error:
            log.warning("campaign_failed", error=str(error), **node.log_fields)
            return None
        if epoch is None:
            log.info("campaign_lost", **node.log_fields)
            return None
        origin = node.follower.origin_estimate
        if origin is None:
            origin = node.clock() - node.matches.server_time
        rate = node.config.tick_rate
        first_tick = max(node.matches.tick_number + 1, math.ceil((node.clock() - origin) * rate))
        node.failover.update(
            promoted_at=time.time(),
            promoted_at_tick=node.matches.tick_number,
            first_tick=first_tick,
            # The primary's hash of the last tick it sent us, and ours of the same tick.
            primary_hash=node.follower.last_hash,
            promoted_hash="/".join(m.world.state_hash() for m in node.matches.matches),
            resyncs=node.follower.resyncs,
        )
        node.metrics.promotions.inc()
        node.follower.promoted()  # a primary now; eligible again only through InSync
        self.sessions.orphan_all()
        self._become_primary(RoleEvent.PROMOTE, epoch, first_tick, origin)
        return epoch
