"""arena-demo's verdict: which runs exit non-zero, and the one line that says why."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from launch.demo import build_parser, check_args, main, outcome, report_paths


def report(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "partial": False,
        "valid": True,
        "invalid_reasons": [],
        "bots": {"connected": 40},
        "failover": {"bots_lost": 0},
    }
    return {**base, **changes}


def test_a_clean_run_exits_0() -> None:
    assert outcome(report(), 40, breached=False) == (0, "ok")


def test_an_invalid_run_exits_1_with_its_reasons() -> None:
    slow = ["the bot process ran 18 ticks/s of 60 (30%, below 95%): the machine is too busy"]
    status, why = outcome(report(valid=False, invalid_reasons=slow), 40, breached=False)
    assert status == 1 and "invalid run" in why and "18 ticks/s of 60" in why
    assert "\n" not in why


@pytest.mark.parametrize(
    ("changes", "expected_bots", "breached", "says"),
    [
        ({"failover": {"bots_lost": 2}}, 40, False, "2 bot(s) never resumed"),
        ({"bots": {"connected": 39}}, 40, False, "only 39 of 40"),
        ({}, 40, True, "--fail-if"),
        ({"partial": True}, 40, False, "interrupted"),
    ],
)
def test_every_other_failure_exits_non_zero_saying_why(
    changes: dict[str, Any], expected_bots: int, breached: bool, says: str
) -> None:
    status, why = outcome(report(**changes), expected_bots, breached)
    assert status in (1, 130) and says in why


def test_with_regions_the_directory_may_seat_fewer_bots() -> None:
    assert outcome(report(bots={"connected": 30}), None, breached=False)[0] == 0


def test_the_html_page_and_its_pictures_go_beside_the_json() -> None:
    assert report_paths("out/demo-report.json") == (
        Path("out/demo-report.html"),
        Path("out/demo-report"),
    )
    assert report_paths("r") == (Path("r.html"), Path("r-pictures"))


def test_a_bad_threshold_is_a_one_line_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--fail-if", "ticks.p99>16.7"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("arena-demo: --fail-if") and "\n" not in err


def test_the_pictures_folder_must_not_be_a_file(tmp_path: Path) -> None:
    (tmp_path / "r").write_text("")
    args = build_parser().parse_args(["--json", str(tmp_path / "r.json")])
    with pytest.raises(ValueError, match="not a folder"):
        check_args(args)
