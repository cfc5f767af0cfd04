"""The standby's end of replication: follow the primary, notice when it falls silent.

The follower connects to the primary's ``/replicate``, answers its challenge with an
authenticated hello (``server/replication/auth.py``), installs the full state it
receives, then applies and acknowledges every tick record. Tick records double as
heartbeats: if none arrives for ``silence_timeout`` (200 ms by default at
60 Hz: twelve missed ticks) after its last acknowledgement, or the link breaks, the primary
is declared gone and :meth:`Follower.follow` returns so the node can campaign, if it is
*eligible*: in the primary's commit set (``InSync``), not told it is out (``OutOfSync``),
without a gap since.

After a promotion the old link is kept open by :meth:`Follower.fence`: if the old primary
was only paused and comes back, its next record is answered with the new epoch, and it
steps down before it can publish anything.
"""

from __future__ import annotations

import contextlib
import ssl
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import aiohttp

from server.logs import EventLogger, Throttle
from server.replication import messages, state
from server.replication.auth import sign_hello
from server.replication.detector import SilenceDetector
from server.replication.standby import StandbyEvent, StandbySync, standby_sync
from server.sim.matchset import MatchSet

__all__ = ["FollowOutcome", "Follower"]

log = EventLogger("arena.replication")

#: Closing a link to a dead primary must not wait for the closing handshake it never sends.
LINK_TIMEOUT = aiohttp.ClientWSTimeout(ws_receive=None, ws_close=0.5)


@dataclass(frozen=True, slots=True)
class FollowOutcome:
    reason: str  # "silent", "closed", "refused", "not_primary", "fenced_primary"
    detected_at: float  # wall clock when the standby concluded it
    primary: str  # the node id it was following ("" when it never connected)
    epoch: int  # the highest epoch seen


class Follower:
    def __init__(
        self,
        matches: MatchSet,
        node_id: str,
        secret: bytes,
        silence_timeout: float,
        clock: Callable[[], float],
        log_fields: Callable[[], Mapping[str, object]],
        *,
        tls: ssl.SSLContext | bool = True,
    ) -> None:
        self.matches = matches
        self.node_id = node_id
        self.secret = secret
        self.silence_timeout = silence_timeout
        #: How long a silence must last (never less than ``silence_timeout``, our promise).
        self.detector = SilenceDetector(silence_timeout)
        self.clock = clock
        self.log_fields = log_fields
        #: How an ``https://`` primary's certificate is checked (True: the system's CAs).
        self.tls = tls
        self.primary_id = ""
        self.public_url = ""  # told to the primary, so it can tell players where we are
        #: Called once, while eligible, when the primary's silence will count in
        #: ``foresight`` seconds: the coordinator starts what its campaign has to ask then,
        #: so a takeover does not wait for those answers after the silence.
        self.foresee: Callable[[], None] | None = None
        self.foresight = 0.0
        #: Called with every record applied (the match log's, ``--record``).
        self.applied: Callable[[messages.TickRecord | messages.FullState], None] | None = None
        self.origin_estimate: float | None = None  # primary's tick-0 time on our clock
        self.last_record_at: float | None = None
        self.last_hash = ""  # the primary's state hash of the last record applied
        self.resyncs = 0
        #: Where it stands with its primary (:data:`server.replication.standby.STANDBY`).
        self.sync = standby_sync()
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self._session: aiohttp.ClientSession | None = None
        self._refusals = Throttle()

    @property
    def eligible(self) -> bool:
        """Whether this node holds every tick the region has shown: told ``InSync`` by the
        primary it follows (or it led itself and stepped down with no successor). Only
        an eligible node may be promoted."""
        return self.sync.state.eligible

    def promoted(self) -> None:
        """This node won a campaign: it leads, and is eligible again only through InSync."""
        self.sync.apply(StandbyEvent.PROMOTED)

    def stepped_down(self, successor_known: bool) -> None:
        """This node led and stepped down: with no successor, it still holds every tick
        it showed (it may lead again)."""
        self.sync.apply(StandbyEvent.SUPERSEDED if successor_known else StandbyEvent.LED_TO_THE_END)

    def _log_refusal(self, reason: str) -> None:
        """A refusal once (a standby retries ten times a second), the same one again only
        every half minute with the count; a wrong secret at warning level, named."""
        held = self._refusals.allow(reason)
        if held is None:
            return
        if reason == "unauthenticated":
            log.warning(
                "replication_refused",
                reason="unauthenticated",
                repeats=held,
                hint="the primary does not share this node's cluster secret: give every node "
                "of the region the same ARENA_CLUSTER_SECRET",
                **self.log_fields(),
            )
        else:
            log.info("replication_refused", reason=reason, repeats=held, **self.log_fields())

    async def follow(self, primary_url: str) -> FollowOutcome:
        """Follow ``primary_url`` (``http(s)://host:port``) until it is gone or refuses us.

        The previous link (if any) stays open until the new one is welcomed: until then
        the old primary still counts this standby in its commit set, and it stays
        eligible for promotion with what it holds.
        """
        if not primary_url:
            return FollowOutcome("refused", time.time(), self.primary_id, self.matches.epoch)
        self._session = self._session or aiohttp.ClientSession()
        url = primary_url.rstrip("/") + "/replicate"
        previous = self._ws
        try:
            ws = await self._session.ws_connect(
                url, max_msg_size=64 << 20, autoping=True, timeout=LINK_TIMEOUT, ssl=self.tls
            )
        except (aiohttp.ClientError, OSError, TimeoutError) as error:
            log.info(
                "replication_connect_failed",
                url=url,
                error=type(error).__name__,
                **self.log_fields(),
            )
            return FollowOutcome("refused", time.time(), self.primary_id, self.matches.epoch)
        self._ws = ws
        answered = False  # the challenge: one per link, the first message
        self.detector.reset()
        silent_after = self.clock() + self.silence_timeout
        foresee = self.foresee if self.foresight > 0 else None
        foreseen = False  # this silence's foresee was called
        while True:
            left = silent_after - self.clock()
            warn = foresee is not None and not foreseen and self.eligible
            try:
                # (aiohttp reads a timeout of 0 as none at all)
                wait = left - self.foresight if warn else left
                message = await ws.receive(timeout=max(1e-3, wait))
            except TimeoutError:
                if warn and foresee is not None:
                    foreseen = True
                    foresee()
                    continue
                return FollowOutcome("silent", time.time(), self.primary_id, self.matches.epoch)
            foreseen = False
            # Anything from the primary shows it alive: waiting longer before a campaign is
            # always safe (a full state at 300 players can take a while to arrive), and how
            # much longer follows the rhythm the tick records kept lately.
            silent_after = self.clock() + self.detector.wait()
            if message.type is not aiohttp.WSMsgType.BINARY:
                reason = "closed" if self.primary_id else "refused"
                return FollowOutcome(reason, time.time(), self.primary_id, self.matches.epoch)
            try:
                record = messages.decode(message.data)
            except messages.MessageError as error:
                log.warning("replication_garbage", error=str(error), **self.log_fields())
                continue
            if isinstance(record, messages.Challenge):
                if not answered:
                    answered = True
                    await ws.send_bytes(messages.encode(self._hello(record.nonce)))
                continue
            if isinstance(record, messages.StandbyWelcome):
                # The primary replaced our old link: what we hold no longer counts.
                self.primary_id = record.node
                self._move(StandbyEvent.WELCOMED, "welcomed")
                if previous is not None and previous is not ws:
                    await previous.close()
                    previous = None
                continue
            if isinstance(record, messages.Refused | messages.NotPrimary):
                if isinstance(record, messages.Refused):
                    self._log_refusal(record.code)
                    reason = "refused"
                else:
                    self._log_refusal("not_primary")
                    self.matches.epoch = max(self.matches.epoch, record.epoch)
                    reason = "not_primary"
                await ws.close()
                self._ws = previous
                return FollowOutcome(reason, time.time(), self.primary_id, self.matches.epoch)
            if isinstance(record, messages.InSync):
                # The primary admits us once we acknowledged every tick it sent, and says so
                # before its next one: ``tick`` may be more than one ahead of ours when ticks
                # were skipped between (a stall, a resume from a checkpoint).
                if record.tick > self.matches.tick_number:
                    if self.sync.apply(StandbyEvent.TOLD_IN_SYNC).eligible:
                        log.info("in_sync", tick=record.tick, **self.log_fields())
                continue
            if isinstance(record, messages.OutOfSync):
                self._move(StandbyEvent.TOLD_OUT_OF_SYNC, "out_of_sync")
                await self._ask_full_state(ws)
                continue
            if not isinstance(record, messages.TickRecord | messages.FullState):
                continue
            if record.epoch < self.matches.epoch:
                # A deposed primary still talking: tell it, and stop following it.
                await ws.send_bytes(messages.encode(messages.Fenced(self.matches.epoch)))
                return FollowOutcome(
                    "fenced_primary", time.time(), self.primary_id, self.matches.epoch
                )
            resyncing = self.sync.state is StandbySync.RESYNCING
            if resyncing and isinstance(record, messages.TickRecord):
                continue  # waiting for the full state asked for
            try:
                state.apply(self.matches, record)
            except (state.ReplicationGap, state.HashMismatch) as problem:
                self.resyncs += 1
                log.warning("replication_resync", reason=problem, **self.log_fields())
                self._move(StandbyEvent.GAP, "gap")
                await self._ask_full_state(ws)
                continue
            full = isinstance(record, messages.FullState)
            self.sync.apply(StandbyEvent.APPLIED_FULL_STATE if full else StandbyEvent.APPLIED_TICK)
            if self.applied is not None:
                self.applied(record)
            received = self.clock()
            if isinstance(record, messages.FullState):
                self.detector.reset()  # the wait for it is no part of the ticks' rhythm
            else:
                self.detector.arrived(received)
            self.last_record_at = received
            self.last_hash = "/".join(match.hash for match in record.matches)
            origin = received - self.matches.server_time
            if self.origin_estimate is None or origin < self.origin_estimate:
                self.origin_estimate = origin  # the least-delayed record is the best anchor
            await ws.send_bytes(messages.encode(messages.Ack(self.matches.tick_number)))
            # Our promise: no campaign before this ack + the silence timeout (the primary's
            # lease from this ack ends earlier); the detector may ask for longer.
            silent_after = self.clock() + self.detector.wait()

    def _hello(self, nonce: str) -> messages.Hello:
        """Our answer to the challenge of ``nonce``: who we are, signed with it."""
        return sign_hello(
            self.secret,
            nonce,
            node=self.node_id,
            epoch=self.matches.epoch,
            tick=self.matches.tick_number,
            fingerprint=state.config_fingerprint(self.matches),
            url=self.public_url,
            promise=self.silence_timeout,
        )

    def _move(self, event: StandbyEvent, why: str) -> None:
        """Apply ``event``, and log a loss of eligibility as ``why``."""
        was = self.eligible
        now = self.sync.apply(event)
        if was and not now.eligible:
            log.info("not_eligible", reason=why, **self.log_fields())

    async def _ask_full_state(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        await ws.send_bytes(messages.encode(messages.Resync()))

    async def fence(self, epoch: int) -> bool:
        """After our promotion: answer anything the old primary still sends with our epoch.
        True when it did send something: it was alive, and the promotion was spurious."""
        ws = self._ws
        if ws is None or ws.closed:
            return False
        spoke = False
        with contextlib.suppress(aiohttp.ClientError, ConnectionError):
            async for message in ws:
                if message.type is aiohttp.WSMsgType.BINARY:
                    await ws.send_bytes(messages.encode(messages.Fenced(epoch)))
                    log.info("fenced_old_primary", fence_epoch=epoch, **self.log_fields())
                    spoke = True
                    break
        await ws.close()
        return spoke

    async def close(self) -> None:
        if self._ws is not None:
            await self._ws.close()
        if self._session is not None:
            await self._session.close()
            self._session = None
