"""arena-bots' exit status: an invalid run is no measurement, so it fails unless asked not to."""

from __future__ import annotations

from typing import Any

import pytest

from client_sim.cli import build_parser, exit_status


def report(*, valid: bool = True, partial: bool = False, connected: int = 4) -> dict[str, Any]:
    return {"valid": valid, "partial": partial,
            "bots": {"connected": connected, "light": {"connected": 0}}}  # fmt: skip


def test_a_valid_run_exits_0_and_a_breached_threshold_1() -> None:
    assert exit_status(report(), passed=True, allow_invalid=False) == (0, "")
    assert exit_status(report(), passed=False, allow_invalid=False) == (1, "")


def test_an_invalid_run_exits_1_unless_allowed() -> None:
    status, why = exit_status(report(valid=False), passed=True, allow_invalid=False)
    assert status == 1 and "--allow-invalid" in why
    assert exit_status(report(valid=False), passed=True, allow_invalid=True) == (0, "")
    # Allowing an invalid run does not hide a breached threshold.
    assert exit_status(report(valid=False), passed=False, allow_invalid=True) == (1, "")


@pytest.mark.parametrize("allow", [False, True])
def test_interrupted_and_empty_runs_keep_their_statuses(allow: bool) -> None:
    assert exit_status(report(partial=True, valid=False), True, allow)[0] == 130
    assert exit_status(report(connected=0, valid=False), True, allow)[0] == 1


def test_the_flag_is_off_by_default() -> None:
    assert build_parser().parse_args([]).allow_invalid is False
    assert build_parser().parse_args(["--allow-invalid"]).allow_invalid is True
