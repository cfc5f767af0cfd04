"""The naive peer of bench/peers: an aiohttp + msgpack server that sends the full state of
every player to every client every tick, at 60 Hz.

What an afternoon's server looks like, kept as a baseline: a dict of
players, the latest input of each applied in the tick, the whole world packed once per tick
as msgpack maps (float64, string keys) and ``send_bytes`` to each socket in turn. It times
its own ticks (wall time of apply + move + pack + send) and serves them at ``GET /stats``
(``?reset=1`` starts a new window); on SIGTERM it prints them as one JSON line.

    python bench/peers/naive_server.py [--port 0]

stdout: ``{"event":"listening","url":"ws://127.0.0.1:PORT/ws"}`` once it accepts connections.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import math
import random
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgpack
from aiohttp import WSMsgType, web

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from shared import eventloop
from shared.lifetime import exit_with_parent_if_asked
from shared.timestep import TickSchedule, run_tick_loop

__all__ = ["Player", "World", "build_app", "main"]

TICK_RATE_HZ = 60
ARENA_HALF_M = 30.0  # a 60 x 60 m arena, centred on 0
SPEED_MPS = 6.0
MAX_INPUT_BYTES = 1024


@dataclass(slots=True)
class Player:
    """The state every peer holds per player (bench/peers/colyseus/server.js: ``Player``)."""

    x: float
    y: float
    z: float = 0.0
    vx: float = 0.0
    vy: float = 0.0
    vz: float = 0.0
    yaw: float = 0.0
    pitch: float = 0.0
    health: int = 100
    ack: int = 0  # the last input applied for this client


@dataclass
class World:
    """The match and the server's own tick timings (the window since the last reset)."""

    players: dict[int, Player] = field(default_factory=dict)
    sockets: dict[int, web.WebSocketResponse] = field(default_factory=dict)
    inputs: dict[int, list[Any]] = field(default_factory=dict)
    ticks: int = 0
    durations: list[float] = field(default_factory=list)
    window_began: float = field(default_factory=time.monotonic)
    ids: itertools.count[int] = field(default_factory=itertools.count)

    def tick(self, tick: int, dt: float) -> bytes:
        """Apply the latest input of each player, move everyone, pack the whole world."""
        for pid, (mx, my, yaw, pitch, _buttons, seq) in self.inputs.items():
            player = self.players.get(pid)
            if player is None:
                continue
            length = math.hypot(mx, my)
            scale = 1.0 / length if length > 1.0 else 1.0
            player.vx, player.vy = mx * scale * SPEED_MPS, my * scale * SPEED_MPS
            player.yaw, player.pitch, player.ack = yaw, pitch, seq
        self.inputs.clear()
        for player in self.players.values():
            player.x = min(ARENA_HALF_M, max(-ARENA_HALF_M, player.x + player.vx * dt))
            player.y = min(ARENA_HALF_M, max(-ARENA_HALF_M, player.y + player.vy * dt))
            player.z += player.vz * dt
        state = {
            "tick": tick,
            "players": [
                {
                    "id": pid, "x": p.x, "y": p.y, "z": p.z, "vx": p.vx, "vy": p.vy,
                    "vz": p.vz, "yaw": p.yaw, "pitch": p.pitch, "health": p.health,
                    "ack": p.ack,
                }
                for pid, p in self.players.items()
            ],
        }  # fmt: skip
        return msgpack.packb(state)

    def stats(self) -> dict[str, Any]:
        ordered = sorted(self.durations)

        def percentile(q: float) -> float | None:
            if not ordered:
                return None
            rank = min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))
            return round(ordered[rank] * 1000, 4)

        return {
            "event": "stats",
            "server": "naive",
            "players": len(self.players),
            "ticks": self.ticks,
            "seconds": round(time.monotonic() - self.window_began, 3),
            "tick_ms_p50": percentile(50),
            "tick_ms_p99": percentile(99),
        }

    def reset_stats(self) -> None:
        self.ticks, self.durations, self.window_began = 0, [], time.monotonic()


WORLD = web.AppKey("world", World)


async def play(request: web.Request) -> web.WebSocketResponse:
    """One client: seated on connect, its inputs kept (the latest wins) until the tick."""
    world = request.app[WORLD]
    # No per-message deflate (every peer sends uncompressed) and a small cap on inputs.
    ws = web.WebSocketResponse(compress=False, max_msg_size=MAX_INPUT_BYTES)
    await ws.prepare(request)
    pid = next(world.ids)
    world.players[pid] = Player(
        x=random.uniform(-ARENA_HALF_M, ARENA_HALF_M), y=random.uniform(-ARENA_HALF_M, ARENA_HALF_M)
    )
    world.sockets[pid] = ws
    try:
        async for message in ws:
            if message.type is not WSMsgType.BINARY:
                continue
            try:
                move_x, move_y, yaw, pitch, buttons, seq = msgpack.unpackb(message.data)
                world.inputs[pid] = [
                    float(move_x),
                    float(move_y),
                    float(yaw),
                    float(pitch),
                    int(buttons),
                    int(seq),
                ]
            except (ValueError, TypeError, msgpack.UnpackException):
                continue  # garbage from one client never stops the server
    finally:
        world.players.pop(pid, None)
        world.sockets.pop(pid, None)
        world.inputs.pop(pid, None)
    return ws


async def stats(request: web.Request) -> web.Response:
    world = request.app[WORLD]
    body = world.stats()
    if request.query.get("reset") == "1":
        world.reset_stats()
    return web.json_response(body)


async def ticking(app: web.Application) -> Any:
    """The 60 Hz loop, for the app's lifetime (cleanup_ctx)."""
    world = app[WORLD]
    dt = 1.0 / TICK_RATE_HZ
    loop = asyncio.get_running_loop()

    async def on_tick(tick: int) -> None:
        began = time.perf_counter()
        payload = world.tick(tick, dt)
        for ws in list(world.sockets.values()):
            if ws.closed:
                continue
            try:
                await ws.send_bytes(payload)
            except ConnectionError:
                pass  # its handler removes it
        world.ticks += 1
        world.durations.append(time.perf_counter() - began)

    task = asyncio.create_task(
        run_tick_loop(TickSchedule(TICK_RATE_HZ, loop.time()), on_tick, loop.time)
    )
    yield
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


def build_app() -> web.Application:
    app = web.Application()
    app[WORLD] = World()
    app.router.add_get("/ws", play)
    app.router.add_get("/stats", stats)
    app.cleanup_ctx.append(ticking)
    return app


async def serve(port: int) -> None:
    app = build_app()
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    bound = runner.addresses[0][1]
    # The line launch.supervisor.Child waits for.
    print(json.dumps({"event": "listening", "url": f"ws://127.0.0.1:{bound}/ws"}), flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        print(json.dumps(app[WORLD].stats()), flush=True)
        await runner.cleanup()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=0, help="0: any free port (default)")
    args = parser.parse_args(argv)
    exit_with_parent_if_asked()  # a bench's child: never outlive it
    eventloop.run(serve(args.port))
    return 0


if __name__ == "__main__":
    sys.exit(main())
