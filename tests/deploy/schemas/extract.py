"""Write the Agones kinds' schemas that tests/deploy/test_manifests.py checks the
manifests of deploy/agones/ against: each CustomResourceDefinition's ``openAPIV3Schema``,
as Agones ships it, one JSON file per kind.

    python tests/deploy/schemas/extract.py AGONES/install/yaml/install.yaml

from Agones' repository at the release we deploy (v1.31.0: ``git archive v1.31.0
install/yaml``). Kubernetes checks a custom resource against exactly this schema (plus
``apiVersion``, ``kind`` and ``metadata``, which every object has); the files record
where they came from (``$comment``) so a newer release is a re-run and a diff.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import yaml

#: The kinds deploy/agones/ uses: (group, version, kind).
KINDS = (
    ("agones.dev", "v1", "GameServer"),
    ("agones.dev", "v1", "Fleet"),
    ("autoscaling.agones.dev", "v1", "FleetAutoscaler"),
)
HERE = Path(__file__).resolve().parent


def schema_path(group: str, version: str, kind: str) -> Path:
    return HERE / f"{kind.lower()}-{group}-{version}.json"


def extract(install_yaml: Path, release: str) -> list[Path]:
    text = install_yaml.read_bytes()
    digest = hashlib.sha256(text).hexdigest()
    crds = {
        (doc["spec"]["group"], doc["spec"]["names"]["kind"]): doc
        for doc in yaml.safe_load_all(text)
        if doc and doc.get("kind") == "CustomResourceDefinition"
    }
    written = []
    for group, version, kind in KINDS:
        crd = crds[(group, kind)]
        (served,) = [v for v in crd["spec"]["versions"] if v["name"] == version]
        schema = {
            # OpenAPI 3.0's schemas are JSON Schema draft 4's (a boolean
            # exclusiveMinimum): say so, for check-jsonschema and the jsonschema library.
            "$schema": "http://json-schema.org/draft-04/schema#",
            "$comment": f"openAPIV3Schema of {crd['metadata']['name']} {version}, from "
            f"googleforgames/agones {release} install/yaml/install.yaml (sha256 {digest}), "
            "by tests/deploy/schemas/extract.py",
            **served["schema"]["openAPIV3Schema"],
        }
        path = schema_path(group, version, kind)
        path.write_text(json.dumps(schema, indent=1, sort_keys=True) + "\n")
        written.append(path)
    return written


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 2):
        print("usage: extract.py AGONES/install/yaml/install.yaml [RELEASE]", file=sys.stderr)
        return 2
    for path in extract(Path(argv[0]), argv[1] if len(argv) == 2 else "v1.31.0"):
        print(path.relative_to(HERE.parents[2]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
