"""The warm-up: a cold cache is filled by forked workers and stamped, a warm one only
loaded; a worker's failure is named; the cache folder is the same however a command is
started. (The workers here run a stand-in for the compile: the real one is the node's
start-up, tested in tests/integration.)"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from client_sim import swarm
from server.net import warmup
from server.net.warmup import GROUPS, WarmUpError, in_daemon_thread, warm_up_kernels
from server.sim.hitreg import make_validator
from shared import rayhits, sightlines
from shared.protocol import baselines, between, reader


@pytest.fixture
def stamp_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The stamp and the lock in a folder of the test's own (the kernels stay cached)."""
    monkeypatch.setattr(warmup.jitcache, "cache_dir", lambda: tmp_path)
    return tmp_path


async def test_a_cold_cache_is_filled_by_one_worker_per_group_then_stamped(
    stamp_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran_in: dict[str, int] = {}

    def compile_stand_in(group: str) -> int:
        ran_in[group] = os.getpid()
        return 2

    monkeypatch.setattr(warmup, "warm_group", compile_stand_in)
    validator = make_validator("cpu")
    first = await warm_up_kernels(validator, workers=2)
    assert first.cold and first.worker_compile_events == 2 * len(GROUPS)
    assert first.workers == 2
    assert warmup.stamp_path().exists()
    assert ran_in == {}  # every group ran in a forked worker, none in this process
    again = await warm_up_kernels(validator, workers=2)
    assert not again.cold and again.worker_compile_events == 0 and again.workers == 0


async def test_a_worker_that_fails_is_named_and_nothing_is_stamped(
    stamp_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def compile_stand_in(group: str) -> int:
        if group == "grid":
            raise ValueError("no room left on the device")
        return 0

    monkeypatch.setattr(warmup, "warm_group", compile_stand_in)
    with pytest.raises(WarmUpError, match="grid kernels failed: ValueError: no room left"):
        await warm_up_kernels(make_validator("cpu"), workers=2)
    assert not warmup.stamp_path().exists()


async def test_a_worker_that_dies_is_named(
    stamp_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def crash(group: str) -> int:
        os._exit(3)

    monkeypatch.setattr(warmup, "warm_group", crash)
    with pytest.raises(WarmUpError, match="kernels failed: the worker died"):
        await warm_up_kernels(make_validator("cpu"), workers=2)


async def test_one_core_compiles_in_process_without_workers(stamp_folder: Path) -> None:
    report = await warm_up_kernels(make_validator("cpu"), workers=1)
    assert report.workers == 0 and report.worker_compile_events == 0
    assert not warmup.stamp_path().exists()


def test_the_bots_kernels_are_a_group_of_their_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """Filled with the node's groups, so a swarm on this machine loads them: compiled on
    the first swarm's event loop, the decoder held an in-process node's ticks for 10 s in a
    fresh clone. The group warms exactly what a swarm loads before its bots connect."""
    ran: list[str] = []
    kernels = (
        (baselines, "decoder"),
        (reader, "reader"),
        (between, "view"),
        (sightlines, "sight"),
        (rayhits, "shots"),
    )
    for module, name in kernels:
        monkeypatch.setattr(module, "warm_up", lambda name=name: ran.append(name))
    assert GROUPS[0] == "decoder"  # (the longest: it goes first)
    warmup.warm_group("decoder")
    filled, ran[:] = list(ran), []
    swarm.warm_up_kernels()
    assert filled == ran == ["decoder", "reader", "view", "sight", "shots"]


def test_a_second_checkout_has_a_stamp_of_its_own(
    stamp_folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """numba keys its cache by the source's path: the same sources elsewhere are cold."""
    here = warmup.stamp_path()
    clone = tmp_path / "clone"
    for source in warmup._SOURCES:
        (clone / source).parent.mkdir(parents=True, exist_ok=True)
        (clone / source).write_bytes((warmup._ROOT / source).read_bytes())
    monkeypatch.setattr(warmup, "_ROOT", clone)
    assert warmup.stamp_path() != here


async def test_a_daemon_thread_hands_back_its_result_and_its_error() -> None:
    assert await in_daemon_thread(sum, [1, 2, 3]) == 6

    def fail() -> None:
        raise KeyError("lost")

    with pytest.raises(KeyError, match="lost"):
        await in_daemon_thread(fail)


async def test_a_cancelled_wait_leaves_the_thread_to_finish_alone() -> None:
    release = threading.Event()
    waiting = asyncio.ensure_future(in_daemon_thread(release.wait))
    await asyncio.sleep(0.01)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    release.set()  # the thread ends later; nobody is told, nothing breaks
    await asyncio.sleep(0.01)


def cache_dir_of(env: dict[str, str], prelude: str = "") -> str:
    """The cache folder a fresh process chooses (and what numba was told)."""
    code = (
        f"{prelude}import os, server; from numba.core import config; "
        "print(os.environ['NUMBA_CACHE_DIR'], config.CACHE_DIR)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    assert out[0] == out[1], out  # numba uses the folder the environment names
    return out[0]


def test_the_cache_folder_is_chosen_in_code_however_a_command_starts(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env["XDG_CACHE_HOME"] = str(tmp_path / "xdg")
    assert cache_dir_of(env) == str(tmp_path / "xdg" / "arena" / "numba")
    # numba imported before the server package: it is told all the same
    assert cache_dir_of(env, "import numba; ") == str(tmp_path / "xdg" / "arena" / "numba")
    # an operator's choice wins
    assert cache_dir_of({**env, "NUMBA_CACHE_DIR": str(tmp_path / "mine")}) == str(
        tmp_path / "mine"
    )


def test_an_unwritable_home_falls_back_to_the_temporary_folder(tmp_path: Path) -> None:
    """As under systemd's ProtectHome=: the node still starts (it compiles once there)."""
    not_a_folder = tmp_path / "a-file"
    not_a_folder.write_text("")  # (a read-only folder stops no root; a file stops anyone)
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env["XDG_CACHE_HOME"] = str(not_a_folder)
    assert f"arena-numba-{os.getuid()}" in cache_dir_of(env)
