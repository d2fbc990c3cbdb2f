"""Many replicas in the cluster: the endpoint picker's configuration and InferencePool, the
gateway retry policies, the autoscaling queries and their promtool proof, and the
LeaderWorkerSet variant of the chart.

The picker facts checked here were read from the llm-d router (github.com/llm-d/llm-d-router,
commit ebab687, 2026-08-22): ``apix/config/v1alpha1/endpointpickerconfig_types.go`` (the
config's fields), ``pkg/epp/framework/plugins/datalayer/extractor/metrics/factories.go`` (an
engine's metric specifications), and the plugin type names registered under
``pkg/epp/framework/plugins``.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from dashboards import autoscaling, generate
from sidecar.observe.router_load import KV_USAGE, REQUESTS_WAITING
from sidecar.settings import parse_objective_priorities
from tests.support.crd_schemas import SCHEMA_FILES, SCHEMAS, schema_errors
from tests.support.deploy_rendering import (
    CHART,
    DEPLOY,
    container_environment,
    render_chart,
    render_kustomization,
    serving_pods,
    vllm_flags,
)
from tests.support.paths import ROOT
from tests.support.prometheus_tools import promtool

EXAMPLE = DEPLOY / "examples" / "inference-pool"
RETRIES = DEPLOY / "examples" / "retries"
EPP_FIELDS = {
    "apiVersion", "kind", "featureGates", "plugins", "schedulingProfiles", "dataLayer",
    "flowControl", "requestHandler", "saturationDetector", "parser",
}  # fmt: skip
ENGINE_CONFIG_FIELDS = {
    "name", "queuedRequestsSpec", "runningRequestsSpec", "kvUsageSpec", "loraSpec",
    "cacheInfoSpec", "cacheBlockSizeLabelName", "cacheNumBlocksLabelName", "cacheBlockSizeSpec",
    "cacheNumBlocksSpec", "customMetrics",
}  # fmt: skip
PLUGIN_TYPES = {
    "metrics-data-source", "core-metrics-extractor", "queue-scorer",
    "kv-cache-utilization-scorer", "prefix-cache-scorer", "max-score-picker",
    "single-profile-handler",
}  # fmt: skip
VLLM_SERIES = {"vllm:num_requests_running", "vllm:lora_requests_info", "vllm:cache_config_info"}
LWS_VALUES = "lws-pp-values.yaml"


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def example_epp_config() -> dict[str, Any]:
    config: dict[str, Any] = load(EXAMPLE / "endpoint-picker-config.yaml")
    return config


# --- the endpoint picker ------------------------------------------------------------------


def test_picker_config_is_the_same_in_the_example_the_chart_and_the_router_chart_values() -> None:
    rendered = render_chart(LWS_VALUES)
    (config_map,) = [
        c for c in rendered.of_kind("ConfigMap") if c["metadata"]["name"].endswith("-epp-config")
    ]
    from_chart = yaml.safe_load(config_map["data"]["endpoint-picker-config.yaml"])
    router_values = load(EXAMPLE / "llm-d-router-values.yaml")["router"]["epp"]
    inline = router_values["pluginsCustomConfig"][router_values["pluginsConfigFile"]]
    assert from_chart == example_epp_config() == yaml.safe_load(inline)
    kustomized = render_kustomization("examples/inference-pool")
    (generated,) = [
        c for c in kustomized.of_kind("ConfigMap") if c["metadata"]["name"] == "vllm-epp-config"
    ]
    assert yaml.safe_load(generated["data"]["endpoint-picker-config.yaml"]) == example_epp_config()


def test_picker_config_reads_the_router_gauges_for_the_sidecars_engine() -> None:
    config = example_epp_config()
    assert (config["apiVersion"], config["kind"]) == ("llm-d.ai/v1alpha1", "EndpointPickerConfig")
    assert set(config) <= EPP_FIELDS
    plugins = {plugin["type"]: plugin for plugin in config["plugins"]}
    assert set(plugins) <= PLUGIN_TYPES
    extractor = plugins["core-metrics-extractor"]["parameters"]
    (engine,) = extractor["engineConfigs"]
    assert set(engine) <= ENGINE_CONFIG_FIELDS
    assert extractor["defaultEngine"] == engine["name"] == "vlm-sidecar"
    assert engine["queuedRequestsSpec"] == REQUESTS_WAITING
    assert engine["kvUsageSpec"] == KV_USAGE
    others = {engine[key] for key in ("runningRequestsSpec", "loraSpec", "cacheInfoSpec")}
    assert others <= VLLM_SERIES
    assert plugins["metrics-data-source"]["parameters"]["path"] == "/metrics"
    declared = {plugin.get("name", plugin["type"]) for plugin in config["plugins"]}
    refs = [p["pluginRef"] for profile in config["schedulingProfiles"] for p in profile["plugins"]]
    refs += [source["pluginRef"] for source in config["dataLayer"]["sources"]]
    refs += [e["pluginRef"] for s in config["dataLayer"]["sources"] for e in s["extractors"]]
    assert set(refs) <= declared


@pytest.mark.parametrize("render", ["helm-lws", "kustomize"])
def test_inference_pool_targets_the_sidecars_traffic_port_of_the_serving_pods(render: str) -> None:
    rendered = (
        render_chart(LWS_VALUES)
        if render == "helm-lws"
        else render_kustomization("examples/inference-pool")
    )
    pool = rendered.one("InferencePool")
    assert schema_errors(pool) == []
    (pod,) = serving_pods(rendered)
    sidecar_port = next(p["containerPort"] for p in pod.sidecar["ports"] if p["name"] == "http")
    assert pool["spec"]["targetPorts"] == [{"number": sidecar_port}]
    selector = pool["spec"]["selector"]["matchLabels"]
    assert all(pod.labels.get(key) == value for key, value in selector.items())
    assert pod.labels["llm-d.ai/engine-type"] == "vlm-sidecar"
    assert pool["spec"]["endpointPickerRef"]["failureMode"] in {"FailOpen", "FailClose"}


def test_inference_pool_schema_is_strict() -> None:
    pool = render_chart(LWS_VALUES).one("InferencePool")
    broken = copy.deepcopy(pool)
    broken["spec"]["endpointPickerRef"]["failureMode"] = "FailClosed"  # the CRD says FailClose
    broken["spec"]["targetPort"] = 8080
    errors = schema_errors(broken)
    assert any("FailClosed" in error for error in errors)
    assert any("targetPort" in error for error in errors)


def test_inference_objectives_carry_the_priorities_the_sidecar_queues_by() -> None:
    rendered = render_kustomization("examples/inference-pool")
    objectives = rendered.of_kind("InferenceObjective")
    assert objectives
    pool = rendered.one("InferencePool")["metadata"]["name"]
    for objective in objectives:
        assert schema_errors(objective) == []
        assert objective["spec"]["poolRef"]["name"] == pool
    (pod,) = serving_pods(rendered)
    environment = container_environment(rendered, pod.sidecar)
    mapping = parse_objective_priorities(environment["SIDECAR_OBJECTIVE_PRIORITIES"])
    declared = {o["metadata"]["name"]: o["spec"]["priority"] for o in objectives}
    assert mapping == declared
    assert any(priority < 0 for priority in mapping.values())  # one sheddable objective


def test_inference_objective_schema_is_strict() -> None:
    objective = render_kustomization("examples/inference-pool").of_kind("InferenceObjective")[0]
    broken = copy.deepcopy(objective)
    broken["spec"]["priority"] = "high"
    broken["spec"]["criticality"] = "Critical"  # the field InferenceModel had before
    errors = schema_errors(broken)
    assert any("'high'" in error for error in errors)
    assert any("criticality" in error for error in errors)


# --- retries across replicas --------------------------------------------------------------


def test_istio_retries_429_on_another_replica_and_never_5xx() -> None:
    service = load(RETRIES / "istio-virtualservice.yaml")
    assert schema_errors(service) == []
    retries = service["spec"]["http"][0]["retries"]
    conditions = set(retries["retryOn"].split(","))
    assert "429" in conditions
    assert not conditions & {"5xx", "gateway-error", "500", "502", "503", "504", "413"}
    assert retries["retryIgnorePreviousHosts"] is True
    assert retries["attempts"] >= 1


def test_httproute_retry_needs_the_experimental_channel() -> None:
    route = load(RETRIES / "httproute-retry.yaml")
    assert schema_errors(route) == []  # experimental CRD, Gateway API v1.6.1
    standard = schema_errors(route, "gateway.networking.k8s.io_httproute_v1_standard.json")
    assert standard == [
        "spec.rules.0: Additional properties are not allowed ('retry' was unexpected)"
    ]
    assert route["spec"]["rules"][0]["retry"]["codes"] == [429]


def test_inference_pool_route_is_a_valid_standard_httproute() -> None:
    route = load(EXAMPLE / "httproute.yaml")
    assert schema_errors(route, "gateway.networking.k8s.io_httproute_v1_standard.json") == []
    (backend,) = route["spec"]["rules"][0]["backendRefs"]
    assert (backend["kind"], backend["name"]) == ("InferencePool", "vllm")


def test_every_committed_schema_is_documented_with_its_source() -> None:
    readme = (SCHEMAS / "README.md").read_text(encoding="utf-8")
    files = sorted(path.name for path in SCHEMAS.glob("*.json"))
    assert set(files) >= set(SCHEMA_FILES.values())
    for name in files:
        assert f"`{name}`" in readme, name


# --- autoscaling --------------------------------------------------------------------------


def test_keda_and_adapter_queries_are_the_proven_recording_rules() -> None:
    scaled = render_kustomization("examples/autoscaling").one("ScaledObject")
    selector = 'namespace="qwen2-5-vl-7b",service="vllm"'
    queries = [trigger["metadata"]["query"] for trigger in scaled["spec"]["triggers"]]
    assert queries == [autoscaling.waiting_query(selector), autoscaling.kv_usage_query(selector)]
    chart = render_chart("tp2-72b-values.yaml").one("ScaledObject")
    chart_selector = 'namespace="serving",service="vlm-vlm-sidecar"'
    assert [t["metadata"]["query"] for t in chart["spec"]["triggers"]] == [
        autoscaling.waiting_query(chart_selector),
        autoscaling.kv_usage_query(chart_selector),
    ]
    adapter = load(DEPLOY / "examples" / "autoscaling" / "prometheus-adapter-values.yaml")
    rules = adapter["rules"]["custom"]
    assert [rule["metricsQuery"] for rule in rules] == [
        autoscaling.adapter_query("waiting"),
        autoscaling.adapter_query("kv"),
    ]
    records = {
        rule["record"]: rule["expr"]
        for group in load(ROOT / generate.AUTOSCALING_RULES)["groups"]
        for rule in group["rules"]
    }
    assert records == {
        autoscaling.WAITING_RECORD: autoscaling.waiting_query("", autoscaling.BY),
        autoscaling.KV_USAGE_RECORD: autoscaling.kv_usage_query("", autoscaling.BY),
    }


async def test_autoscaling_rules_pass_promtool_check_and_their_unit_tests() -> None:
    rules_file = ROOT / generate.AUTOSCALING_RULES
    assert "SUCCESS: 2 rules found" in await promtool("check", "rules", str(rules_file))
    output = await promtool(
        "test", "rules", generate.AUTOSCALING_RULES_TEST.name, cwd=rules_file.parent
    )
    assert "SUCCESS" in output


def test_autoscaling_unit_tests_cover_sustained_load_and_bursts() -> None:
    names = [case["name"] for case in load(ROOT / generate.AUTOSCALING_RULES_TEST)["tests"]]
    assert any("scales out" in name and "burst" not in name for name in names)
    assert sum("burst" in name or "spike" in name or "one scrape" in name for name in names) >= 2


# --- the LeaderWorkerSet variant ----------------------------------------------------------


def test_lws_runs_the_sidecar_in_the_leader_only_and_the_other_ranks_headless() -> None:
    rendered = render_chart(LWS_VALUES)
    assert not rendered.of_kind("Deployment")
    lws = rendered.one("LeaderWorkerSet")
    assert schema_errors(lws) == []
    template = lws["spec"]["leaderWorkerTemplate"]
    size = template["size"]
    (leader,) = serving_pods(rendered)
    workers = template["workerTemplate"]["spec"]["containers"]
    assert [c["name"] for c in workers] == ["vllm"]
    leader_flags, worker_flags = vllm_flags(leader.vllm), vllm_flags(workers[0])
    assert leader_flags["--nnodes"] == worker_flags["--nnodes"] == str(size)
    assert leader_flags["--node-rank"] == "0"
    assert worker_flags["--node-rank"] == "$(LWS_WORKER_INDEX)"
    assert worker_flags["--master-addr"] == leader_flags["--master-addr"] == "$(LWS_LEADER_ADDRESS)"
    assert worker_flags.get("--headless") == "true"
    assert "--headless" not in leader_flags
    engine = {"--node-rank", "--headless"}
    assert {k: v for k, v in worker_flags.items() if k not in engine} == {
        k: v for k, v in leader_flags.items() if k not in engine
    }
    gpus = int(leader.vllm["resources"]["limits"]["nvidia.com/gpu"])
    assert gpus == int(workers[0]["resources"]["limits"]["nvidia.com/gpu"])
    ranks = int(leader_flags["--tensor-parallel-size"]) * int(
        leader_flags["--pipeline-parallel-size"]
    )
    assert gpus * size == ranks
    service = rendered.one("Service")
    assert service["spec"]["selector"]["app.kubernetes.io/component"] == "leader"


def test_lws_schema_is_strict_about_the_pod_templates() -> None:
    lws = render_chart(LWS_VALUES).one("LeaderWorkerSet")
    broken = copy.deepcopy(lws)
    broken["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"][0]["argz"] = []
    assert any("argz" in error for error in schema_errors(broken))


def test_lws_refuses_gpus_that_do_not_divide_over_the_group() -> None:
    from tests.support.deploy_rendering import helm_template_command, run

    result = run(
        [
            *helm_template_command("--values", str(CHART / "ci" / LWS_VALUES)),
            "--set", "leaderWorkerSet.size=3",
        ]
    )  # fmt: skip
    assert result.returncode != 0
    assert "do not divide over leaderWorkerSet.size 3 pods" in result.stderr
