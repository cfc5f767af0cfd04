"""A prototype of fanning snapshots out across processes, measured against the node's
one-process fan-out (the design is in docs/fanout.md).

A "tick" process plays the node's simulation: at ``--tick-rate`` Hz it makes every
client's snapshot as the node does, a per-client head plus a body shared by all (the
delta every client on one baseline gets). Then either

* ``inproc``: it writes every client's frame itself, one vectored write of WebSocket
  header, head and body per client (``server.net.ws_link.WebSocketLink.send_snapshot``'s shape); or
* ``gateways:K``: it sends each of K gateway processes one message per tick over a unix
  socket (the body once, and the heads of that gateway's clients), and each gateway writes
  its clients' frames.

The clients (one process, raw sockets) check every frame and measure how long after the
tick began it arrived (one monotonic clock on one machine). Prints JSON: per mode, the
tick process's CPU per tick (what the simulation's core pays to publish), all processes'
CPU per client-tick, the delivery delay p50/p99 and the frames delivered; modes
interleaved, ``--repeats`` each, medians. A run counts only when the clients got 95 % of
the frames and the tick process kept its rate.

    python bench/fanout_prototype.py --clients 600 --seconds 6 --repeats 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import statistics
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.report import Start, add_json_option, emit

HEAD_BYTES = 64  # the client's own part: here, the tick's start time and the tick number
_STAMP = struct.Struct("<dq")
_MESSAGE = struct.Struct("<II")  # a gateway message's length after this, and its heads
MIN_DELIVERED = 0.95
#: Ticks whose frames a window may count as sent before its clients count them: those
#: still on their way when it closes (late, not lost: a busy machine delays them a tick
#: or two, and a one-second window of 6 clients then missed 12 of 198).
IN_FLIGHT_TICKS = 2
MIN_RATE_SHARE = 0.95


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=600, help="connections (default: 600)")
    parser.add_argument(
        "--modes", default="inproc,gateways:1,gateways:2",
        help="fan-outs to compare, comma-separated (default: inproc,gateways:1,gateways:2)",
    )  # fmt: skip
    parser.add_argument(
        "--tick-rate", type=float, default=30.0, help="snapshots a second (default: 30)"
    )
    parser.add_argument(
        "--body-bytes", type=int, default=1500, help="shared body size (default: 1500)"
    )
    parser.add_argument(
        "--seconds", type=float, default=6.0, help="measured seconds a run (default: 6)"
    )
    parser.add_argument("--repeats", type=int, default=3, help="runs per mode (default: 3)")
    add_json_option(parser, "fanout_prototype")
    parser.add_argument("--role", choices=("tick", "gateway", "clients"), help=argparse.SUPPRESS)
    parser.add_argument("--mode", help=argparse.SUPPRESS)
    parser.add_argument("--ports", help=argparse.SUPPRESS)  # where the clients connect
    parser.add_argument("--fd", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.clients < 1 or args.repeats < 1 or not args.seconds > 0 or not args.tick_rate > 0:
        parser.error("--clients, --repeats, --seconds and --tick-rate must be positive")
    if args.body_bytes < 1:
        parser.error("--body-bytes must be positive")
    modes = [mode.strip() for mode in args.modes.split(",")]
    for mode in modes:
        try:
            gateway_count(mode)
        except ValueError as error:
            parser.error(str(error))
    if args.role is not None:
        from shared import eventloop
        from shared.lifetime import exit_with_parent

        exit_with_parent()  # (a bench that dies leaves no server or client behind)

        if args.role == "tick":
            side = tick(args.mode, args.clients, args.tick_rate, args.body_bytes)
        elif args.role == "gateway":
            side = gateway(args.fd)
        else:
            ports = [int(port) for port in args.ports.split(",")]
            side = clients(ports, args.clients, args.body_bytes)
        eventloop.run(side)
        return 0
    start = Start.now("fanout_prototype", "bench/fanout_prototype.py", argv)
    result = compare(modes, args.clients, args.tick_rate, args.body_bytes, args.seconds,
                     args.repeats)  # fmt: skip
    emit(result, args.json, start)
    return 0


def gateway_count(mode: str) -> int:
    """0 for ``inproc``, K for ``gateways:K``."""
    if mode == "inproc":
        return 0
    name, _, count = mode.partition(":")
    if name == "gateways" and count.isdigit() and int(count) >= 1:
        return int(count)
    raise ValueError(f"--modes: {mode!r} is neither inproc nor gateways:K (K >= 1)")


# -- the orchestrator ------------------------------------------------------------------


def compare(
    modes: list[str], clients: int, rate: float, body: int, seconds: float, repeats: int
) -> dict[str, Any]:
    load_before = os.getloadavg()[0]
    runs: dict[str, list[dict[str, Any]]] = {mode: [] for mode in modes}
    for repeat in range(repeats):
        for mode in modes:  # interleaved: the machine's drift hits every mode alike
            run = measure(mode, clients, rate, body, seconds)
            print(f"repeat {repeat + 1}/{repeats} {mode}: {json.dumps(run)}", file=sys.stderr)
            runs[mode].append(run)
    figures = ("tick_cpu_us_per_tick", "all_cpu_us_per_client_tick", "delay_ms_p50",
               "delay_ms_p99")  # fmt: skip
    summary = {}
    for mode, done in runs.items():
        valid = [run for run in done if run["valid"]]
        summary[mode] = {"valid_runs": len(valid)} | {
            figure: round(statistics.median(run[figure] for run in valid), 2) if valid else None
            for figure in figures
        }
    return {
        "bench": "fanout_prototype",
        "clients": clients,
        "tick_rate_hz": rate,
        "body_bytes": body,
        "head_bytes": HEAD_BYTES,
        "seconds": seconds,
        "repeats": repeats,
        "cores": os.cpu_count(),
        "loadavg_1m_before": load_before,
        "modes": summary,
        "runs": runs,
    }


def measure(mode: str, clients: int, rate: float, body: int, seconds: float) -> dict[str, Any]:
    common = [f"--mode={mode}", f"--clients={clients}", f"--tick-rate={rate}",
              f"--body-bytes={body}"]  # fmt: skip
    me = [sys.executable, __file__]
    ticker = subprocess.Popen(me + ["--role=tick", *common], stdout=subprocess.PIPE, text=True)
    players = None
    try:
        # "listening PID... ports PORT...": the gateways' processes, and where clients go
        # (each listener bound a port of its own choosing: none is taken by another first).
        words = _line(ticker, "listening").split()
        split = words.index("ports")
        gateway_pids = [int(pid) for pid in words[1:split]]
        ports = ",".join(words[split + 1 :])
        players = subprocess.Popen(me + ["--role=clients", f"--ports={ports}", *common],
                                   stdout=subprocess.PIPE, text=True)  # fmt: skip
        _line(players, "connected")
        time.sleep(1.0)
        pids = [ticker.pid, *gateway_pids]
        cpu0 = [_cpu_s(pid) for pid in pids]
        ticks0, got0 = _counter(ticker.pid), _counter(players.pid)
        load = os.getloadavg()[0]
        time.sleep(seconds)
        cpu1 = [_cpu_s(pid) for pid in pids]
        ticks, got = _counter(ticker.pid) - ticks0, _counter(players.pid) - got0
        reports = {}
        for name, process in (("tick", ticker), ("clients", players)):
            process.send_signal(signal.SIGTERM)
            out, _ = process.communicate(timeout=30)
            reports[name] = json.loads(out.strip().splitlines()[-1])
    finally:
        for process in (players, ticker):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()
    tick_cpu = cpu1[0] - cpu0[0]
    all_cpu = sum(cpu1) - sum(cpu0)
    sent = ticks * clients  # in the measured window
    delays = reports["clients"]["delays_ms"]
    return {
        "tick_cpu_us_per_tick": round(tick_cpu * 1e6 / max(ticks, 1), 1),
        "all_cpu_us_per_client_tick": round(all_cpu * 1e6 / max(ticks * clients, 1), 2),
        "delay_ms_p50": delays[0],
        "delay_ms_p99": delays[1],
        "ticks_per_s": round(ticks / seconds, 1),
        "frames_sent": sent,
        "frames_received": got,
        "bad_frames": reports["clients"]["bad"],
        "loadavg_1m": load,
        "valid": delivered(got, sent, clients)
        and reports["clients"]["bad"] == 0
        and ticks / seconds >= MIN_RATE_SHARE * rate,
    }


def _line(process: subprocess.Popen[str], word: str) -> str:
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line.startswith(word):
        raise RuntimeError(f"expected {word!r} from a bench process, got {line!r}")
    return line


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _counter_path(pid: int) -> Path:
    """Where a bench process keeps its count (ticks made, or frames received)."""
    return Path(f"/tmp/arena-fanout-{pid}.count")


def delivered(received: int, sent: int, clients: int) -> bool:
    """Whether a window's clients got nearly every frame sent in it (those still on their
    way when it closed aside)."""
    return received >= MIN_DELIVERED * (sent - IN_FLIGHT_TICKS * clients)


def _publish_count(path: Path, number: int) -> None:
    """Write a count whole, by renaming a finished file over the old one: a reader of a
    file rewritten in place could find it empty, read 0 and take a negative difference."""
    partial = path.with_suffix(".partial")
    partial.write_text(str(number))
    os.replace(partial, path)


def read_count(path: Path) -> int:
    """A count as :func:`_publish_count` left it (0 before the first)."""
    try:
        return int(path.read_text() or 0)
    except (FileNotFoundError, ValueError):
        return 0


def _counter(pid: int) -> int:
    return read_count(_counter_path(pid))


async def _until_terminated() -> None:
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()


# -- the tick process --------------------------------------------------------------------


class _Sink(asyncio.Protocol):
    """A connection that only receives writes (the tick's clients, or a gateway's end)."""

    def __init__(self, joined: list[asyncio.Transport]) -> None:
        self._joined = joined

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._joined.append(transport)  # type: ignore[arg-type]


async def tick(mode: str, count: int, rate: float, body_bytes: int) -> None:
    """The simulation's side: a frame for every client every tick, written directly
    (``inproc``) or handed to the gateways, one message each."""
    from shared import wsframe

    loop = asyncio.get_running_loop()
    body = os.urandom(body_bytes)
    frame_header = wsframe.header(wsframe.OP_BINARY, HEAD_BYTES + body_bytes, masked=False)
    heads = np.zeros((count, HEAD_BYTES), dtype=np.uint8)
    k = gateway_count(mode)
    targets: list[asyncio.Transport] = []
    children: list[asyncio.subprocess.Process] = []
    ports: list[int] = []
    if k == 0:
        server = await loop.create_server(lambda: _Sink(targets), "127.0.0.1", 0)
        ports.append(int(server.sockets[0].getsockname()[1]))
    else:
        for _ in range(k):
            ours, theirs = socket.socketpair()
            children.append(await asyncio.create_subprocess_exec(
                sys.executable, __file__, "--role=gateway", f"--fd={theirs.fileno()}",
                pass_fds=[theirs.fileno()],
            ))  # fmt: skip
            theirs.close()
            ours.setblocking(False)
            async with asyncio.timeout(30.0):
                ready = await loop.sock_recv(ours, 3)  # b"R" + the port it listens on
                if len(ready) != 3 or ready[:1] != b"R":
                    raise RuntimeError("a gateway did not start")
                ports.append(struct.unpack(">H", ready[1:])[0])
            await loop.connect_accepted_socket(lambda: _Sink(targets), ours)
    print("listening", *[child.pid for child in children], "ports", *ports, flush=True)
    counter = _counter_path(os.getpid())
    period, due, number = 1.0 / rate, time.monotonic(), 0
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    try:
        while not stop.is_set():
            started = time.monotonic()
            number += 1
            stamp = _STAMP.pack(started, number)
            heads[:, : _STAMP.size] = np.frombuffer(stamp, dtype=np.uint8)
            if k == 0:
                for index, transport in enumerate(targets):
                    if not transport.is_closing():
                        transport.writelines((frame_header, heads[index].tobytes(), body))
            elif len(targets) == k:
                share = -(-count // k)  # client i talks to gateway i // share
                for index, transport in enumerate(targets):
                    mine = heads[index * share : (index + 1) * share]
                    size = 4 + len(body) + mine.nbytes
                    transport.writelines((_MESSAGE.pack(size, len(mine)),
                                          len(body).to_bytes(4, "little"), body,
                                          mine.tobytes()))  # fmt: skip
            if number % 3 == 0:
                _publish_count(counter, number)
            due += period
            await asyncio.sleep(max(0.0, due - time.monotonic()))
    finally:
        if k == 0:
            server.close()
        for child in children:
            child.terminate()
            await child.wait()
        counter.unlink(missing_ok=True)
        counter.with_suffix(".partial").unlink(missing_ok=True)
    print(json.dumps({}), flush=True)


# -- a gateway ---------------------------------------------------------------------------


class _Feed(asyncio.Protocol):
    """The tick's messages, each split into the body and its clients' heads and written
    to those clients (one vectored write each, as the node writes)."""

    def __init__(self, clients: list[asyncio.Transport]) -> None:
        self._clients = clients
        self._buffer = bytearray()

    def data_received(self, data: bytes) -> None:
        from shared import wsframe

        self._buffer += data
        while len(self._buffer) >= _MESSAGE.size:
            size, count = _MESSAGE.unpack_from(self._buffer)
            end = _MESSAGE.size + size
            if len(self._buffer) < end:
                return
            message = bytes(self._buffer[_MESSAGE.size : end])
            del self._buffer[:end]
            body_len = int.from_bytes(message[:4], "little")
            body = message[4 : 4 + body_len]
            heads = memoryview(message)[4 + body_len :]
            header = wsframe.header(wsframe.OP_BINARY, HEAD_BYTES + body_len, masked=False)
            for index, transport in enumerate(self._clients[:count]):
                if transport.is_closing():
                    continue
                head = heads[index * HEAD_BYTES : (index + 1) * HEAD_BYTES]
                transport.writelines((header, head, body))

    def connection_lost(self, exc: Exception | None) -> None:
        asyncio.get_running_loop().stop()


async def gateway(fd: int) -> None:
    loop = asyncio.get_running_loop()
    clients: list[asyncio.Transport] = []
    server = await loop.create_server(lambda: _Sink(clients), "127.0.0.1", 0)
    feed = socket.socket(fileno=fd)
    feed.sendall(b"R" + struct.pack(">H", server.sockets[0].getsockname()[1]))
    feed.setblocking(False)
    await loop.connect_accepted_socket(lambda: _Feed(clients), feed)
    try:
        await _until_terminated()
    finally:
        server.close()


# -- the clients -------------------------------------------------------------------------


class _Player(asyncio.Protocol):
    def __init__(self, frame_bytes: int, tally: _Tally) -> None:
        from shared import wsframe

        self._frame_bytes = frame_bytes
        self._tally = tally
        self._buffer = bytearray()
        self._header = len(wsframe.header(wsframe.OP_BINARY, frame_bytes, masked=False))

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        whole = self._header + self._frame_bytes
        now = time.monotonic()
        while len(self._buffer) >= whole:
            started, _number = _STAMP.unpack_from(self._buffer, self._header)
            if self._buffer[0] != 0x82:
                self._tally.bad += 1
            self._tally.delays.append(now - started)
            self._tally.frames += 1
            del self._buffer[:whole]


class _Tally:
    def __init__(self) -> None:
        self.frames = 0
        self.bad = 0
        self.delays: list[float] = []


async def clients(ports: list[int], count: int, body_bytes: int) -> None:
    loop = asyncio.get_running_loop()
    tally = _Tally()
    share = -(-count // len(ports))  # clients a listener (the tick's own, or a gateway's)
    for index in range(count):
        target = ports[index // share]
        await loop.create_connection(
            lambda: _Player(HEAD_BYTES + body_bytes, tally), "127.0.0.1", target
        )
    print("connected", flush=True)
    counter = _counter_path(os.getpid())

    async def count() -> None:
        while True:
            _publish_count(counter, tally.frames)
            await asyncio.sleep(0.05)

    counting = asyncio.create_task(count())
    await _until_terminated()
    counting.cancel()
    counter.unlink(missing_ok=True)
    counter.with_suffix(".partial").unlink(missing_ok=True)
    delays = np.array(tally.delays[len(tally.delays) // 10 :]) * 1000.0  # (after warm-up)
    figures = (
        [round(float(np.percentile(delays, q)), 2) for q in (50, 99)] if len(delays) else [0, 0]
    )
    print(json.dumps({"bad": tally.bad, "delays_ms": figures}), flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
