"""The custom resources' schemas committed under ``deploy/schemas`` (generated from each
project's CRD by ``deploy/tools/crd_schema.py``; sources in ``deploy/schemas/README.md``), and
strict validation against them: what ``kubernetes-validate`` cannot check for CRD kinds."""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any

import jsonschema

from tests.support.paths import ROOT

SCHEMAS = ROOT / "deploy" / "schemas"
# (apiVersion, kind) -> schema file
SCHEMA_FILES = {
    ("inference.networking.k8s.io/v1", "InferencePool"):
        "inference.networking.k8s.io_inferencepool_v1.json",
    ("inference.networking.x-k8s.io/v1alpha2", "InferenceObjective"):
        "inference.networking.x-k8s.io_inferenceobjective_v1alpha2.json",
    ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"):
        "leaderworkerset.x-k8s.io_leaderworkerset_v1.json",
    ("networking.istio.io/v1", "VirtualService"): "networking.istio.io_virtualservice_v1.json",
    ("gateway.networking.k8s.io/v1", "HTTPRoute"):
        "gateway.networking.k8s.io_httproute_v1_experimental.json",
}  # fmt: skip
CRD_KINDS = frozenset(kind for _, kind in SCHEMA_FILES)


@functools.cache
def schema(name: str) -> dict[str, Any]:
    """A committed schema, by file name."""
    loaded: dict[str, Any] = json.loads((SCHEMAS / name).read_text(encoding="utf-8"))
    return loaded


def schema_errors(obj: Mapping[str, Any], name: str | None = None) -> list[str]:
    """Why ``obj`` breaks its kind's committed schema (or the named one); [] when it is valid."""
    name = name or SCHEMA_FILES[str(obj.get("apiVersion")), str(obj.get("kind"))]
    validator = jsonschema.Draft7Validator(schema(name))
    return [
        f"{'.'.join(str(p) for p in error.absolute_path) or '<root>'}: {error.message[:300]}"
        for error in validator.iter_errors(obj)
    ]


def has_schema(obj: Mapping[str, Any]) -> bool:
    """Whether a schema for ``obj``'s apiVersion and kind is committed."""
    return (str(obj.get("apiVersion")), str(obj.get("kind"))) in SCHEMA_FILES
