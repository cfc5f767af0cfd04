"""deploy/: the alert rules are valid and fire on the series they are about (``promtool test
rules``), a real node's and the directory's ``/metrics`` pass ``promtool check metrics``,
and the Grafana dashboard only queries metrics that something exports.

promtool comes with Debian's ``prometheus`` package; without it these tests skip, except
in CI (``CI=true``), where ``.ci/run`` installs it and a missing one fails.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from server.directory.metrics import DirectoryMetrics
from tests.server.replication.test_replication_link import REGION, bind, cluster
from tests.tools import required_tool

ROOT = Path(__file__).resolve().parents[2]
PROMETHEUS = ROOT / "deploy" / "prometheus"
DASHBOARD = ROOT / "deploy" / "grafana" / "arena-region.json"


def promtool() -> str:
    return required_tool("promtool", "prometheus")


def run_promtool(*args: str, stdin: str | None = None, cwd: Path = ROOT) -> str:
    done = subprocess.run(
        [promtool(), *args], input=stdin, capture_output=True, text=True, cwd=cwd, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


async def _scrape_a_node() -> str:
    async with cluster() as (nodes, session):
        node = await nodes.start(bind(), node_id="alpha", role="primary")
        async with session.get(node.admin_url + "/metrics") as response:
            assert response.status == 200
            return await response.text()


@pytest.fixture(scope="module")
def node_metrics() -> str:
    """A real node's ``/metrics`` (in-process, served by its own app over HTTP)."""
    return asyncio.run(_scrape_a_node())


def names(text: str) -> set[str]:
    """The sample names of an exposition (``x_bucket``, ``x_count`` and ``x`` alike)."""
    found = set()
    for family in text_string_to_metric_families(text):
        found.add(family.name)
        found.update(sample.name for sample in family.samples)
    return found


def test_the_alert_rules_are_valid_and_fire_on_their_series() -> None:
    assert "SUCCESS: 4 rules found" in run_promtool("check", "rules", "alerts.yml", cwd=PROMETHEUS)
    assert "SUCCESS" in run_promtool("test", "rules", "alerts.test.yml", cwd=PROMETHEUS)


def test_the_scrape_config_loads_the_alert_rules() -> None:
    out = run_promtool("check", "config", "deploy/prometheus.yml")
    assert "1 rule files found" in out


def test_a_node_s_and_the_directory_s_metrics_pass_promtool(node_metrics: str) -> None:
    assert "arena_node_role" in node_metrics and "_created" not in node_metrics
    for role, value in (("starting", 0.0), ("primary", 1.0), ("standby", 0.0)):
        assert f'arena_node_role{{region="{REGION}",role="{role}"}} {value}' in node_metrics
    assert 'arena_joins_refused_total{reason="full"} 0.0' in node_metrics
    run_promtool("check", "metrics", stdin=node_metrics)
    directory = generate_latest(DirectoryMetrics().registry).decode()
    run_promtool("check", "metrics", stdin=directory)


def dashboard_exprs() -> list[tuple[str, str]]:
    board = json.loads(DASHBOARD.read_text())
    found = [
        (panel["title"], target["expr"]) for panel in board["panels"] for target in panel["targets"]
    ]
    assert len(board["panels"]) >= 6 and all(expr for _, expr in found)
    return found


def test_every_dashboard_query_names_only_metrics_that_are_exported(node_metrics: str) -> None:
    exported = names(node_metrics) | names(generate_latest(DirectoryMetrics().registry).decode())
    for title, expr in dashboard_exprs():
        used = set(re.findall(r"\b((?:arena|process|python)_\w+)", expr))
        assert used, f"{title}: {expr} queries no metric of ours"
        assert used <= exported, f"{title}: not exported: {sorted(used - exported)}"


def test_every_dashboard_query_is_promql(tmp_path: Path) -> None:
    """promtool parses each query (as a recording rule, with the variables filled in)."""
    rules = {
        "groups": [
            {
                "name": "dashboard",
                "rules": [
                    {"record": f"dashboard:panel_{i}", "expr": expr.replace("$region", "eu")}
                    for i, (_, expr) in enumerate(dashboard_exprs())
                ],
            }
        ]
    }
    (tmp_path / "dashboard.yml").write_text(json.dumps(rules))  # (JSON is YAML)
    run_promtool("check", "rules", "dashboard.yml", cwd=tmp_path)
