"""The layers hold: no import cycle among our modules (the layer contracts themselves are
import-linter's, run by ``make lint``)."""

from __future__ import annotations

import grimp

PACKAGES = ("server", "client_sim", "shared", "launch")


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
