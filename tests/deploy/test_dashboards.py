"""The Grafana dashboard: generated and up to date, valid against Grafana's own schema, every
query valid PromQL over metrics that exist, and every panel telling the reader what to do."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from jsonschema.exceptions import best_match

from dashboards import generate
from dashboards.grafana import GRID_COLUMNS, SCHEMA_VERSION
from sidecar.settings import Settings
from tests.support.paths import ROOT
from tests.support.prometheus_tools import (
    VLLM_SERIES,
    selected_series,
    sidecar_series,
    substitute_grafana,
)

SCHEMA = json.loads((ROOT / "dashboards/schema/dashboard.schema.json").read_text())
DASHBOARD: dict[str, Any] = json.loads((ROOT / generate.DASHBOARD).read_text())
PANELS = [panel for panel in DASHBOARD["panels"] if panel["type"] != "row"]
TARGETS = [(panel, target) for panel in PANELS for target in panel["targets"]]


def panel_ids(panels: list[dict[str, Any]]) -> list[str]:
    return [panel["title"] for panel in panels]


def target_ids() -> list[str]:
    return [f"{panel['title']}/{target['refId']}" for panel, target in TARGETS]


def all_exprs() -> list[str]:
    return [target["expr"] for _, target in TARGETS]


def test_generate_check_passes_for_the_committed_files() -> None:
    assert generate.main(["--check"]) == 0


def test_generate_check_names_missing_and_edited_copies(tmp_path: Path) -> None:
    assert set(generate.stale(tmp_path)) == set(generate.artefacts())
    generate.write(tmp_path)
    assert generate.stale(tmp_path) == []
    copy = Path("helm/vlm-sidecar/files/dashboards/vlm-sidecar.json")
    (tmp_path / copy).write_text("{}\n")
    assert generate.stale(tmp_path) == [copy]


def test_generate_writes_identical_copies_for_helm_and_kustomize() -> None:
    for copy, source in generate.COPIES.items():
        assert (ROOT / copy).read_bytes() == (ROOT / source).read_bytes(), copy


def test_dashboard_validates_against_grafana_dashboard_schema() -> None:
    error = best_match(jsonschema.Draft7Validator(SCHEMA).iter_errors(DASHBOARD))
    assert error is None, f"{error.json_path}: {error.message}"


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("graphTooltip",), 7),
        (("panels", 1, "gridPos", "w"), "12"),
        (("panels", 1, "gridPoss"), {}),
        (("templating", "list", 1, "type"), "dropdown"),
    ],
    ids=["bad-enum", "wrong-type", "unknown-panel-key", "unknown-variable-type"],
)
def test_dashboard_schema_rejects_what_grafana_would_reject(
    path: tuple[str | int, ...], value: object
) -> None:
    broken = json.loads(json.dumps(DASHBOARD))
    node = broken
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    assert best_match(jsonschema.Draft7Validator(SCHEMA).iter_errors(broken)) is not None


def test_dashboard_is_at_the_current_grafana_schema_version() -> None:
    assert DASHBOARD["schemaVersion"] == SCHEMA_VERSION == 42


def test_dashboard_has_datasource_namespace_pod_and_model_variables() -> None:
    variables = {v["name"]: v for v in DASHBOARD["templating"]["list"]}
    assert list(variables) == ["datasource", "namespace", "pod", "model"]
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    for name in ("namespace", "pod", "model"):
        assert variables[name]["query"].startswith("label_values(vlm_sidecar_model_info")
        assert variables[name]["query"].endswith(f", {name})")
        assert variables[name]["allValue"] == ".*"


def test_every_panel_and_target_uses_the_datasource_variable() -> None:
    for panel, target in TARGETS:
        assert panel["datasource"]["uid"] == target["datasource"]["uid"] == "${datasource}"


@pytest.mark.parametrize("panel", PANELS, ids=panel_ids(PANELS))
def test_panel_description_says_what_to_do_when_it_looks_bad(panel: dict[str, Any]) -> None:
    shows, _, action = panel["description"].partition("\n\nWhen it looks bad: ")
    assert len(shows) > 30
    assert len(action) > 30, "the description must say what to do when the panel looks bad"


@pytest.mark.parametrize(("panel", "target"), TARGETS, ids=target_ids())
def test_panel_query_is_valid_promql_over_known_metrics(
    panel: dict[str, Any], target: dict[str, Any]
) -> None:
    names = selected_series(substitute_grafana(target["expr"]))
    assert names
    unknown = set(names) - sidecar_series() - VLLM_SERIES
    assert not unknown, f"{panel['title']} selects metrics nobody exports: {sorted(unknown)}"


@pytest.mark.parametrize(
    "series",
    [
        "vllm:kv_cache_usage_perc",
        "vllm:num_requests_waiting",
        "vllm:num_preemptions_total",
        "vllm:request_prompt_tokens_bucket",
    ],
)
def test_dashboard_puts_vllm_metrics_beside_the_predictions(series: str) -> None:
    row = next(i for i, p in enumerate(DASHBOARD["panels"]) if p["title"].startswith("vLLM"))
    later = [p for p in DASHBOARD["panels"][row:] if p["type"] != "row"]
    exprs = [substitute_grafana(target["expr"]) for p in later for target in p["targets"]]
    assert any(series in selected_series(expr) for expr in exprs)


@pytest.mark.parametrize(
    ("histogram", "kind"),
    [
        ("vlm_sidecar_request_visual_tokens", "timeseries"),
        ("vlm_sidecar_request_visual_tokens", "heatmap"),
        ("vlm_sidecar_request_kv_bytes", "timeseries"),
        ("vlm_sidecar_request_kv_bytes", "heatmap"),
        ("vlm_sidecar_image_pixels", "heatmap"),
        ("vlm_sidecar_image_tokens", "heatmap"),
        ("vlm_sidecar_request_images", "timeseries"),
        ("vlm_sidecar_queue_wait_seconds", "timeseries"),
        ("vlm_sidecar_downscale_seconds", "timeseries"),
        ("vlm_sidecar_prompt_tokens_prediction_error", "timeseries"),
        ("vlm_sidecar_overhead_seconds", "timeseries"),
        ("vlm_sidecar_upstream_first_byte_seconds", "timeseries"),
    ],
    ids=lambda value: value.removeprefix("vlm_sidecar_"),
)
def test_dashboard_shows_the_histogram_as_quantiles_or_heatmap(histogram: str, kind: str) -> None:
    bucket = f"{histogram}_bucket"
    panels = [p for p in PANELS if p["type"] == kind]
    shown = [p for p in panels if any(bucket in t["expr"] for t in p["targets"])]
    assert shown, f"no {kind} panel shows {histogram}"
    if kind == "timeseries":
        assert any("histogram_quantile" in t["expr"] for p in shown for t in p["targets"])
    else:
        assert all(t.get("format") == "heatmap" for p in shown for t in p["targets"])


@pytest.mark.parametrize(
    "fragment",
    [
        "sum by (decision) (rate(vlm_sidecar_requests_total",
        'decision="reject"',
        "vlm_sidecar_inflight_kv_bytes",
        "vlm_sidecar_kv_budget_bytes",
        "vlm_sidecar_queue_depth",
        "vlm_sidecar_downscaled_images_total",
        "vlm_sidecar_observed_prompt_tokens_sum",
        "vlm_sidecar_usage_predicted_prompt_tokens_total",
        "vlm_sidecar_upstream_errors_total",
    ],
)
def test_dashboard_queries_the_issue_asks_for(fragment: str) -> None:
    assert any(fragment in expr for expr in all_exprs())


def test_dashboard_panels_have_unique_ids_and_do_not_overlap() -> None:
    ids = [panel["id"] for panel in DASHBOARD["panels"]]
    assert len(ids) == len(set(ids))
    cells: set[tuple[int, int]] = set()
    for panel in DASHBOARD["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] >= 0, panel["title"]
        assert grid["x"] + grid["w"] <= GRID_COLUMNS, panel["title"]
        area = {
            (x, y)
            for x in range(grid["x"], grid["x"] + grid["w"])
            for y in range(grid["y"], grid["y"] + grid["h"])
        }
        assert not area & cells, f"{panel['title']} overlaps another panel"
        cells |= area


def test_descriptions_name_only_settings_that_exist() -> None:
    text = json.dumps(DASHBOARD) + (ROOT / generate.RULES).read_text()
    named = set(re.findall(r"SIDECAR_([A-Z0-9_]+)", text))
    assert named
    assert sorted(name for name in named if name.lower() not in Settings.model_fields) == []
