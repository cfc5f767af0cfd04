"""Seat requests per second the directory answers, and pure routing decisions per second.

Three figures, from the inside out:

* ``policy``: :func:`server.directory.policy.choose` alone over N nodes in 7 regions, with
  RTT maps drawn from the latency matrix plus noise (decisions/s, µs per decision).
* ``core``: :meth:`server.directory.service.Directory.seat` without HTTP: registry views,
  policy, token, reservation.
* ``http``: ``POST /seat`` over loopback against a real ``arena-directory`` subprocess
  (default; ``--in-process`` runs it in this event loop instead), N fake nodes registered
  and heartbeating every 0.5 s, C concurrent clients on one session, bounded by
  ``--requests`` and ``--duration``. The directory's CPU per request comes from /proc, so
  the figure holds even when the client (one Python process) is the bottleneck.

    python bench/routing.py [--nodes 50] [--clients 64] [--requests 20000] [--duration 10]
                            [--json PATH]

Progress goes to stderr; the JSON report to stdout (and ``--json PATH``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import signal
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np
from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.report import Start, add_json_option, emit
from server.directory.auth import HeartbeatSequence, signed_heartbeat
from server.directory.net.app import create_app
from server.directory.policy import NodeView, NoPlacement, RegionView, choose
from server.directory.service import Directory, DirectoryConfig
from shared.directory import Heartbeat
from shared.geo import default_matrix, draw_homes

SECRET = "bench-cluster-secret-0123456789"
SEQUENCE = HeartbeatSequence(time.time())
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
POPULATION = "na:0.35,eu:0.3,asia:0.2,sa:0.07,oce:0.05,me:0.02,af:0.01"
_LISTENING = re.compile(r"event=listening url=(\S+)")


def progress(text: str) -> None:
    print(f"routing: {text}", file=sys.stderr, flush=True)


def fake_nodes(count: int, capacity: int) -> list[Heartbeat]:
    regions = default_matrix().locations
    return [
        Heartbeat(
            node_id=f"{regions[i % len(regions)]}-{i // len(regions) + 1}",
            region=regions[i % len(regions)],
            endpoint=f"ws://10.0.{i // 250}.{i % 250}:7777/ws",
            probe=f"http://10.0.{i // 250}.{i % 250}:7777/probe",
            role="primary",
            epoch=1,
            matches=1,
            players=int(i * 37 % 200),
            capacity=capacity,
        )
        for i in range(count)
    ]


def rtt_maps(count: int, seed: int) -> list[dict[str, float]]:
    """Players drawn from a world population; each measures every region with noise."""
    matrix = default_matrix()
    rng = np.random.default_rng(seed)
    homes = draw_homes(POPULATION, count, seed)
    noise = rng.lognormal(0.0, 0.15, size=(count, len(matrix.locations)))
    return [
        {
            b: round(matrix.rtt_ms(home, b) * float(noise[i, j]), 1)
            for j, b in enumerate(matrix.locations)
        }
        for i, home in enumerate(homes)
    ]


def bench_policy(
    nodes: list[Heartbeat], maps: list[dict[str, float]], seconds: float
) -> dict[str, Any]:
    by_region: dict[str, list[NodeView]] = {}
    for beat in nodes:
        by_region.setdefault(beat.region, []).append(
            NodeView(
                beat.node_id,
                beat.region,
                beat.endpoint,
                beat.role,
                beat.epoch,
                beat.players,
                beat.capacity,
                expires_at=1e18,
            )
        )
    views = [RegionView(name, tuple(ns)) for name, ns in sorted(by_region.items())]
    done, refused, began = 0, 0, time.perf_counter()
    while time.perf_counter() - began < seconds:
        for rtt in maps[:1000]:
            if isinstance(choose(views, rtt, now=0.0, slack_ms=40.0), NoPlacement):
                refused += 1
        done += min(len(maps), 1000)
    elapsed = time.perf_counter() - began
    return {
        "decisions": done,
        "decisions_per_s": round(done / elapsed),
        "us_per_decision": round(elapsed / done * 1e6, 2),
        "refused": refused,
    }


def bench_core(
    nodes: list[Heartbeat], maps: list[dict[str, float]], seconds: float
) -> dict[str, Any]:
    config = DirectoryConfig(secret=SECRET.encode(), heartbeat_timeout=60.0)
    directory = Directory(config, time.monotonic, time.time)
    for beat in nodes:
        body, headers = signed_heartbeat(SECRET, beat, now=time.time(), sequence=SEQUENCE.next())
        assert directory.heartbeat(body, headers)[0] == 200
    done, began = 0, time.perf_counter()
    outcomes: dict[int, int] = {}
    while time.perf_counter() - began < seconds:
        for rtt in maps[:1000]:
            status, _ = directory.seat({"player": f"p{done}", "rtt_ms": rtt})
            outcomes[status] = outcomes.get(status, 0) + 1
            done += 1
    elapsed = time.perf_counter() - began
    return {
        "requests": done,
        "requests_per_s": round(done / elapsed),
        "us_per_request": round(elapsed / done * 1e6, 2),
        "outstanding_reservations_at_end": directory.registry.outstanding,
        "status_counts": {str(k): v for k, v in sorted(outcomes.items())},
    }


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


@contextlib.asynccontextmanager
async def directory_at(in_process: bool) -> AsyncIterator[tuple[str, int]]:
    """Yields ``(url, pid)`` of a running directory; stops it afterwards."""
    if in_process:
        config = DirectoryConfig(secret=SECRET.encode(), reservation_ttl=10.0)
        runner = web.AppRunner(create_app(config), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        try:
            yield f"http://127.0.0.1:{runner.addresses[0][1]}", os.getpid()
        finally:
            await runner.cleanup()
        return
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "server.directory.net.cli",
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "--log-level",
        "warning",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env={
            **os.environ,
            "ARENA_CLUSTER_SECRET": SECRET,
            "PYTHONUNBUFFERED": "1",
            "ARENA_EXIT_WITH_PARENT": "1",
        },
    )
    try:
        assert process.stdout is not None
        async with asyncio.timeout(30):
            line = (await process.stdout.readline()).decode()
        match = _LISTENING.search(line)
        if match is None:
            raise RuntimeError(f"arena-directory did not start: {line!r}")
        yield match.group(1), process.pid
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            try:
                async with asyncio.timeout(10):
                    await process.wait()
            except TimeoutError:
                process.kill()
                await process.wait()


async def bench_http(
    nodes: list[Heartbeat],
    maps: list[dict[str, float]],
    clients: int,
    requests: int,
    duration: float,
    in_process: bool,
) -> dict[str, Any]:
    connector = aiohttp.TCPConnector(limit=0)
    async with (
        directory_at(in_process) as (url, pid),
        aiohttp.ClientSession(connector=connector) as session,
    ):

        async def beat_all() -> None:
            for beat in nodes:
                body, headers = signed_heartbeat(
                    SECRET, beat, now=time.time(), sequence=SEQUENCE.next()
                )
                async with session.post(f"{url}/nodes/heartbeat", data=body, headers=headers) as r:
                    if r.status != 200:
                        raise RuntimeError(f"heartbeat refused: {await r.text()}")

        async def heartbeats() -> None:
            while True:
                await asyncio.sleep(0.5)
                await beat_all()

        await beat_all()
        latencies: list[float] = []
        statuses: dict[int, int] = {}
        issued = 0
        began = time.perf_counter()
        deadline = began + duration

        async def client(index: int) -> None:
            nonlocal issued
            while issued < requests and time.perf_counter() < deadline:
                n = issued
                issued += 1
                body = {"player": f"bench-{n}", "rtt_ms": maps[n % len(maps)]}
                sent = time.perf_counter()
                async with session.post(f"{url}/seat", json=body) as response:
                    await response.read()
                    statuses[response.status] = statuses.get(response.status, 0) + 1
                latencies.append(time.perf_counter() - sent)

        async def report() -> None:
            while True:
                await asyncio.sleep(1.0)
                elapsed = time.perf_counter() - began
                progress(
                    f"http: {len(latencies)} answers in {elapsed:.1f} s "
                    f"({len(latencies) / elapsed:.0f}/s)"
                )

        cpu0 = cpu_seconds(pid)
        async with asyncio.TaskGroup() as group:
            background = [group.create_task(heartbeats()), group.create_task(report())]
            workers = [group.create_task(client(i)) for i in range(clients)]
            await asyncio.gather(*workers)
            elapsed = time.perf_counter() - began
            cpu1 = cpu_seconds(pid)
            for task in background:
                task.cancel()
        async with session.get(f"{url}/health") as response:
            health = await response.json()
    ms = np.array(latencies) * 1e3
    return {
        "server": "in-process" if in_process else "subprocess",
        "clients": clients,
        "answers": len(latencies),
        "window_s": round(elapsed, 2),
        "requests_per_s": round(len(latencies) / elapsed),
        "latency_ms": {
            "p50": round(float(np.percentile(ms, 50)), 3),
            "p90": round(float(np.percentile(ms, 90)), 3),
            "p99": round(float(np.percentile(ms, 99)), 3),
            "max": round(float(ms.max()), 3),
        },
        "status_counts": {str(k): v for k, v in sorted(statuses.items())},
        # in-process, this process's CPU is the directory's *and* the clients'
        "directory_cpu_us_per_request": round((cpu1 - cpu0) / len(latencies) * 1e6, 1),
        "directory_cpu_includes_clients": in_process,
        "directory_cpu_share": round((cpu1 - cpu0) / elapsed, 3),
        "seats_granted": health["seats_granted"],
        "reservations_outstanding_at_end": health["reservations_outstanding"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=50, help="fake nodes across 7 regions")
    parser.add_argument("--clients", type=int, default=64, help="concurrent HTTP clients")
    parser.add_argument("--requests", type=int, default=50_000, help="most seat requests")
    parser.add_argument("--duration", type=float, default=10.0, help="most seconds of HTTP load")
    parser.add_argument("--policy-seconds", type=float, default=2.0, help="seconds per pure run")
    parser.add_argument("--in-process", action="store_true", help="serve from this process")
    parser.add_argument("--seed", type=int, default=1)
    add_json_option(parser, "routing")
    args = parser.parse_args()
    start = Start.now("routing", "bench/routing.py", None)
    if args.nodes < 1 or args.clients < 1 or args.requests < 1 or args.duration <= 0:
        print(
            "routing: --nodes, --clients, --requests and --duration must be positive",
            file=sys.stderr,
        )
        return 2
    # Capacity far above the load: every request is a real grant, none a cheap refusal.
    nodes = fake_nodes(args.nodes, capacity=10_000_000)
    maps = rtt_maps(5000, args.seed)
    progress(f"policy: {args.nodes} nodes, {args.policy_seconds:g} s ...")
    policy = bench_policy(nodes, maps, args.policy_seconds)
    progress(f"policy: {policy['decisions_per_s']} decisions/s")
    core = bench_core(nodes, maps, args.policy_seconds)
    progress(f"core: {core['requests_per_s']} seat answers/s without HTTP")
    progress(f"http: {args.clients} clients, up to {args.requests} requests / {args.duration:g} s")
    http = asyncio.run(
        bench_http(nodes, maps, args.clients, args.requests, args.duration, args.in_process)
    )
    report = {
        "bench": "routing",
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
        "nodes": args.nodes,
        "regions": len({n.region for n in nodes}),
        "policy": policy,
        "core": core,
        "http": http,
    }
    emit(report, args.json, start)
    progress(
        f"{policy['decisions_per_s']} decisions/s pure, {core['requests_per_s']} seats/s in "
        f"core, {http['requests_per_s']} seats/s over HTTP (p99 {http['latency_ms']['p99']} ms, "
        f"directory {http['directory_cpu_us_per_request']} µs CPU each)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
