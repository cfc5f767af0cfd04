"""deploy/agones/: every manifest is what its platform accepts, checked offline.

Agones kinds against Agones' own CRD schemas (v1.31.0's ``openAPIV3Schema``, extracted by
tests/deploy/schemas/extract.py), as Kubernetes checks them, and in a strict variant:
those schemas let unknown fields through (Kubernetes prunes them silently), so a
misspelled ``periodSecond`` would be applied and ignored; with ``additionalProperties:
false`` on every object that lists its properties it is an error. Core kinds (the Secret)
with kubernetes-validate's bundled schemas, strict. The node's flags in the manifests are
the ones ``arena-server`` takes.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from jsonschema import Draft4Validator

from server.lifecycle import HEALTH_INTERVAL_S
from server.net.cli import build_parser, config_from_args

ROOT = Path(__file__).resolve().parents[2]
AGONES = ROOT / "deploy" / "agones"
SCHEMAS = Path(__file__).resolve().parent / "schemas"
#: Agones v1.31 supports Kubernetes 1.24 to 1.26 (kubernetes-validate bundles 1.25 on).
KUBERNETES = "1.26.0"
SCHEMA_OF = {
    ("agones.dev/v1", "GameServer"): "gameserver-agones.dev-v1.json",
    ("agones.dev/v1", "Fleet"): "fleet-agones.dev-v1.json",
    ("autoscaling.agones.dev/v1", "FleetAutoscaler"): (
        "fleetautoscaler-autoscaling.agones.dev-v1.json"
    ),
}
CORE_KINDS = {("v1", "Secret")}
#: What every object has besides its CRD's schema (Kubernetes adds these itself): the
#: ObjectMeta fields these manifests use.
OBJECT_META = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "generateName": {"type": "string"},
        "namespace": {"type": "string"},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
    },
}


def documents(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


MANIFESTS = [
    pytest.param(path, index, doc, id=f"{path.name}:{doc['kind']}")
    for path in sorted(AGONES.glob("*.yaml"))
    for index, doc in enumerate(documents(path))
]


def crd_schema(api_version: str, kind: str) -> dict[str, Any]:
    """The kind's schema as Kubernetes applies it: the CRD's, plus apiVersion, kind and
    metadata."""
    schema = json.loads((SCHEMAS / SCHEMA_OF[(api_version, kind)]).read_text())
    schema["properties"] = {
        "apiVersion": {"type": "string", "enum": [api_version]},
        "kind": {"type": "string", "enum": [kind]},
        "metadata": OBJECT_META,
        **schema["properties"],
    }
    schema["required"] = ["apiVersion", "kind", "metadata", *schema.get("required", [])]
    return schema


def strict(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with ``additionalProperties: false`` on every object that lists its
    properties and says nothing of others (maps, with a schema for their values, and
    objects that keep unknown fields on purpose are left alone)."""
    tight = copy.deepcopy(schema)

    def tighten(node: Any) -> None:
        if isinstance(node, dict):
            if (
                "properties" in node
                and "additionalProperties" not in node
                and not node.get("x-kubernetes-preserve-unknown-fields")
            ):
                node["additionalProperties"] = False
            for value in node.values():
                tighten(value)
        elif isinstance(node, list):
            for value in node:
                tighten(value)

    tighten(tight)
    return tight


def problems(schema: dict[str, Any], document: dict[str, Any]) -> list[str]:
    return [
        f"{'.'.join(map(str, error.absolute_path)) or '<root>'}: {error.message}"
        for error in Draft4Validator(schema).iter_errors(document)
    ]


def test_the_schemas_are_agones_v1_31_and_every_manifest_is_a_known_kind() -> None:
    for name in SCHEMA_OF.values():
        schema = json.loads((SCHEMAS / name).read_text())
        assert "googleforgames/agones v1.31.0 install/yaml/install.yaml" in schema["$comment"]
        Draft4Validator.check_schema(schema)
    kinds = {(doc["apiVersion"], doc["kind"]) for _, _, doc in (p.values for p in MANIFESTS)}
    assert kinds - set(SCHEMA_OF) <= CORE_KINDS
    assert set(SCHEMA_OF) <= kinds  # a GameServer, a Fleet and a FleetAutoscaler


@pytest.mark.parametrize("path,index,document", MANIFESTS)
def test_a_manifest_passes_its_schema_as_is_and_strict(
    path: Path, index: int, document: dict[str, Any]
) -> None:
    key = (document["apiVersion"], document["kind"])
    if key in CORE_KINDS:
        kubernetes_validate.validate(document, KUBERNETES, strict=True)
        return
    schema = crd_schema(*key)
    assert problems(schema, document) == []
    assert problems(strict(schema), document) == []


def gameserver() -> dict[str, Any]:
    (document,) = documents(AGONES / "gameserver.yaml")
    return document


@pytest.mark.parametrize(
    "where,misspelled",
    [
        (("spec", "health"), ("periodSeconds", "periodSecond")),
        (("spec", "ports", 0), ("containerPort", "containerport")),
        (("spec", "template", "spec", "containers", 0), ("imagePullPolicy", "imagePulPolicy")),
        (("metadata",), ("labels", "lables")),
    ],
)
def test_the_strict_check_catches_a_misspelled_field(
    where: tuple[str | int, ...], misspelled: tuple[str, str]
) -> None:
    document = gameserver()
    node: Any = document
    for step in where:
        node = node[step]
    right, wrong = misspelled
    node[wrong] = node.pop(right)
    schema = crd_schema("agones.dev/v1", "GameServer")
    assert problems(schema, document) == []  # as Kubernetes would: applied, and ignored
    (problem,) = problems(strict(schema), document)
    assert f"'{wrong}' was unexpected" in problem


def test_a_wrong_value_fails_as_is() -> None:
    document = gameserver()
    document["spec"]["ports"][0]["portPolicy"] = "Dynamical"
    document["spec"]["health"]["periodSeconds"] = "5s"
    found = problems(crd_schema("agones.dev/v1", "GameServer"), document)
    assert len(found) == 2 and any("'Dynamical' is not one of" in p for p in found)


def test_check_jsonschema_accepts_the_manifests_and_refuses_a_misspelled_one(
    tmp_path: Path,
) -> None:
    """The same checks with check-jsonschema's command line, as one would by hand."""
    cli = Path(sys.executable).parent / "check-jsonschema"
    for (api_version, kind), _ in SCHEMA_OF.items():
        schema_file = tmp_path / f"{kind}.strict.json"
        schema_file.write_text(json.dumps(strict(crd_schema(api_version, kind))))
        manifest = next(
            path for path, _, doc in (p.values for p in MANIFESTS) if doc["kind"] == kind
        )
        run = subprocess.run(
            [str(cli), "--schemafile", str(schema_file), str(manifest)],
            capture_output=True,
            text=True,
        )
        assert run.returncode == 0, run.stdout + run.stderr
    broken = tmp_path / "gameserver.yaml"
    text = (AGONES / "gameserver.yaml").read_text()
    broken.write_text(text.replace("periodSeconds: 5", "periodSecond: 5"))
    run = subprocess.run(
        [str(cli), "--schemafile", str(tmp_path / "GameServer.strict.json"), str(broken)],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 1 and "periodSecond" in run.stdout, run.stdout + run.stderr


def node_containers() -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(manifest, GameServer spec, its arena container) of every node in the manifests."""
    found = []
    for path in sorted(AGONES.glob("*.yaml")):
        for document in documents(path):
            spec = document.get("spec", {})
            if document["kind"] == "Fleet":
                spec = spec["template"]["spec"]
            if document["kind"] in ("GameServer", "Fleet"):
                (container,) = spec["template"]["spec"]["containers"]
                found.append((path.name, spec, container))
    return found


def test_the_nodes_flags_are_arena_servers_and_agree_with_agones_settings() -> None:
    nodes = node_containers()
    assert {name for name, _, _ in nodes} == {"gameserver.yaml", "fleet.yaml"}
    for name, spec, container in nodes:
        env = {"$(POD_NAME)": "arena-eu-west-x7k2p", "$(POD_IP)": "10.4.0.12"}
        args = list(container["args"])
        for variable, value in env.items():
            args = [arg.replace(variable, value) for arg in args]
        config = config_from_args(build_parser().parse_args(args))  # (SystemExit if not)
        assert config.agones_url, name  # --agones
        assert config.public_url == "http://10.4.0.12:7777" and config.node_id.startswith("arena")
        (port,) = spec["ports"]
        assert port["containerPort"] == 7777 and port["protocol"] == "TCP"
        assert f"--port={port['containerPort']}" in container["args"]
        assert spec["container"] == container["name"] == "arena"
        assert container["image"] == "arena:latest"
        assert container["readinessProbe"]["httpGet"] == {"path": "/health", "port": 7777}
        assert container["livenessProbe"]["httpGet"] == {"path": "/live", "port": 7777}
        # At least two pings a health period: one late ping is never a failure.
        health = spec["health"]
        assert not health["disabled"] and health["periodSeconds"] >= 2 * HEALTH_INTERVAL_S
        # The REST port the node uses: Agones tells it (AGONES_SDK_HTTP_PORT) what this says.
        assert spec["sdkServer"]["httpPort"] == 9358
        names = {item["name"] for item in container["env"]}
        assert {"POD_NAME", "POD_IP", "ARENA_CLUSTER_SECRET"} <= names


def test_the_autoscaler_scales_the_fleet_and_keeps_a_standby() -> None:
    (fleet,) = documents(AGONES / "fleet.yaml")
    (scaler,) = documents(AGONES / "fleetautoscaler.yaml")
    assert scaler["spec"]["fleetName"] == fleet["metadata"]["name"]
    buffer = scaler["spec"]["policy"]["buffer"]
    assert buffer["minReplicas"] >= 2 and buffer["bufferSize"] >= 1  # primary + standby
    assert buffer["minReplicas"] <= fleet["spec"]["replicas"] <= buffer["maxReplicas"]
