"""The kustomize tree under deploy/: every kustomization renders valid objects, the generated
PrometheusRule is current, and the component, snippet and examples agree with each other."""

from __future__ import annotations

import re

import pytest
import yaml
from prometheus_client import CollectorRegistry

from sidecar.observe.metrics import Metrics
from sidecar.observe.router_load import KV_USAGE, REQUESTS_WAITING
from tests.support.crd_schemas import CRD_KINDS, has_schema, schema_errors
from tests.support.deploy_rendering import (
    CHART,
    DEPLOY,
    KUSTOMIZATIONS,
    documents,
    render_kustomization,
    run,
    serving_pods,
    venv_tool,
)
from tests.support.paths import ROOT

# Client-side `kubectl apply` keeps a copy of the object in an annotation capped at 256 KiB.
APPLY_ANNOTATION_LIMIT_BYTES = 256 * 1024
METRIC_NAME = re.compile(r"\bvlm_sidecar_[a-z0-9_]+\b")


@pytest.mark.parametrize("kustomization", KUSTOMIZATIONS, ids=KUSTOMIZATIONS)
def test_kustomization_renders_objects_that_kubernetes_validate_accepts_strictly(
    kustomization: str,
) -> None:
    rendered = render_kustomization(kustomization)
    result = run(
        [venv_tool("kubernetes-validate"), "--strict", "--quiet", "-k", "1.30.0", "-"],
        stdin=rendered.text,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    # CRD kinds lack a schema there; those with one in deploy/schemas are validated against it.
    crds = "|".join(("ServiceMonitor", "PrometheusRule", "ScaledObject", *sorted(CRD_KINDS)))
    for line in (result.stdout + result.stderr).splitlines():
        if line.startswith("WARN"):
            assert re.search(rf"kind ({crds}) ", line), line
    for obj in rendered.objects:
        if has_schema(obj):
            assert schema_errors(obj) == [], obj["kind"]


def test_hpa_example_is_a_valid_autoscaling_v2_object() -> None:
    path = DEPLOY / "examples" / "autoscaling" / "hpa.yaml"
    result = run([venv_tool("kubernetes-validate"), "--strict", "-k", "1.30.0", path])
    assert result.returncode == 0, result.stdout + result.stderr
    (hpa,) = documents(path)
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["scaleTargetRef"]["name"] == "vllm"


def test_base_prometheus_rule_is_the_rules_file_wrapped_unchanged() -> None:
    rules = yaml.safe_load(
        (DEPLOY / "base" / "files" / "rules" / "vlm-sidecar.rules.yml").read_text("utf-8")
    )
    rule = render_kustomization("base").one("PrometheusRule")
    assert rule["spec"]["groups"] == rules["groups"], (
        "deploy/base/prometheusrule.yaml is stale: run python dashboards/generate.py"
    )


def test_base_dashboard_configmap_is_labelled_for_grafana_and_fits_kubectl_apply() -> None:
    rendered = render_kustomization("base")
    (config_map,) = [
        cm
        for cm in rendered.of_kind("ConfigMap")
        if cm["metadata"]["name"] == "vlm-sidecar-dashboards"
    ]
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert sorted(config_map["data"]) == ["vlm-sidecar.json"]
    assert len(yaml.safe_dump(config_map).encode()) < APPLY_ANNOTATION_LIMIT_BYTES


def test_component_and_snippet_hold_the_same_sidecar_container() -> None:
    patch = yaml.safe_load((DEPLOY / "components" / "sidecar" / "sidecar.yaml").read_text("utf-8"))
    (container_op,) = [op for op in patch if op["path"] == "/spec/template/spec/containers/-"]
    (snippet,) = yaml.safe_load((DEPLOY / "snippets" / "sidecar-container.yaml").read_text("utf-8"))
    assert snippet == container_op["value"]


def test_component_appends_the_sidecar_after_the_existing_vllm_container() -> None:
    rendered = render_kustomization("examples/existing-vllm")
    (pod,) = serving_pods(rendered)
    names = [container["name"] for container in pod.spec["containers"]]
    assert names == ["server", "vlm-sidecar"]
    assert {volume["name"] for volume in pod.spec["volumes"]} == {"models", "sidecar-tmp"}


def test_overlays_run_in_their_own_namespaces() -> None:
    namespaces = set()
    for overlay in (k for k in KUSTOMIZATIONS if k.startswith("overlays/")):
        found = {obj["metadata"].get("namespace") for obj in render_kustomization(overlay).objects}
        assert len(found) == 1
        assert None not in found
        namespaces |= found
    assert len(namespaces) == len([k for k in KUSTOMIZATIONS if k.startswith("overlays/")])


def test_traced_overlay_sends_both_containers_to_one_collector_over_http() -> None:
    rendered = render_kustomization("overlays/qwen2.5-vl-7b-traced")
    (pod,) = serving_pods(rendered)
    config = next(
        cm["data"]
        for cm in rendered.of_kind("ConfigMap")
        if cm["metadata"]["name"].startswith("vlm-sidecar-config")
    )
    flags = [arg for arg in pod.vllm["args"] if arg.startswith("--otlp-traces-endpoint=")]
    assert flags == [f"--otlp-traces-endpoint={config['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT']}"]
    env = {item["name"]: item.get("value") for item in pod.vllm["env"]}
    assert env["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] == "http/protobuf"
    assert env["HF_HUB_OFFLINE"] == "1"  # the base's entries are kept beside them
    assert config["SIDECAR_MODEL"]  # merged into the base's settings, not replacing them


def test_autoscaling_example_leaves_the_replica_count_to_the_autoscaler() -> None:
    rendered = render_kustomization("examples/autoscaling")
    scaled = rendered.one("ScaledObject")
    deployment = rendered.one("Deployment")
    assert scaled["spec"]["scaleTargetRef"]["name"] == deployment["metadata"]["name"]
    assert "replicas" not in deployment["spec"]


def test_every_sidecar_metric_named_in_deploy_files_exists() -> None:
    registry = CollectorRegistry()
    Metrics(registry, model="contract")
    exported = {sample.name for family in registry.collect() for sample in family.samples}
    exported |= {family.name for family in registry.collect()}
    # made up by the adapter rules, documented
    adapter_names = {"vlm_sidecar_kv_utilization", "vlm_sidecar_requests_waiting"}
    exported |= {REQUESTS_WAITING, KV_USAGE}  # the router gauges, registered by serve.app
    generated = {DEPLOY / "base" / "prometheusrule.yaml"}
    files = [
        path
        for tree in (DEPLOY, CHART / "templates", CHART / "ci")
        for path in tree.rglob("*")
        if path.suffix in {".yaml", ".tpl", ".txt"} and "files" not in path.parts
        and path not in generated
    ]  # fmt: skip
    assert files
    for path in files:
        for name in METRIC_NAME.findall(path.read_text(encoding="utf-8")):
            assert name in exported | adapter_names, f"{path.relative_to(ROOT)} names {name}"


def test_every_yaml_file_under_deploy_and_the_chart_ci_parses() -> None:
    files = [*DEPLOY.rglob("*.yaml"), *DEPLOY.rglob("*.yml"), *(CHART / "ci").glob("*.yaml")]
    assert len(files) > 10
    for path in files:
        try:
            list(documents(path))
        except yaml.YAMLError as error:
            pytest.fail(f"{path.relative_to(ROOT)}: {error}")


def test_snippet_container_is_valid_in_a_pod() -> None:
    (container,) = yaml.safe_load(
        (DEPLOY / "snippets" / "sidecar-container.yaml").read_text("utf-8")
    )
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "snippet"},
        "spec": {
            "enableServiceLinks": False,
            "containers": [container],
            "volumes": [
                {"name": "models", "persistentVolumeClaim": {"claimName": "models"}},
                {"name": "sidecar-tmp", "emptyDir": {}},
            ],
        },
    }
    result = run(
        [venv_tool("kubernetes-validate"), "--strict", "--quiet", "-k", "1.30.0", "-"],
        stdin=yaml.safe_dump(pod),
    )
    assert result.returncode == 0, result.stdout + result.stderr
