"""The Helm chart, with the real helm binary: lint, render, validate, and what the values do."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
import yaml

from tests.support.crd_schemas import CRD_KINDS, has_schema, schema_errors
from tests.support.deploy_rendering import (
    CHART,
    CHART_CI_VALUES,
    NAMESPACE,
    RELEASE,
    TOOLS_BIN,
    checked,
    helm,
    helm_template_command,
    render_chart,
    run,
    serving_pods,
    venv_tool,
    vllm_flags,
)

HELM_SHA256 = "210d576a6dc04b7864af4b5d9a5af58860bbc03d19174ffeddbd29d01d1b59a9"  # v4.1.4
CI_IDS = [path.name.removesuffix("-values.yaml") for path in CHART_CI_VALUES]
MONITORING_KINDS = {"ServiceMonitor", "PrometheusRule"}


def test_helm_is_the_pinned_release() -> None:
    binary = helm()
    assert hashlib.sha256(binary.read_bytes()).hexdigest() == HELM_SHA256
    assert checked([binary, "version", "--short"]).startswith("v4.1.4")
    assert binary.parent == TOOLS_BIN


def test_chart_ci_values_cover_the_documented_combinations() -> None:
    assert {"default", "capped-7b", "tp2-72b", "everything-off", "shadow", "hpa"} <= set(CI_IDS)


@pytest.mark.parametrize("values", CHART_CI_VALUES, ids=CI_IDS)
def test_chart_lints_strictly(values: Any) -> None:
    output = checked([helm(), "lint", "--strict", CHART, "--values", values])
    assert "0 chart(s) failed" in output


@pytest.mark.parametrize("values", CHART_CI_VALUES, ids=CI_IDS)
def test_chart_renders_objects_that_kubernetes_validate_accepts_strictly(values: Any) -> None:
    rendered = render_chart(values.name)
    result = run(
        [venv_tool("kubernetes-validate"), "--strict", "--quiet", "-k", "1.30.0", "-"],
        stdin=rendered.text,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    # Only the CRDs (Prometheus Operator, KEDA, and those with a schema in deploy/schemas) may
    # lack a schema; the last are validated strictly against their project's CRD.
    for line in (result.stdout + result.stderr).splitlines():
        if line.startswith("WARN"):
            known = (*MONITORING_KINDS, "ScaledObject", *CRD_KINDS)
            assert any(kind in line for kind in known), line
    for obj in rendered.objects:
        if has_schema(obj):
            assert schema_errors(obj) == [], obj["kind"]


@pytest.mark.parametrize(
    ("assignment", "complaint"),
    [
        ("sidecar.config.max_pixels=1003520", "max_pixels"),
        ("sidecar.config.max_image_token=4096", "max_image_token"),
        ("sidecar.config.kv_budget_bytes=48Gi", "kv_budget_bytes"),
        ("sidecar.config.mode=observe", "mode"),
        ("vllm.extraArgs[0]=--tensor-parallel-size=4", "extraArgs"),
        ("vllm.mmProcessorKwargs.max_pixels=1003520", "mmProcessorKwargs"),
        ("vllm.limitMmPerPrompt.image=4", "limitMmPerPrompt"),
        ("images.maxPixels=0", "maxPixels"),
        ("model.path=/elsewhere/qwen", "must lie under model.mountPath"),
    ],
    ids=[
        "a-derived-setting-in-sidecar-config",
        "a-misspelt-setting",
        "a-kubernetes-quantity-as-a-byte-size",
        "an-unknown-mode",
        "a-flag-the-chart-sets-itself",
        "max-pixels-outside-images",
        "the-image-count-outside-images",
        "a-zero-pixel-cap",
        "a-model-outside-the-mount",
    ],
)
def test_chart_refuses_values_that_would_split_engine_and_sidecar(
    assignment: str, complaint: str
) -> None:
    result = run(helm_template_command("--set", assignment))
    assert result.returncode != 0, f"{assignment} was accepted"
    assert complaint in result.stderr


def test_chart_passes_one_pixel_cap_and_image_count_to_both_containers() -> None:
    rendered = render_chart(None, "images.maxPixels=1003520", "images.maxPerRequest=3")
    pod = serving_pods(rendered)[0]
    flags = vllm_flags(pod.vllm)
    assert json.loads(flags["--mm-processor-kwargs"]) == {"max_pixels": 1003520}
    assert json.loads(flags["--limit-mm-per-prompt"]) == {"image": 3}
    data = rendered.one("ConfigMap")["data"]
    assert data["SIDECAR_MAX_PIXELS"] == "1003520"
    assert data["SIDECAR_MAX_IMAGES_PER_REQUEST"] == "3"


def test_chart_keeps_other_processor_kwargs_and_modalities_beside_the_shared_ones() -> None:
    rendered = render_chart("capped-7b-values.yaml", "vllm.mmProcessorKwargs.do_rescale=true")
    flags = vllm_flags(serving_pods(rendered)[0].vllm)
    assert json.loads(flags["--mm-processor-kwargs"]) == {"max_pixels": 1003520, "do_rescale": True}
    assert json.loads(flags["--limit-mm-per-prompt"]) == {"image": 4, "video": 0}


def test_chart_omits_unset_flags_and_variables() -> None:
    rendered = render_chart()
    flags = vllm_flags(serving_pods(rendered)[0].vllm)
    assert not {"--mm-processor-kwargs", "--limit-mm-per-prompt", "--block-size"} & set(flags)
    data = rendered.one("ConfigMap")["data"]
    derived = {"SIDECAR_MAX_PIXELS", "SIDECAR_MAX_IMAGE_TOKENS", "SIDECAR_BLOCK_SIZE_TOKENS"}
    assert not derived & set(data)


def test_chart_tracing_points_both_containers_at_one_collector() -> None:
    rendered = render_chart("tracing-values.yaml")
    endpoint = "http://otel-collector.observability:4318/v1/traces"
    data = rendered.one("ConfigMap")["data"]
    assert {name: value for name, value in data.items() if name.startswith("OTEL_")} == {
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": endpoint,
        "OTEL_SERVICE_NAME": "vlm-sidecar",
        "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
        "OTEL_TRACES_SAMPLER_ARG": "0.1",
        "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=prod",
    }
    for pod in serving_pods(rendered):
        assert vllm_flags(pod.vllm)["--otlp-traces-endpoint"] == endpoint
        env = {item["name"]: item["value"] for item in pod.vllm["env"]}
        assert env["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] == "http/protobuf"  # not gRPC
        assert env["OTEL_SERVICE_NAME"] == "vllm"
        assert env["OTEL_TRACES_SAMPLER"] == "parentbased_traceidratio"


def test_chart_tracing_off_sets_nothing_and_on_needs_an_endpoint() -> None:
    rendered = render_chart()
    assert not [name for name in rendered.one("ConfigMap")["data"] if name.startswith("OTEL_")]
    pod = serving_pods(rendered)[0]
    assert "--otlp-traces-endpoint" not in vllm_flags(pod.vllm)
    assert not [e for e in pod.vllm.get("env", []) if e["name"].startswith("OTEL_")]
    result = run(helm_template_command("--set", "tracing.enabled=true"))
    assert result.returncode != 0
    assert "tracing.enabled needs tracing.endpoint" in result.stderr


def test_chart_checksum_annotation_changes_with_the_sidecar_config() -> None:
    def checksum(*sets: str) -> str:
        pod = serving_pods(render_chart(None, *sets))[0]
        annotations = pod.deployment["spec"]["template"]["metadata"]["annotations"]
        value: str = annotations["checksum/config"]
        return value

    assert checksum() != checksum("sidecar.config.max_image_tokens=4096")
    assert checksum() == checksum("vllm.image.tag=v0.33.0")


@pytest.mark.parametrize(
    ("values", "kinds"),
    [
        ("default-values.yaml", set()),
        ("everything-off-values.yaml", set()),
        ("capped-7b-values.yaml", {"ServiceMonitor", "PrometheusRule", "dashboards"}),
        ("shadow-values.yaml", {"ServiceMonitor"}),
        ("tp2-72b-values.yaml", {"ScaledObject"}),
        ("hpa-values.yaml", {"HorizontalPodAutoscaler"}),
    ],
    ids=["default", "everything-off", "capped-7b", "shadow", "tp2-72b", "hpa"],
)
def test_chart_renders_optional_objects_only_when_enabled(values: str, kinds: set[str]) -> None:
    rendered = render_chart(values)
    found = {obj["kind"] for obj in rendered.objects} & {
        *MONITORING_KINDS, "ScaledObject", "HorizontalPodAutoscaler",
    }  # fmt: skip
    dashboards = [
        cm for cm in rendered.of_kind("ConfigMap") if cm["metadata"]["name"].endswith("dashboards")
    ]
    assert found | ({"dashboards"} if dashboards else set()) == kinds


def test_chart_everything_off_has_no_scrape_annotations_or_service_account() -> None:
    rendered = render_chart("everything-off-values.yaml")
    pod = serving_pods(rendered)[0]
    annotations = pod.deployment["spec"]["template"]["metadata"]["annotations"]
    assert not any(key.startswith("prometheus.io/") for key in annotations)
    assert not rendered.of_kind("ServiceAccount")
    assert pod.spec["serviceAccountName"] == "default"


def test_chart_prometheus_rule_holds_the_rules_file_groups_unchanged() -> None:
    rules_file = CHART / "files" / "rules" / "vlm-sidecar.rules.yml"
    expected = yaml.safe_load(rules_file.read_text(encoding="utf-8"))["groups"]
    rule = render_chart("capped-7b-values.yaml").one("PrometheusRule")
    assert rule["spec"]["groups"] == expected
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus-stack"


def test_chart_dashboard_configmap_holds_every_dashboard_with_the_grafana_label() -> None:
    rendered = render_chart("capped-7b-values.yaml")
    (config_map,) = [
        cm for cm in rendered.of_kind("ConfigMap") if cm["metadata"]["name"].endswith("dashboards")
    ]
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    files = sorted((CHART / "files" / "dashboards").glob("*.json"))
    assert sorted(config_map["data"]) == [path.name for path in files]
    for path in files:
        assert json.loads(config_map["data"][path.name]) == json.loads(path.read_text("utf-8"))


def test_chart_helm_test_calls_readyz_through_the_service() -> None:
    rendered = render_chart()
    (pod,) = rendered.of_kind("Pod")
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    script = " ".join(pod["spec"]["containers"][0]["command"])
    service = rendered.one("Service")
    metrics_port = next(p["port"] for p in service["spec"]["ports"] if p["name"] == "metrics")
    assert f'"http://{service["metadata"]["name"]}"' in script
    assert f":{metrics_port}/readyz" in script


@pytest.mark.parametrize(
    ("kind", "values"),
    [("ScaledObject", "tp2-72b-values.yaml"), ("HorizontalPodAutoscaler", "hpa-values.yaml")],
    ids=["keda", "hpa"],
)
def test_chart_autoscaler_scales_the_deployment_on_sidecar_metrics(kind: str, values: str) -> None:
    rendered = render_chart(values)
    scaler = rendered.one(kind)
    deployment = rendered.one("Deployment")
    assert scaler["spec"]["scaleTargetRef"]["name"] == deployment["metadata"]["name"]
    assert "replicas" not in deployment["spec"], "the autoscaler owns the replica count"
    text = json.dumps(scaler["spec"])
    assert "vlm_sidecar_effective_requests_waiting" in text or (
        "vlm_sidecar_requests_waiting" in text
    )
    assert "vlm_sidecar_effective_kv_usage" in text or "vlm_sidecar_kv_utilization" in text


def test_chart_notes_warn_about_uncapped_images_and_an_off_kv_budget() -> None:
    command = [helm(), "install", RELEASE, CHART, "--dry-run=client", "--namespace", NAMESPACE]
    uncapped = checked(command)
    assert "images.maxPixels is not set" in uncapped
    assert "kv_budget_bytes is 0" in uncapped
    capped = checked([*command, "--values", CHART / "ci" / "capped-7b-values.yaml"])
    assert "max_pixels 1003520, 4 image(s) per request" in capped
    assert "WARNING" not in capped
    assert "shadow mode" in checked([*command, "--values", CHART / "ci" / "shadow-values.yaml"])
