"""Turn one version of a CustomResourceDefinition into the JSON Schema the deploy tests use.

    python deploy/tools/crd_schema.py CRD.yaml KIND VERSION > deploy/schemas/FILE.json

The CRD's ``openAPIV3Schema`` is kept as the API server applies it, with three changes so
that ``jsonschema`` checks what ``kubectl apply --validate=strict`` would:

* ``nullable: true`` becomes a ``null`` alternative of the ``type``;
* every object that lists ``properties`` and neither ``additionalProperties`` nor
  ``x-kubernetes-preserve-unknown-fields`` refuses unknown fields (strict field validation);
* ``description`` is dropped (it is most of the bytes and checks nothing).

CEL rules (``x-kubernetes-validations``) are kept as data but not evaluated; defaults are not
applied. The schemas in ``deploy/schemas/`` name their source in ``deploy/schemas/README.md``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml


def strict(node: Any) -> Any:
    """The schema with descriptions dropped, nullables spelled out and unknown fields refused."""
    if isinstance(node, list):
        return [strict(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: strict(value) for key, value in node.items() if key != "description"}
    if out.pop("nullable", False) and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    if (
        "properties" in out
        and "additionalProperties" not in out
        and not out.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


def crd_schema(documents: list[Any], kind: str, version: str) -> dict[str, Any]:
    """The strict schema of ``kind`` at ``version`` among the CRDs in ``documents``."""
    for document in documents:
        if not isinstance(document, dict) or document.get("kind") != "CustomResourceDefinition":
            continue
        if document["spec"]["names"]["kind"] != kind:
            continue
        for served in document["spec"]["versions"]:
            if served["name"] == version:
                schema = strict(served["schema"]["openAPIV3Schema"])
                # apiVersion, kind and metadata are the API server's, not the CRD's, to check.
                schema["properties"]["metadata"] = {"type": "object"}
                group = document["spec"]["group"]
                schema["properties"]["apiVersion"] = {"const": f"{group}/{version}"}
                schema["properties"]["kind"] = {"const": kind}
                schema["required"] = sorted({*schema.get("required", ()), "apiVersion", "kind"})
                return schema
    raise SystemExit(f"no CustomResourceDefinition of kind {kind} with version {version}")


def main(argv: list[str]) -> int:
    path, kind, version = argv
    documents = list(yaml.safe_load_all(Path(path).read_text(encoding="utf-8")))
    json.dump(crd_schema(documents, kind, version), sys.stdout, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
