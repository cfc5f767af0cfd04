"""server.net.metrics and server.directory.metrics: no ``*_created`` series, the process's
own metrics, every labelled counter at 0 for each value the code can count before the
first event, and the role and epoch gauges reading the node's state."""

from __future__ import annotations

import re
from pathlib import Path

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from server.directory.metrics import HEARTBEAT_OUTCOMES, SEAT_OUTCOMES, DirectoryMetrics
from server.net.metrics import (
    INPUT_REJECTIONS,
    JOIN_REFUSALS,
    PEER_REFUSALS,
    PROTOCOL_ERROR_CODES,
    UDP_REFUSALS,
    UNPUBLISHED_REASONS,
    NodeMetrics,
)
from server.replication.roles import Role

SERVER = Path(__file__).resolve().parents[3] / "server"

#: Each labelled counter (by its attribute) and the label values it starts with.
STARTS_WITH = {
    "inputs_rejected": INPUT_REJECTIONS,
    "protocol_errors": PROTOCOL_ERROR_CODES,
    "joins_refused": JOIN_REFUSALS,
    "ticks_unpublished": UNPUBLISHED_REASONS,
    "peers_refused": PEER_REFUSALS,
    "udp_refused": UDP_REFUSALS,
    "udp_datagrams": ("in", "out"),
    "udp_bytes": ("in", "out"),
    "seat_requests": SEAT_OUTCOMES,
    "heartbeats": HEARTBEAT_OUTCOMES,
}


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_no_created_series_and_the_process_metrics_are_there() -> None:
    for registry in (NodeMetrics().registry, DirectoryMetrics().registry):
        text = generate_latest(registry).decode()
        assert "_created" not in text
        assert "process_cpu_seconds_total" in text and "python_gc_collections_total" in text
        assert "python_info" in text


def test_labelled_counters_read_zero_for_every_known_value_before_any_event() -> None:
    node = samples(generate_latest(NodeMetrics().registry).decode())
    directory = samples(generate_latest(DirectoryMetrics().registry).decode())
    expected = {
        ("arena_inputs_rejected_total", "reason", INPUT_REJECTIONS),
        ("arena_protocol_errors_total", "code", PROTOCOL_ERROR_CODES),
        ("arena_joins_refused_total", "reason", JOIN_REFUSALS),
        ("arena_ticks_unpublished_total", "reason", UNPUBLISHED_REASONS),
        ("arena_peers_refused_total", "reason", PEER_REFUSALS),
        ("arena_udp_refused_total", "cause", UDP_REFUSALS),
        ("arena_udp_datagrams_total", "direction", ("in", "out")),
        ("arena_directory_seat_requests_total", "outcome", SEAT_OUTCOMES),
        ("arena_directory_heartbeats_total", "outcome", HEARTBEAT_OUTCOMES),
    }
    for name, label, values in expected:
        found = directory if "directory" in name else node
        for value in values:
            assert found[name, ((label, value),)] == 0.0, (name, value)
    assert {"stale", "too_far_ahead", "bad_angle", "overflow"} == set(INPUT_REJECTIONS)
    assert {"malformed_frame", "frame_too_large", "version_mismatch"} <= set(PROTOCOL_ERROR_CODES)


def test_every_label_value_the_code_counts_is_one_it_starts_with() -> None:
    """A new refusal reason added to the code and not to the tuple would have no series
    until it first happens (and an alert on its rate would miss the first ones)."""
    counted: list[tuple[str, str]] = []
    for path in SERVER.rglob("*.py"):
        text = path.read_text()
        counted += re.findall(r"\.(\w+)\.labels\(\"(\w+)\"\)", text)
        counted += [
            ("heartbeats", code) for code in re.findall(r"_refuse\(\s*\d+,\s*\"(\w+)\"", text)
        ]
        counted += [
            ("ticks_unpublished", r) for r in re.findall(r"_unpublished\(tick, \"(\w+)\"", text)
        ]
    assert ("joins_refused", "full") in counted and ("heartbeats", "bad_signature") in counted
    for counter, value in counted:
        if counter in STARTS_WITH:
            assert value in STARTS_WITH[counter], f"{counter}: {value!r} is not initialised"


def test_the_role_gauge_has_one_series_per_role_and_reads_the_role_at_each_scrape() -> None:
    metrics = NodeMetrics()
    role, epoch = [Role.STANDBY], [1]
    metrics.watch("eu", lambda: role[0], lambda: epoch[0])

    def read() -> tuple[dict[str, float], float | None]:
        get = metrics.registry.get_sample_value
        roles = {r.value: get("arena_node_role", {"region": "eu", "role": r.value}) for r in Role}
        return roles, get("arena_node_epoch", {"region": "eu"})

    assert read() == ({"starting": 0.0, "primary": 0.0, "standby": 1.0}, 1.0)
    role[0], epoch[0] = Role.PRIMARY, 2
    assert read() == ({"starting": 0.0, "primary": 1.0, "standby": 0.0}, 2.0)


def test_the_match_log_counters_read_its_recorder_at_each_scrape() -> None:
    class Counts:
        tick_cpu_s, writer_cpu_s, blocks_written, bytes_written, blocks_lost = 0.0, 0.0, 0, 0, 0
        paused = False

    metrics, counts = NodeMetrics(), Counts()
    metrics.watch_recording(counts)
    before = samples(generate_latest(metrics.registry).decode())
    assert before["arena_record_cpu_seconds_total", (("part", "tick"),)] == 0.0
    assert before["arena_record_cpu_seconds_total", (("part", "writer"),)] == 0.0
    assert before["arena_record_paused", ()] == 0.0
    counts.tick_cpu_s, counts.writer_cpu_s, counts.blocks_written, counts.bytes_written = (
        0.25, 1.5, 3, 4096
    )  # fmt: skip
    counts.blocks_lost, counts.paused = 2, True
    after = samples(generate_latest(metrics.registry).decode())
    assert after["arena_record_cpu_seconds_total", (("part", "tick"),)] == 0.25
    assert after["arena_record_cpu_seconds_total", (("part", "writer"),)] == 1.5
    assert after["arena_record_blocks_total", ()] == 3
    assert after["arena_record_bytes_total", ()] == 4096
    assert after["arena_record_blocks_lost_total", ()] == 2
    assert after["arena_record_paused", ()] == 1.0
