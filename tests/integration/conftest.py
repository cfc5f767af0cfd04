"""Fixtures that start real nodes on 127.0.0.1 (free ports picked by the OS) and stop them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from launch.nodes import NodeProcess, start_node


@pytest.fixture
def node() -> Iterator[NodeProcess]:
    with start_node("--log-level", "warning") as running:
        yield running


@pytest.fixture
def small_node() -> Iterator[NodeProcess]:
    with start_node("--log-level", "warning", "--max-players", "2") as running:
        yield running
