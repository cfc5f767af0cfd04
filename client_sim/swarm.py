"""A swarm of bots in one process: one event loop, one tick for all of them.

Each bot is a real client on its own WebSocket: it joins, syncs its clock with pings,
predicts and reconciles its player, interpolates the others and sends one input per tick.
What is per-bot I/O stays per bot (:class:`Bot`: a reader, a writer and the two delay lines
of its simulated link); what is arithmetic runs once for the whole swarm over arrays
(:class:`~client_sim.prediction.SwarmPredictor`, :class:`~client_sim.brain.Brain`).

Every packet in either direction passes through the bot's :class:`~client_sim.link.BotLink`,
so the server sees each bot's modelled latency, jitter and loss, and the RTTs the bots
report are measured through it, never copied from the model.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

from client_sim.bot import Bot, FailoverEvent, ProcessBeat
from client_sim.bot_random import BotStreams
from client_sim.brain import SHOOTING_BEHAVIOURS, Brain
from client_sim.clock_sync import server_times
from client_sim.interpolation import Bracket, drawn
from client_sim.latency import BotParams
from client_sim.light import LightPlayers
from client_sim.marksman import AimSkill
from client_sim.prediction import SwarmPredictor
from client_sim.pump import DeliveryPump
from client_sim.recording import SnapshotRecorder
from client_sim.report_series import Sample
from client_sim.routing import Route
from client_sim.shooting import ShotSummary, SwarmShooting
from client_sim.sight import POP_IN_NEAR_M, PopInWatch
from client_sim.websocket import TlsTrust
from shared import eventloop, protocol, rayhits, sightlines
from shared.arena_map import ArenaMap, default_map
from shared.movement import BUTTON_JUMP
from shared.protocol import baselines, between, reader
from shared.timestep import TickSchedule, run_tick_loop

__all__ = ["ProcessFigures", "Swarm", "SwarmConfig", "SwarmResult", "run_swarm", "warm_up_kernels"]

WATCHDOG_INTERVAL_S = 0.1  # how often the swarm looks for silent primaries and missing spares
#: Inputs sent this long (plus two of the slowest bot's round trips) before the run's end
#: are due an acknowledgement by then; the newer ones' acks are still on their way.
ACK_GRACE_S = 0.5
PROGRESS_INTERVAL_S = 1.0
YOUNG_COLLECTION_THRESHOLD = 10_000  # allocations between two young-generation collections
SAMPLE_INTERVAL_S = 1.0  # the report's time series: one sample a second
MAX_WORLDS = 16  # worlds (region, match, epoch) whose player values a swarm keeps
#: Errors after which a bot stops playing: kicked for idleness (its seat is gone), or
#: refused a seat that trying again will not get it.
FINAL_REFUSALS = frozenset({"idle_kick", "address_limit", "reservation_required"})


@dataclass(frozen=True, slots=True)
class SwarmConfig:
    url: str
    bots: tuple[BotParams, ...]
    duration: float
    seed: int = 1
    interp_delay: float = 0.1
    ping_interval: float = 0.5
    perceive_hz: float = 10.0
    #: Command packets a second: each carries every input since the last (Source's
    #: ``cl_cmdrate``). Rounded to a whole number of ticks, at most one packet a tick.
    input_rate: float = 30.0
    #: Fog of war's pop-ins are judged within this distance whatever the view
    #: (:class:`~client_sim.sight.PopInWatch`).
    pop_in_range_m: float = POP_IN_NEAR_M
    connect_timeout: float = 10.0
    name_prefix: str = "bot"
    arena: ArenaMap = field(default_factory=default_map)
    skill: AimSkill = field(default_factory=AimSkill)
    behaviour: str = "play"
    team: bool = False  # bots of this swarm never aim at each other
    routes: tuple[Route, ...] = ()  # per bot, when the directory seated them
    record: str = ""  # a folder: every accepted snapshot, per bot (client_sim.recording)
    tls: TlsTrust = field(default_factory=TlsTrust)  # which wss:// servers the bots believe
    transport: str = "ws"  # "ws": WebSocket; "udp": sealed datagrams (client_sim.datagram)
    #: Per bot, whether it is a light player (client_sim.light); empty: none is.
    light: tuple[bool, ...] = ()


@dataclass(frozen=True, slots=True)
class ProcessFigures:
    """What one bot process could do: whether it kept the tick rate, at what CPU cost."""

    target_hz: int  # the tick rate its loop was meant to keep (the server's)
    ticks: int  # bot-loop iterations it ran
    ticking_s: float  # wall seconds from its first tick to its last
    cpu_s: float  # its CPU seconds over the whole run
    wall_s: float  # the run's wall seconds

    @property
    def tick_hz(self) -> float | None:
        return self.ticks / self.ticking_s if self.ticking_s > 0 else None


@dataclass(slots=True)
class SwarmResult:
    """Raw measurements of one swarm; :mod:`client_sim.report` turns them into the report."""

    requested: int = 0
    connected: int = 0
    duration_s: float = 0.0
    cpu_s: float = 0.0
    swarm_ticks: int = 0
    rtt_samples: list[float] = field(default_factory=list)
    link_rtts: list[float] = field(default_factory=list)  # per bot: its link's modelled RTT
    prediction_errors: list[float] = field(default_factory=list)
    bytes_down: list[int] = field(default_factory=list)
    bytes_up: list[int] = field(default_factory=list)
    snapshots: list[int] = field(default_factory=list)
    inputs_sent: list[int] = field(default_factory=list)
    inputs_acked: list[int] = field(default_factory=list)
    #: Per bot, the inputs sent up to the ack grace before the end, and how many of those
    #: were acknowledged (``inputs.acked_ratio``: the run's last round trip not counted).
    inputs_due: list[int] = field(default_factory=list)
    inputs_acked_due: list[int] = field(default_factory=list)
    inputs_resent: int = 0  # sent again: repeated in later datagrams, resent after failovers
    inputs_recovered: int = 0  # (UDP) first datagram lost, the node had them from a repeat
    longest_gaps: list[float] = field(default_factory=list)  # per bot, seconds
    snapshots_lost: int = 0
    #: Bots by the transport they played over ({"udp": 40}).
    transports: dict[str, int] = field(default_factory=dict)
    interpolation_misses: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    shots: list[ShotSummary] = field(default_factory=list)
    hits_received: int = 0
    hits_behind_cover: int = 0
    hits_checked: list[tuple[float, bool]] = field(default_factory=list)  # (shooter RTT, cover)
    #: Each time a bot first saw an enemy: (node URL, its player id, the enemy's, loop time).
    sightings: list[tuple[str, int, int, float]] = field(default_factory=list)
    failovers: list[FailoverEvent] = field(default_factory=list)
    stalls: int = 0  # stalls the bots rode out with a probe instead of failing over
    seats_lost: int = 0  # seats whose token a node refused: the bot played on in a new one
    processes: list[ProcessFigures] = field(default_factory=list)  # one per bot process
    #: Per process, one sample a second (:mod:`client_sim.report_series`).
    samples: list[list[Sample]] = field(default_factory=list)
    partial: bool = False  # ended early (Ctrl-C, SIGTERM): the report says so
    clock_to_wall: float = 0.0  # add to a loop time (FailoverEvent.lost_at) for wall time
    node_urls: dict[str, int] = field(default_factory=dict)  # where the bots play at the end
    #: Fog of war as the bots saw it (:meth:`client_sim.sight.PopInWatch.figures`).
    fog: dict[str, int] = field(default_factory=dict)
    #: Light players (client_sim.light): counted apart, none of the figures above.
    light_requested: int = 0
    light_connected: int = 0
    light_inputs_sent: int = 0
    light_inputs_acked: int = 0
    light_snapshots: int = 0
    light_bytes_down: int = 0
    light_bytes_up: int = 0
    #: CPU seconds of the light players' own work (their inputs, sends and snapshot
    #: reads); in a process of light players only, all of its CPU.
    light_cpu_s: float = 0.0


class Swarm:
    def __init__(self, config: SwarmConfig) -> None:
        self.config = config
        self.count = len(config.bots)
        self.bots: list[Bot] = []
        # Each bot's draws keyed by its index in the whole population: bot k behaves the
        # same in whichever worker or shard runs it.
        self.rng = BotStreams(config.seed, [bot.index for bot in config.bots])
        self.errors: dict[str, int] = {}
        self.predictor: SwarmPredictor | None = None
        self.brain = Brain(self.count, config.arena, self.rng, behaviour=config.behaviour)
        self.shooting = SwarmShooting(self.count, config.arena, config.skill, self.rng)
        # Light players (client_sim.light): rows whose snapshots are read from their head
        # only and whose inputs come from LightPlayers, never placed in the predictor.
        self.is_light = list(config.light) if config.light else [False] * self.count
        self.light_rows = np.flatnonzero(np.array(self.is_light, dtype=bool))
        self.light = LightPlayers(self.count, self.light_rows, config.arena, config.skill, self.rng)
        self._light_shown = np.zeros(self.count, dtype=bool)  # a snapshot shown: it plays
        self._light_seq = np.zeros(self.count, dtype=np.int64)  # each one's next input
        self._light_acked = np.full(self.count, -1, dtype=np.int64)
        self._light_newest = np.zeros(self.count)  # server time of each one's newest snapshot
        self._light_work_s = 0.0  # wall time in the light players' own code (perf_counter)
        self.pop_ins = PopInWatch(
            self.count, config.arena.box_min, config.arena.box_max, config.pop_in_range_m
        )
        self.placed = np.zeros(self.count, dtype=bool)
        self.tick_rate = 0
        self.inputs_per_packet = 1
        self.ticks_run = 0
        self.pump: DeliveryPump
        self.beat = ProcessBeat()
        self.decoder = protocol.ServerFrameDecoder()
        self.reader = protocol.SnapshotReader(self.decoder)
        # The players' coding by the bots' own map: for a node whose welcome does not say.
        self.codec = protocol.EntityCodec.for_bounds(
            config.arena.bounds_min, config.arena.bounds_max
        )
        # The players' values per world the bots play in (region, match, epoch): each
        # decoded once for every bot told it (protocol.PlayerValues).
        self._worlds: dict[tuple[str, int, int], protocol.PlayerValues] = {}
        self.welcomed: asyncio.Event
        self.recorder = SnapshotRecorder(config.record) if config.record else None
        self._finish = asyncio.Event()
        self.partial = False
        self._ticking: tuple[float, float] | None = None  # loop times of the first, last tick
        self.samples: list[Sample] = []
        self._sampled = _Totals()
        #: Each bot's inputs sent at the ack grace before the end, by bot index (None: the
        #: run ended before it).
        self._inputs_due: dict[int, int] | None = None
        # Each bot's clock as its ticks read it, kept by clock_changed, so that one pass a
        # tick gives every bot's server time (Bot.server_time, bit for bit): its clock
        # offset, its ClockSync's slew once a pong came, else its welcome's server time
        # and the local time it came at; and the interpolation delay it was granted.
        self._clock_offsets = np.array([bot.clock_offset for bot in config.bots], dtype=float)
        self._slews = np.zeros((self.count, 4))
        self._synced = np.zeros(self.count, dtype=bool)
        self._snapped = np.zeros(self.count, dtype=bool)  # its ClockSync's snap phase is over
        self._welcome_clocks = np.zeros((self.count, 2))
        self._interp_delays = np.zeros(self.count)

    def clock_changed(self, bot: Bot) -> None:
        """``bot``'s clock took a pong or a welcome: its row of the tick's clocks."""
        assert bot.welcome is not None
        index, slew = bot.index, bot.clock.slew()
        if slew is not None:
            self._slews[index] = slew
        self._synced[index] = slew is not None
        self._snapped[index] = bot.clock.synced
        self._welcome_clocks[index] = bot.welcome.server_time, bot.welcomed_local
        self._interp_delays[index] = bot.welcome.interp_delay

    def _clocks(self, ready: np.ndarray, now: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Bots ``ready``'s local times, server times and render times at loop time ``now``,
        as each one's :meth:`Bot.local_time`, :meth:`Bot.server_time` and
        :meth:`_render_time` give them."""
        local = now + self._clock_offsets[ready]
        welcome_time, welcomed_local = self._welcome_clocks[ready].T
        server_now = np.where(
            self._synced[ready],
            server_times(local, self._slews[ready]),
            welcome_time + (local - welcomed_local),
        )
        return local, server_now, np.maximum(0.0, server_now - self._interp_delays[ready])

    def finish(self) -> None:
        """End the run now, before its duration (Ctrl-C): the result is marked partial."""
        self.partial = True
        self._finish.set()

    def note_error(self, code: str) -> None:
        self.errors[code] = self.errors.get(code, 0) + 1

    # -- what arrives, after its modelled delay ------------------------------------------

    def deliver(self, bot: Bot, data: bytes) -> None:
        light = self.is_light[bot.index]
        began = time.perf_counter() if light else 0.0
        try:
            self._deliver(bot, data, light)
        finally:
            if light:
                self._light_work_s += time.perf_counter() - began

    def _deliver(self, bot: Bot, data: bytes, light: bool) -> None:
        body = self.decoder.shared_body(data)
        if body is not None:
            if light:
                ack = protocol.snapshot_ack(data)
                if ack is not None:
                    self._show_light(bot, body[0], ack)
                    return
            elif self._read_snapshot(bot, data, body):
                return
        try:
            message = self.decoder.decode(data)
        except protocol.ProtocolError as error:
            self.note_error(f"bad_frame:{error.code}")
            return
        if isinstance(message, protocol.SnapshotMessage):
            if light:
                self._show_light(bot, message, message.ack)
            else:
                self._on_snapshot(bot, message)
        elif isinstance(message, protocol.ProbeMessage):
            bot.echo_probe(message)
        elif isinstance(message, protocol.PongMessage):
            bot.note_pong(message)
        elif isinstance(message, protocol.StandbysMessage):
            bot.standbys_changed(message)
        elif isinstance(message, protocol.TokenMessage):
            bot.token_renewed(message)
        elif isinstance(message, protocol.ConnectTokenMessage):
            bot.connect_token_renewed(message)
        elif isinstance(message, protocol.WelcomeMessage):
            self._on_welcome(bot, message)
        elif isinstance(message, protocol.ErrorMessage):
            if message.retry_after > 0:  # (held_off, or a fatal offence: when to come back)
                warming = message.code == "not_ready"  # (that node only)
                bot.hold_off(message.retry_after, bot.delivering_url() if warming else None)
            if message.code == "invalid_token":
                bot.token_refused()
            elif message.code in FINAL_REFUSALS:
                bot.refused()
            # A standby answering during a failover is expected: the bot tries the next node.
            if message.code != "not_primary" or bot.welcome is None:
                self.note_error(f"server:{message.code}")

    def _on_welcome(self, bot: Bot, welcome: protocol.WelcomeMessage) -> None:
        if bot.welcomed(welcome):
            self._new_seat(bot.index)
        if self.recorder is not None and bot.welcome is welcome:  # (not a deposed node's)
            self.recorder.welcomed(bot.params.index, welcome.epoch, welcome.player_id, welcome.ack)
        if self.predictor is None:
            self.tick_rate = welcome.tick_rate
            self.inputs_per_packet = inputs_per_packet(welcome.tick_rate, self.config.input_rate)
            self.predictor = SwarmPredictor(self.count, self.config.arena, welcome.tick_rate)
            self.welcomed.set()

    def _world(self, welcome: protocol.WelcomeMessage, epoch: int) -> protocol.PlayerValues:
        """The values of the world a bot welcomed by ``welcome`` sees at ``epoch``."""
        key = (welcome.region, welcome.match, epoch)
        world = self._worlds.get(key)
        if world is None:
            if len(self._worlds) >= MAX_WORLDS:  # (the oldest: an epoch long gone)
                del self._worlds[next(iter(self._worlds))]
            interval = max(1, welcome.tick_rate // welcome.snapshot_rate)
            ring = protocol.PlayerValues.ring_for(welcome.snapshot_rate)
            codec = self._codec(welcome)
            world = self._worlds[key] = protocol.PlayerValues(codec, interval, ring=ring)
        return world

    def _codec(self, welcome: protocol.WelcomeMessage) -> protocol.EntityCodec:
        """How the node that sent ``welcome`` codes its players: as the welcome says (the
        map's bounds and every field's width), else as the bots' own copy of the map
        gives it (a node that does not say)."""
        if welcome.bounds_min is None or welcome.entity_bits is None:
            return self.codec
        return protocol.EntityCodec.for_wire(welcome.bounds_min, welcome.entity_bits)

    def _new_seat(self, index: int) -> None:
        """Bot ``index`` plays on in a new seat (its token was refused; its player id may
        differ): predicted afresh from its first snapshot there, alive, and what it fired
        from the old seat will never be judged."""
        assert self.predictor is not None  # (a bot that had a seat was welcomed before)
        self.placed[index] = False
        self.predictor.unscored[index] = False
        self.shooting.new_seat(index)

    def _read_snapshot(
        self, bot: Bot, data: bytes, body: tuple[protocol.SnapshotMessage, int]
    ) -> bool:
        """The fast path of a snapshot (a body the decoder knows): read in one kernel call
        and shown; False for one the general path must read."""
        template = body[0]
        welcome = bot.welcome
        if (
            self.predictor is None
            or welcome is None
            or not bot.shows(template.epoch, template.tick)
        ):
            return False
        try:
            snapshot = self.reader.read(
                data, body, bot.baselines, self._world(welcome, template.epoch)
            )
        except protocol.MissingBaseline:
            self.note_error("missing_baseline")
            return True
        except protocol.ProtocolError as error:
            self.note_error(f"bad_frame:{error.code}")
            return True
        if snapshot is None:
            return False
        self._show(bot, snapshot, snapshot.records)
        return True

    def _show_light(self, bot: Bot, snapshot: protocol.SnapshotMessage, ack: int) -> None:
        """A light player's snapshot, read from its head and its shared body (``ack`` is
        this frame's): acknowledged, its tick what the next input acks, its time the
        newest the player could draw; its players are never decoded."""
        epoch, tick = snapshot.epoch, snapshot.tick
        if self.predictor is None or not bot.accept_snapshot(epoch, tick, ack):
            return
        if self.recorder is not None:
            self.recorder.accepted(bot.params.index, epoch, tick, snapshot.state, ack)
        index = bot.index
        self._light_shown[index] = True
        self._light_newest[index] = snapshot.server_time
        if ack > self._light_acked[index]:
            self._light_acked[index] = ack

    def _on_snapshot(self, bot: Bot, snapshot: protocol.SnapshotMessage) -> None:
        if self.predictor is None or not bot.shows(snapshot.epoch, snapshot.tick):
            bot.note_unshown(snapshot.epoch, snapshot.tick)
            return  # a deposed primary's, or not newer than what the bot shows
        assert bot.welcome is not None
        try:
            records = bot.baselines.apply(
                snapshot.epoch,
                snapshot.tick,
                snapshot.base,
                snapshot.entities,
                self._world(bot.welcome, snapshot.epoch),
            )
        except protocol.MissingBaseline:
            self.note_error("missing_baseline")  # not shown, not acknowledged: the next
            return  # is coded against an older base, or none
        except protocol.ProtocolError as error:
            self.note_error(f"bad_frame:{error.code}")
            return
        self._show(bot, snapshot, records)

    def _show(
        self,
        bot: Bot,
        snapshot: protocol.SnapshotMessage | protocol.ReadSnapshot,
        records: np.ndarray,
    ) -> None:
        """A snapshot decoded: the bot shows it, reconciles and settles its shots."""
        assert self.predictor is not None and bot.welcome is not None
        bot.accept_snapshot(snapshot.epoch, snapshot.tick, snapshot.ack)
        if self.recorder is not None:
            self.recorder.accepted(
                bot.params.index, snapshot.epoch, snapshot.tick, snapshot.state, snapshot.ack
            )
        you = snapshot.you
        if not self.placed[bot.index]:
            self.predictor.place(bot.index, np.array(you[:3]), np.array(you[3:]))
            self.placed[bot.index] = True
        self.predictor.authoritative(bot.index, snapshot.ack, you)
        before = bot.snapshots.newest
        if before is None or snapshot.server_time > before[0]:
            self.pop_ins.snapshot(
                bot.index, bot.welcome.player_id, before, snapshot.server_time, records,
                snapshot.events,
            )  # fmt: skip
        bot.snapshots.push(snapshot.server_time, records)
        mine = self.shooting.concerning(snapshot.events, bot.welcome.player_id)
        if not mine and not self.shooting.awaiting[bot.index]:
            return  # nothing happened to this bot and nothing is in flight: kept cheap
        was_alive = bool(self.shooting.alive[bot.index])
        respawned = self.shooting.on_snapshot(
            bot.index,
            bot.welcome.player_id,
            snapshot.server_time,
            records,
            mine,
            self.predictor.pos[bot.index],
            lambda: bot.snapshots.view(self._render_time(bot)),
            tick=snapshot.tick,
            told=snapshot.events,
        )
        alive = bool(self.shooting.alive[bot.index])
        if alive != was_alive or respawned:
            self.predictor.unscored[bot.index] = not alive
            self.predictor.skip_next[bot.index] = True

    @staticmethod
    def _render_time(bot: Bot, server_now: float | None = None) -> float:
        """Server time minus the interpolation delay the server granted this bot (the one
        its claims are judged by)."""
        assert bot.welcome is not None
        now = bot.server_time() if server_now is None else server_now
        return max(0.0, now - bot.welcome.interp_delay)

    # -- one tick of the whole swarm -----------------------------------------------------

    async def tick(self, tick: int) -> None:
        predictor = self.predictor
        if predictor is None:
            return
        self.ticks_run += 1
        if len(self.light_rows):
            began = time.perf_counter()
            self._tick_light(asyncio.get_running_loop().time())
            self._light_work_s += time.perf_counter() - began
        if len(self.light_rows) == self.count:
            return
        predictor.reconcile()
        now = asyncio.get_running_loop().time()
        self._perceive(tick, now)
        intent = self.brain.decide(predictor.pos, now, 1.0 / self.tick_rate)
        ready = np.flatnonzero(self.placed & self._linked())
        if not len(ready):
            return
        seqs = predictor.apply(ready, intent.move[ready], intent.buttons[ready])
        shooters: set[int] = set()
        if self.config.behaviour in SHOOTING_BEHAVIOURS:
            shooters = set(self.shooting.shooters(ready, self.brain, now, self.tick_rate).tolist())
            self.light.note_engaged(self.shooting.engaged_share)
        local, server_now, render = self._clocks(ready, asyncio.get_running_loop().time())
        self.pop_ins.frame(ready, render, predictor.pos[ready])
        # Plain lists: indexing them per bot is far cheaper than NumPy scalar indexing.
        rows = zip(
            ready.tolist(),
            seqs.tolist(),
            intent.move[ready].tolist(),
            intent.yaw[ready].tolist(),
            intent.pitch[ready].tolist(),
            intent.buttons[ready].tolist(),
            local.tolist(),
            server_now.tolist(),
            render.tolist(),
            strict=True,
        )
        bots, rate = self.bots, self.tick_rate
        send_tick = self.ticks_run % self.inputs_per_packet == 0
        for index, seq, move, yaw, pitch, buttons, local, server_now, render_time in rows:
            bot = bots[index]
            sighting = None
            if index in shooters:
                fired = self._shoot(bot, seq, render_time)
                if fired is not None:
                    yaw, pitch, trigger, render_time = fired
                    buttons |= trigger
                    sighting = self.shooting.sighting(index, seq, local)
                    self._record_sighting(bot, seq, render_time)
            frame = protocol.encode_input(
                seq=seq,
                tick=max(0, int(server_now * rate)),
                move=move,
                yaw=yaw,
                pitch=pitch,
                buttons=buttons,
                view_time=render_time,
                ack_tick=bot.latest_tick,
            )
            bot.hold_input(seq, frame)
            extra = [] if sighting is None else [sighting]
            if local >= bot.next_ping:
                extra.append(bot.ping_frame(local))
            if extra or send_tick:  # (a ping or a sighting leaves now, with the inputs)
                bot.flush(*extra)

    def _tick_light(self, now: float) -> None:
        """The light players' inputs this tick, each held for its next command packet
        (sent at the full bots' command rate, with a ping when one is due)."""
        rows = self.light_rows[self._light_shown[self.light_rows]]
        if not len(rows):
            return
        bots = self.bots
        rows = rows[np.fromiter((bots[i].playing for i in rows.tolist()), bool, len(rows))]
        if not len(rows):
            return
        seqs = self._light_seq[rows]
        self._light_seq[rows] += 1
        inputs = self.light.decide(rows, seqs, now, self.tick_rate)
        # As a full bot: no shot before its clock is synced (its view times would be
        # guesses the node rightly replaces), none in a behaviour that does not shoot.
        firing = self._snapped[rows] & (self.config.behaviour in SHOOTING_BEHAVIOURS)
        buttons = np.where(firing, inputs.buttons, inputs.buttons & BUTTON_JUMP)
        local, server_now, render = self._clocks(rows, now)
        # What a full bot draws is never newer than its newest snapshot.
        render = np.minimum(render, self._light_newest[rows])
        rate = self.tick_rate
        send_tick = self.ticks_run % self.inputs_per_packet == 0
        encode = protocol.encode_input
        for index, seq, move, yaw, pitch, pressed, local_t, server_t, render_t in zip(
            rows.tolist(), seqs.tolist(), inputs.move.tolist(), inputs.yaw.tolist(),
            inputs.pitch.tolist(), buttons.tolist(), local.tolist(), server_now.tolist(),
            render.tolist(), strict=True,
        ):  # fmt: skip
            bot = bots[index]
            bot.hold_input(
                seq,
                encode(
                    seq=seq, tick=max(0, int(server_t * rate)), move=move, yaw=yaw,
                    pitch=pitch, buttons=pressed, view_time=render_t, ack_tick=bot.latest_tick,
                ),
            )  # fmt: skip
            if local_t >= bot.next_ping:
                bot.flush(bot.ping_frame(local_t))
            elif send_tick:
                bot.flush()

    def _record_sighting(self, bot: Bot, seq: int, view_time: float) -> None:
        """With ``--record``: what this bot drew of the target of the shot it just fired."""
        sighted = self.shooting.sighted(bot.index)
        if self.recorder is not None and sighted is not None and bot.welcome is not None:
            self.recorder.sighted(bot.params.index, bot.welcome.player_id, seq, view_time, *sighted)

    def _shoot(
        self, bot: Bot, seq: int, render_time: float
    ) -> tuple[float, float, int, float] | None:
        """Aim at the tracked enemy in what this bot renders now, and fire.

        Not before the bot's clock is synced: until then its view times are guesses that
        the server would rightly replace.
        """
        assert self.predictor is not None and bot.welcome is not None
        if not bot.clock.synced:
            return None
        view = bot.snapshots.view(render_time)
        if view is None:
            return None
        rtt = bot.clock.rtt_estimate
        return self.shooting.fire(
            bot.index,
            bot.welcome.player_id,
            seq,
            self.predictor.pos[bot.index],
            view,
            int(self.brain.threat_id[bot.index]),
            float("nan") if rtt is None else rtt * 1e3,
            bot.params.rtt * 1e3,
            self.tick_rate,
            bot.snapshots.since,
        )

    def _player_id(self, index: int) -> int:
        welcome = self.bots[index].welcome
        return welcome.player_id if welcome is not None else -1

    def _teammates(self) -> np.ndarray:
        return np.array(
            [b.welcome.player_id for b in self.bots if b.welcome is not None], dtype=np.int64
        )

    def _linked(self) -> np.ndarray:
        return np.fromiter((b.playing for b in self.bots), dtype=bool, count=self.count)

    def _perceive(self, tick: int, now: float) -> None:
        """A few times a second each bot looks at its interpolated view (staggered).

        Every looker's view is drawn and glanced at in one kernel call
        (``Brain.perceive_drawn``): at 300 bots, 50 of them look each tick.
        """
        predictor = self.predictor
        assert predictor is not None
        every = max(1, round(self.tick_rate / self.config.perceive_hz))
        lookers: list[int] = []
        selves: list[int] = []  # each looker's own player id
        brackets: list[Bracket] = []
        for index in range(tick % every, self.count, every):
            bot = self.bots[index]
            if not self.placed[index] or bot.welcome is None:
                continue
            bracket = bot.snapshots.bracket(self._render_time(bot))
            if bracket is not None:
                lookers.append(index)
                selves.append(bot.welcome.player_id)
                brackets.append(bracket)
        if not brackets:
            return
        # One perception pass for every looker, each over the players it draws (interest
        # management sends each bot its own): a player a bot does not draw is invisible
        # to it.
        friends = np.zeros(0, dtype=bool)
        if self.config.team:
            teammates = self._teammates()
            friends = np.zeros(int(teammates.max(initial=-1)) + 1, dtype=bool)
            friends[teammates] = True
        bots = np.array(lookers)
        self.brain.perceive_drawn(
            bots, predictor.pos[bots], *drawn(brackets), np.array(selves), friends, now
        )

    # -- the whole run -------------------------------------------------------------------

    async def run(self, progress: Callable[[str], None] | None = None) -> SwarmResult:
        config = self.config
        loop = asyncio.get_running_loop()
        warm_up_kernels()
        self.pump = DeliveryPump(loop)
        self.welcomed = asyncio.Event()
        self.bots = [Bot(i, params, self, *self._seat(i)) for i, params in enumerate(config.bots)]
        stop = asyncio.Event()
        cpu_before, began = time.process_time(), loop.time()
        try:
            async with asyncio.TaskGroup() as group:
                for bot in self.bots:
                    group.create_task(bot.run(stop))
                group.create_task(self._drive(stop, progress))
        finally:
            if self.recorder is not None:
                self.recorder.close()
        self.pump.close()
        self.shooting.close()
        result = self._result(loop.time() - began, time.process_time() - cpu_before)
        return result

    async def _drive(self, stop: asyncio.Event, progress: Callable[[str], None] | None) -> None:
        """Wait for the welcome, tick until the duration is over, then stop every bot."""
        loop = asyncio.get_running_loop()
        give_up = loop.time() + self.config.connect_timeout
        while not self.welcomed.is_set():
            if self._finish.is_set() or loop.time() > give_up:
                self._stop_all(stop)
                return
            await asyncio.sleep(WATCHDOG_INTERVAL_S)
        with collector_aside():
            schedule = TickSchedule(self.tick_rate, loop.time())
            end = loop.time() + self.config.duration
            slowest = max((bot.params.rtt for bot in self.bots), default=0.0)
            due_at = end - min(ACK_GRACE_S + 2 * slowest, self.config.duration / 2)
            self._ticking = (loop.time(), loop.time())
            self._sampled = self._totals(loop.time())
            ticker = asyncio.create_task(run_tick_loop(schedule, self.tick, loop.time))
            next_progress = loop.time() + PROGRESS_INTERVAL_S
            next_sample = loop.time() + SAMPLE_INTERVAL_S
            try:
                while (now := loop.time()) < end and not self._finish.is_set():
                    await asyncio.sleep(min(WATCHDOG_INTERVAL_S, max(0.0, end - now)))
                    now = loop.time()
                    self.beat.beat(now)  # (a stall of this process: no bot's silence counts)
                    if self._inputs_due is None and now >= due_at:
                        self._inputs_due = {bot.index: bot.inputs_sent for bot in self.bots}
                    for bot in self.bots:
                        if bot.needs_attention(now):
                            bot.wake()
                    if now >= next_sample:
                        next_sample += SAMPLE_INTERVAL_S
                        self._sample(now)
                    if progress is not None and now >= next_progress:
                        next_progress += PROGRESS_INTERVAL_S
                        progress(self._progress_line(end - now))
            finally:
                ticker.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await ticker
                self._ticking = (self._ticking[0], loop.time())
                self._stop_all(stop)

    def _totals(self, now: float) -> _Totals:
        return _Totals(
            at=now,
            ticks=self.ticks_run,
            cpu_s=time.process_time(),
            bytes_down=sum(b.bytes_down for b in self.bots),
            bytes_up=sum(b.bytes_up for b in self.bots),
            pongs=[b.clock.samples for b in self.bots],
            shots=len(self.shooting.finished),
        )

    def _sample(self, now: float) -> None:
        """One second of the report's time series: what changed since the last sample."""
        before, after = self._sampled, self._totals(now)
        judged = [s for s in self.shooting.finished[before.shots :] if s.server_result is not None]
        rtts = tuple(
            r
            for bot, seen in zip(self.bots, before.pongs, strict=True)
            if bot.clock.samples > seen
            for r in bot.clock.rtt_samples[seen:]
        )
        self.samples.append(
            Sample(
                at=time.time(),
                seconds=now - before.at,
                ticks=after.ticks - before.ticks,
                cpu_s=after.cpu_s - before.cpu_s,
                bots=sum(b.playing for b in self.bots),
                bytes_down=after.bytes_down - before.bytes_down,
                bytes_up=after.bytes_up - before.bytes_up,
                rtts=rtts,
                shots=len(judged),
                agreed=sum(s.agrees for s in judged),
            )
        )
        self._sampled = after

    def _seat(self, index: int) -> tuple[str, str | None]:
        """Where bot ``index`` plays: the node the directory gave it (with the reserved
        seat's token), or the swarm's one node."""
        routes = self.config.routes
        if routes:
            return routes[index].url, routes[index].reservation
        return self.config.url, None

    def _stop_all(self, stop: asyncio.Event) -> None:
        stop.set()
        for bot in self.bots:
            bot.wake()  # each bot's play loop sleeps until something changes

    def node_counts(self) -> dict[str, int]:
        """How many bots play on each node now (after a failover: on the survivor)."""
        counts: dict[str, int] = {}
        for bot in self.bots:
            if (url := bot.node_url) is not None:
                counts[url] = counts.get(url, 0) + 1
        return counts

    def busiest_node(self) -> str | None:
        """The node most bots play on now (None: none plays)."""
        counts = self.node_counts()
        return max(counts, key=counts.__getitem__) if counts else None

    def _progress_line(self, remaining: float) -> str:
        connected = sum(b.playing for b in self.bots)
        rtts = [r for b in self.bots for r in b.clock.rtt_samples[-8:]]
        rtt = f"{np.median(rtts) * 1000:.0f}ms" if rtts else "-"
        errors = self.predictor.error_samples() if self.predictor is not None else np.zeros(0)
        err = f"{np.percentile(errors, 99):.3f}m" if len(errors) else "-"
        return (
            f"bots {connected}/{self.count} connected, {max(0.0, remaining):4.0f}s left, "
            f"rtt p50 {rtt}, prediction error p99 {err}"
        )

    def _result(self, duration: float, cpu: float) -> SwarmResult:
        """The full bots' measurements; the light players counted apart."""
        predictor = self.predictor
        full = [b for b in self.bots if not self.is_light[b.index]]
        light = [b for b in self.bots if self.is_light[b.index]]
        welcomed = [b for b in full if b.welcome is not None]
        lit = [b for b in light if b.welcome is not None]
        first, last = self._ticking or (0.0, 0.0)
        acked = (
            [int(predictor.acked[b.index] + 1) for b in welcomed] if predictor is not None else []
        )
        due_by_bot = self._inputs_due or {}
        due = [due_by_bot.get(b.index, b.inputs_sent) for b in welcomed] if acked else []
        return SwarmResult(
            requested=len(full),
            connected=len(welcomed),
            duration_s=duration,
            cpu_s=cpu,
            swarm_ticks=self.ticks_run,
            rtt_samples=[r for b in full for r in b.clock.rtt_samples],
            link_rtts=[b.params.rtt for b in full],
            prediction_errors=(predictor.error_samples().tolist() if predictor is not None else []),
            bytes_down=[b.bytes_down for b in welcomed],
            bytes_up=[b.bytes_up for b in welcomed],
            snapshots=[b.snapshot_count for b in welcomed],
            inputs_sent=[b.inputs_sent for b in welcomed],
            inputs_acked=acked,
            inputs_due=due,
            inputs_acked_due=[min(a, d) for a, d in zip(acked, due, strict=False)],
            inputs_resent=sum(b.inputs_resent for b in full),
            inputs_recovered=sum(max(0, b.inputs_first_lost - b.inputs_given_up) for b in full),
            longest_gaps=[b.longest_gap for b in welcomed if b.snapshot_count > 1],
            snapshots_lost=sum(b.snapshots_lost for b in full),
            transports={self.config.transport: self.count},
            interpolation_misses=sum(b.snapshots.misses for b in full),
            errors=dict(self.errors),
            shots=self.shooting.finished,
            hits_received=self.shooting.hits_received,
            hits_behind_cover=self.shooting.hits_behind_cover,
            hits_checked=self.shooting.hits_checked,
            sightings=[
                (self.bots[bot].url, player, enemy, at)
                for bot, enemy, at in self.brain.sightings
                if (player := self._player_id(bot)) >= 0
            ],
            failovers=[event for bot in full for event in bot.failovers],
            stalls=sum(bot.stalls for bot in full),
            seats_lost=sum(bot.seats_lost for bot in full),
            processes=[ProcessFigures(self.tick_rate, self.ticks_run, last - first, cpu, duration)],
            samples=[self.samples],
            partial=self.partial,
            clock_to_wall=time.time() - asyncio.get_running_loop().time(),
            node_urls=self.node_counts(),
            fog=self.pop_ins.figures(),
            light_requested=len(light),
            light_connected=len(lit),
            light_inputs_sent=sum(b.inputs_sent for b in lit),
            light_inputs_acked=int(sum(self._light_acked[b.index] + 1 for b in lit)),
            light_snapshots=sum(b.snapshot_count for b in lit),
            light_bytes_down=sum(b.bytes_down for b in lit),
            light_bytes_up=sum(b.bytes_up for b in lit),
            light_cpu_s=cpu if light and not full else self._light_work_s,
        )


@contextlib.contextmanager
def collector_aside() -> Iterator[None]:
    """While a swarm ticks, what exists (modules, numba's kernels, the bots) is out of the
    cyclic collector's sight, so a full collection does not walk it (one stalled every bot
    for up to 78 ms), and young collections come every 10,000 allocations, not every 700:
    at 300 bots the collector took 3 % of the CPU, under 1 % so. Afterwards both are as
    they were, so what a swarm leaves in cycles (its bots) can be collected."""
    threshold = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, *threshold[1:])
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        gc.unfreeze()


def warm_up_kernels() -> None:
    """Load (or compile once) the bots' kernels, the snapshot decoder's, the view's, the
    sight lines' and glances', and the shots', before any bot connects: a compile would
    stall every bot of the process."""
    baselines.warm_up()
    reader.warm_up()
    between.warm_up()
    sightlines.warm_up()
    rayhits.warm_up()


def inputs_per_packet(tick_rate: int, input_rate: float) -> int:
    """The ticks between two command packets: the tick rate over the input rate, rounded
    to the nearest whole tick (at least one)."""
    return max(1, round(tick_rate / input_rate))


@dataclass(slots=True)
class _Totals:
    """The swarm's running totals when the last sample was taken."""

    at: float = 0.0  # loop time
    ticks: int = 0
    cpu_s: float = 0.0
    bytes_down: int = 0
    bytes_up: int = 0
    pongs: list[int] = field(default_factory=list)  # per bot, RTT samples seen
    shots: int = 0  # finished shots seen


def run_swarm(
    config: SwarmConfig,
    progress: Callable[[str], None] | None = None,
    finish_on: signal.Signals | None = None,
) -> SwarmResult:
    """Run a swarm to completion in a fresh event loop (also the worker processes' entry).
    ``finish_on``: a signal that ends it early, with a partial result (a worker's parent
    sends it on Ctrl-C)."""

    async def run() -> SwarmResult:
        swarm = Swarm(config)
        if finish_on is not None:
            asyncio.get_running_loop().add_signal_handler(finish_on, swarm.finish)
        return await swarm.run(progress)

    return eventloop.run(run())
