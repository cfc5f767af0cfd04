"""bench/adversary: the node's CPU it reports per window, and the verdict of a class that
may cost the node only so much above its baseline (pure: no node is started)."""

from __future__ import annotations

import os
import time
from typing import Any

from bench.adversary import BY_NAME, FLOOD_EXTRA_CORES_MAX, judge, parse_args, process_cpu_s


def test_a_process_cpu_time_is_read_from_proc() -> None:
    before, started = process_cpu_s(os.getpid()), time.process_time()
    while time.process_time() - started < 0.05:  # (spend some CPU)
        pass
    used = process_cpu_s(os.getpid()) - before
    assert 0.03 <= used <= time.process_time() - started + 0.02  # (clock ticks: 10 ms)


def window(cores: float) -> dict[str, Any]:
    return {"snapshots_per_bot_per_s": 30.0, "tick_ms_p99": 1.0, "honest_lost": 0,
            "node_cores": cores}  # fmt: skip


def test_a_reconnecting_flood_is_judged_by_the_cpu_it_adds_to_the_node() -> None:
    args = parse_args(["--attacks", "input_flood_reconnecting,compact_honest"])
    attack = BY_NAME["input_flood_reconnecting"]
    gained = {"closed_with": 1008}
    within = judge(attack, window(0.09), window(0.05), gained, args)
    assert within["node_cores_above_baseline"] == {
        "value": 0.04,
        "limit": FLOOD_EXTRA_CORES_MAX,
        "met": True,
    }
    beyond = judge(attack, window(0.11), window(0.05), gained, args)
    assert not beyond["node_cores_above_baseline"]["met"]
    compact = {"closes": {"None": 1}, "errors": {}, "stayed_seated": True}
    others = judge(BY_NAME["compact_honest"], window(0.5), window(0.05), compact, args)
    assert "node_cores_above_baseline" not in others  # (a CPU target only where stated)
    assert all(verdict["met"] for verdict in others.values())
