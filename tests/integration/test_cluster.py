"""``arena-cluster``: a directory and per-region primaries and standbys as real processes."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from launch import cluster_run
from launch.cluster import Cluster, ClusterError, ClusterSpec, parse_regions, start_cluster
from tests.processes import children_of, start_session

pytestmark = pytest.mark.integration


def get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as response:
        assert response.status == 200
        return json.loads(response.read())


def my_children() -> set[int]:
    return children_of(os.getpid())


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def until(predicate: Any, within: float = 20.0) -> None:
    deadline = time.monotonic() + within
    while not predicate():
        assert time.monotonic() < deadline, "not in time"
        time.sleep(0.1)


def health(url: str) -> dict[str, Any] | None:
    try:
        body = get(url + "/health")
    except OSError:
        return None
    return body if isinstance(body, dict) else None


def test_a_two_region_cluster_starts_every_node_in_its_role_and_stops_them_all(
    tmp_path: Path,
) -> None:
    before = my_children()
    spec = ClusterSpec(regions=parse_regions("na,us-east@na"), standbys=1, log_dir=tmp_path)
    lines: list[str] = []
    with start_cluster(spec, progress=lines.append) as cluster:
        pids = cluster.pids()
        assert len(pids) == 5 and len(set(pids)) == 5
        assert get(cluster.directory_url + "/health")["status"] == "ok"
        assert set(cluster.regions) == {"na", "us-east"}
        assert cluster.regions["us-east"].location == "na"
        for name, region in cluster.regions.items():
            primary = get(region.primary.admin_url + "/health")
            assert (primary["region"], primary["node"], primary["role"]) == (
                name,
                f"{name}-1",
                "primary",
            )
            in_sync = [s["node"] for s in primary["standbys"] if s["state"] == "in_sync"]
            assert in_sync == [f"{name}-2"]
            (standby,) = region.standbys
            answer = get(standby.admin_url + "/health")
            assert (answer["region"], answer["node"], answer["role"]) == (
                name,
                f"{name}-2",
                "standby",
            )
            assert answer["pid"] == standby.pid and primary["pid"] == region.primary.pid
        if cluster.registered:  # arena-server has --directory: the directory knows them all
            regions = {r["region"]: r for r in get(cluster.directory_url + "/regions")["regions"]}
            assert regions["na"]["primary"]["node_id"] == "na-1"
            assert [s["node_id"] for s in regions["us-east"]["standbys"]] == ["us-east-2"]
        assert_peers_wired(cluster)
        described = cluster.describe()
        assert described["directory"] == cluster.directory_url
        assert (
            described["regions"]["na"]["standbys"][0]["url"]
            == cluster.regions["na"].standbys[0].base_url
        )
        assert cluster.secret.decode() not in json.dumps(described) + cluster.table()
    assert all(gone(pid) for pid in pids)
    assert my_children() == before
    assert lines[-1].startswith("ready in")
    assert (tmp_path / "na-1.log").exists() and (tmp_path / "directory.log").exists()


def assert_peers_wired(cluster: Cluster) -> None:
    """The standby knows its primary and peers: killing the primary promotes it."""
    region = cluster.regions["us-east"]
    os.kill(region.primary.pid, signal.SIGKILL)
    standby = region.standbys[0]

    def promoted() -> bool:
        answer = health(standby.admin_url)
        return answer is not None and answer["role"] == "primary" and answer["epoch"] >= 2

    until(promoted)


def test_a_start_that_times_out_leaves_nothing_running(tmp_path: Path) -> None:
    before = my_children()
    spec = ClusterSpec(regions=parse_regions("eu"), startup_timeout=0.01, log_dir=tmp_path)
    with pytest.raises(ClusterError, match=r"not ready within 0\.01 s"):
        with start_cluster(spec):
            pass
    assert my_children() == before


def test_a_node_that_cannot_start_is_named_and_the_rest_is_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = my_children()
    monkeypatch.setattr(cluster_run, "SERVER_MODULE", "server.no_such_node_module")
    spec = ClusterSpec(regions=parse_regions("eu,asia"), standbys=1, log_dir=tmp_path)
    with pytest.raises(ClusterError, match=r"eu-1 exited during start-up with code 1: .*No mod"):
        with start_cluster(spec):
            pass
    assert my_children() == before
    assert "No module named" in (tmp_path / "eu-1.log").read_text()


def test_the_command_prints_where_everything_is_and_stops_it_all_on_sigterm(
    tmp_path: Path,
) -> None:
    where = tmp_path / "cluster.json"
    command = [sys.executable, "-m", "launch.cluster", "--regions", "eu", "--standbys", "0",
               "--json", str(where), "--log-dir", str(tmp_path / "logs")]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "ARENA_CLUSTER_SECRET"}
    with start_session(command, env) as cluster:  # (stops the whole session, whatever happens)
        cluster.wait_for("running;", 300)
        described = json.loads(where.read_text())  # written whole before "running"
        primary = described["regions"]["eu"]["primary"]
        pids = [described["directory_pid"], primary["pid"]]
        assert health(primary["admin"])["role"] == "primary"  # type: ignore[index]
        cluster.process.send_signal(signal.SIGTERM)
        assert cluster.process.wait(30) == 0, cluster.output
        cluster.wait_for("stopped", 5)
        assert cluster.members() == set()
    assert "eu-1" in cluster.output and described["directory"] in cluster.output
    assert "SIGTERM: stopping everything" in cluster.output
    assert cluster.output.rstrip().endswith("stopped")
    assert all(gone(pid) for pid in pids)


def test_bad_arguments_are_one_line_and_exit_2() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "launch.cluster", "--regions", "us-east", "--standbys", "1"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "us-east@na" in result.stderr


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"tick_rate": 500}, "tick rate 500 Hz is outside 20-128 Hz"),
        ({"tick_rate": 19}, "tick rate 19 Hz is outside 20-128 Hz"),
        ({"matches": 65}, "matches 65 is outside 1-64"),
        ({"max_players": 0}, "max players 0 is outside 1-65535"),
        ({"standbys": 9}, "standbys 9 is outside 0-8"),
        ({"standbys": -1}, "standbys -1 is outside 0-8"),
    ],
)
def test_a_spec_beyond_the_limits_is_refused_in_one_line(
    settings: dict[str, int], message: str
) -> None:
    """The node's limits are the node's (server.limits): what the cluster accepts, every node
    accepts; standbys are the cluster's own."""
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        ClusterSpec(regions=parse_regions("eu"), **settings)  # type: ignore[arg-type]


def test_a_spec_at_the_limits_is_accepted() -> None:
    spec = ClusterSpec(
        regions=parse_regions("eu"), standbys=8, matches=64, max_players=65535, tick_rate=128
    )
    assert (spec.standbys, spec.matches, spec.max_players, spec.tick_rate) == (8, 64, 65535, 128)
    assert ClusterSpec(regions=parse_regions("eu"), standbys=0, tick_rate=20).tick_rate == 20


def test_a_killed_node_is_restarted_and_the_region_has_its_standby_again(tmp_path: Path) -> None:
    spec = ClusterSpec(regions=parse_regions("eu"), standbys=1, log_dir=tmp_path, register=False)
    with start_cluster(spec) as cluster:
        region = cluster.regions["eu"]
        first, second = region.primary, region.standbys[0]
        assert cluster.heal() == []  # nobody died
        os.kill(first.pid, signal.SIGKILL)
        until(lambda: (health(second.admin_url) or {}).get("role") == "primary")
        until(lambda: first.exit_code is not None)
        (healed,) = cluster.heal()
        assert healed[0] is first and first.restarts == 1
        # Started again as it was (--role primary), it finds the region led and follows.

        def standby_again() -> bool:
            found = health(second.admin_url) or {}
            return [s["state"] for s in found.get("standbys", [])] == ["in_sync"]

        until(standby_again, within=60.0)
        assert (health(first.admin_url) or {}).get("role") == "standby"
        assert (health(second.admin_url) or {}).get("standbys_in_sync") == 1


def test_a_region_whose_every_node_died_resumes_from_its_checkpoint(tmp_path: Path) -> None:
    spec = ClusterSpec(
        regions=parse_regions("eu"),
        standbys=1,
        log_dir=tmp_path,
        register=False,
        checkpoint_dir=tmp_path / "checkpoints",
    )
    with start_cluster(spec) as cluster:
        region = cluster.regions["eu"]
        first, second = region.primary, region.standbys[0]
        until(lambda: any((tmp_path / "checkpoints").glob("eu-*.ckpt")), within=30.0)
        epoch = (health(first.admin_url) or {})["epoch"]
        for node in (second, first):
            os.kill(node.pid, signal.SIGKILL)
        until(lambda: first.exit_code is not None and second.exit_code is not None)
        assert len(cluster.heal()) == 2

        def resumed() -> bool:
            found = health(first.admin_url) or {}
            return found.get("role") == "primary" and "resumed_from" in found.get("failover", {})

        until(resumed, within=60.0)
        found = health(first.admin_url) or {}
        assert found["epoch"] > epoch and found["failover"]["resumed_from"]["epoch"] == epoch
        until(lambda: (health(first.admin_url) or {}).get("standbys_in_sync") == 1, within=60.0)
