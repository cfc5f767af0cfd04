"""One spelling for every duration flag of every command: ``30s``, ``250ms``, ``2m``, or a bare
number in the flag's own unit (as each flag took it before)."""

from __future__ import annotations

import argparse
import importlib
import re
import tomllib
from pathlib import Path

import pytest

from shared.commandline import (
    Duration,
    OneLineParser,
    check_duration,
    milliseconds,
    parse_duration,
    seconds,
)

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
# Torture's options belong to arena-chaos (its parser adds them).
COMMAND_MODULES = sorted({entry.partition(":")[0] for entry in SCRIPTS.values()})
#: Commands that take no duration at all (arena-replay's --from/--to are ticks).
NO_DURATIONS = {"server.record.cli"}


@pytest.mark.parametrize(
    ("text", "unit", "value"),
    [
        ("30", "s", 30.0),  # bare: the flag's unit, as before
        ("2.5", "ms", 2.5),
        ("30s", "s", 30.0),
        ("250ms", "s", 0.25),
        ("2m", "s", 120.0),
        ("2 min", "s", 120.0),
        ("1h", "s", 3600.0),
        ("1.5s", "ms", 1500.0),
        ("250ms", "ms", 250.0),
        ("500us", "ms", 0.5),
        ("2M", "ms", 120000.0),  # units are case-insensitive
        ("1e3ms", "s", 1.0),
    ],
)
def test_durations_with_and_without_units(text: str, unit: str, value: float) -> None:
    assert parse_duration(text, unit) == pytest.approx(value)


@pytest.mark.parametrize("text", ["", "s", "2x", "2 m s", "ms250", "1e999s", "2d"])
def test_what_is_not_a_duration_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(text, "s")


def test_a_duration_beyond_its_bounds_is_one_line() -> None:
    assert check_duration(1500.0, "--for", "ms") == 1500.0
    with pytest.raises(ValueError, match="--for: 1e\\+12 ms is longer than 60 s"):
        check_duration(parse_duration("1e9s", "ms"), "--for", "ms")
    with pytest.raises(ValueError, match="--jitter must be a duration >= 0"):
        check_duration(-1.0, "--jitter", "ms")
    with pytest.raises(ValueError, match=">= 0"):
        check_duration(float("nan"), "--jitter", "ms")


def test_a_bad_duration_is_one_line_naming_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    parser = OneLineParser(prog="cmd")
    parser.add_argument("--wait-ms", type=milliseconds, default=5.0, help="how long")
    assert parser.parse_args(["--wait-ms", "1.5s"]).wait_ms == 1500.0
    with pytest.raises(SystemExit) as stopped:
        parser.parse_args(["--wait-ms", "soon"])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--wait-ms" in err and "milliseconds" in err
    shown = " ".join(parser.format_help().split())
    assert "how long [a duration: 30s, 250ms, 2m; a bare number is milliseconds]" in shown


def _looks_like_a_duration(action: argparse.Action) -> bool:
    flag = max(action.option_strings, key=len, default="")
    named = re.search(
        r"-(s|ms|seconds)$|timeout|ttl|interval|duration|grace|holdoff|jitter|delay|-for$", flag
    )
    return bool(named) or action.metavar in ("S", "SECONDS", "MS")


@pytest.mark.parametrize("module", COMMAND_MODULES)
def test_every_duration_flag_of_every_command_takes_unit_strings(module: str) -> None:
    parser = importlib.import_module(module).build_parser()
    durations = [a for a in parser._actions if _looks_like_a_duration(a)]
    assert bool(durations) != (module in NO_DURATIONS), module
    for action in durations:
        assert isinstance(action.type, Duration), (module, action.option_strings)
        flag = max(action.option_strings, key=len)
        # Bare numbers keep their unit: milliseconds where the name says so, and for the
        # flags that always read them as the latency grammar does (--jitter, --for, ...).
        in_ms = flag.endswith("-ms") or flag in ("--jitter", "--interp-delay", "--for")
        assert action.type is (milliseconds if in_ms else seconds), flag
