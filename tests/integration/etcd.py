"""A real, throw-away etcd for integration tests: ``from tests.integration.etcd import etcd_url``.

The process is :mod:`launch.etcd_local`'s. Without an ``etcd`` binary the tests are skipped
(``apt-get install etcd-server``), except in CI (``CI=true``), where a missing etcd is a
failure: CI installs it in ``.ci/run``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from launch.etcd_local import (
    EtcdProcess,
    EtcdUnavailable,
    LocalEtcdCluster,
    find_etcd,
    running_etcd_cluster,
)
from launch.etcd_local import running_etcd as _running_etcd
from tests.tools import missing_tool

__all__ = [
    "EtcdProcess",
    "LocalEtcdCluster",
    "etcd_binary",
    "etcd_cluster",
    "etcd_process",
    "etcd_url",
    "running_etcd",
]


def etcd_binary() -> str:
    """The path of ``etcd``; skips the test (fails it in CI) when there is none."""
    path = find_etcd()
    if path is None:
        missing_tool("etcd not installed (apt-get install etcd-server)")
    assert path is not None
    return path


@contextlib.contextmanager
def running_etcd() -> Iterator[EtcdProcess]:
    """A healthy etcd for the block (skipped without a binary; a failed start fails)."""
    binary = etcd_binary()
    try:
        with _running_etcd(binary) as etcd:
            yield etcd
    except EtcdUnavailable as error:
        pytest.fail(str(error), pytrace=False)


@pytest.fixture
def etcd_process() -> Iterator[EtcdProcess]:
    """A running etcd that the test may :meth:`~EtcdProcess.stop` itself."""
    with running_etcd() as etcd:
        yield etcd


@pytest.fixture
def etcd_url() -> Iterator[str]:
    """The client URL (``http://127.0.0.1:PORT``) of a fresh etcd, stopped after the test."""
    with running_etcd() as etcd:
        yield etcd.url


@pytest.fixture
def etcd_cluster() -> Iterator[LocalEtcdCluster]:
    """Three members of one etcd cluster, which the test may kill one by one."""
    binary = etcd_binary()
    try:
        with running_etcd_cluster(3, binary) as cluster:
            yield cluster
    except EtcdUnavailable as error:
        pytest.fail(str(error), pytrace=False)
