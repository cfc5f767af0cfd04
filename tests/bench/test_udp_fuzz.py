"""bench/udp_fuzz: bad arguments are refused in one line; a run that did not measure what it
claims is refused with its reasons; and a short fuzz against a real node gets no source a
connection, no source more bytes back than it sent, and every datagram refused by cause in
the node's /metrics."""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.performance_doc import udp_fuzz as udp_fuzz_table
from bench.udp_fuzz import judge, parse_args, read_metrics, refusals
from launch.datagram_fuzz import FUZZ_KINDS
from launch.nodes import NodeProcess, start_node
from launch.udp_fuzzer import FuzzPlan, run_fuzzer
from server.region_key import region_key

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench/udp_fuzz.py"
DATAGRAMS = 2000
RATE = 1000.0  # two seconds of fuzz
WITHIN_S = 10.0


def test_bad_arguments_are_one_line(tmp_path: Path) -> None:
    for bad in (
        ["--datagrams", "0"],
        ["--rate", "-5"],
        ["--rate", "nan"],
        ["--sources", "0"],
        ["--bots", "many"],
        ["--json", str(tmp_path / "missing" / "out.json")],
    ):
        done = subprocess.run(
            [sys.executable, str(BENCH), *bad], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert "Traceback" not in done.stderr


def _window(rate: float, valid: bool = True) -> dict[str, Any]:
    return {
        "bots_valid": valid,
        "bots_invalid_reasons": [] if valid else ["the bots' tick rate fell below 57 Hz"],
        "snapshots_per_bot_per_s": rate,
        "node_cores": 0.1,
        "loadavg_1m_at_end": 1.0,
        "kernel_drops": 0,
    }


def _fuzzed(sent: int, accepted: int = 0, valid: bool = True) -> dict[str, Any]:
    fuzz: dict[str, Any] = {
        "failure": None,
        "sent": sent,
        "capture": {"connections": 1},
        "challenges_received": 3,
        "refused_by_cause": {"bad_packet": sent},
        "accepted_from_fuzz_sources": accepted,
        "amplifying_sources": [],
    }
    return {**_window(29.0, valid), "fuzz": fuzz, "udp_clients_max_during_fuzz": 3}


def test_a_short_or_invalid_run_is_refused_and_an_accepted_datagram_is_a_missed_target() -> None:
    args = parse_args(["--datagrams", "100", "--bots", "2", "--json", "-"])
    invalid, targets = judge(args, _window(30.0), _fuzzed(100))
    assert invalid == [] and all(t["met"] for t in targets.values()), targets
    invalid, _ = judge(args, _window(30.0, valid=False), _fuzzed(99))
    assert any("baseline window" in reason for reason in invalid)
    assert "sent 99 datagrams of the 100 asked" in invalid
    _, targets = judge(args, _window(30.0), _fuzzed(100, accepted=1))
    assert not targets["accepted_from_fuzz_sources"]["met"]
    _, targets = judge(args, _window(40.0), _fuzzed(100))
    assert not targets["snapshot_rate_vs_baseline"]["met"]  # 29 of 40


def test_the_headline_table_has_a_row_per_window() -> None:
    args = parse_args(["--datagrams", "100", "--bots", "2", "--json", "-"])
    baseline, fuzzed = _window(30.0), _fuzzed(100)
    _, targets = judge(args, baseline, fuzzed)
    head, rows = udp_fuzz_table({"baseline": baseline, "fuzzed": fuzzed, "targets": targets})
    assert [row[0] for row in rows] == ["alone", "beside the fuzzer"]
    assert all(len(row) == len(head) for row in rows)
    beside = dict(zip(head, rows[1], strict=True))
    assert (beside["bad datagrams"], beside["refused"], beside["accepted"]) == (100, 100, 0)


@pytest.fixture(scope="module")
def node() -> Iterator[tuple[NodeProcess, bytes, int]]:
    secret = secrets.token_hex(16)
    env = {**os.environ, "ARENA_CLUSTER_SECRET": secret}
    with start_node("--log-level", "warning", "--region", "local", env=env) as started:
        with urllib.request.urlopen(started.admin_url + "/health", timeout=10) as answer:
            port = int(json.loads(answer.read())["udp"])
        yield started, region_key(secret.encode(), "local"), port


@pytest.mark.integration
def test_a_short_fuzz_is_all_refused_by_cause_and_never_accepted_or_amplified(
    node: tuple[NodeProcess, bytes, int],
) -> None:
    process, key, port = node
    before = read_metrics(process.admin_url)
    started = time.monotonic()
    result = run_fuzzer(
        FuzzPlan(("127.0.0.1", port), process.base_url, DATAGRAMS, RATE, 4, 7, WITHIN_S, key)
    )
    assert time.monotonic() - started < WITHIN_S + 2
    time.sleep(0.2)  # (the channels' refusals are counted every 50 ms)
    after = read_metrics(process.admin_url)
    assert result["failure"] is None
    assert result["sent"] == DATAGRAMS
    assert set(result["sent_by_kind"]) == set(FUZZ_KINDS)
    assert result["capture"]["connections"] >= 1 and result["challenges_received"] >= 1
    assert result["accepted_from_fuzz_sources"] == 0
    assert result["amplifying_sources"] == []
    for source in result["sources"]:
        assert source["received_bytes"] <= source["sent_bytes"], source
    refused = refusals(before, after)
    assert sum(refused.values()) >= 0.999 * DATAGRAMS, refused
    for cause in ("bad_size", "expired", "bad_token", "bad_challenge", "bad_packet",
                  "unknown_address", "replayed"):  # fmt: skip
        assert refused.get(cause, 0) > 0, (cause, refused)
    with urllib.request.urlopen(process.admin_url + "/health", timeout=10) as answer:
        assert json.loads(answer.read())["udp_clients"] <= 1  # the fuzzer's own capture client


def test_a_node_that_gives_no_token_ends_the_fuzz_with_its_failure_said() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # (nothing listens there)
    result = run_fuzzer(
        FuzzPlan(("127.0.0.1", port), f"http://127.0.0.1:{port}", 10, RATE, 2, 1, 5.0)
    )
    assert result["sent"] == 0 and result["failure"], result
    assert result["accepted_from_fuzz_sources"] == 0 and len(result["sources"]) == 3
