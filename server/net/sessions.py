"""The node's players: join, admit, park, reject; their frames; their snapshots.

A player's link (:class:`~server.net.links.PlayerLink`: a WebSocket that came to ``/ws``,
or a UDP channel that answered its challenge) must send ``join`` within
:data:`JOIN_TIMEOUT_S`. A
primary seats it (a new seat, with a seat reservation from the directory when the node
has one, or the seat its session token proves is the player's); a standby parks a join
that carries a token (the player's spare connection) until this node leads, then admits
it at once; everything else is refused with an ``error`` and a close code. Once seated,
its link charges every frame to the seat's budgets and holds its inputs in the intake;
the sessions read the rest: pings are answered at once, echoes of the node's round-trip
probes are timed, anything else is an offence. Both transports are seated, budgeted,
published to and closed by the same code here. While it plays, its session token is renewed (a
``token`` message) long before it expires.

Admission is bounded: behind a directory a new seat needs the directory's reservation
(unless ``--open-join``), one peer address holds at most ``--max-seats-per-address``
seats, and a seated player whose inputs stop for ``--idle-kick-s`` of match time is told
(``idle_kick``) and loses its seat at once (it was idle, not cut off: no seat grace).

Offences follow the seat, not the connection: a resumed seat keeps its count, and a seat
closed for offences may not be resumed for a hold-off (:data:`SEAT_HOLD_OFF`) that doubles
with each close (``held_off``, with its ``retry_after``). A seat whose connection ended
(closed, lost, or for offences) banks nothing for catch-up from its last applied input to
its first one back (:meth:`server.sim.inputs.InputQueues.resume`): a client that drops its
own connection buys no movement with the gap. Only the seats a takeover found (the node,
not their clients, made them wait) keep what they banked meanwhile, as any seat whose
inputs a stall delayed. With ``--offender-holdoff-s``, a source address whose connections
end in offences waits too before its next upgrade is served
(:meth:`Sessions.handshake_wait`, answered with HTTP 429 by the app).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import math
import time

import numpy as np

from server.logs import EventLogger
from server.net.holdoff import HoldOffPolicy, HoldOffs, address_key
from server.net.links import (
    GOING_AWAY,
    POLICY_VIOLATION,
    PROTOCOL_ERROR,
    TRY_AGAIN_LATER,
    Player,
    PlayerLink,
)
from server.net.registration import check_reservation
from server.net.state import NodeState
from server.replication.roles import Role
from server.sim.input_budget import PING_ALLOWANCE, FrameKind, RateLimited
from server.sim.match import MatchFull, PlayerSeat, TickResult
from server.tokens import TokenError, TokenExpired, issue_token, verify_token
from shared import protocol
from shared.protocol import (
    ErrorMessage,
    InputMessage,
    JoinMessage,
    PingMessage,
    PongMessage,
    ProbeEchoMessage,
    ProbeMessage,
    SightingMessage,
    TokenMessage,
)

__all__ = [
    "ADDRESS_HOLD_OFF_CAP_S", "JOIN_TIMEOUT_S", "SEAT_HOLD_OFF", "Sessions", "in_share", "reject",
]  # fmt: skip

log = EventLogger("arena.server")

JOIN_TIMEOUT_S = 5.0
IDLE_CHECK_S = 1.0  # how often (wall clock) the seated players' acknowledged inputs are read

Seated = tuple[int, int]  # (match, slot)
SeatKey = tuple[int, int, int]  # (match, slot, seat id): one seating of a slot

#: How long a seat closed for offences waits before it may be resumed: 1 s after its first
#: close, doubled with each further one, at most 16 s (1, 2, 4, 8, 16): within the default
#: 30 s seat grace, so the wait alone does not cost a seat its place; a seat whose grace
#: runs out meanwhile is freed as any other. A seat's record lives as long as the seat.
SEAT_HOLD_OFF = HoldOffPolicy(first=1.0, cap=16.0)
#: ``--offender-holdoff-s`` is an address's first wait, doubled with each further close for
#: offences up to this cap (or the first wait, if that is longer); an address with no such
#: close for :data:`ADDRESS_FORGET_S` after its wait ended starts again at the first.
ADDRESS_HOLD_OFF_CAP_S = 60.0
ADDRESS_FORGET_S = 300.0
#: Addresses (and seats) whose hold-offs a node remembers, the least recently closed
#: forgotten first: a few hundred kilobytes at most, whatever the number of sources.
HOLD_OFF_CAPACITY = 4096


@dataclasses.dataclass(slots=True)
class _Admitted:
    """A seat admitted here: its id, the peer address it was last admitted from, and the
    offences its connections made (they follow the seat: a resume does not clear them)."""

    seat_id: int
    address: str | None
    offences: int = 0


class Sessions:
    """Every player connection of one node, seated or parked."""

    def __init__(self, node: NodeState) -> None:
        self.node = node
        self.connections: dict[Seated, Player] = {}
        self.parked = 0
        self._orphaned_since: dict[Seated, float] = {}
        # Per seat admitted here: its id, its peer address, its offences.
        self._admitted: dict[Seated, _Admitted] = {}
        # The seats the last takeover found (each until its player is back): their wait
        # was the node's doing, so their resume keeps the catch-up they banked meanwhile.
        self._away_by_takeover: set[SeatKey] = set()
        # Seats closed for offences: how long each waits before it may be resumed.
        self._seat_holds: HoldOffs[SeatKey] = HoldOffs(SEAT_HOLD_OFF, HOLD_OFF_CAPACITY)
        # With --offender-holdoff-s: source addresses whose connections ended in offences.
        first = node.config.offender_holdoff
        self._address_holds: HoldOffs[str] | None = None
        if first > 0:
            policy = HoldOffPolicy(first, max(first, ADDRESS_HOLD_OFF_CAP_S), ADDRESS_FORGET_S)
            self._address_holds = HoldOffs(policy, HOLD_OFF_CAPACITY)
        # Per seated connection: (it, its seat's acknowledged input, match time it changed).
        self._activity: dict[Seated, tuple[Player, int, float]] = {}
        self._next_idle_check = 0.0

    # -- the join -------------------------------------------------------------------------

    async def session(self, link: PlayerLink) -> None:
        """One player's connection, from its join to its end."""
        node = self.node
        address = link.address
        try:
            async with asyncio.timeout(JOIN_TIMEOUT_S):
                first = await link.receive()
            if first is None:
                return  # gone (hung up, or closed by its transport for a framing fault)
            join = protocol.decode_client(first)
        except TimeoutError:
            self._address_offended(address)
            await reject(link, "join_timeout", "no join within 5 s", POLICY_VIOLATION)
            return
        except protocol.ProtocolError as error:
            self._address_offended(address)
            node.metrics.protocol_errors.labels(error.code).inc()
            await reject(link, error.code, str(error), POLICY_VIOLATION)
            return
        if not isinstance(join, JoinMessage):
            self._address_offended(address)
            await reject(link, "join_first", "the first message must be join", POLICY_VIOLATION)
            return
        if join.v != protocol.PROTOCOL_VERSION:
            node.metrics.joins_refused.labels("version").inc()
            await reject(
                link,
                protocol.VersionMismatch.code,
                f"server speaks protocol {protocol.PROTOCOL_VERSION}, client sent {join.v}",
                PROTOCOL_ERROR,
            )
            return
        if node.role is not Role.PRIMARY and (join.token is None or not await self._park(link)):
            node.metrics.joins_refused.labels("not_primary").inc()
            await reject(
                link, "not_primary", "this node is a standby; try the others", TRY_AGAIN_LATER
            )
            return
        admitted = await self._admit(link, join, address)
        if admitted is None:
            return
        index, seat = admitted
        record = self._admitted.get((index, seat.slot))
        if record is None or record.seat_id != seat.seat_id:
            record = self._admitted[(index, seat.slot)] = _Admitted(seat.seat_id, address)
        record.address = address
        await self._play(link, join, index, seat, record)

    async def _play(
        self,
        link: PlayerLink,
        join: JoinMessage,
        index: int,
        seat: PlayerSeat,
        record: _Admitted,
    ) -> None:
        """Welcome a seated player, read its frames until it goes, free its seat then."""
        node = self.node
        key = (index, seat.slot)
        connection = Player(link, seat.slot, match=index)
        connection.offences = record.offences  # the seat's, not this connection's
        connection.token_issued_at = time.time()
        arena, codec = node.config.arena, node.matches[index].codec
        welcome = protocol.WelcomeMessage(
            v=protocol.PROTOCOL_VERSION,
            player_id=seat.slot,
            tick_rate=node.config.tick_rate,
            snapshot_rate=node.config.tick_rate // node.config.snapshot_interval,
            tick=node.matches.tick_number,
            server_time=node.server_time(),
            token=self._new_token(index, seat, connection.token_issued_at),
            map=node.config.arena.name,
            region=node.config.region,
            epoch=node.matches.epoch,
            standbys=node.player_endpoints(),
            ack=seat.inputs.acked,
            match=index,
            interp_delay=seat.interp_delay,
            bounds_min=(float(arena.bounds_min[0]), float(arena.bounds_min[1])),
            bounds_max=(float(arena.bounds_max[0]), float(arena.bounds_max[1])),
            entity_bits=tuple(int(width) for width in codec.bits),
        )
        # From here on the link reads this player's frames, charged to its budgets (from
        # before the welcome: a client sends nothing else until it has one).
        gone = link.seat(connection, _SeatEvents(self, connection), node.intake, node.server_time)
        connection.send(protocol.encode(welcome))
        self.connections[key] = connection
        connection.seated = True
        node.metrics.players.set(node.matches.player_count)
        log.info(
            "player_joined", match=index, player=seat.slot, name=join.name[:32], **node.log_fields
        )
        try:
            if gone is not None:
                await gone
        finally:
            record.offences = connection.offences  # before anyone may resume the seat
            connection.seated = False
            if self.connections.get(key) is connection:
                del self.connections[key]
                if node.role is Role.PRIMARY and not node.shutting_down:
                    # A node that shuts down keeps its seats: the standby that takes over
                    # gives them back to the players who come back with their tokens. A
                    # dropped connection keeps its seat for the grace period too.
                    self._orphan(index, seat.slot)
            node.metrics.players.set(node.matches.player_count)
            log.info("player_left", match=index, player=seat.slot, **node.log_fields)

    async def _park(self, link: PlayerLink) -> bool:
        """A player's spare connection to this standby: hold it until this node leads.

        True once promoted (the caller then admits the player with its token at once, with
        no connection set-up on the player's side); False if the player hangs up first.
        """
        self.parked += 1
        promoted = asyncio.ensure_future(self.node.leading.wait())
        hung_up = asyncio.ensure_future(link.receive())
        try:
            await asyncio.wait({promoted, hung_up}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self.parked -= 1
            for waiter in (promoted, hung_up):
                waiter.cancel()
            await asyncio.gather(promoted, hung_up, return_exceptions=True)
        return promoted.done() and not promoted.cancelled() and not link.closing

    async def _admit(
        self, link: PlayerLink, join: JoinMessage, address: str | None
    ) -> tuple[int, PlayerSeat] | None:
        """A seat for this join: a new one (with a seat reservation from the directory, if
        it came with one: behind a directory it must, unless ``--open-join``), or the one its
        session token proves is the player's. ``address``: the peer's, whose seats are
        counted for ``--max-seats-per-address`` (a resumed seat is no new one)."""
        node = self.node
        config = node.config
        if join.token is None and config.directory_url and not config.open_join:
            node.metrics.joins_refused.labels("reservation_required").inc()
            await reject(
                link,
                "reservation_required",
                "this node seats the players its directory sends: ask the directory for a "
                "seat (POST /seat) and join with its reservation",
                POLICY_VIOLATION,
            )
            return None
        if join.token is not None and node.config.directory_url:
            refusal = self._reservation_refusal(join)
            if refusal == "":  # a valid reservation: a new seat
                join = dataclasses.replace(join, token=None)
            elif refusal is not None:
                node.metrics.joins_refused.labels("reservation").inc()
                await reject(
                    link,
                    "invalid_reservation",
                    f"reservation {refusal}; ask the directory for a new seat",
                    POLICY_VIOLATION,
                )
                return None
        if join.token is None:
            limit = config.max_seats_per_address
            if limit and address is not None and self._seats_held_by(address) >= limit:
                node.metrics.joins_refused.labels("address_limit").inc()
                await reject(
                    link,
                    "address_limit",
                    f"your address already holds {limit} seat(s) here, the most it may",
                    POLICY_VIOLATION,
                )
                return None
            try:
                return node.matches.join(join.name, join.interp_delay)
            except MatchFull as full:
                node.metrics.joins_refused.labels("full").inc()
                await reject(link, "server_full", str(full), TRY_AGAIN_LATER)
                return None
        try:
            claim = verify_token(node.secret, join.token, node.config.region, time.time())
        except TokenError:
            claim = None
        seat = None
        if claim is not None and 0 <= claim.match < len(node.matches):
            seat = node.matches[claim.match].seats.get(claim.slot)
        if (
            claim is None
            or seat is None
            # Freed and given to somebody else since (under the same name, even): the seat
            # the token names is gone.
            or seat.seat_id != claim.seat_id
            or seat.name != claim.name
        ):
            node.metrics.joins_refused.labels("token").inc()
            await reject(
                link,
                "invalid_token",
                "this region issued no such live session",
                POLICY_VIOLATION,
            )
            return None
        wait = self._seat_holds.remaining((claim.match, claim.slot, seat.seat_id), time.monotonic())
        if wait > 0:
            node.metrics.joins_refused.labels("held_off").inc()
            await reject(
                link,
                "held_off",
                f"this seat was closed for offences; resume it in {wait:.1f} s, not before",
                TRY_AGAIN_LATER,
                retry_after=wait,
            )
            return None
        if (claim.match, claim.slot) in self.connections:
            # Most likely the player's own connection, dropped but not noticed here yet:
            # its token stays good, so the player tries again (unlike invalid_token).
            node.metrics.joins_refused.labels("in_use").inc()
            await reject(
                link,
                "seat_in_use",
                "another connection holds this seat; try again shortly",
                TRY_AGAIN_LATER,
            )
            return None
        self._orphaned_since.pop((claim.match, claim.slot), None)
        seat_key = (claim.match, claim.slot, seat.seat_id)
        if seat_key in self._away_by_takeover:
            self._away_by_takeover.discard(seat_key)  # (a failover's gap: caught up as ever)
        else:
            seat.inputs.resume()  # its own connection ended: the gap is not caught up
        node.matches[claim.match].note_resume(claim.slot)  # (for the match log)
        log.info(
            "player_resumed",
            match=claim.match,
            player=claim.slot,
            ack=seat.inputs.acked,
            **node.log_fields,
        )
        return claim.match, seat

    def _seats_held_by(self, address: str) -> int:
        """Seats this node admitted from ``address`` that are held now: connected, or
        waiting out the seat grace for their player."""
        matches = self.node.matches
        held = 0
        for key in self.connections.keys() | self._orphaned_since.keys():
            admitted = self._admitted.get(key)
            if admitted is None or admitted.address != address:
                continue
            seat = matches[key[0]].seats.get(key[1])
            held += seat is not None and seat.seat_id == admitted.seat_id
        return held

    def _new_token(self, index: int, seat: PlayerSeat, now: float) -> str:
        """A session token for ``seat`` of match ``index``, good for ``--token-ttl-s`` from
        unix time ``now`` (wall clock: the region's other nodes check it too)."""
        node = self.node
        return issue_token(
            node.secret,
            node.config.region,
            seat.slot,
            seat.name,
            match=index,
            seat_id=seat.seat_id,
            expires_at=now + node.config.token_ttl,
        )

    def _reservation_refusal(self, join: JoinMessage) -> str | None:
        """None: the token is a session token; "": a valid seat reservation; else why not."""
        assert join.token is not None
        node = self.node
        now = time.time()
        try:
            verify_token(node.secret, join.token, node.config.region, now)
            return None
        except TokenExpired:
            return None  # a session token that ran out: refused as one (invalid_token)
        except TokenError:
            pass
        code = check_reservation(
            node.secret,
            join.token,
            node.config.node_id,
            now,
            player=join.name,
            claims=node.claims,
        )
        return "" if code is None else code

    # -- a seated player's frames ---------------------------------------------------------

    def complain(self, connection: Player, error: protocol.ProtocolError) -> bool:
        """Answer a bad frame; True when the client has offended too often and must go
        (its error then carries the hold-off before its seat may be resumed)."""
        node = self.node
        connection.offences += 1
        node.metrics.protocol_errors.labels(error.code).inc()
        fatal = connection.offences >= node.config.max_offences
        # (once per close: frames read in the same batch may complain again meanwhile)
        closing = connection.closing
        wait = self._closed_for_offences(connection) if fatal and not closing else 0.0
        text = str(error)[:256]
        connection.send(protocol.encode(ErrorMessage(error.code, text, fatal, round(wait, 3))))
        if fatal:
            log.info(
                "client_dropped",
                match=connection.match,
                player=connection.slot,
                reason=error.code,
                offences=connection.offences,
                held_off_s=wait,
                **node.log_fields,
            )
        return fatal

    def _closed_for_offences(self, connection: Player) -> float:
        """A seated connection is closed for offences: its seat's hold-off starts (doubled
        from its last) and its address is held off (with ``--offender-holdoff-s``).
        Returns the seat's wait."""
        key = (connection.match, connection.slot)
        record = self._admitted.get(key)
        seat = self.node.matches[connection.match].seats.get(connection.slot)
        if record is None or seat is None or seat.seat_id != record.seat_id:
            return 0.0  # (its seat is gone already)
        self._address_offended(record.address)
        return self._seat_holds.close((*key, seat.seat_id), time.monotonic())

    def _address_offended(self, address: str | None) -> None:
        """A connection from ``address`` ended in an offence: with
        ``--offender-holdoff-s``, its next upgrade waits (doubled from its last wait)."""
        key = address_key(address)
        if self._address_holds is not None and key is not None:
            wait = self._address_holds.close(key, time.monotonic())
            log.info("address_held_off", address=key, wait_s=wait, **self.node.log_fields)

    def handshake_wait(self, address: str | None) -> float:
        """Seconds a new connection from ``address`` must still wait before its upgrade is
        served (0: serve it; always 0 without ``--offender-holdoff-s``)."""
        key = address_key(address)
        if self._address_holds is None or key is None:
            return 0.0
        return self._address_holds.remaining(key, time.monotonic())

    def over_budget(self, connection: Player, kind: FrameKind, dropped: int, offence: bool) -> bool:
        """Frames of ``kind`` a seated player sent beyond its budget, dropped unread: counted;
        ``offence``: it kept that up (an error, and True when it must go)."""
        metrics = self.node.metrics
        if kind is FrameKind.INPUT:
            metrics.tally_inputs_over_budget += dropped
            rate = f"{self.node.intake.allowance.rate:g} inputs a second, the tick rate"
        else:
            metrics.tally_pings_over_budget += dropped
            rate = f"{PING_ALLOWANCE.rate:g} pings and other frames a second"
        if not offence:
            return False
        return self.complain(
            connection, RateLimited(f"over budget ({rate}) for 2 s running: the surplus is dropped")
        )

    def handle_frame(self, connection: Player, data: bytes) -> bool:
        """One frame from a seated player read the ordinary way (not held for the batch);
        True when the player must be disconnected for repeated offences."""
        node = self.node
        node.metrics.tally_bytes_in += len(data)
        try:
            message = protocol.decode_client(data)
        except protocol.ProtocolError as error:
            return self.complain(connection, error)
        if type(message) is InputMessage:
            node.intake.receive(connection, message, node.server_time())
        elif isinstance(message, PingMessage):
            pong = PongMessage(message.id, message.t, node.server_time())
            connection.send(protocol.encode(pong))
        elif isinstance(message, ProbeEchoMessage):
            node.matches[connection.match].probes.echo(
                connection.slot, message.id, node.server_time()
            )
        elif isinstance(message, SightingMessage):
            node.view.sighting(
                connection.match, connection.slot, message.seq, message.target, message.seen
            )
        else:
            return self.complain(connection, protocol.InvalidField("join: already joined"))
        return False

    # -- everyone -------------------------------------------------------------------------

    def publish(
        self,
        results: list[TickResult],
        until: float = math.inf,
        share: tuple[int, int] = (0, 1),
        probe_time: float | None = None,
    ) -> tuple[int, int]:
        """Each seated player's snapshot of this tick; never waits (a full socket misses
        this one, the next is newer anyway). ``until``: the lease, checked before every
        send, so a node frozen in the middle of a tick sends nothing once it has run out.
        ``share`` (k, n): only the players whose seat is k modulo n (the fan-out is spread
        over the ticks between two snapshots, :class:`~server.net.ticker.Ticker`).
        ``probe_time``: the server time of the tick this goes out in; a seat whose
        round-trip probe is due then gets it in the same write as its snapshot.
        Returns (players sent to, players withheld from because the lease ran out)."""
        matches = self.node.matches.matches
        clock = self.node.clock
        dropped = sent = 0
        seated = [
            (key, connection)
            for key, connection in self.connections.items()
            if in_share(key[1], share)
        ]
        probes = self._probes_due(probe_time, share) if probe_time is not None else {}
        parts: dict[int, dict[int, bytes]] = {}  # per match, the parts of this share's seats
        for (index, slot), connection in seated:
            if clock() >= until:
                return sent, len(seated) - sent
            sent += 1
            result = results[index]
            if not result.body:
                continue  # not a snapshot tick (every match of a node shares the cadence)
            coded = parts.get(index)
            if coded is None:
                share_seats = [s for s in sorted(result.seats) if in_share(s, share)]
                coded = parts[index] = matches[index].snapshot_parts(result, share_seats)
            head = coded.get(slot)
            if head is None:
                continue  # seated after this tick was computed: the next one is its first
            if not connection.send_snapshot(head, result.body, probes.get((index, slot), b"")):
                dropped += 1
        if dropped:
            self.node.metrics.snapshots_dropped.inc(dropped)
        return sent, 0

    def _probes_due(self, tick_time: float, share: tuple[int, int]) -> dict[tuple[int, int], bytes]:
        """The round-trip probes due with the tick of time ``tick_time`` for the seats of
        ``share``, by (match, seat): a probe's round trip counts from its tick, as a
        snapshot's age does. One the snapshot's write does not carry (a full socket, a
        seat taken after the tick) is lost like a dropped packet: the next is due an
        interval later."""
        due: dict[tuple[int, int], bytes] = {}
        part, parts = share
        for match in self.node.matches.matches:
            among = np.arange(part, match.probes.capacity, parts) if parts > 1 else None
            slots, ids = match.probes.due(tick_time, among)
            for slot, probe_id in zip(slots.tolist(), ids.tolist(), strict=True):
                due[match.index, slot] = protocol.encode(ProbeMessage(probe_id))
        return due

    async def announce_standbys(self) -> None:
        """Tell every player the region's current standbys (for their spare connections)."""
        node = self.node
        frame = protocol.encode(
            protocol.StandbysMessage(node.player_endpoints(), node.matches.epoch)
        )
        for connection in list(self.connections.values()):
            connection.send(frame)

    async def close_all(self, code: str, text: str) -> None:
        """Tell every player ``code`` (fatal) and close with 1001 GOING_AWAY, all at once
        (each close is bounded: a datagram link lingers a few round trips, a WebSocket
        waits for its close to be written)."""
        bye = protocol.encode(ErrorMessage(code, text, fatal=True))
        closing = []
        for connection in list(self.connections.values()):
            with contextlib.suppress(Exception):
                connection.send(bye)
                closing.append(connection.close(GOING_AWAY, code.encode()))
        await asyncio.gather(*closing, return_exceptions=True)

    # -- seats kept through a failover ----------------------------------------------------

    def orphan_all(self) -> None:
        """After a takeover: every seat waits up to ``--seat-grace-s`` for its player, and
        banks the time it waits (the node's doing, not its client's) as a stall's."""
        self._orphaned_since = {}
        self._away_by_takeover = set()
        for match in self.node.matches.matches:
            for slot, seat in list(match.seats.items()):
                self._away_by_takeover.add((match.index, slot, seat.seat_id))
                self._orphan(match.index, slot)

    def _orphan(self, index: int, slot: int) -> None:
        """Keep the seat for its player's token (at once freed with no grace): its inputs
        not yet applied are dropped, the player resends what its welcome's ``ack`` lacks."""
        match = self.node.matches[index]
        if self.node.config.seat_grace <= 0:
            match.leave(slot)
            return
        seat = match.seats.get(slot)
        if seat is not None:
            seat.inputs.restore(seat.inputs.acked)
            self._orphaned_since[(index, slot)] = time.monotonic()

    def free_orphans(self) -> None:
        """Free the seats whose players did not come back in time and, once a second, those
        of idle players (:meth:`kick_idle`), then renew the tokens due
        (:meth:`renew_tokens`): the primary's peer watch calls this every 0.25 s."""
        now = time.monotonic()
        for key, since in list(self._orphaned_since.items()):
            match, slot = self.node.matches[key[0]], key[1]
            if key in self.connections or slot not in match.seats:
                del self._orphaned_since[key]
            elif now - since > self.node.config.seat_grace:
                del self._orphaned_since[key]
                match.leave(slot)
                log.info(
                    "seat_freed",
                    match=key[0],
                    player=slot,
                    reason="not_reclaimed",
                    **self.node.log_fields,
                )
        if self.node.config.idle_kick > 0 and now >= self._next_idle_check:
            self._next_idle_check = now + IDLE_CHECK_S
            self.kick_idle()
        self.renew_tokens(time.time())

    def kick_idle(self) -> None:
        """Drop every seated player whose acknowledged input has not moved for
        ``--idle-kick-s`` of match time (ticks simulated: a node that stalls or halts
        kicks nobody for it). Pings and probe echoes do not count: only inputs move a
        player."""
        node = self.node
        limit = node.config.idle_kick
        match_time = node.matches.tick_number / node.config.tick_rate
        acked = [match.inputs.acked.tolist() for match in node.matches.matches]
        activity: dict[Seated, tuple[Player, int, float]] = {}
        idle: list[tuple[Seated, Player, float]] = []
        for key, connection in self.connections.items():
            ack = acked[key[0]][key[1]]
            seen = self._activity.get(key)
            if seen is None or seen[0] is not connection or seen[1] != ack:
                activity[key] = (connection, ack, match_time)
            elif match_time - seen[2] >= limit:
                idle.append((key, connection, match_time - seen[2]))
            else:
                activity[key] = seen
        self._activity = activity
        for key, connection, quiet in idle:
            self._kick(key, connection, quiet)

    def _kick(self, key: Seated, connection: Player, quiet: float) -> None:
        """Tell an idle player (``idle_kick``, fatal), free its seat now, close with 1008."""
        node = self.node
        del self.connections[key]  # (its _play then leaves the seat alone)
        connection.seated = False
        node.matches[key[0]].leave(key[1])
        node.metrics.idle_kicks.inc()
        node.metrics.players.set(node.matches.player_count)
        text = f"no input for {quiet:.0f} s (--idle-kick-s {node.config.idle_kick:g}): seat freed"
        connection.send(protocol.encode(ErrorMessage("idle_kick", text, fatal=True)))
        log.info(
            "idle_kick", match=key[0], player=key[1], idle_s=round(quiet, 1), **node.log_fields
        )
        connection.link.close(POLICY_VIOLATION, b"idle_kick")

    def renew_tokens(self, now: float) -> None:
        """Send each seated player whose token has used half its life (at unix time ``now``)
        a new one: a connected player never holds an expired token, and a dropped one's
        runs out at most ``--token-ttl-s`` after it left. A send that finds the socket full
        is tried again on the next call."""
        node = self.node
        due = now - node.config.token_ttl / 2
        for (index, slot), connection in list(self.connections.items()):
            seat = node.matches[index].seats.get(slot)
            if seat is None or connection.token_issued_at > due:
                continue
            renewal = TokenMessage(self._new_token(index, seat, now))
            if connection.send(protocol.encode(renewal)):
                connection.token_issued_at = now


async def reject(
    link: PlayerLink, code: str, text: str, close: int, retry_after: float = 0.0
) -> None:
    """Tell the client why (and how long to wait before it tries again), then close; a
    client that already hung up is left alone."""
    answer = ErrorMessage(code, text, fatal=True, retry_after=round(retry_after, 3))
    await link.refuse(protocol.encode(answer), close, code.encode())


class _SeatEvents:
    """What a seated player's link tells the sessions (:class:`~server.net.links.SeatEvents`)."""

    __slots__ = ("_player", "_sessions")

    def __init__(self, sessions: Sessions, player: Player) -> None:
        self._sessions = sessions
        self._player = player

    def frame(self, data: bytes) -> bool:
        return self._sessions.handle_frame(self._player, data)

    def refused(self, error: protocol.ProtocolError) -> bool:
        return self._sessions.complain(self._player, error)

    def over_budget(self, kind: FrameKind, dropped: int, offence: bool) -> bool:
        return self._sessions.over_budget(self._player, kind, dropped, offence)


def in_share(slot: int, share: tuple[int, int]) -> bool:
    """Whether seat ``slot`` is one of share (k, n) of the seats: those whose slot is k
    modulo n (how :class:`~server.net.ticker.Ticker` spreads a snapshot's writes)."""
    part, parts = share
    return slot % parts == part
