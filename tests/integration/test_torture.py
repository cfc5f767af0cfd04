"""``arena-chaos torture`` end to end, small: a region, bots, kills and a pause, an audit.

The figures of a full run (20 kills, 10 pauses, 40 bots) are in ``docs/failover.md``; this
proves, on every change, that the tool runs and that synchronous replication keeps its
promises through its faults: nothing a bot was shown is lost, no deposed primary is heard.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from launch import netns
from launch.chaos import main
from tests.integration.etcd import etcd_binary


@pytest.mark.parametrize(
    ("coordinator", "transport"), [("static", "ws"), ("etcd", "ws"), ("static", "udp")]
)
def test_a_small_torture_loses_nothing(
    coordinator: str, transport: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if coordinator == "etcd":
        etcd_binary()  # skipped without one (failed in CI)
    report_path = tmp_path / "report.json"
    # Checkpoint recovery (both nodes killed) and the calm phase under a hog (no promotion
    # without a fault) do not depend on what carries the players: tried over WebSocket.
    calm = transport == "ws"
    whole = calm and coordinator == "static"
    code = main(
        [
            "torture", "--coordinator", coordinator, "--bots", "6", "--kills", "2",
            "--pauses", "1", "--pause-min", "1", "--pause-max", "1.5", "--standby-kills", "1",
            "--both-kills", "1" if whole else "0", "--hog-phase", "2" if calm else "0",
            "--partitions", "0", "--out", str(tmp_path / "run"), "--json", str(report_path),
            "--transport", transport,
        ]
    )  # fmt: skip
    progress = capsys.readouterr().err
    assert code == 0, progress
    report = json.loads(report_path.read_text())
    figures = report["audit"]
    assert (figures["kills"], figures["pauses"], figures["standby_kills"]) == (2, 1, 1)
    assert figures["promotions"] >= 3
    assert figures["acked_ticks"] > 1000
    assert figures["acked_ticks_lost"] == 0
    assert figures["inputs_lost"] == 0
    assert figures["published_by_deposed_primary_accepted"] == 0
    assert figures["epochs_reused"] == []
    assert figures["bots_lost"] == 0
    assert report["coordinator"] == coordinator and report["bots_connected"] == 6
    assert report["transport"] == transport
    assert f"snapshots   over {transport}:" in (tmp_path / "run" / "bots.log").read_text()
    # No node was restarted by hand: the supervisor brought every killed node back, and
    # every bot came back to its own seat each time.
    assert report["supervisor"]["restarts"] >= (3 if whole else 2)
    assert report["supervisor"]["standby_back_in_sync_s_max"] is not None
    assert figures["seats_lost"] == 0 and figures["seats_resumed"] >= 6 * 2
    if calm:
        assert figures["calm_phase"]["seconds"] >= 2.0
    if whole:  # every node killed once: resumed from a checkpoint
        (recovery,) = figures["checkpoint_recoveries"]
        assert recovery["epoch"] > recovery["from_epoch"]
        assert recovery["first_tick_s_after_node_start"] is not None
    assert "audit:" in progress and "0 lost" in progress
    journals = sorted(p.name for p in (tmp_path / "run").glob("journal-*.jsonl"))
    assert journals == ["journal-a.jsonl", "journal-b.jsonl"]


@pytest.mark.skipif(netns.unavailable() is not None, reason="no network namespaces here")
def test_a_partition_of_the_primary_from_its_standby_loses_nothing(tmp_path: Path) -> None:
    report_path = tmp_path / "report.json"
    code = main(
        [
            "torture", "--bots", "6", "--kills", "0", "--pauses", "0", "--standby-kills", "0",
            "--partitions", "1", "--partition-for", "2",
            "--out", str(tmp_path / "run"), "--json", str(report_path),
        ]
    )  # fmt: skip
    assert code == 0
    report = json.loads(report_path.read_text())
    figures = report["audit"]
    assert figures["partitions"] == 1 and report["partition"].startswith("1 x 2 s")
    # The standby took over; the cut-off primary showed nothing meanwhile, then stepped down.
    assert figures["promotions"] == 1 and figures["spurious_promotions"] == 0
    assert figures["acked_ticks_lost"] == 0
    assert figures["published_by_deposed_primary"] == 0
    assert figures["bots_lost"] == 0


def test_torture_refuses_bad_counts(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["torture", "--bots", "0"]) == 2
    assert main(["torture", "--pause-min", "5", "--pause-max", "2"]) == 2
    assert capsys.readouterr().err.count("\n") == 2
    assert main(["kill"]) == 2  # kill and pause still need a node
