"""deploy/k8s/: the sharded load test's Jobs are what Kubernetes accepts (its schemas,
strict, offline) and run arena-bots with flags it takes: one shard per completion index,
as many shards as completions, the merge reading the parts the shards write."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from client_sim.cli import build_merge_parser, build_parser, parse_run

K8S = Path(__file__).resolve().parents[2] / "deploy" / "k8s"
KUBERNETES = "1.26.0"  # as tests/deploy/test_manifests.py checks the Agones manifests


def documents(name: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all((K8S / name).read_text()) if doc]


@pytest.mark.parametrize("name", ["bots-job.yaml", "bots-merge-job.yaml"])
def test_every_document_passes_kubernetes_schemas_strict(name: str) -> None:
    for document in documents(name):
        kubernetes_validate.validate(document, KUBERNETES, strict=True)


def _command(job: dict[str, Any], env: dict[str, str]) -> list[str]:
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["sh", "-c"]
    words = shlex.split(container["args"][0])
    assert words[0] == "exec"
    given = {e["name"]: e["value"] for e in container.get("env", [])}
    return [_expand(w, env | given) for w in words[1:]]


def _expand(word: str, env: dict[str, str]) -> str:
    for name, value in sorted(env.items(), key=lambda kv: -len(kv[0])):
        word = word.replace(f"${name}", value)
    return word


def test_each_pod_runs_its_shard_and_the_merge_reads_every_part(tmp_path: Path) -> None:
    (claim, job) = documents("bots-job.yaml")
    spec = job["spec"]
    assert spec["completionMode"] == "Indexed"
    assert spec["completions"] == spec["parallelism"]
    parts = []
    for index in range(spec["completions"]):
        argv = _command(job, {"JOB_COMPLETION_INDEX": str(index)})
        argv = [w.replace("/reports", str(tmp_path)) for w in argv]  # the shared volume
        assert argv[0] == "arena-bots"
        run = parse_run(build_parser().parse_args(argv[1:]))
        assert (run.shard, run.shards) == (index, spec["completions"])
        parts.append(argv[argv.index("--part") + 1])
    assert len(set(parts)) == spec["completions"]
    mounts = job["spec"]["template"]["spec"]["volumes"]
    assert mounts[0]["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]

    (merge,) = documents("bots-merge-job.yaml")
    argv = [w.replace("/reports", str(tmp_path)) for w in _command(merge, {})]
    assert argv[:2] == ["arena-bots", "merge"]
    args = build_merge_parser().parse_args(argv[2:])
    pattern = args.parts[0]
    assert all(Path(p).match(pattern) for p in parts), (pattern, parts)
    volumes = merge["spec"]["template"]["spec"]["volumes"]
    assert volumes == job["spec"]["template"]["spec"]["volumes"]
