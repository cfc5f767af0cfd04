"""A peer bench: the same workload against Arena, Colyseus and a naive aiohttp + msgpack
full-state server, interleaved in one run, as JSON.

Every peer holds the same state per player (position, velocity, yaw, pitch, health, the
last input it applied for that client), ticks at 60 Hz, applies one input per client per
tick and sends state to every client every tick (docs/peers.md). For each size, each
repeat and each server (in an order rotated per repeat, so no peer always runs first or
last on a machine that drifts) the server starts pinned to one core and its clients (one
process) to another; after everyone joined and a warm-up, one window is measured:

* server CPU per player-tick: the server process' utime + stime delta (/proc) over
  (players x ticks it ran in the window);
* tick p50/p99: the server's own timing of tick + send (Arena: its tick histogram's deltas);
* downstream bytes per client per second: WebSocket message payloads the clients received;
* client CPU per client-tick (the client process, /proc) and the clients' own tick rate.

A window whose clients kept under 95 % of 60 Hz, or whose server did not hold every player
(or, for Arena, whose bots reconnected), is kept with ``"valid": false`` and its reasons
but left out of the medians. Medians are over valid windows; ratios are Arena / peer
(and floor / peer).

``ws-floor`` is no game server: the node's own WebSocket code (``ws-floor-picows``: picows)
carrying Arena's traffic (30 snapshots of 400 bytes down, 30 packets of two inputs up, a
player a second) and nothing else (``bench/websocket_paths.py``, pinned the same way). Its
CPU per player-tick is what any Python node with Arena's traffic pays before its game runs.

    python bench/peers/run.py [--sizes 60,150,300,600] [--repeats 3] [--warmup 5]
                              [--window 15] [--servers arena,colyseus,naive] [--quick]
                              [--json bench/results/peers.json]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from bench import websocket_paths
from bench.adversary import node_metrics, tick_quantile
from bench.report import Start, add_json_option, emit
from bench.server_load import process_cpu_seconds, process_cpu_times
from launch.health import node_health
from launch.nodes import NodeProcess, start_node
from launch.supervisor import Child, ChildError
from shared import eventloop
from shared.commandline import OneLineParser
from shared.lifetime import EXIT_WITH_PARENT_ENV

__all__ = ["main", "medians", "ratios", "validity"]

TICK_RATE_HZ = 60
CLIENT_TICKS_FLOOR = 0.95 * TICK_RATE_HZ
HERE = Path(__file__).resolve().parent
COLYSEUS = HERE / "colyseus"
PEERS = (
    "arena", "arena-udp", "arena-light", "arena-light-udp", "arena-wander", "colyseus",
    "naive", "ws-floor",
)  # fmt: skip
#: The servers with no game behind them: the WebSocket code alone under Arena's traffic.
FLOOR = "ws-floor"
FLOORS = (FLOOR, f"{FLOOR}-picows")
#: Arena's traffic a player (its defaults): 30 snapshots down and 30 command packets of two
#: inputs up a second; a snapshot's size at 60-300 wandering players is 395-564 bytes.
ARENA_SNAPSHOT_HZ = 30.0
FLOOR_FRAME_BYTES = 400
#: Each figure the medians and ratios are taken of.
FIGURES = (
    "server_cpu_us_per_player_tick",
    "tick_p50_ms",
    "tick_p99_ms",
    "down_bytes_per_client_per_s",
    "client_cpu_us_per_client_tick",
    "client_ticks_per_s",
    "server_ticks_per_s",
    "server_sys_us_per_player_tick",
)
#: Ratios Arena / peer: below 1 Arena is cheaper (or sends less).
RATIO_FIGURES = FIGURES[:5]


class BenchError(RuntimeError):
    """A run could not be set up; the message is one line for the user."""


def log(line: str) -> None:
    print(f"bench/peers: {line}", file=sys.stderr, flush=True)


# -- the servers ---------------------------------------------------------------------------------


@dataclass
class Server:
    """A running peer server: its process, where its clients connect and how its own tick
    figures are read at a window's edges."""

    peer: str
    pid: int
    url: str
    room: str = ""  # Colyseus: the room every client joins
    admin: str = ""  # Arena: the node's admin URL (its full /health and /metrics)

    async def stats(self, reset: bool) -> dict[str, Any]:
        """The figures of the window so far (Arena: the raw /metrics and /health)."""
        if self.peer == "arena":
            health = await node_health(self.admin, within=10.0)
            return {"metrics": await node_metrics(self.admin), "players": (health or {}).get(
                "players", 0)}  # fmt: skip
        http = self.url.replace("ws://", "http://").split("/ws")[0].rstrip("/")
        query = "?reset=1" if reset else ""
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10.0)) as session,
            session.get(f"{http}/stats{query}") as response,
        ):
            return dict(await response.json())

    async def players(self) -> int:
        return int((await self.stats(reset=False))["players"])

    def window(self, start: dict[str, Any], end: dict[str, Any]) -> dict[str, Any]:
        """Ticks run and tick percentiles between two ``stats``, and the seats at each."""
        if self.peer == "arena":
            a, b = start["metrics"], end["metrics"]
            p50, p99 = tick_quantile(0.50, a, b), tick_quantile(0.99, a, b)
            ticks = b.get(("arena_ticks_total", ()), 0.0) - a.get(("arena_ticks_total", ()), 0.0)
            rejected = {
                dict(labels)["reason"]: int(value - a.get((name, labels), 0.0))
                for (name, labels), value in b.items()
                if name == "arena_inputs_rejected_total"
            }
            return {
                "ticks": int(ticks),
                # Honest clients' inputs the node refused: a window with any measured a
                # node that applied less than the workload says (validity()).
                "inputs_rejected": {reason: n for reason, n in rejected.items() if n},
                "tick_p50_ms": None if p50 is None else round(p50, 3),
                "tick_p99_ms": None if p99 is None else round(p99, 3),
                "seated_at_start": start["players"],
                "seated_at_end": end["players"],
            }
        return {  # the start reset the server's window: the end's figures are the window's
            "ticks": end["ticks"],
            "tick_p50_ms": end["tick_ms_p50"],
            "tick_p99_ms": end["tick_ms_p99"],
            "seated_at_start": start["players"],
            "seated_at_end": end["players"],
        }


def pinned(core: int) -> list[str]:
    return ["taskset", "-c", str(core)]


def ensure_colyseus() -> None:
    """``npm ci`` into bench/peers/colyseus/node_modules, once, when it is missing."""
    if shutil.which("node") is None:
        raise BenchError("colyseus needs node on PATH (or leave it out: --servers arena,naive)")
    if (COLYSEUS / "node_modules" / "@colyseus" / "core").is_dir():
        return
    if shutil.which("npm") is None:
        raise BenchError("colyseus: node_modules is missing and npm is not on PATH")
    log("installing the Colyseus peer's packages (npm ci, once)")
    done = subprocess.run(
        ["npm", "ci", "--no-audit", "--no-fund"], cwd=COLYSEUS, capture_output=True, text=True
    )
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["?"])[-1]
        raise BenchError(f"colyseus: npm ci failed ({last})")


@contextlib.asynccontextmanager
async def started(peer: str, players: int, core: int) -> AsyncIterator[Server]:
    """The peer's server, pinned to ``core``, until the block ends (then stopped)."""
    if peer == "arena":
        stack = contextlib.ExitStack()
        flags = ["--node-id", "peers", "--log-level", "warning",
                 "--max-players", str(max(players, 300))]  # fmt: skip
        node: NodeProcess = await asyncio.to_thread(
            stack.enter_context, start_node(*flags, prefix=pinned(core))
        )
        try:
            yield Server(peer, node.process.pid, node.url, admin=node.admin_url)
        finally:
            await asyncio.to_thread(stack.close)
        return
    if peer == "colyseus":
        command = ["node", str(COLYSEUS / "server.js"), "--max-clients", str(players + 10)]
    else:
        command = [sys.executable, str(HERE / "naive_server.py")]
    child = Child(f"{peer}-server", pinned(core) + command)
    try:
        url = await asyncio.to_thread(child.wait_ready, 60.0)
        server = Server(peer, child.pid, url)
        if peer == "colyseus":
            server.room = str((await server.stats(reset=False))["room"])
        yield server
    finally:
        await asyncio.to_thread(child.stop, 10.0)


# -- the clients -----------------------------------------------------------------------------


class Clients:
    """The client process of one window, and its line protocol (``ready``, ``mark``)."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    @classmethod
    async def start(
        cls, server: Server, kind: str, count: int, core: int, decode: str, behaviour: str
    ) -> Clients:
        """``kind``: whose clients (a peer's name, or ``arena-wander``)."""
        if kind == "colyseus":
            command = ["node", str(COLYSEUS / "clients.js"), "--url", server.url,
                       "--room", server.room, "--count", str(count),
                       "--decode", decode]  # fmt: skip
        elif kind in ("naive", "arena-wander"):
            command = [sys.executable, str(HERE / "clients.py"), kind, "--url", server.url,
                       "--count", str(count), "--decode", decode]  # fmt: skip
        else:  # arena, arena-udp: Arena's own bots, over WebSocket or UDP
            command = [sys.executable, str(HERE / "clients.py"), kind, "--url", server.url,
                       "--count", str(count), "--behaviour", behaviour]  # fmt: skip
        process = await asyncio.create_subprocess_exec(
            *pinned(core), *command,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            env={**os.environ, "PYTHONUNBUFFERED": "1", EXIT_WITH_PARENT_ENV: "1"},
            limit=1 << 20,
        )  # fmt: skip
        return cls(process)

    async def line(self, within: float) -> dict[str, Any]:
        """The next JSON event it prints (other output is skipped)."""
        assert self.process.stdout is not None
        deadline = time.monotonic() + within
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise BenchError(f"the clients said nothing for {within:g} s")
            raw = await asyncio.wait_for(self.process.stdout.readline(), remaining)
            if not raw:
                raise BenchError(f"the clients exited (code {await self.process.wait()})")
            with contextlib.suppress(ValueError):
                event = json.loads(raw)
                if isinstance(event, dict) and "event" in event:
                    return event

    async def mark(self) -> dict[str, Any]:
        assert self.process.stdin is not None
        self.process.stdin.write(b"mark\n")
        await self.process.stdin.drain()
        while (event := await self.line(30.0))["event"] != "mark":
            pass
        event["cpu_proc_s"] = process_cpu_seconds(self.process.pid)
        return event

    async def stop(self) -> None:
        """Close its stdin (it ends), then SIGTERM, then SIGKILL; always reaped."""
        process = self.process
        with contextlib.suppress(Exception):
            if process.stdin is not None:
                process.stdin.close()
        for action in ("wait", "terminate", "kill"):
            if process.returncode is not None:
                break
            if action != "wait":
                with contextlib.suppress(ProcessLookupError):
                    getattr(process, action)()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(process.wait(), 10.0)
        await process.wait()


# -- one window ------------------------------------------------------------------------------


async def measure(
    name: str, players: int, args: argparse.Namespace, cores: tuple[int, int]
) -> dict[str, Any]:
    """One window of one server under ``players`` clients."""
    if name in FLOORS:
        return await measure_floor(name, players, args.window, cores)
    kind, _, decode = name.partition("-decode-")
    decode = decode or "one"
    # (Arena's node, whichever clients: its bots over WebSocket or UDP, or the wanderers)
    peer = "arena" if kind.startswith("arena") else kind
    server_core, client_core = cores
    record: dict[str, Any] = {"server": name, "players": players, "decode": decode}
    async with started(peer, players, server_core) as server:
        clients = await Clients.start(
            server, kind, players, client_core, decode, args.arena_behaviour
        )
        try:
            ready = await clients.line(60.0 + players * 0.5)
            record["clients_failed_to_join"] = ready.get("failed", 0)
            began = time.monotonic()
            while await server.players() < players and time.monotonic() - began < 30.0:
                await asyncio.sleep(0.25)
            await asyncio.sleep(args.warmup)
            record["loadavg_1m"] = os.getloadavg()[0]
            stats0 = await server.stats(reset=True)
            cpu0, mark0 = process_cpu_times(server.pid), await clients.mark()
            await asyncio.sleep(args.window)
            stats1 = await server.stats(reset=False)
            cpu1, mark1 = process_cpu_times(server.pid), await clients.mark()
        finally:
            await clients.stop()
    used = [end - start for start, end in zip(cpu0, cpu1, strict=True)]
    record.update(figures(players, server.window(stats0, stats1), used, mark0, mark1))
    reasons = validity(record)
    return {**record, "valid": not reasons, "invalid_reasons": reasons}


async def measure_floor(
    name: str, players: int, window_s: float, cores: tuple[int, int]
) -> dict[str, Any]:
    """One window of the floor under any Python node: the node's own WebSocket code
    (``ws-floor``) or picows (``ws-floor-picows``) carrying Arena's traffic with no game
    behind it (``bench/websocket_paths.py``), pinned as the servers and clients are."""
    library = "picows" if name.endswith("-picows") else "own"
    server_core, client_core = cores
    try:
        run = await asyncio.to_thread(
            websocket_paths.measure, library, players, ARENA_SNAPSHOT_HZ, FLOOR_FRAME_BYTES,
            window_s, (pinned(server_core), pinned(client_core)),
        )  # fmt: skip
    except (RuntimeError, OSError, subprocess.SubprocessError, ValueError) as error:
        raise BenchError(f"{name}: {error}") from error
    return floor_record(name, players, run)


def floor_record(name: str, players: int, run: dict[str, Any]) -> dict[str, Any]:
    """A floor window in the peers' figures (per player-tick at 60 Hz; no tick of its own,
    so no tick times): valid when 95 % of the frames each way arrived."""
    record: dict[str, Any] = {"server": name, "players": players, "decode": "none"}
    record.update({figure: None for figure in FIGURES})
    record.update(
        loadavg_1m=run["loadavg_1m"],
        server_cpu_us_per_player_tick=round(run["server_cpu_us_per_client_s"] / TICK_RATE_HZ, 2),
        client_cpu_us_per_client_tick=round(run["client_cpu_us_per_client_s"] / TICK_RATE_HZ, 2),
        down_bytes_per_client_per_s=FLOOR_FRAME_BYTES * ARENA_SNAPSHOT_HZ,
        **{key: run[key] for key in
           ("snapshots_sent", "snapshots_received", "inputs_sent", "inputs_received")},
    )  # fmt: skip
    reasons = [] if run["valid"] else [
        f"frames lost: {run['snapshots_received']} of {run['snapshots_sent']} snapshots, "
        f"{run['inputs_received']} of {run['inputs_sent']} inputs arrived"
    ]  # fmt: skip
    return {**record, "valid": not reasons, "invalid_reasons": reasons}


def figures(
    players: int, window: dict[str, Any], server_cpu: list[float], start: dict[str, Any],
    end: dict[str, Any],
) -> dict[str, Any]:  # fmt: skip
    """The window's figures from the server's and the clients' deltas.

    ``server_cpu`` is the server's user and system seconds in the window.
    """
    server_cpu_s, server_sys_s = sum(server_cpu), server_cpu[1]
    seconds = end["t"] - start["t"]
    ticks = window["ticks"]
    seated = min(window["seated_at_start"], window["seated_at_end"])
    client_ticks = end["ticks"] - start["ticks"]
    connected = min(start["connected"], end["connected"])
    client_cpu = end["cpu_proc_s"] - start["cpu_proc_s"]
    down = end["bytes_down"] - start["bytes_down"]
    messages = end["messages_down"] - start["messages_down"]

    def per(value: float, by: float, scale: float = 1.0, digits: int = 2) -> float | None:
        return round(value / by * scale, digits) if by > 0 else None

    return {
        **window,
        "window_s": round(seconds, 2),
        "connected_at_start": start["connected"],
        "connected_at_end": end["connected"],
        "server_cpu_us_per_player_tick": per(server_cpu_s, seated * ticks, 1e6),
        # The kernel's part (socket reads and writes, mostly): a floor under any server code.
        "server_sys_us_per_player_tick": per(server_sys_s, seated * ticks, 1e6),
        "server_cpu_share": per(server_cpu_s, seconds, digits=3),
        "server_ticks_per_s": per(ticks, seconds),
        "down_bytes_per_client_per_s": per(down, connected * seconds, digits=0),
        "down_messages_per_client_per_s": per(messages, connected * seconds),
        "down_bytes_per_player_per_message": per(down, messages * max(seated, 1)),
        "inputs_per_client_per_s": per(
            end["inputs_sent"] - start["inputs_sent"], connected * seconds
        ),
        "client_cpu_us_per_client_tick": per(client_cpu, players * client_ticks, 1e6),
        "client_cpu_share": per(client_cpu, seconds, digits=3),
        "client_ticks_per_s": per(client_ticks, seconds),
        "client_reconnects": end.get("reconnects", 0) - start.get("reconnects", 0),
        # What the decoding client's own state held at the end (Arena's bots: not reported).
        "decoded_players_at_end": end.get("decoded_players"),
    }


def validity(run: dict[str, Any]) -> list[str]:
    """Why a window did not measure its server under every client at 60 Hz (empty: it did)."""
    players = run["players"]
    reasons = []
    kept = run["client_ticks_per_s"]
    if kept is None or kept < CLIENT_TICKS_FLOOR:
        reasons.append(f"clients kept {kept} Hz (< {CLIENT_TICKS_FLOOR:.1f})")
    for moment in ("start", "end"):
        if (seated := run[f"seated_at_{moment}"]) < players:
            reasons.append(f"server held {seated} of {players} players at the window's {moment}")
        if (connected := run[f"connected_at_{moment}"]) < players:
            reasons.append(f"{connected} of {players} clients connected at the window's {moment}")
    if run.get("client_reconnects", 0) > 0:
        reasons.append(f"{run['client_reconnects']} client reconnects in the window")
    if run["ticks"] < 1:
        reasons.append("the server ran no tick in the window")
    if rejected := run.get("inputs_rejected"):
        said = ", ".join(f"{n} {reason}" for reason, n in sorted(rejected.items()))
        reasons.append(f"the node rejected inputs of honest clients ({said})")
    return reasons


def failed_run(name: str, players: int, error: str) -> dict[str, Any]:
    """A window that could not be measured at all, kept in the JSON with why."""
    record: dict[str, Any] = {"server": name, "players": players}
    record.update({figure: None for figure in FIGURES})
    return {**record, "valid": False, "invalid_reasons": [error]}


# -- medians and ratios ------------------------------------------------------------------------


def medians(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per figure, the median over the valid windows (None without one)."""
    valid = [run for run in runs if run["valid"]]
    record: dict[str, Any] = {"windows": len(runs), "valid_windows": len(valid)}
    for figure in FIGURES:
        values = [run[figure] for run in valid if run.get(figure) is not None]
        record[figure] = round(statistics.median(values), 3) if values else None
        record[f"{figure}_runs"] = [run.get(figure) for run in runs]
    record["invalid_reasons"] = [
        reason for run in runs if not run["valid"] for reason in run["invalid_reasons"]
    ]
    return record


def ratios(arena: dict[str, Any], peer: dict[str, Any]) -> dict[str, float | None]:
    """Arena / peer per figure, from the medians (None when either has no valid window)."""
    out: dict[str, float | None] = {}
    for figure in RATIO_FIGURES:
        a, b = arena.get(figure), peer.get(figure)
        out[figure] = round(a / b, 3) if a is not None and b else None
    return out


def versions() -> dict[str, Any]:
    found: dict[str, Any] = {"python": sys.version.split()[0]}
    for package in ("aiohttp", "msgpack"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            found[package] = metadata.version(package)
    if node := shutil.which("node"):
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            found["node"] = subprocess.run(
                [node, "--version"], capture_output=True, text=True, timeout=10
            ).stdout.strip()
    with contextlib.suppress(OSError, ValueError):
        lock = json.loads((COLYSEUS / "package-lock.json").read_text())
        for name in ("@colyseus/core", "@colyseus/schema", "@colyseus/ws-transport",
                     "colyseus.js"):  # fmt: skip
            found[name] = lock["packages"][f"node_modules/{name}"]["version"]
    return found


async def run(args: argparse.Namespace) -> dict[str, Any]:
    cores = sorted(os.sched_getaffinity(0))
    server_core, client_core = (cores[0], cores[1]) if len(cores) > 1 else (cores[0], cores[0])
    os.sched_setaffinity(0, {client_core})  # this process beside the clients, not the server
    report: dict[str, Any] = {
        "bench": "peers",
        "tick_rate_hz": TICK_RATE_HZ,
        "config": {
            "sizes": args.sizes,
            "repeats": args.repeats,
            "warmup_s": args.warmup,
            "window_s": args.window,
            "servers": args.servers,
            "arena_behaviour": args.arena_behaviour,
        },
        "versions": versions(),
        "machine": {
            "cpus": os.cpu_count(),
            "server_core": server_core,
            "client_core": client_core,
            "loadavg_1m_at_start": os.getloadavg()[0],
        },
        "runs": [],
    }
    runs: list[dict[str, Any]] = report["runs"]
    for players in args.sizes:
        for repeat in range(args.repeats):
            shift = repeat % len(args.servers)
            for name in args.servers[shift:] + args.servers[:shift]:
                log(f"{name}: {players} players, repeat {repeat + 1} of {args.repeats}")
                try:
                    record = await measure(name, players, args, (server_core, client_core))
                except (BenchError, ChildError, aiohttp.ClientError, TimeoutError) as error:
                    record = failed_run(name, players, f"not measured: {error}")
                record["repeat"] = repeat + 1
                runs.append(record)
                log(summary(record))
    results: dict[str, Any] = {}
    for players in args.sizes:
        results[str(players)] = {
            name: medians([r for r in runs if r["server"] == name and r["players"] == players])
            for name in args.servers
        }
    report["results"] = results
    report["ratios"] = {
        size: {
            f"{arena}/{name}": ratios(by_server[arena], by_server[name])
            for arena in by_server
            if arena.startswith(("arena", FLOOR))
            for name in by_server
            if not name.startswith(("arena", FLOOR))
        }
        for size, by_server in results.items()
    }
    report["machine"]["loadavg_1m_at_end"] = os.getloadavg()[0]
    return report


def summary(run: dict[str, Any]) -> str:
    verdict = "valid" if run["valid"] else "INVALID: " + "; ".join(run["invalid_reasons"])
    return (
        f"{run['server']} @ {run['players']}: server {run['server_cpu_us_per_player_tick']} us "
        f"per player-tick, tick p99 {run['tick_p99_ms']} ms, "
        f"down {run.get('down_bytes_per_client_per_s')} B/client/s, "
        f"clients {run.get('client_cpu_us_per_client_tick')} us per client-tick at "
        f"{run.get('client_ticks_per_s')} Hz: {verdict}"
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = OneLineParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="60,150,300,600", help="comma-separated players")
    parser.add_argument("--repeats", type=int, default=3, help="windows per size and server")
    parser.add_argument("--warmup", type=float, default=5.0, help="seconds after all joined")
    parser.add_argument("--window", type=float, default=15.0, help="seconds measured")
    parser.add_argument(
        "--servers",
        default="arena,arena-wander,colyseus,naive,ws-floor",
        help="comma-separated: arena (Arena's bots), arena-udp (the same bots over UDP), "
        "arena-light and arena-light-udp (light players: the bots' traffic, little CPU), "
        "arena-wander (Arena's node under "
        "clients that play as the peers' do), colyseus, naive; colyseus-decode-all, "
        "naive-decode-all and arena-wander-decode-all run that peer with every client "
        "decoding every state message (default: one client decodes, the others count bytes); "
        "ws-floor (ws-floor-picows): the node's WebSocket code (picows) under Arena's "
        "traffic with no game behind it, the floor under any Python node",
    )
    parser.add_argument(
        "--arena-behaviour", default="play", help="what Arena's bots play (default: play)"
    )
    parser.add_argument(
        "--quick", action="store_true", help="a smoke: 20 players, one repeat, 3 s windows"
    )
    add_json_option(parser, "peers")
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.repeats, args.window, args.warmup = "20", 1, 3.0, 1.0
    try:
        args.sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    except ValueError:
        parser.error(f"--sizes: expected comma-separated counts, got {args.sizes!r}")
    if not args.sizes or min(args.sizes) < 1:
        parser.error("--sizes: every size must be at least 1")
    args.servers = [s.strip() for s in args.servers.split(",") if s.strip()]
    known = {*PEERS, *FLOORS, "colyseus-decode-all", "naive-decode-all", "arena-wander-decode-all"}
    if not args.servers or any(s not in known for s in args.servers):
        parser.error(f"--servers: choose from {', '.join(sorted(known))}")
    if args.repeats < 1 or args.window <= 0 or args.warmup < 0:
        parser.error("--repeats at least 1, --window above 0, --warmup at least 0")
    if shutil.which("taskset") is None:
        parser.error("taskset (util-linux) is needed to pin the servers and clients")
    if args.json and not Path(args.json).resolve().parent.is_dir():
        parser.error(f"--json {args.json}: its folder does not exist")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    start = Start.now("peers", "bench/peers/run.py", argv)
    try:
        if any(name.startswith("colyseus") for name in args.servers):
            ensure_colyseus()
        report = eventloop.run(run(args), cancel_on=(signal.SIGTERM,))
    except BenchError as error:
        print(f"bench/peers: {error}", file=sys.stderr)
        return 2
    except (KeyboardInterrupt, asyncio.CancelledError):
        print("bench/peers: interrupted", file=sys.stderr)
        return 130
    emit(report, args.json, start)
    for size, by_server in report["results"].items():
        for name, record in by_server.items():
            if record["valid_windows"] == 0:
                log(f"WARNING: {name} @ {size}: no valid window; its medians are empty")
    return 0


if __name__ == "__main__":
    sys.exit(main())
