"""Every command of a plain install answers ``--help`` and ``--version``.

CI installs every extra, so a command that imports an extra's package at start would pass
here and fail for a user who ran ``pip install .``. Each entry point of ``pyproject.toml``
runs in a process where every distribution that only the extras bring (the extras' own
requirements and what they need, less what the core needs) cannot be imported.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
SCRIPTS: dict[str, str] = PROJECT["scripts"]

# Runs one entry point with the named top-level modules made unimportable.
_BLOCKED_RUN = """
import importlib, importlib.abc, sys
blocked = set(sys.argv[1].split(","))
class Blocked(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in blocked:
            raise ModuleNotFoundError(f"No module named {name!r} (only an extra installs it)")
        return None
sys.meta_path.insert(0, Blocked())
module, _, function = sys.argv[2].partition(":")
sys.argv = [sys.argv[3], *sys.argv[4:]]
getattr(importlib.import_module(module), function)()
"""


def _closure(requirements: list[str]) -> set[str]:
    """The distributions these requirements install, following each one's own (no extras)."""
    seen: set[str] = set()
    todo = [Requirement(r) for r in requirements]
    while todo:
        requirement = todo.pop()
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        name = canonicalize_name(requirement.name)
        if name in seen:
            continue
        seen.add(name)
        try:
            todo.extend(Requirement(r) for r in metadata.requires(name) or [])
        except metadata.PackageNotFoundError:
            continue
    return seen


def _extras_only_modules() -> list[str]:
    core = _closure(PROJECT["dependencies"])
    extras = _closure([r for group in PROJECT["optional-dependencies"].values() for r in group])
    only = extras - core
    modules = {
        module
        for module, distributions in metadata.packages_distributions().items()
        if any(canonicalize_name(d) in only for d in distributions)
    }
    return sorted(m for m in modules if m.isidentifier())


BLOCKED = ",".join(_extras_only_modules())


def test_the_extras_bring_packages_to_block() -> None:
    # If the closure found nothing, every test below would pass whatever the commands import.
    assert {"pytest", "hypothesis", "selenium"} <= set(BLOCKED.split(","))
    assert "matplotlib" not in BLOCKED.split(",")


@pytest.mark.parametrize("flag", ["--help", "--version"])
@pytest.mark.parametrize("command", sorted(SCRIPTS))
def test_command_answers_without_extras(command: str, flag: str) -> None:
    result = subprocess.run(
        [sys.executable, "-c", _BLOCKED_RUN, BLOCKED, SCRIPTS[command], command, flag],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    if flag == "--version":
        assert result.stdout.strip() == f"{command} {metadata.version('arena')}"
    else:
        assert result.stdout.startswith("usage: ")


def test_a_blocked_import_fails_the_command() -> None:
    # The blocker itself works: a command that imported an extra would fail as a user's does.
    result = subprocess.run(
        [sys.executable, "-c", _BLOCKED_RUN, "launch", SCRIPTS["arena-demo"], "arena-demo"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert result.returncode != 0
    assert "only an extra installs it" in result.stderr
