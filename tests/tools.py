"""The real parts some tests need from Debian's packages (etcd, Chromium, promtool, podman,
systemd-analyze): a test without one skips, saying which package brings it, except in CI
(``CI=true``), where ``.ci/run`` installs them and a missing one fails the test."""

from __future__ import annotations

import os
import shutil

import pytest

__all__ = ["missing_tool", "required_tool"]


def missing_tool(message: str) -> None:
    """Skip the test for want of a tool, or fail it in CI, which must have installed it."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{message}: CI must install it (.ci/run)", pytrace=False)
    pytest.skip(message)


def required_tool(name: str, package: str) -> str:
    """The path of the command ``name``; skips (fails in CI) when ``package`` is not
    installed."""
    path = shutil.which(name)
    if path is None:
        missing_tool(f"{name} not installed (apt-get install {package})")
    assert path is not None
    return path
