"""``--transport``, ``--burst-loss`` and ``--duplicate``: what they set, what they refuse,
and the new report fields through the tally and its merge."""

from __future__ import annotations

import pytest

from client_sim.cli import build_parser, main, parse_run, parse_thresholds
from client_sim.latency import BurstLoss
from client_sim.report import report_of, tally_of
from client_sim.swarm import SwarmResult
from client_sim.tally import Tally


def test_udp_bursts_and_duplicates_reach_every_bot_of_every_worker() -> None:
    args = ["--transport", "udp", "--burst-loss", "0.01,0.25", "--duplicate", "0.02",
            "--workers", "2", "--count", "4"]  # fmt: skip
    run = parse_run(build_parser().parse_args(args))
    configs = run.swarm_configs()
    assert [c.transport for c in configs] == ["udp", "udp"]
    bots = [bot for config in configs for bot in config.bots]
    assert {bot.burst for bot in bots} == {BurstLoss(0.01, 0.25, 1.0)}
    assert {bot.duplicate for bot in bots} == {0.02}
    assert parse_run(build_parser().parse_args([])).transport == "ws"
    bad_state = parse_run(build_parser().parse_args(["--burst-loss", "0.1,0.5,0.3"]))
    assert bad_state.burst == BurstLoss(0.1, 0.5, 0.3)  # over WebSocket: retransmissions


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--burst-loss", "0.1"], "--burst-loss must be P_GB,P_BG[,LOSS_BAD]"),
        (["--burst-loss", "a,b"], "--burst-loss must be P_GB,P_BG[,LOSS_BAD]"),
        (["--burst-loss", "0.1,0"], "p_bad_good must be > 0"),
        (["--burst-loss", "0.1,0.5", "--loss", "0.01"], "give --loss or --burst-loss"),
        (["--duplicate", "0.1"], "--duplicate needs --transport udp"),
        (["--transport", "udp", "--duplicate", "2"], "--duplicate is a probability"),
    ],
)
def test_bad_link_flags_are_one_line_and_exit_2(
    flags: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(flags) == 2
    error = capsys.readouterr().err
    assert says in error and error.count("\n") == 1 and "Traceback" not in error


def test_the_new_fields_can_be_thresholds() -> None:
    parse_thresholds(["snapshots.longest_gap_ms_p99>100", "snapshots.lost>0",
                      "inputs.recovered_by_redundancy<1", "inputs.resent>0"])  # fmt: skip


def result(transport: str, gaps: list[float], lost: int) -> SwarmResult:
    return SwarmResult(
        requested=len(gaps), connected=len(gaps), longest_gaps=gaps, snapshots_lost=lost,
        inputs_resent=3 * len(gaps), inputs_recovered=len(gaps),
        transports={transport: len(gaps)},
    )  # fmt: skip


def test_the_new_fields_merge_across_parts() -> None:
    one = tally_of(result("udp", [0.05] * 3, 2))
    two = tally_of(result("udp", [0.09] * 2 + [0.5], 5))
    report = report_of(Tally().merge(one).merge(two))
    assert report["transport"] == "udp"
    assert report["snapshots"]["lost"] == 7
    assert report["inputs"]["resent"] == 18 and report["inputs"]["recovered_by_redundancy"] == 6
    assert report["snapshots"]["longest_gap_ms_p50"] == pytest.approx(50.0, rel=0.01)
    assert report["snapshots"]["longest_gap_ms_p99"] == pytest.approx(90.0, rel=0.01)
    mixed = report_of(Tally().merge(one).merge(tally_of(result("ws", [0.2], 0))))
    assert mixed["transport"] == "mixed"
