"""picows against the project's own WebSocket code, for both ends of a seated player.

The node's players and the bots both use the project's own framing: the node takes the
socket over from aiohttp after the upgrade (``server.net.player_stream.PlayerStream``
reads, ``server.net.ws_link.WebSocketLink.send_snapshot`` writes a header, a head and the shared
body as one vectored write); the bots use ``client_sim.websocket.WebSocketClient``. picows
(a Cython WebSocket library for asyncio) is the usual faster alternative. This bench runs
the same traffic through each, in separate processes, interleaved, and compares the CPU of
the sending side (the node's role) and of the receiving side (the bots' role):

* the server sends each client a ``--frame-bytes`` snapshot at ``--rate`` Hz, built as a
  per-client head plus a body shared by every client (the node's layout);
* each client sends two 60-byte inputs in one packet at ``--rate`` Hz (the bots' command
  packets at 60 Hz ticks).

Both ends of a run use the same library, so the wire bytes are the same either way and
each process's CPU is its own library's cost. A run counts only when the clients received
at least 95 % of the frames the server sent and the server at least 95 % of the inputs.
Prints JSON: per library, the median over ``--repeats`` of CPU µs per client-second on
each side, and the ratios picows / own.

    python bench/websocket_paths.py --clients 300 --seconds 8 --repeats 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.report import Start, add_json_option, emit

LIBRARIES = ("own", "picows")
HEAD_BYTES = 64  # a player's own part of a snapshot (ack, state, base)
INPUT_BYTES = 60
INPUTS_PER_PACKET = 2
MIN_DELIVERED = 0.95
QUIESCE_S = 0.5  # after the window, both sides stop sending for this long before counting


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=300, help="connections (default: 300)")
    parser.add_argument(
        "--rate", type=float, default=30.0,
        help="snapshots and input packets a second per client (default: 30)",
    )  # fmt: skip
    parser.add_argument("--frame-bytes", type=int, default=400, help="snapshot size (default: 400)")
    parser.add_argument(
        "--seconds", type=float, default=8.0, help="measured seconds a run (default: 8)"
    )
    parser.add_argument("--repeats", type=int, default=3, help="runs per library (default: 3)")
    add_json_option(parser, "websocket_paths")
    parser.add_argument("--role", choices=("server", "client"), help=argparse.SUPPRESS)
    parser.add_argument("--library", choices=LIBRARIES, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.clients < 1 or args.repeats < 1 or not args.seconds > 0 or not args.rate > 0:
        parser.error("--clients, --repeats, --seconds and --rate must be positive")
    if args.frame_bytes <= HEAD_BYTES:
        parser.error(f"--frame-bytes must be more than the {HEAD_BYTES}-byte head")
    if args.role is not None:
        from shared import eventloop
        from shared.lifetime import exit_with_parent

        exit_with_parent()  # (a bench that dies leaves no server or client behind)

        side = serve if args.role == "server" else play
        eventloop.run(side(args.library, args.port, args.clients, args.rate, args.frame_bytes))
        return 0
    start = Start.now("websocket_paths", "bench/websocket_paths.py", argv)
    result = compare(args.clients, args.rate, args.frame_bytes, args.seconds, args.repeats)
    emit(result, args.json, start)
    return 0


# -- the orchestrator ------------------------------------------------------------------


def compare(clients: int, rate: float, frame_bytes: int, seconds: float, repeats: int) -> dict:
    runs: dict[str, list[dict[str, Any]]] = {library: [] for library in LIBRARIES}
    load_before = os.getloadavg()[0]
    for repeat in range(repeats):
        for library in LIBRARIES:  # interleaved: the machine's drift hits both alike
            run = measure(library, clients, rate, frame_bytes, seconds)
            print(f"repeat {repeat + 1}/{repeats} {library}: {json.dumps(run)}", file=sys.stderr)
            runs[library].append(run)
    summary: dict[str, Any] = {}
    for library, done in runs.items():
        valid = [run for run in done if run["valid"]]
        summary[library] = {
            "valid_runs": len(valid),
            "server_cpu_us_per_client_s": _median(valid, "server_cpu_us_per_client_s"),
            "client_cpu_us_per_client_s": _median(valid, "client_cpu_us_per_client_s"),
        }
    ratios = {
        side: _ratio(summary["picows"][side], summary["own"][side])
        for side in ("server_cpu_us_per_client_s", "client_cpu_us_per_client_s")
    }
    return {
        "bench": "websocket_paths",
        "clients": clients,
        "rate_hz": rate,
        "frame_bytes": frame_bytes,
        "seconds": seconds,
        "repeats": repeats,
        "loadavg_1m_before": load_before,
        "cores": os.cpu_count(),
        "libraries": summary,
        "picows_over_own": ratios,
        "runs": runs,
    }


def _median(runs: list[dict[str, Any]], key: str) -> float | None:
    return round(statistics.median(run[key] for run in runs), 1) if runs else None


def _ratio(picows: float | None, own: float | None) -> float | None:
    return None if picows is None or not own else round(picows / own, 3)


def measure(
    library: str,
    clients: int,
    rate: float,
    frame_bytes: int,
    seconds: float,
    prefixes: tuple[list[str], list[str]] = ([], []),
) -> dict:
    """One run: a server process and a client process, CPU read from /proc over the
    measured window (after every client connected and a second of warm-up). ``prefixes``:
    a command to run the server and the client under (``taskset -c N``)."""
    port = _free_port()
    common = [f"--library={library}", f"--port={port}", f"--clients={clients}",
              f"--rate={rate}", f"--frame-bytes={frame_bytes}"]  # fmt: skip
    me = [sys.executable, __file__]
    server_prefix, client_prefix = prefixes
    server = subprocess.Popen(
        [*server_prefix, *me, "--role=server", *common], stdout=subprocess.PIPE, text=True
    )
    client = None
    try:
        _expect(server, "listening")
        client = subprocess.Popen(
            [*client_prefix, *me, "--role=client", *common], stdout=subprocess.PIPE, text=True
        )
        _expect(client, "connected")
        time.sleep(1.0)
        cpu0 = (_cpu_s(server.pid), _cpu_s(client.pid))
        load = os.getloadavg()[0]
        time.sleep(seconds)
        cpu1 = (_cpu_s(server.pid), _cpu_s(client.pid))
        for process in (server, client):  # both stop sending; what is in flight lands
            process.send_signal(signal.SIGUSR1)
        time.sleep(QUIESCE_S)
        counts = {}
        for name, process in (("client", client), ("server", server)):
            process.send_signal(signal.SIGTERM)
            out, _ = process.communicate(timeout=30)
            counts[name] = json.loads(out.strip().splitlines()[-1])
    finally:
        for process in (client, server):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()
    sent, received = counts["server"]["frames_out"], counts["client"]["frames_in"]
    inputs_out, inputs_in = counts["client"]["frames_out"], counts["server"]["frames_in"]
    client_seconds = clients * seconds
    return {
        "server_cpu_us_per_client_s": round((cpu1[0] - cpu0[0]) * 1e6 / client_seconds, 1),
        "client_cpu_us_per_client_s": round((cpu1[1] - cpu0[1]) * 1e6 / client_seconds, 1),
        "snapshots_sent": sent,
        "snapshots_received": received,
        "inputs_sent": inputs_out,
        "inputs_received": inputs_in,
        "loadavg_1m": load,
        "valid": received >= MIN_DELIVERED * sent and inputs_in >= MIN_DELIVERED * inputs_out,
    }


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _expect(process: subprocess.Popen[str], word: str) -> None:
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line.startswith(word):
        raise RuntimeError(f"expected {word!r} from a bench process, got {line!r}")


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# -- the two sides -----------------------------------------------------------------------


class _Counts:
    def __init__(self) -> None:
        self.frames_in = 0
        self.frames_out = 0

    def report(self) -> None:
        print(json.dumps({"frames_in": self.frames_in, "frames_out": self.frames_out}), flush=True)


async def _send_until_told(rate: float, send_all: Any) -> None:
    """``send_all()`` at ``rate`` Hz until SIGUSR1 (then what was sent can land), and
    return at SIGTERM."""
    loop = asyncio.get_running_loop()
    quiet, stop = asyncio.Event(), asyncio.Event()
    loop.add_signal_handler(signal.SIGUSR1, quiet.set)
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    ticking = asyncio.create_task(_every(rate, send_all))
    await quiet.wait()
    ticking.cancel()
    await stop.wait()


async def _every(rate: float, step: Any) -> None:
    """Call ``step()`` at ``rate`` Hz on a fixed schedule until cancelled."""
    period, due = 1.0 / rate, time.monotonic()
    while True:
        step()
        due += period
        await asyncio.sleep(max(0.0, due - time.monotonic()))


def _snapshot_parts(frame_bytes: int) -> tuple[bytes, bytes]:
    return os.urandom(HEAD_BYTES), os.urandom(frame_bytes - HEAD_BYTES)


async def serve(library: str, port: int, clients: int, rate: float, frame_bytes: int) -> None:
    counts = _Counts()
    head, body = _snapshot_parts(frame_bytes)
    send_all = await (_serve_own if library == "own" else _serve_picows)(port, counts, head, body)
    print("listening", flush=True)
    await _send_until_told(rate, send_all)
    counts.report()


async def _serve_own(port: int, counts: _Counts, head: bytes, body: bytes) -> Any:
    """aiohttp does the upgrade; a PlayerStream reads, a WebSocketLink writes (as the node)."""
    from aiohttp import web

    from server.net.metrics import NodeMetrics
    from server.net.player_stream import PlayerStream
    from server.net.ws_link import WS_MAX_MESSAGE_BYTES, WebSocketLink

    metrics = NodeMetrics()
    connections: list[WebSocketLink] = []

    def received(_payload: bytes) -> bool:
        counts.frames_in += 1
        return False

    async def upgrade(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(max_msg_size=WS_MAX_MESSAGE_BYTES)
        await ws.prepare(request)
        connection = WebSocketLink(ws, request.transport, metrics)
        stream = PlayerStream.take_over(
            request.transport, received, lambda: False, WS_MAX_MESSAGE_BYTES
        )
        if stream is None:
            return ws
        connection.stream = stream
        connections.append(connection)
        await stream.closed
        return ws

    app = web.Application()
    app.router.add_get("/ws", upgrade)
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()

    def send_all() -> None:
        for connection in connections:
            counts.frames_out += connection.send_snapshot(head, body)

    return send_all


async def _serve_picows(port: int, counts: _Counts, head: bytes, body: bytes) -> Any:
    """picows does the upgrade, reads and writes (one send per snapshot: it copies the
    message into its buffer, so head and body are joined first, as its API takes one)."""
    import picows

    transports: list[Any] = []

    class Player(picows.WSListener):  # type: ignore[misc]
        def on_ws_connected(self, transport: Any) -> None:
            transports.append(transport)

        def on_ws_frame(self, transport: Any, frame: Any) -> None:
            if frame.msg_type == picows.WSMsgType.BINARY:
                frame.get_payload_as_bytes()  # (as the node would hand it on)
                counts.frames_in += 1

    await picows.ws_create_server(lambda _request: Player(), "127.0.0.1", port)
    binary = picows.WSMsgType.BINARY

    def send_all() -> None:
        for transport in transports:
            transport.send(binary, head + body)
            counts.frames_out += 1

    return send_all


async def play(library: str, port: int, clients: int, rate: float, _frame_bytes: int) -> None:
    counts = _Counts()
    inputs = [os.urandom(INPUT_BYTES) for _ in range(INPUTS_PER_PACKET)]
    url = f"ws://127.0.0.1:{port}/ws"
    connect_all = _play_own if library == "own" else _play_picows
    send_all = await connect_all(url, clients, counts, inputs)
    print("connected", flush=True)
    await _send_until_told(rate, send_all)
    counts.report()


async def _play_own(url: str, clients: int, counts: _Counts, inputs: list[bytes]) -> Any:
    from client_sim.websocket import connect

    def received(_payload: bytes) -> None:
        counts.frames_in += 1

    sockets = [await connect(url, received, lambda: None, max_size=1 << 16) for _ in range(clients)]

    def send_all() -> None:
        for ws in sockets:
            if ws.send_many(inputs):
                counts.frames_out += len(inputs)

    return send_all


async def _play_picows(url: str, clients: int, counts: _Counts, inputs: list[bytes]) -> Any:
    import picows

    class Bot(picows.WSListener):  # type: ignore[misc]
        def on_ws_frame(self, transport: Any, frame: Any) -> None:
            if frame.msg_type == picows.WSMsgType.BINARY:
                frame.get_payload_as_bytes()  # (as a bot decodes it)
                counts.frames_in += 1

    transports = [(await picows.ws_connect(Bot, url))[0] for _ in range(clients)]
    binary = picows.WSMsgType.BINARY

    def send_all() -> None:
        for transport in transports:
            for payload in inputs:  # (picows writes one frame a call)
                transport.send(binary, payload)
            counts.frames_out += len(inputs)

    return send_all


if __name__ == "__main__":
    raise SystemExit(main())
