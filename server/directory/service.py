"""The directory's request logic: a request's bytes or document in, ``(status, JSON body)`` out.

Sans-I/O: the aiohttp edge (:mod:`server.directory.net.app`) only moves bytes to and from
:class:`Directory`. Two clocks are injected: a monotonic one for liveness and reservation
accounting, the wall clock for the unix times in tokens and answers. Every error answer is
an :class:`~shared.directory.ErrorAnswer` whose one-line message never echoes secrets.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from server.directory.auth import (
    NODE_HEADER,
    SEQUENCE_HEADER,
    SIGNATURE_HEADER,
    TIME_HEADER,
    ReplayGuard,
    check_heartbeat_signature,
    stamp_from_headers,
)
from server.directory.listing import region_summaries
from server.directory.metrics import DirectoryMetrics
from server.directory.policy import NoPlacement, Placement, RegionView, choose, routable_nodes
from server.directory.registry import HeartbeatOutcome, Registry
from server.directory.reservations import issue, reservation_id
from server.logs import EventLogger
from shared.directory import (
    ErrorAnswer,
    Heartbeat,
    HeartbeatAck,
    MessageError,
    RegionListing,
    Seat,
    SeatRequest,
)

__all__ = ["Answer", "Directory", "DirectoryConfig"]

log = EventLogger("arena.directory")

#: An HTTP status and the JSON document to answer with.
Answer = tuple[int, dict[str, object]]
_REJECT_LOG_INTERVAL_S = 10.0


@dataclass(frozen=True, slots=True)
class DirectoryConfig:
    """``secret``: the cluster secret (heartbeat signatures and reservation tokens);
    ``heartbeat_window``: how far (seconds) a heartbeat's signed time may be from the
    directory's clock before it is refused as stale."""

    secret: bytes
    heartbeat_timeout: float = 1.5
    reservation_ttl: float = 10.0
    overflow_slack_ms: float = 40.0
    heartbeat_window: float = 10.0

    def __post_init__(self) -> None:
        if not self.secret:
            raise ValueError("the cluster secret must not be empty")
        if not math.isfinite(self.heartbeat_timeout) or not 0 < self.heartbeat_timeout <= 60:
            raise ValueError("heartbeat timeout must be > 0 and <= 60 seconds")
        if not math.isfinite(self.reservation_ttl) or not 0 < self.reservation_ttl <= 3600:
            raise ValueError("reservation TTL must be > 0 and <= 3600 seconds")
        if not math.isfinite(self.overflow_slack_ms) or not 0 <= self.overflow_slack_ms <= 10_000:
            raise ValueError("overflow slack must be between 0 and 10000 ms")
        if not math.isfinite(self.heartbeat_window) or not 0 < self.heartbeat_window <= 3600:
            raise ValueError("heartbeat window must be > 0 and <= 3600 seconds")


class Directory:
    """The directory's state and request logic. ``clock``: monotonic seconds; ``wall``: unix
    seconds."""

    def __init__(
        self, config: DirectoryConfig, clock: Callable[[], float], wall: Callable[[], float]
    ) -> None:
        self.config = config
        self.clock = clock
        self.wall = wall
        self.registry = Registry(config.heartbeat_timeout)
        self.metrics = DirectoryMetrics()
        #: Heartbeats already seen, per node: a copy sent again is refused.
        self.replays = ReplayGuard(config.heartbeat_window)
        self.seats_granted = 0
        self.seats_refused = 0
        self.started_at = clock()
        self._status: dict[str, str] = {}
        self._reject_logged: dict[tuple[str, str], float] = {}

    # -- heartbeats ------------------------------------------------------------------------

    def heartbeat(self, body: bytes, headers: Mapping[str, str], remote: str = "-") -> Answer:
        """Authenticate, validate and record one heartbeat (the raw body, as signed, and the
        request's headers)."""
        beat = self.admit(body, headers, remote)
        if not isinstance(beat, Heartbeat):
            return beat
        return self.acknowledge(beat, self.registry.heartbeat(beat, self.clock()))

    def admit(
        self, body: bytes, headers: Mapping[str, str], remote: str = "-"
    ) -> Heartbeat | Answer:
        """The heartbeat in ``body`` once its signature, freshness and fields check out, else
        the refusal to answer (counted and logged)."""
        signature = headers.get(SIGNATURE_HEADER)
        if not signature:
            return self._refuse(
                401, "unauthenticated", f"missing {SIGNATURE_HEADER} header", remote
            )
        try:
            stamp = stamp_from_headers(headers)
        except ValueError as error:
            return self._refuse(401, "unauthenticated", str(error), remote)
        if not check_heartbeat_signature(self.config.secret, body, stamp, signature):
            return self._refuse(
                401,
                "bad_signature",
                f"{SIGNATURE_HEADER} does not match the body, {NODE_HEADER}, {TIME_HEADER} "
                f"and {SEQUENCE_HEADER}",
                remote,
            )
        try:
            beat = Heartbeat.parse(json.loads(body))
        except (ValueError, UnicodeDecodeError, RecursionError) as error:
            if isinstance(error, MessageError):
                return self._refuse(400, error.code, str(error), remote)
            return self._refuse(400, "malformed", "the body is not valid JSON", remote)
        if beat.node_id != stamp.node_id:
            return self._refuse(
                400, "invalid_field", f"{NODE_HEADER} is not the body's node_id", remote
            )
        refused = self.replays.check(stamp, self.wall())
        if refused == "stale":
            window = self.config.heartbeat_window
            return self._refuse(
                401,
                "stale",
                f"{TIME_HEADER} is more than {window:g} s from the directory's clock "
                "(are the hosts' clocks synchronised?)",
                remote,
            )
        if refused == "replayed":
            return self._refuse(
                401,
                "replayed",
                f"{SEQUENCE_HEADER} {stamp.sequence} is not above the last one accepted from "
                "this node (a copy of an earlier heartbeat)",
                remote,
            )
        return beat

    def acknowledge(self, beat: Heartbeat, outcome: HeartbeatOutcome) -> Answer:
        """Count, log and answer a recorded heartbeat."""
        self.metrics.heartbeats.labels("accepted").inc()
        context = {
            "region": beat.region, "node": beat.node_id, "role": beat.role, "epoch": beat.epoch
        }  # fmt: skip
        if outcome.new_node:
            log.info("node_registered", endpoint=beat.endpoint, capacity=beat.capacity, **context)
        previous = outcome.previous_group_epoch
        if previous is not None and outcome.group_epoch > previous:
            log.info("epoch_raised", group=beat.group_key, previous_epoch=previous, **context)
        if self._status.get(beat.node_id) != outcome.status:
            self._status[beat.node_id] = outcome.status
            level = logging.WARNING if outcome.status == "fenced" else logging.INFO
            log.log(
                level,
                "node_status",
                status=outcome.status,
                group_epoch=outcome.group_epoch,
                **context,
            )
        ack = HeartbeatAck(
            node_id=beat.node_id,
            status=outcome.status,
            group_epoch=outcome.group_epoch,
            reserved=outcome.reserved,
            heartbeat_timeout_s=self.config.heartbeat_timeout,
        )
        return 200, ack.to_json()

    def unavailable(self, kind: str, reason: str) -> Answer:
        """503 for a request the shared state (etcd) could not serve: ask another directory."""
        counted = {"heartbeat": self.metrics.heartbeats, "seat": self.metrics.seat_requests}
        if kind in counted:
            counted[kind].labels("unavailable").inc()
        now = self.clock()
        if now - self._reject_logged.get(("etcd", kind), -math.inf) >= _REJECT_LOG_INTERVAL_S:
            self._reject_logged[("etcd", kind)] = now
            log.warning("shared_state_unavailable", request=kind, reason=reason)
        message = "the directory cannot reach its shared state; ask another directory or retry"
        return 503, ErrorAnswer("unavailable", message).to_json()

    def _refuse(self, status: int, code: str, message: str, remote: str) -> Answer:
        self.metrics.heartbeats.labels(code).inc()
        now = self.clock()
        key = (remote, code)
        if now - self._reject_logged.get(key, -math.inf) >= _REJECT_LOG_INTERVAL_S:
            self._reject_logged[key] = now
            log.warning("heartbeat_refused", remote=remote, error=code)
        return status, ErrorAnswer(code, message).to_json()

    # -- seats -----------------------------------------------------------------------------

    def seat(self, document: object) -> Answer:
        """Answer one ``POST /seat`` body (already JSON-decoded)."""
        request = self.seat_request(document)
        if not isinstance(request, SeatRequest):
            return request
        now = self.clock()
        decision = self.place(request, self.registry.views(now), now)
        if not isinstance(decision, Placement):
            return decision
        wall = self.wall()
        token = self.token(request, decision, wall)
        ttl = self.config.reservation_ttl
        self.registry.reserve(decision.node_id, reservation_id(token), request.player, now, ttl)
        return self.granted(request, decision, token, wall)

    def seat_request(self, document: object) -> SeatRequest | Answer:
        """The request in a ``POST /seat`` body, or the 400 to answer (counted)."""
        try:
            return SeatRequest.parse(document)
        except MessageError as error:
            self.metrics.seat_requests.labels("bad_request").inc()
            return 400, ErrorAnswer(error.code, str(error)).to_json()

    def place(
        self,
        request: SeatRequest,
        views: tuple[RegionView, ...],
        now: float,
        tie_break: Callable[[str], str] | None = None,
    ) -> Placement | Answer:
        """The policy's placement over ``views`` (live at ``now``), or the 503 to answer."""
        slack = self.config.overflow_slack_ms
        decision = choose(views, request.rtt_ms, now=now, slack_ms=slack, tie_break=tie_break)
        if isinstance(decision, NoPlacement):
            self.seats_refused += 1
            return 503, self._no_seat(decision).to_json()
        return decision

    def token(self, request: SeatRequest, decision: Placement, wall: float) -> str:
        """The signed reservation for ``decision``, valid from ``wall`` for the TTL."""
        c = self.config
        return issue(
            c.secret, request.player, decision.node_id, decision.region, wall, c.reservation_ttl
        )

    def granted(self, request: SeatRequest, decision: Placement, token: str, wall: float) -> Answer:
        """Count, log and answer a seat whose reservation is recorded."""
        config = self.config
        player = request.player
        self.seats_granted += 1
        self.metrics.seat_requests.labels("overflow" if decision.overflow else "granted").inc()
        log.debug(
            "seat_granted",
            player=player,
            region=decision.region,
            node=decision.node_id,
            rtt_ms=round(decision.rtt_ms, 1),
            best_region=decision.best_region,
        )
        seat = Seat(
            player=player,
            region=decision.region,
            node_id=decision.node_id,
            endpoint=decision.endpoint,
            epoch=decision.epoch,
            rtt_ms=decision.rtt_ms,
            best_region=decision.best_region,
            best_rtt_ms=decision.best_rtt_ms,
            overflow=decision.overflow,
            reservation=token,
            expires_at=round(wall + config.reservation_ttl, 3),
        )
        return 200, seat.to_json()

    def _no_seat(self, decision: NoPlacement) -> ErrorAnswer:
        if decision.reason == "no_region":
            self.metrics.seat_requests.labels("no_region").inc()
            return ErrorAnswer(
                "no_region",
                "none of the measured regions has a live primary node; "
                "GET /regions and measure its probes",
            )
        self.metrics.seat_requests.labels("no_capacity").inc()
        return ErrorAnswer(
            "no_capacity",
            f"every region within {self.config.overflow_slack_ms:g} ms of the best "
            f"({decision.best_region}, {decision.best_rtt_ms:g} ms) is full; retry shortly",
            decision.best_region,
            decision.best_rtt_ms,
        )

    # -- views -----------------------------------------------------------------------------

    def regions(self) -> dict[str, object]:
        """``GET /regions``."""
        now = self.clock()
        return self.listing(self.registry.views(now), now)

    def listing(self, views: tuple[RegionView, ...], now: float) -> dict[str, object]:
        """``GET /regions`` over ``views`` (live at ``now``)."""
        listing = RegionListing(
            regions=region_summaries(views, now),
            heartbeat_timeout_s=self.config.heartbeat_timeout,
            generated_at=round(self.wall(), 3),
        )
        return listing.to_json()

    def health(self) -> dict[str, object]:
        """``GET /health``."""
        now = self.clock()
        return self.health_of(self.registry.views(now), now, self.registry.known)

    def health_of(self, views: tuple[RegionView, ...], now: float, known: int) -> dict[str, object]:
        """``GET /health`` over ``views`` (live at ``now``) of ``known`` stored nodes."""
        live = [n for r in views for n in r.nodes if n.live(now)]
        return {
            "status": "ok",
            "nodes_known": known,
            "nodes_live": len(live),
            "regions": sorted({n.region for n in live}),
            "seats_granted": self.seats_granted,
            "seats_refused": self.seats_refused,
            "reservations_outstanding": sum(n.reserved for n in live),
            "heartbeat_timeout_s": self.config.heartbeat_timeout,
            "reservation_ttl_s": self.config.reservation_ttl,
            "overflow_slack_ms": self.config.overflow_slack_ms,
            "uptime_s": round(self.clock() - self.started_at, 3),
        }

    def refresh_gauges(self) -> None:
        """Set the per-region gauges from the registry (called on each scrape)."""
        now = self.clock()
        self.gauges_of(self.registry.views(now), now)

    def gauges_of(self, views: tuple[RegionView, ...], now: float) -> None:
        """Set the per-region gauges from ``views`` (live at ``now``)."""
        self.metrics.nodes_live.clear()
        self.metrics.reserved.clear()
        for region in views:
            routable = routable_nodes(region, now)
            live = [n for n in region.nodes if n.live(now)]
            if not live:
                continue
            standbys = sum(1 for n in live if n.role == "standby")
            gauge = self.metrics.nodes_live
            gauge.labels(region.name, "routable").set(len(routable))
            gauge.labels(region.name, "standby").set(standbys)
            gauge.labels(region.name, "fenced").set(len(live) - standbys - len(routable))
            self.metrics.reserved.labels(region.name).set(sum(n.reserved for n in routable))

    def sweep(self) -> None:
        """Forget silent nodes (logged) and stale log throttles."""
        for beat in self.registry.sweep(self.clock()):
            self._status.pop(beat.node_id, None)
            self.metrics.nodes_expired.inc()
            log.warning(
                "node_expired",
                region=beat.region,
                node=beat.node_id,
                role=beat.role,
                epoch=beat.epoch,
                timeout_s=self.config.heartbeat_timeout,
            )
        stale = self.clock() - _REJECT_LOG_INTERVAL_S
        for key, when in list(self._reject_logged.items()):
            if when < stale:
                del self._reject_logged[key]
