"""The deploy contract: chart, manifests and the docs name exactly what ``Settings`` defines,
route traffic through the sidecar, and give vLLM and the sidecar the same prediction flags.

Every check runs on each rendered output: the chart with each ci/*-values.yaml file and each
kustomization (base, overlays, examples).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from sidecar.settings import Settings
from tests.support.deploy_rendering import (
    CHART,
    DERIVED_VALUES,
    MONITORED_RENDER_IDS,
    OWNED_VLLM_RENDER_IDS,
    RENDER_IDS,
    VLLM_DEFAULT_BLOCK_SIZE,
    VLLM_DEFAULT_PORT,
    Rendered,
    ServingPod,
    container_environment,
    json_flag,
    render_by_id,
    render_chart,
    resolve_port,
    selects,
    serving_pods,
    vllm_flags,
)
from tests.support.paths import ROOT

FIELDS = set(Settings.model_fields)
CONFIGURATION_DOC = ROOT / "docs" / "configuration.md"
ENV_NAME = re.compile(r"^SIDECAR_[A-Z0-9_]+$")


def env_name(field: str) -> str:
    """``max_pixels`` -> ``SIDECAR_MAX_PIXELS``."""
    return Settings.env_name(field)


def parse_settings(monkeypatch: pytest.MonkeyPatch, environment: Mapping[str, str]) -> Settings:
    """``Settings()`` read from exactly this environment, as ``vlm-sidecar serve`` reads it."""
    ours = [name for name in environment if name.startswith("SIDECAR_")]
    unknown = sorted(name for name in ours if name.removeprefix("SIDECAR_").lower() not in FIELDS)
    # Settings ignores unknown variables, so a misspelt one would silently do nothing.
    assert not unknown, f"variables the sidecar does not read (typos?): {unknown}"
    for name in [name for name in os.environ if name.startswith("SIDECAR_")]:
        monkeypatch.delenv(name)
    for name, value in environment.items():
        if name.startswith("SIDECAR_"):
            monkeypatch.setenv(name, value)
    return Settings()  # type: ignore[call-arg]  # model comes from the environment


def chart_values() -> dict[str, Any]:
    """The chart's values.yaml."""
    values: dict[str, Any] = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))
    return values


def chart_schema() -> dict[str, Any]:
    """The chart's values.schema.json."""
    schema: dict[str, Any] = json.loads((CHART / "values.schema.json").read_text("utf-8"))
    return schema


def documented_configuration_rows() -> dict[str, list[str]]:
    """docs/configuration.md's settings table: variable name -> its cells, backticks removed."""
    rows: dict[str, list[str]] = {}
    for line in CONFIGURATION_DOC.read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) >= 4 and (name := cells[0].strip("`")).startswith("SIDECAR_"):
            assert name not in rows, f"docs/configuration.md lists {name} twice"
            rows[name] = [cell.strip("`") for cell in cells]
    return rows


def values_path(values: Mapping[str, Any], dotted: str) -> bool:
    """Whether ``dotted`` (e.g. ``images.maxPixels``) is a key path in ``values``."""
    node: Any = values
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return False
        node = node[part]
    return True


# --- One list of variables: Settings, chart values and schema, the docs' table ------------


def test_chart_values_map_every_setting_exactly_once() -> None:
    values = chart_values()
    config = set(values["sidecar"]["config"])
    derived = set(DERIVED_VALUES)
    assert not config & derived, f"set by the chart, so not in sidecar.config: {config & derived}"
    missing = FIELDS - config - derived
    assert not missing, f"add to helm/vlm-sidecar/values.yaml sidecar.config: {sorted(missing)}"
    extra = (config | derived) - FIELDS
    assert not extra, f"not settings in sidecar/settings.py: {sorted(extra)}"
    for field, dotted in DERIVED_VALUES.items():
        assert values_path(values, dotted), f"{field} is derived from {dotted}, not in values.yaml"


def test_chart_schema_lists_exactly_the_config_settings_and_refuses_others() -> None:
    config_schema = chart_schema()["properties"]["sidecar"]["properties"]["config"]
    assert config_schema["additionalProperties"] is False
    assert set(config_schema["properties"]) == set(chart_values()["sidecar"]["config"])


def test_chart_schema_allows_null_exactly_for_settings_without_a_default() -> None:
    properties = chart_schema()["properties"]["sidecar"]["properties"]["config"]["properties"]
    for name, schema in properties.items():
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        optional = Settings.model_fields[name].default is None
        assert ("null" in types) == optional, f"sidecar.config.{name}: null allowed {not optional}"


def test_chart_schema_enums_are_the_settings_enum_values() -> None:
    properties = chart_schema()["properties"]["sidecar"]["properties"]["config"]["properties"]
    for name, schema in properties.items():
        annotation = Settings.model_fields[name].annotation
        members = getattr(annotation, "__members__", None)
        if members is not None:
            expected = sorted(member.value for member in members.values())
            assert sorted(schema.get("enum", [])) == expected, f"sidecar.config.{name}"


def test_readme_configuration_table_lists_every_setting_and_nothing_else() -> None:
    documented = set(documented_configuration_rows())
    expected = {env_name(field) for field in FIELDS}
    assert not expected - documented, (
        f"add to docs/configuration.md: {sorted(expected - documented)}"
    )
    assert not documented - expected, f"not settings: {sorted(documented - expected)}"


def test_readme_configuration_table_names_the_helm_value_of_each_setting() -> None:
    for name, cells in documented_configuration_rows().items():
        field = name.removeprefix("SIDECAR_").lower()
        expected = DERIVED_VALUES.get(field, f"sidecar.config.{field}")
        assert cells[2] == expected, f"{name}: Helm value column says {cells[2]!r}"


def test_readme_configuration_defaults_parse_to_the_settings_defaults(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    defaults = Settings(model="unused")
    for name, cells in documented_configuration_rows().items():
        field, written = name.removeprefix("SIDECAR_").lower(), cells[1]
        if field == "model":
            assert written == "required"
            continue
        if written == "unset":
            assert Settings.model_fields[field].default is None, f"{name} has a default"
            continue
        environment = {"SIDECAR_MODEL": "unused", name: "" if written == "empty" else written}
        parsed = getattr(parse_settings(monkeypatch, environment), field)
        assert parsed == getattr(defaults, field), f"{name}: documented default {written!r}"


def test_chart_default_configmap_holds_the_settings_defaults(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rendered = render_chart()
    pod = serving_pods(rendered)[0]
    settings = parse_settings(monkeypatch, container_environment(rendered, pod.sidecar))
    defaults = Settings(model=settings.model)
    for field in sorted(set(chart_values()["sidecar"]["config"])):
        assert getattr(settings, field) == getattr(defaults, field), f"sidecar.config.{field}"


# --- Every render: wiring, agreement, parseable settings --------------------------------


@pytest.fixture(params=RENDER_IDS)
def rendered(request: pytest.FixtureRequest) -> Rendered:
    """One rendered output (chart with a ci values file, or a kustomization)."""
    return render_by_id(request.param)


def sidecar_settings(
    rendered: Rendered, pod: ServingPod, monkeypatch: pytest.MonkeyPatch
) -> Settings:
    """The sidecar container's settings, parsed by the real ``Settings``."""
    return parse_settings(monkeypatch, container_environment(rendered, pod.sidecar))


def test_sidecar_environment_parses_with_the_real_settings(
    rendered: Rendered, monkeypatch: pytest.MonkeyPatch
) -> None:
    for pod in serving_pods(rendered):
        environment = container_environment(rendered, pod.sidecar)
        assert all(ENV_NAME.match(name) for name in environment if name.startswith("SIDECAR"))
        settings = parse_settings(monkeypatch, environment)
        assert settings.model


def test_service_ports_lead_to_the_sidecar_never_to_vllm(rendered: Rendered) -> None:
    pods = serving_pods(rendered)
    services = [
        service
        for service in rendered.of_kind("Service")
        if any(selects(service["spec"]["selector"], pod.labels) for pod in pods)
    ]
    assert services, f"{rendered.name}: no Service selects the serving pods"
    for service in services:
        for port in service["spec"]["ports"]:
            target = port.get("targetPort", port["port"])
            for pod in pods:
                assert resolve_port(pod.sidecar, target) is not None, (
                    f"{service['metadata']['name']}:{port['port']} -> {target!r} is not a "
                    "sidecar port"
                )
                assert resolve_port(pod.vllm, target) is None, f"{target!r} reaches vLLM"


def test_sidecar_upstream_is_vllm_on_loopback(
    rendered: Rendered, monkeypatch: pytest.MonkeyPatch
) -> None:
    for pod in serving_pods(rendered):
        flags = vllm_flags(pod.vllm)
        assert flags.get("--host") == "127.0.0.1", "vLLM must listen on loopback only"
        upstream = urlsplit(str(sidecar_settings(rendered, pod, monkeypatch).upstream_url))
        assert upstream.hostname in {"127.0.0.1", "localhost"}
        assert upstream.port == int(flags.get("--port", VLLM_DEFAULT_PORT))


def test_sidecar_listens_on_its_declared_container_ports(
    rendered: Rendered, monkeypatch: pytest.MonkeyPatch
) -> None:
    for pod in serving_pods(rendered):
        settings = sidecar_settings(rendered, pod, monkeypatch)
        ports = {p["containerPort"] for p in pod.sidecar["ports"]}
        assert ports == {settings.port, settings.metrics_port}
        readiness, liveness = pod.sidecar["readinessProbe"], pod.sidecar["livenessProbe"]
        assert readiness["httpGet"]["path"] == "/readyz"
        assert liveness["httpGet"]["path"] == "/healthz"
        for probe in (readiness, liveness):
            assert resolve_port(pod.sidecar, probe["httpGet"]["port"]) == settings.metrics_port


def vllm_env(container: dict[str, Any]) -> dict[str, str]:
    """The vLLM container's literal environment."""
    return {item["name"]: item["value"] for item in container.get("env", []) if "value" in item}


def test_vllm_flags_agree_with_the_sidecar_settings(
    rendered: Rendered, monkeypatch: pytest.MonkeyPatch
) -> None:
    for pod in serving_pods(rendered):
        flags = vllm_flags(pod.vllm)
        settings = sidecar_settings(rendered, pod, monkeypatch)
        kwargs = json_flag(flags, "--mm-processor-kwargs")
        images = json_flag(flags, "--limit-mm-per-prompt").get("image")
        if isinstance(images, dict):
            images = images.get("count")
        block_size = int(flags.get("--block-size", VLLM_DEFAULT_BLOCK_SIZE))
        pairs = {
            "SIDECAR_MODEL / --model": (settings.model, flags["--model"]),
            "SIDECAR_MAX_PIXELS / --mm-processor-kwargs max_pixels": (
                settings.max_pixels, kwargs.get("max_pixels"),
            ),
            "SIDECAR_MIN_PIXELS / --mm-processor-kwargs min_pixels": (
                settings.min_pixels, kwargs.get("min_pixels"),
            ),
            "SIDECAR_MM_PROCESSOR_KWARGS / --mm-processor-kwargs, less the pixel bounds": (
                settings.mm_processor_kwargs,
                {k: v for k, v in kwargs.items() if k not in ("min_pixels", "max_pixels")},
            ),
            "SIDECAR_MAX_IMAGES_PER_REQUEST / --limit-mm-per-prompt image": (
                settings.max_images_per_request, images,
            ),
            "SIDECAR_TENSOR_PARALLEL_SIZE / --tensor-parallel-size": (
                settings.tensor_parallel_size, int(flags.get("--tensor-parallel-size", 1)),
            ),
            "SIDECAR_PIPELINE_PARALLEL_SIZE / --pipeline-parallel-size": (
                settings.pipeline_parallel_size, int(flags.get("--pipeline-parallel-size", 1)),
            ),
            "SIDECAR_PIPELINE_LAYER_PARTITION / VLLM_PP_LAYER_PARTITION": (
                ",".join(map(str, settings.pipeline_layer_partition)),
                vllm_env(pod.vllm).get("VLLM_PP_LAYER_PARTITION", ""),
            ),
            "SIDECAR_DATA_PARALLEL_SIZE / --data-parallel-size": (
                settings.data_parallel_size, int(flags.get("--data-parallel-size", 1)),
            ),
            "SIDECAR_KV_CACHE_DTYPE / --kv-cache-dtype": (
                settings.kv_cache_dtype, flags.get("--kv-cache-dtype", "auto"),
            ),
            "SIDECAR_MAMBA_CACHE_DTYPE / --mamba-cache-dtype": (
                settings.mamba_cache_dtype, flags.get("--mamba-cache-dtype", "auto"),
            ),
            "SIDECAR_MAMBA_SSM_CACHE_DTYPE / --mamba-ssm-cache-dtype": (
                settings.mamba_ssm_cache_dtype, flags.get("--mamba-ssm-cache-dtype", "auto"),
            ),
            "SIDECAR_PREFIX_CACHING / --[no-]enable-prefix-caching": (
                settings.prefix_caching, "--no-enable-prefix-caching" not in flags,
            ),
            "SIDECAR_GDN_PREFILL_BACKEND / --gdn-prefill-backend": (
                settings.gdn_prefill_backend, flags.get("--gdn-prefill-backend", "auto"),
            ),
            # Unset, the sidecar reads vLLM's block size from vllm:cache_config_info.
            "SIDECAR_BLOCK_SIZE_TOKENS / --block-size": (
                settings.block_size_tokens or block_size, block_size,
            ),
        }  # fmt: skip
        disagree = {name: pair for name, pair in pairs.items() if pair[0] != pair[1]}
        assert not disagree, f"{rendered.name}: sidecar and vLLM disagree: {disagree}"
        if "--max-model-len" in flags and settings.max_request_prompt_tokens is not None:
            assert settings.max_request_prompt_tokens <= int(flags["--max-model-len"])


def test_vllm_gets_one_gpu_per_tensor_parallel_rank(rendered: Rendered) -> None:
    for pod in serving_pods(rendered):
        flags = vllm_flags(pod.vllm)
        ranks = (
            int(flags.get("--tensor-parallel-size", 1))
            * int(flags.get("--pipeline-parallel-size", 1))
            * int(flags.get("--data-parallel-size", 1))
        )
        # A multi-node engine spreads its ranks over the group's pods (--nnodes).
        assert (
            int(pod.vllm["resources"]["limits"]["nvidia.com/gpu"]) * int(flags.get("--nnodes", 1))
            == ranks
        )


def test_both_containers_read_the_served_model_directory_from_one_read_only_volume(
    rendered: Rendered, monkeypatch: pytest.MonkeyPatch
) -> None:
    for pod in serving_pods(rendered):
        served = vllm_flags(pod.vllm)["--model"]
        model = sidecar_settings(rendered, pod, monkeypatch).model
        for container in (pod.vllm, pod.sidecar):
            mounts = [
                m
                for m in container["volumeMounts"]
                if model == m["mountPath"] or model.startswith(m["mountPath"].rstrip("/") + "/")
            ]
            assert len(mounts) == 1, f"{container['name']} does not mount {model}"
            assert mounts[0]["readOnly"] is True
            assert mounts[0]["name"] == "models"
        assert served == model


def test_pods_turn_off_service_links(rendered: Rendered) -> None:
    for pod in serving_pods(rendered):
        assert pod.spec["enableServiceLinks"] is False, "SIDECAR_PORT=tcp://... would break it"


def test_sidecar_runs_as_non_root_with_a_read_only_root_filesystem(rendered: Rendered) -> None:
    for pod in serving_pods(rendered):
        context = pod.sidecar["securityContext"]
        assert context["runAsNonRoot"] is True
        assert context["readOnlyRootFilesystem"] is True
        assert context["allowPrivilegeEscalation"] is False
        assert isinstance(context["runAsUser"], int)
        assert context["runAsUser"] > 0


@pytest.mark.parametrize("render_id", MONITORED_RENDER_IDS)
def test_service_monitor_scrapes_the_sidecar_and_vllm_through_sidecar_ports(
    render_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    rendered = render_by_id(render_id)
    monitors = rendered.of_kind("ServiceMonitor")
    assert monitors, f"{rendered.name} has no ServiceMonitor"
    pod = serving_pods(rendered)[0]
    settings = sidecar_settings(rendered, pod, monkeypatch)
    for monitor in monitors:
        services = [
            s
            for s in rendered.of_kind("Service")
            if selects(monitor["spec"]["selector"]["matchLabels"], s["metadata"]["labels"])
        ]
        assert len(services) == 1, "the ServiceMonitor must select the one serving Service"
        ports = {p["name"]: p for p in services[0]["spec"]["ports"]}
        scraped = set()
        for endpoint in monitor["spec"]["endpoints"]:
            assert endpoint["path"] == "/metrics"
            port = ports[endpoint["port"]]
            scraped.add(resolve_port(pod.sidecar, port.get("targetPort", port["port"])))
        # The metrics port is the sidecar's own; vLLM's /metrics is passed through the traffic port.
        assert settings.metrics_port in scraped
        assert scraped <= {settings.metrics_port, settings.port}


@pytest.mark.parametrize("render_id", OWNED_VLLM_RENDER_IDS)
def test_vllm_probes_run_inside_its_container_and_allow_a_slow_start(render_id: str) -> None:
    for pod in serving_pods(render_by_id(render_id)):
        port = int(vllm_flags(pod.vllm).get("--port", VLLM_DEFAULT_PORT))
        startup = pod.vllm["startupProbe"]
        assert f"http://127.0.0.1:{port}/health" in " ".join(startup["exec"]["command"])
        assert startup["periodSeconds"] * startup["failureThreshold"] >= 15 * 60
        assert f"127.0.0.1:{port}/health" in " ".join(pod.vllm["livenessProbe"]["exec"]["command"])


@pytest.mark.parametrize("render_id", OWNED_VLLM_RENDER_IDS)
def test_vllm_outlives_the_sidecar_drain(render_id: str, monkeypatch: pytest.MonkeyPatch) -> None:
    rendered = render_by_id(render_id)
    for pod in serving_pods(rendered):
        drain = sidecar_settings(rendered, pod, monkeypatch).drain_seconds
        assert pod.vllm["lifecycle"]["preStop"]["exec"]["command"] == ["sleep", str(drain)]
        assert pod.spec["terminationGracePeriodSeconds"] > drain
