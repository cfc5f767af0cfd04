"""The Python client processes of bench/peers: N clients of one peer in one process.

``naive``: N aiohttp WebSocket connections to ``naive_server.py``, each sending one input
per tick at 60 Hz (move x/y, yaw, pitch, buttons, seq: a wander, as the Colyseus clients
send it) and counting the bytes of every message it receives. ``--decode one`` unpacks the
state on client 0 only (the others count and drop it), ``--decode all`` on every client.

``arena-wander``: N connections to an Arena node that play as the naive and Colyseus
clients do (the same wander, an input per tick at 60 Hz) in Arena's protocol: command
packets of two inputs, each acknowledging the newest snapshot read; ``--decode one``
decodes the players on client 0 only (every client reads the snapshot's head for its ack).

``arena``: Arena's own bots (``client_sim.swarm.Swarm``: prediction, reconciliation,
interpolation, the ``--behaviour`` they play), over a 1 ms modelled link without jitter;
``arena-udp``: the same bots over UDP (sealed datagrams, ``client_sim.datagram``);
``arena-light`` and ``arena-light-udp``: light players (``client_sim.light``: the same
traffic to the node as a bot, a fraction of the bot's CPU), so the clients' core holds
hundreds of them.

Either way the process speaks the same line protocol as ``colyseus/clients.js``: stdout
gets ``{"event":"ready",...}`` once every client joined (or failed), then
``{"event":"mark",...}`` with running totals each time ``mark`` arrives on stdin; it ends
on stdin's EOF (or SIGTERM) with ``{"event":"end",...}``. ``run.py`` takes the deltas.

    python bench/peers/clients.py {naive,arena-wander,arena,arena-udp,arena-light,
                                   arena-light-udp} --url URL --count N [--decode one|all]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import math
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import msgpack
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from client_sim import websocket
from client_sim.brain import BEHAVIOURS
from client_sim.latency import LinkProfile, draw_bot, parse_distribution
from client_sim.swarm import Swarm, SwarmConfig, inputs_per_packet
from shared import eventloop, protocol
from shared.arena_map import default_map
from shared.lifetime import exit_with_parent_if_asked
from shared.protocol import baselines
from shared.timestep import TickSchedule, run_tick_loop

__all__ = ["main"]

TICK_RATE_HZ = 60
JOIN_WITHIN_S = 120.0
JOINS_AT_ONCE = 20
#: Arena's default input rate: command packets a second (two inputs each at 60 Hz).
ARENA_INPUT_RATE_HZ = 30.0
#: Long enough for any window; the process ends when run.py closes its stdin.
ARENA_PLAY_S = 24 * 3600.0


def emit(record: dict[str, Any]) -> None:
    print(json.dumps(record), flush=True)


async def stdin_lines() -> asyncio.StreamReader:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    return reader


async def answer_marks(totals: Callable[[str], dict[str, Any]]) -> None:
    """Print the running totals for each ``mark`` line, until stdin ends or SIGTERM."""
    reader = await stdin_lines()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    stopping = asyncio.create_task(stop.wait())
    try:
        while True:
            reading = asyncio.create_task(reader.readline())
            await asyncio.wait({reading, stopping}, return_when=asyncio.FIRST_COMPLETED)
            if not reading.done():
                reading.cancel()
                break
            line = reading.result()
            if not line:
                break
            if line.strip() == b"mark":
                emit(totals("mark"))
    finally:
        stopping.cancel()
    emit(totals("end"))


# -- the peers' clients: a wander, an input per tick --------------------------------------------


class WanderingClients:
    """What every peer's clients share: N of them wandering (each heading turns a little
    every tick, so most fields change each tick), one input each per tick at 60 Hz, and
    the running totals of the line protocol. ``sockets`` is the subclass'."""

    sockets: list[Any]

    def __init__(self, url: str, count: int, decode: str, seed: int = 1) -> None:
        self.url, self.count, self.decode = url, count, decode
        self.rng = np.random.default_rng(seed)
        self.angle = self.rng.uniform(0, 2 * math.pi, count)
        self.seq = 0
        self.ticks = 0
        self.bytes_down = 0
        self.messages_down = 0
        self.inputs_sent = 0
        self.failed = 0
        self.decoded_players: int | None = None
        self.schedule: TickSchedule | None = None

    def wander(self) -> float:
        """Turn every heading for this tick; the tick's pitch."""
        self.angle += (self.rng.random(self.count) - 0.5) * 0.3
        self.seq += 1
        return math.sin(self.seq / 30) * 0.3

    async def tick(self, _tick: int) -> None:
        raise NotImplementedError

    async def play(self, failed: int) -> None:
        """Once every client joined (``failed`` did not): tick at 60 Hz and answer the
        marks until stdin ends; then every socket is closed."""
        loop = asyncio.get_running_loop()
        self.schedule = TickSchedule(TICK_RATE_HZ, loop.time())
        ticker = asyncio.create_task(run_tick_loop(self.schedule, self.tick, loop.time))
        emit({**self.totals("ready"), "failed": failed, "decode": self.decode})
        try:
            await answer_marks(self.totals)
        finally:
            ticker.cancel()
            await asyncio.gather(ticker, return_exceptions=True)
            for ws in self.sockets:
                if ws is not None:
                    await ws.close()

    def totals(self, event: str) -> dict[str, Any]:
        return {
            "event": event,
            "t": time.monotonic(),
            "cpu_s": time.process_time(),
            "connected": sum(ws is not None and not ws.closed for ws in self.sockets),
            "ticks": self.ticks,
            "ticks_skipped": self.schedule.skipped if self.schedule is not None else 0,
            "bytes_down": self.bytes_down,
            "messages_down": self.messages_down,
            "inputs_sent": self.inputs_sent,
            "decoded_players": self.decoded_players,
        }


# -- naive: aiohttp clients of naive_server.py ------------------------------------------------


class NaiveClients(WanderingClients):
    """N connections, one 60 Hz input loop for all of them, bytes counted per message."""

    def __init__(self, url: str, count: int, decode: str, seed: int = 1) -> None:
        super().__init__(url, count, decode, seed)
        self.sockets: list[aiohttp.ClientWebSocketResponse | None] = [None] * count

    async def receive(self, index: int, ws: aiohttp.ClientWebSocketResponse) -> None:
        decodes = self.decode == "all" or index == 0
        async for message in ws:
            if message.type is aiohttp.WSMsgType.BINARY:
                self.bytes_down += len(message.data)
                self.messages_down += 1
                if decodes:
                    state = msgpack.unpackb(message.data)
                    if index == 0:
                        self.decoded_players = len(state["players"])

    async def join(self, session: aiohttp.ClientSession, index: int) -> None:
        try:
            ws = await session.ws_connect(self.url, compress=0, max_msg_size=0, autoping=True)
        except (aiohttp.ClientError, OSError) as error:
            self.failed += 1
            print(f"clients.py: client {index} could not join: {error}", file=sys.stderr)
            return
        self.sockets[index] = ws
        asyncio.get_running_loop().create_task(self.receive(index, ws))

    async def tick(self, _tick: int) -> None:
        pitch = self.wander()
        for index, ws in enumerate(self.sockets):
            if ws is None or ws.closed:
                continue
            angle = float(self.angle[index])
            frame = msgpack.packb([math.cos(angle), math.sin(angle), angle, pitch, 0, self.seq])
            with contextlib.suppress(ConnectionError):
                await ws.send_bytes(frame)
                self.inputs_sent += 1
        self.ticks += 1

    async def run(self) -> None:
        # One connector without a cap: aiohttp's default stops at 100 connections.
        connector = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(connector=connector) as session:
            for start in range(0, self.count, JOINS_AT_ONCE):
                batch = range(start, min(self.count, start + JOINS_AT_ONCE))
                await asyncio.gather(*(self.join(session, i) for i in batch))
            await self.play(self.failed)


# -- arena-wander: the peers' workload against Arena's protocol ------------------------------


class ArenaWanderClients(WanderingClients):
    """N connections that play like the peers' clients: a wander, an input per tick at
    60 Hz, sent as Arena's command packets (two inputs a write at the default 30 a
    second), each acknowledging the newest snapshot its client read. Every client reads
    each snapshot's head (its tick is the ack the node codes the next delta against);
    ``--decode one`` decodes the players on client 0 only, ``all`` on every client, with
    the baselines Arena's bots keep. No prediction, aim or interpolation: the clients cost
    what the peers' cost, so the node, not its load generator, sets the pace."""

    def __init__(self, url: str, count: int, decode: str, seed: int = 1) -> None:
        super().__init__(url, count, decode, seed)
        self.sockets: list[websocket.WebSocketClient | None] = [None] * count
        self.latest_tick = [-1] * count
        self.latest_time = [0.0] * count  # its server time
        self.read_at = [0.0] * count  # when it was read (monotonic)
        self.welcomed = [False] * count
        self.baselines = [protocol.EntityBaselines() for _ in range(count)]
        self.worlds: dict[tuple[str, int, int], protocol.PlayerValues] = {}
        self.region_match = ("", 0)
        self.decoder = protocol.ServerFrameDecoder()
        self.codec: protocol.EntityCodec | None = None
        self.interval = 1
        self.outbox: list[list[bytes]] = [[] for _ in range(count)]
        self.every = inputs_per_packet(TICK_RATE_HZ, ARENA_INPUT_RATE_HZ)

    def received(self, index: int, data: bytes) -> None:
        self.bytes_down += len(data)
        try:
            message = self.decoder.decode(data)
        except protocol.ProtocolError as error:
            print(f"clients.py: client {index}: a bad frame: {error}", file=sys.stderr)
            return
        if isinstance(message, protocol.SnapshotMessage):
            if message.tick <= self.latest_tick[index]:
                return
            self.messages_down += 1
            if self.decode == "all" or index == 0:
                if not self.decoded(index, message):
                    return  # not held: not acknowledged, the next is coded against an older
            self.latest_tick[index] = message.tick
            self.latest_time[index] = message.server_time
            self.read_at[index] = time.monotonic()
        elif isinstance(message, protocol.WelcomeMessage):
            self.welcomed[index] = True
            self.interval = max(1, message.tick_rate // message.snapshot_rate)
            self.region_match = (message.region, message.match)
        elif isinstance(message, protocol.ProbeMessage):
            self.send_now(index, protocol.encode(protocol.ProbeEchoMessage(message.id)))

    def decoded(self, index: int, snapshot: protocol.SnapshotMessage) -> bool:
        """Decode ``snapshot``'s players against this client's baselines."""
        assert self.codec is not None
        key = (*self.region_match, snapshot.epoch)
        world = self.worlds.get(key)
        if world is None:
            world = self.worlds[key] = protocol.PlayerValues(self.codec, self.interval)
        try:
            records = self.baselines[index].apply(
                snapshot.epoch, snapshot.tick, snapshot.base, snapshot.entities, world
            )
        except protocol.ProtocolError as error:
            print(f"clients.py: client {index}: {error}", file=sys.stderr)
            return False
        if index == 0:
            self.decoded_players = len(records)
        return True

    def send_now(self, index: int, frame: bytes) -> None:
        ws = self.sockets[index]
        if ws is not None and not ws.closed:
            ws.send(frame)

    async def join(self, index: int) -> None:
        try:
            async with asyncio.timeout(JOIN_WITHIN_S):
                ws = await websocket.connect(
                    self.url,
                    functools.partial(self.received, index),
                    lambda: None,
                    max_size=protocol.MAX_SERVER_FRAME_BYTES,
                )
        except (OSError, TimeoutError, ValueError, websocket.HandshakeError) as error:
            self.failed += 1
            print(f"clients.py: client {index} could not join: {error}", file=sys.stderr)
            return
        self.sockets[index] = ws
        join = protocol.JoinMessage(protocol.PROTOCOL_VERSION, f"wander-{index}")
        ws.send(protocol.encode(join))

    async def tick(self, _tick: int) -> None:
        pitch = self.wander()
        flush = self.seq % self.every == 0
        now = time.monotonic()
        for index, ws in enumerate(self.sockets):
            if ws is None or ws.closed or not self.welcomed[index]:
                continue
            angle = float(self.angle[index])
            server_now = self.latest_time[index] + (now - self.read_at[index])
            box = self.outbox[index]
            box.append(protocol.encode_input(
                seq=self.seq, tick=max(0, int(server_now * TICK_RATE_HZ)),
                move=(math.cos(angle), math.sin(angle)), yaw=math.remainder(angle, math.tau),
                pitch=pitch, buttons=0,
                view_time=max(0.0, self.latest_time[index] - 0.1),
                ack_tick=self.latest_tick[index],
            ))  # fmt: skip
            if flush:
                if ws.send_many(box):
                    self.inputs_sent += len(box)
                box.clear()
        self.ticks += 1

    async def run(self) -> None:
        baselines.warm_up()  # (the decoder's kernels, before anyone joins)
        arena = default_map()  # (the node's, as the bots assume too)
        self.codec = protocol.EntityCodec.for_bounds(arena.bounds_min, arena.bounds_max)
        for start in range(0, self.count, JOINS_AT_ONCE):
            batch = range(start, min(self.count, start + JOINS_AT_ONCE))
            await asyncio.gather(*(self.join(i) for i in batch))
        deadline = time.monotonic() + JOIN_WITHIN_S
        while sum(self.welcomed) + self.failed < self.count and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        await self.play(self.count - sum(self.welcomed))


# -- arena: the project's own bots ------------------------------------------------------------

#: Arena's own bots: full or light, over WebSocket or UDP.
ARENA_KINDS = ("arena", "arena-udp", "arena-light", "arena-light-udp")


class ArenaClients:
    """Arena's swarm, in this process, with the line protocol around it."""

    def __init__(
        self,
        url: str,
        count: int,
        behaviour: str,
        seed: int = 1,
        transport: str = "ws",
        light: bool = False,
    ) -> None:
        rtt = parse_distribution("1ms")
        profile = LinkProfile(jitter_ms=0.0)
        bots = tuple(draw_bot(i, seed=seed, rtt=rtt, profile=profile) for i in range(count))
        self.swarm = Swarm(
            SwarmConfig(
                url=url,
                bots=bots,
                duration=ARENA_PLAY_S,
                seed=seed,
                behaviour=behaviour,
                connect_timeout=JOIN_WITHIN_S,
                transport=transport,
                light=(True,) * count if light else (),
            )
        )
        self.count = count

    def totals(self, event: str) -> dict[str, Any]:
        bots = self.swarm.bots
        return {
            "event": event,
            "t": time.monotonic(),
            "cpu_s": time.process_time(),
            "connected": sum(bot.playing for bot in bots),
            "ticks": self.swarm.ticks_run,
            "bytes_down": sum(bot.bytes_down for bot in bots),
            "messages_down": sum(bot.snapshot_count for bot in bots),
            "inputs_sent": sum(bot.inputs_sent for bot in bots),
            "reconnects": sum(len(bot.failovers) for bot in bots)
            + sum(bot.seats_lost for bot in bots),
        }

    async def run(self) -> None:
        playing = asyncio.create_task(self.swarm.run())
        try:
            deadline = time.monotonic() + JOIN_WITHIN_S
            while time.monotonic() < deadline and not playing.done():
                if self.swarm.bots and sum(b.playing for b in self.swarm.bots) >= self.count:
                    break
                await asyncio.sleep(0.25)
            connected = sum(b.playing for b in self.swarm.bots)
            emit({**self.totals("ready"), "failed": self.count - connected, "decode": "all"})
            await answer_marks(self.totals)
        finally:
            self.swarm.finish()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(playing, 30.0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("peer", choices=ARENA_KINDS + ("naive", "arena-wander"))
    parser.add_argument("--url", required=True, help="the server's ws:// URL")
    parser.add_argument("--count", type=int, required=True, help="clients in this process")
    parser.add_argument(
        "--decode", choices=("one", "all"), default="one",
        help="naive, arena-wander: who unpacks the state",
    )  # fmt: skip
    parser.add_argument(
        "--behaviour", choices=BEHAVIOURS, default="play", help="arena: what the bots play"
    )
    args = parser.parse_args(argv)
    if args.count < 1:
        parser.error("--count: at least 1")
    exit_with_parent_if_asked()  # a bench's child: never outlive it
    clients: NaiveClients | ArenaWanderClients | ArenaClients
    if args.peer == "naive":
        clients = NaiveClients(args.url, args.count, args.decode)
    elif args.peer == "arena-wander":
        clients = ArenaWanderClients(args.url, args.count, args.decode)
    else:
        transport = "udp" if args.peer.endswith("-udp") else "ws"
        clients = ArenaClients(
            args.url, args.count, args.behaviour, transport=transport,
            light=args.peer.startswith("arena-light"),
        )  # fmt: skip
    with contextlib.suppress(KeyboardInterrupt):
        eventloop.run(clients.run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
