"""launch.supervisor: a child is ready when it says it listens, its own error is passed on,
it is told to die with its launcher, and a stop always leaves nothing running."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from launch.supervisor import Child, ChildError, stop_all
from shared.lifetime import EXIT_WITH_PARENT_ENV
from tests.processes import children_of

PYTHON = sys.executable


def python(code: str) -> list[str]:
    return [PYTHON, "-c", code]


def test_a_child_is_ready_with_the_url_it_prints_and_gets_the_environment_asked_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ARENA_TEST_DROPPED", "inherited")
    monkeypatch.setenv("ARENA_TEST_KEPT", "inherited")
    code = (
        "import os, time\n"
        "names = ['ARENA_TEST_DROPPED', 'ARENA_TEST_KEPT', 'ARENA_TEST_ADDED', "
        f"{EXIT_WITH_PARENT_ENV!r}]\n"
        "print('starting')\n"
        "print('event=listening url=' + '|'.join([os.getcwd(), *(str(os.environ.get(n)) "
        "for n in names)]), flush=True)\n"
        "time.sleep(60)\n"
    )
    child = Child(
        "probe",
        python(code),
        env={"ARENA_TEST_DROPPED": None, "ARENA_TEST_ADDED": "added"},
        cwd=tmp_path,
    )
    try:
        assert child.wait_ready(30) == f"{tmp_path}|None|inherited|added|1"
        assert child.alive()
    finally:
        child.stop(5)
    assert not child.alive()


def test_a_child_that_dies_during_start_up_is_named_with_its_code_and_last_log_line(
    tmp_path: Path,
) -> None:
    log = tmp_path / "logs" / "probe.log"
    code = "import sys; print('first', file=sys.stderr); print('the cause', file=sys.stderr); "
    child = Child("probe", python(code + "sys.exit(3)"), log_path=log)
    with pytest.raises(ChildError, match=r"^probe exited during start-up with code 3: the cause$"):
        child.wait_ready(30)
    child.stop()
    assert log.read_text() == "first\nthe cause\n"  # a named log is kept


def test_a_temporary_log_is_removed_once_the_child_is_stopped() -> None:
    child = Child("probe", python("import sys; print('x', file=sys.stderr)"))
    assert child.log_path is not None
    assert child.wait(30) == 0 and child.log_path.exists()
    child.stop()
    assert not child.log_path.exists()


def test_a_child_that_is_not_ready_in_time_says_so_and_progress_is_told() -> None:
    child = Child("probe", python("import time; time.sleep(60)"))
    told: list[str] = []
    try:
        with pytest.raises(ChildError, match=r"^probe was not ready within 0\.3 s"):
            child.wait_ready(0.3, progress=told.append, every=0.1)
    finally:
        child.stop(5)
    assert told and all(line.startswith("waiting for probe to be ready") for line in told)


def test_stop_is_sigterm_then_sigkill_and_leaves_nothing_running() -> None:
    before = children_of(os.getpid())
    polite = Child("polite", python("import time; print('event=listening url=a', flush=True); "
                                    "time.sleep(60)"))  # fmt: skip
    stubborn = Child(
        "stubborn",
        python(
            "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "print('event=listening url=b', flush=True); time.sleep(60)"
        ),
    )
    polite.wait_ready(30)
    stubborn.wait_ready(30)  # (its SIGTERM handler is set before it says so)
    began = time.monotonic()
    stop_all([polite, stubborn], timeout=1.0)
    assert time.monotonic() - began < 20
    assert polite.process.returncode == -15  # SIGTERM was enough
    assert stubborn.process.returncode == -9  # SIGKILL after the bound
    assert children_of(os.getpid()) == before
    stop_all([polite, stubborn])  # idempotent
