"""The layers hold: no import cycle among our modules, and the layer contracts (import-linter's,
run by ``make lint``) break on a violation of each."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import grimp

PACKAGES = ("server", "client_sim", "shared", "launch")
ROOT = Path(__file__).resolve().parent.parent


def strongly_connected(graph: grimp.ImportGraph) -> list[set[str]]:
    """Tarjan's algorithm over the module import graph: the groups of modules that import
    each other, directly or through others (each group of two or more is a cycle)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in graph.find_modules_directly_imported_by(module):
            if imported.split(".")[0] not in PACKAGES:
                continue
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            group = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.add(member)
                if member == module:
                    break
            groups.append(group)

    for module in sorted(graph.modules):
        if module.split(".")[0] in PACKAGES and module not in index:
            visit(module)
    return groups


def test_no_module_takes_part_in_an_import_cycle() -> None:
    graph = grimp.build_graph(*PACKAGES)
    cycles = [sorted(group) for group in strongly_connected(graph) if len(group) > 1]
    assert cycles == []


# One deliberate violation of each contract, written into a copy of the tree.
VIOLATIONS = {
    "shared imports nothing of ours": ("shared/movement.py", "import server.limits"),
    "client_sim never imports server": ("client_sim/brain.py", "import server.limits"),
    "the cores do no I/O: no asyncio, aiohttp or socket": ("server/sim/world.py", "import aiohttp"),
    "tooling is imported by nothing": ("server/logs.py", "import launch.supervisor"),
}


def test_make_lint_s_contracts_fail_on_a_violation_of_each(tmp_path: Path) -> None:
    for package in PACKAGES:
        shutil.copytree(
            ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    for path, line in VIOLATIONS.values():
        source = tmp_path / path
        source.write_text(f"{line}  # a deliberate violation\n" + source.read_text())
    linted = subprocess.run(
        [str(Path(sys.executable).with_name("lint-imports")), "--no-cache"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert linted.returncode == 1, linted.stdout + linted.stderr
    for contract in VIOLATIONS:
        assert f"{contract} BROKEN" in linted.stdout, linted.stdout
    assert "0 kept, 4 broken" in linted.stdout
