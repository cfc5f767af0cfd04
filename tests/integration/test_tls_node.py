"""``arena-server --tls-cert --tls-key`` as a process: it says it listens on wss://, serves
/health over https, and ``arena-bots --ca`` plays on it and reads its /health."""

from __future__ import annotations

import json
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from launch.nodes import start_node
from tests.server.net.test_tls import make_certificate

pytestmark = pytest.mark.integration


def test_a_tls_node_and_arena_bots_with_its_ca(tmp_path: Path) -> None:
    cert, key = make_certificate(tmp_path)
    report = tmp_path / "report.json"
    with start_node("--log-level", "warning", "--tls-cert", cert, "--tls-key", key) as node:
        assert node.url.startswith("wss://127.0.0.1:") and node.url.endswith("/ws")
        trusting = ssl.create_default_context(cafile=cert)
        with urllib.request.urlopen(node.base_url + "/health", context=trusting) as answer:
            assert json.load(answer)["ready"] is True
        with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
            urllib.request.urlopen(node.base_url + "/health", context=ssl.create_default_context())

        bots = subprocess.run(
            [sys.executable, "-m", "client_sim.cli", "--server", node.url, "--ca", cert,
             "--server-admin", node.admin_url, "--allow-invalid",
             "--count", "2", "--duration", "2", "--latency", "20ms", "--quiet",
             "--json", str(report)],
            capture_output=True,
            text=True,
            timeout=120,
        )  # fmt: skip

    assert bots.returncode == 0, bots.stderr
    played = json.loads(report.read_text())
    assert played["bots"]["connected"] == 2
    assert played["ticks"]["served"] > 0  # the admin port's /health over https
