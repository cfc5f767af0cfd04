"""bench/peers: its verdicts and medians (pure), and a smoke run that starts the real
servers and clients (naive, Arena under its bots and under wandering clients; Colyseus only
where node and its packages already are) and leaves nothing running."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from bench.peers.run import COLYSEUS, FIGURES, floor_record, medians, ratios, validity
from tests.processes import start_session

ROOT = Path(__file__).resolve().parents[2]
#: Three servers' windows at 20 players take ~30 s on an idle 2-core machine; Colyseus ~10 s.
SMOKE_WITHIN_S = 90.0
COLYSEUS_EXTRA_S = 30.0


def window(**figures: Any) -> dict[str, Any]:
    """A window's record as ``measure`` builds it, 20 players held at 60 Hz unless
    ``figures`` says otherwise, with the verdict of the rule under test."""
    run: dict[str, Any] = {
        "server": "naive",
        "players": 20,
        "ticks": 300,
        "seated_at_start": 20,
        "seated_at_end": 20,
        "connected_at_start": 20,
        "connected_at_end": 20,
        "client_reconnects": 0,
        "client_ticks_per_s": 59.8,
        **{figure: 1.0 for figure in FIGURES if figure != "client_ticks_per_s"},
        **figures,
    }
    reasons = validity(run)
    return {**run, "valid": not reasons, "invalid_reasons": reasons}


def test_a_window_at_60_hz_with_every_player_held_is_valid() -> None:
    assert window()["valid"] is True
    assert window(client_ticks_per_s=57.0)["valid"] is True


def test_slow_clients_or_lost_players_make_a_window_invalid() -> None:
    assert window(client_ticks_per_s=41.0)["invalid_reasons"] == ["clients kept 41.0 Hz (< 57.0)"]
    assert window(seated_at_end=18)["invalid_reasons"] == [
        "server held 18 of 20 players at the window's end"
    ]
    assert window(client_reconnects=2)["invalid_reasons"] == ["2 client reconnects in the window"]
    assert window(ticks=0)["invalid_reasons"] == ["the server ran no tick in the window"]
    assert window(inputs_rejected={"bad_angle": 40, "too_far_ahead": 2})["invalid_reasons"] == [
        "the node rejected inputs of honest clients (40 bad_angle, 2 too_far_ahead)"
    ]
    assert window(inputs_rejected={})["valid"] is True


def test_medians_leave_invalid_windows_out_and_say_why() -> None:
    runs = [
        window(server_cpu_us_per_player_tick=30.0),
        window(server_cpu_us_per_player_tick=10.0),
        window(server_cpu_us_per_player_tick=20.0),
        window(server_cpu_us_per_player_tick=99.0, client_ticks_per_s=20.0),
    ]
    record = medians(runs)
    assert record["server_cpu_us_per_player_tick"] == 20.0
    assert record["valid_windows"] == 3
    assert record["server_cpu_us_per_player_tick_runs"] == [30.0, 10.0, 20.0, 99.0]
    assert record["invalid_reasons"] == ["clients kept 20.0 Hz (< 57.0)"]
    assert medians([runs[-1]])["server_cpu_us_per_player_tick"] is None


def test_ratios_are_arena_over_the_peer_and_empty_without_a_valid_median() -> None:
    arena = medians([window(server_cpu_us_per_player_tick=20.0)])
    peer = medians([window(server_cpu_us_per_player_tick=40.0)])
    assert ratios(arena, peer)["server_cpu_us_per_player_tick"] == 0.5
    none = medians([window(client_ticks_per_s=10.0)])
    assert ratios(arena, none)["server_cpu_us_per_player_tick"] is None


def floor_run(**figures: Any) -> dict[str, Any]:
    """What ``websocket_paths.measure`` returns for 20 clients over a second."""
    return {
        "server_cpu_us_per_client_s": 360.0,
        "client_cpu_us_per_client_s": 300.0,
        "snapshots_sent": 600,
        "snapshots_received": 600,
        "inputs_sent": 1200,
        "inputs_received": 1200,
        "loadavg_1m": 0.5,
        "valid": True,
        **figures,
    }


def test_a_floor_window_is_per_player_tick_and_invalid_when_frames_were_lost() -> None:
    record = floor_record("ws-floor", 20, floor_run())
    assert record["valid"] is True
    assert record["server_cpu_us_per_player_tick"] == 6.0  # 360 us a client-second / 60
    assert record["client_cpu_us_per_client_tick"] == 5.0
    assert record["tick_p99_ms"] is None  # no tick of its own
    assert set(FIGURES) <= set(record)
    lost = floor_record("ws-floor", 20, floor_run(snapshots_received=500, valid=False))
    assert lost["invalid_reasons"] == [
        "frames lost: 500 of 600 snapshots, 1200 of 1200 inputs arrived"
    ]
    assert medians([lost])["server_cpu_us_per_player_tick"] is None


def colyseus_ready() -> bool:
    """Node on PATH and the packages already installed: CI never installs npm packages."""
    return shutil.which("node") is not None and (COLYSEUS / "node_modules").is_dir()


@pytest.mark.integration
def test_a_quick_run_reports_every_figure_of_each_server_and_leaves_nothing(
    tmp_path: Path,
) -> None:
    servers = ["naive", "arena", "arena-wander", "ws-floor"]
    servers += ["colyseus"] if colyseus_ready() else []
    within = SMOKE_WITHIN_S + (COLYSEUS_EXTRA_S if "colyseus" in servers else 0.0)
    out = tmp_path / "peers.json"
    command = [sys.executable, str(ROOT / "bench/peers/run.py"), "--quick",
               "--servers", ",".join(servers), "--json", str(out)]  # fmt: skip
    with start_session(command) as bench:
        try:
            bench.process.wait(within)
        except subprocess.TimeoutExpired:
            pytest.fail(f"bench/peers --quick ran over {within:g} s:\n{bench.output[-2000:]}")
        assert bench.process.returncode == 0, bench.output[-2000:]
        deadline = time.monotonic() + 5.0
        while bench.members() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not bench.members(), "bench/peers left processes running"
    report = json.loads(out.read_text())
    assert report["bench"] == "peers"
    for name in servers:
        record = report["results"]["20"][name]
        assert record["windows"] == 1
        for figure in FIGURES:
            assert figure in record
        (run,) = [r for r in report["runs"] if r["server"] == name]
        assert run["players"] == 20 and "valid" in run
        assert run["server_cpu_us_per_player_tick"] > 0, run
        if name == "ws-floor":  # (no tick of its own: its frames arrived)
            assert run["snapshots_received"] > 0 and run["inputs_received"] > 0, run
            continue
        assert run["ticks"] > 0, run  # the server ran in the window ...
        assert run["down_bytes_per_client_per_s"] > 0, run  # ... and its clients heard it
    # The wandering clients acknowledged what they read: client 0 decoded its players
    # against its baselines, and every client sent its 60 inputs a second.
    (wander,) = [r for r in report["runs"] if r["server"] == "arena-wander"]
    assert wander["decoded_players_at_end"] >= 1, wander
    assert wander["inputs_per_client_per_s"] > 50, wander
    assert wander["inputs_rejected"] == {}, wander  # (a heading past pi once refused half)
    peers = [name for name in servers if not name.startswith(("arena", "ws-floor"))]
    ours = ("arena", "arena-wander", "ws-floor")
    ratio_names = {f"{arena}/{name}" for arena in ours for name in peers}
    assert set(report["ratios"]["20"]) == ratio_names
