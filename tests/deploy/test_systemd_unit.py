"""deploy/arena-server@.service: ``systemd-analyze verify`` finds nothing wrong with it,
it is a ``Type=notify`` service with a watchdog and a writable cache and state, its
hardening leaves the node what it needs (no ``MemoryDenyWriteExecute=``: numba JITs; the
unix address family: the notify socket), and ``systemd-analyze security`` rates it OK.

systemd-analyze comes with systemd; where it is missing these tests skip, except in CI
(``CI=true``), where a missing one fails.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from server.net.sd_notify import watchdog_interval
from tests.tools import required_tool

ROOT = Path(__file__).resolve().parents[2]
UNIT = ROOT / "deploy" / "arena-server@.service"
#: The units the template refers to (After=, Wants=, WantedBy=) and the ones every
#: service depends on by default: verify loads them from the root it is given.
HOST_UNITS = Path("/usr/lib/systemd/system")
DEPENDENCIES = ("sysinit.target", "basic.target", "network-online.target", "network.target",
                "multi-user.target", "shutdown.target")  # fmt: skip


def systemd_analyze() -> str:
    return required_tool("systemd-analyze", "systemd")


def directives(text: str) -> dict[str, list[str]]:
    """``Section.Key`` -> every value it is given, in order (keys may repeat)."""
    found: dict[str, list[str]] = {}
    section = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = line.strip("[]")
            continue
        key, _, value = line.partition("=")
        found.setdefault(f"{section}.{key.strip()}", []).append(value.strip())
    return found


def verify(unit_text: str, root: Path) -> subprocess.CompletedProcess[str]:
    """``systemd-analyze verify`` of an instance of ``unit_text``, installed in ``root``
    with a stand-in for the node's executable (the unit names /opt/arena/.venv's)."""
    (root / "etc/systemd/system").mkdir(parents=True)
    (root / "etc/systemd/system/arena-server@.service").write_text(unit_text)
    executable = root / "opt/arena/.venv/bin/arena-server"
    executable.parent.mkdir(parents=True)
    executable.write_text("#!/bin/sh\n")
    executable.chmod(0o755)
    units = root / "usr/lib/systemd/system"
    units.mkdir(parents=True)
    for name in DEPENDENCIES:
        if (HOST_UNITS / name).is_file():
            shutil.copy(HOST_UNITS / name, units / name)
    return subprocess.run(
        [systemd_analyze(), "verify", f"--root={root}", "--man=no",
         "/etc/systemd/system/arena-server@eu-west.service"],
        capture_output=True,
        text=True,
        timeout=60,
    )  # fmt: skip


def test_systemd_analyze_verify_finds_nothing(tmp_path: Path) -> None:
    run = verify(UNIT.read_text(), tmp_path)
    assert run.returncode == 0 and run.stdout + run.stderr == "", run.stdout + run.stderr


def test_verify_would_catch_a_misspelled_or_wrong_directive(tmp_path: Path) -> None:
    text = UNIT.read_text().replace("ProtectClock=true", "ProtectClok=true")
    text = text.replace("LockPersonality=true", "LockPersonality=maybe")
    run = verify(text, tmp_path)
    assert "Unknown key 'ProtectClok'" in run.stderr, run.stderr
    assert "Failed to parse boolean value" in run.stderr, run.stderr


def test_the_node_is_a_notify_service_with_a_watchdog_a_cache_and_a_state() -> None:
    unit = directives(UNIT.read_text())
    one = {key: values[-1] for key, values in unit.items()}
    assert one["Service.Type"] == "notify" and one["Service.NotifyAccess"] == "main"
    # READY=1 waits for the kernels: a cold compile on a busy machine needs minutes.
    assert int(one["Service.TimeoutStartSec"]) >= 120
    # The node pings at half the watchdog, what systemd passes it in WATCHDOG_USEC.
    watchdog = int(one["Service.WatchdogSec"])
    assert watchdog_interval({"WATCHDOG_USEC": str(watchdog * 1_000_000)}) == watchdog / 2
    assert one["Service.Restart"] == "always"
    assert one["Service.CacheDirectory"] == one["Service.StateDirectory"] == "arena"
    assert "NUMBA_CACHE_DIR=%C/arena/numba" in unit["Service.Environment"]
    assert "--state-dir %S/arena" in one["Service.ExecStart"]
    assert one["Service.KillSignal"] == "SIGTERM"


def test_the_hardening_leaves_the_node_what_it_needs() -> None:
    unit = directives(UNIT.read_text())
    one = {key: values[-1] for key, values in unit.items()}
    for switch in ("NoNewPrivileges", "ProtectHome", "PrivateTmp", "PrivateDevices",
                   "PrivateUsers", "ProtectKernelTunables", "ProtectKernelModules",
                   "ProtectKernelLogs", "ProtectControlGroups", "ProtectClock",
                   "ProtectHostname", "RestrictNamespaces", "RestrictRealtime",
                   "RestrictSUIDSGID", "LockPersonality"):  # fmt: skip
        assert one[f"Service.{switch}"] == "true", switch
    assert one["Service.ProtectSystem"] == "strict"
    assert one["Service.CapabilityBoundingSet"] == ""
    assert one["Service.UMask"] == "0077"
    # TCP for players and peers; unix for the notify socket (READY=1, WATCHDOG=1).
    assert set(one["Service.RestrictAddressFamilies"].split()) == {"AF_INET", "AF_INET6",
                                                                   "AF_UNIX"}  # fmt: skip
    assert unit["Service.SystemCallFilter"][0] == "@system-service"
    assert one["Service.SystemCallErrorNumber"] == "EPERM"
    # numba's JIT needs writable, executable memory: this would stop every kernel.
    assert "Service.MemoryDenyWriteExecute" not in unit


def test_systemd_analyze_security_rates_it_ok() -> None:
    run = subprocess.run(
        [systemd_analyze(), "security", "--offline=true", str(UNIT)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if "--offline" in run.stderr and "unrecognized" in run.stderr:
        pytest.skip("this systemd-analyze has no --offline (systemd 250 and later do)")
    found = re.search(r"Overall exposure level for \S+: (\d+\.\d+) (\w+)", run.stdout)
    assert found is not None, run.stdout + run.stderr
    # 8.5 EXPOSED before the hardening; 1.2 OK with systemd 252.
    assert float(found[1]) <= 2.0 and found[2] == "OK", run.stdout
