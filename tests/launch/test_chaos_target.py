"""arena-chaos signals the process a node's /health names only when that pid means the same
process here: a node in a container (another pid namespace) is refused, in one line."""

from __future__ import annotations

import pytest

from launch.chaos import node_pid
from shared.lifetime import pid_namespace


def test_a_node_in_this_pid_namespace_is_its_pid() -> None:
    assert pid_namespace() is not None  # (Linux: /proc/self/ns/pid)
    assert (
        node_pid("http://127.0.0.1:7777", {"pid": 4321, "pid_namespace": pid_namespace()}) == 4321
    )


def test_a_node_in_another_pid_namespace_is_refused() -> None:
    health = {"pid": 1, "pid_namespace": (pid_namespace() or 0) + 1}
    with pytest.raises(RuntimeError, match="another pid namespace") as refused:
        node_pid("http://127.0.0.1:7777/ws", health)
    assert "127.0.0.1:7777" in str(refused.value) and "podman kill" in str(refused.value)


def test_a_node_that_does_not_say_is_taken_at_its_word() -> None:
    assert node_pid("http://127.0.0.1:7777", {"pid": 99}) == 99
