"""Tables of worked numbers in the docs, each recomputed from the code that produces it.

A table marked ``<!-- docs-test: table name=NAME -->`` is checked by the test registered
under NAME in ``CHECKED``; a marker without one, or a checked table no page marks, fails.
"""

from __future__ import annotations

import re

import pytest
import yaml

from sidecar.profiles import ProfileOverrides, load_profile
from sidecar.units import format_bytes
from tests.support.doc_blocks import DOCS, MARKER, ROOT, marked_tables, markers, pages

# docs/deploy/parallelism.md names the models as people do.
MODELS = {
    "Qwen2.5-VL-7B": "Qwen/Qwen2.5-VL-7B-Instruct",
    "Qwen2.5-VL-72B": "Qwen/Qwen2.5-VL-72B-Instruct",
    "Gemma 3 27B": "google/gemma-3-27b-it",
    "Qwen3-VL-30B-A3B": "Qwen/Qwen3-VL-30B-A3B-Instruct",
    "Llama 4 Maverick": "meta-llama/Llama-4-Maverick-17B-128E-Instruct",
}
CHECKED = {"pipeline-kv", "alerts", "chart-vllm-values"}
PARTITION = re.compile(r"^(?P<model>.+), partition `(?P<partition>[\d,]+)`$")
PER_TOKEN = re.compile(r"^(?P<figure>\d+ [KMG]iB)")
OUTSIDE_PARENTHESES = re.compile(r"; (?![^()]*\))")  # "20 KiB (10 layers; 56 KiB unsplit)"
UNSPLIT = re.compile(r"(?P<figure>\d+ [KMG]iB) unsplit")


def _marked_names() -> set[str]:
    names = set()
    for page in pages():
        for _, text in markers(page):
            match = MARKER.match(text)
            if match is not None and match["kind"] == "table":
                names.add(dict(o.split("=", 1) for o in match["options"].split()).get("name", ""))
    return names


def test_every_marked_table_is_checked_and_every_check_has_its_table() -> None:
    assert _marked_names() == CHECKED


def _pipeline_rows() -> list[object]:
    return [
        pytest.param(f"{where} {row[0]}", row, id=f"{row[0]} {row[1]}")
        for where, rows in marked_tables("pipeline-kv")
        for row in rows
    ]


@pytest.mark.parametrize(("where", "row"), _pipeline_rows())
def test_pipeline_kv_table_row_is_what_the_profile_computes(where: str, row: list[str]) -> None:
    name, splits, layers, per_token = row
    partition: tuple[int, ...] = ()
    if match := PARTITION.match(name):
        name, partition = match["model"], tuple(int(n) for n in match["partition"].split(","))
    model = MODELS[name]
    for split, stages, figure in zip(
        splits.split(", "), layers.split("; "), OUTSIDE_PARENTHESES.split(per_token), strict=True
    ):
        tp, pp = (int(n) for n in split.split(" x "))
        overrides = ProfileOverrides(
            tensor_parallel_size=tp, pipeline_parallel_size=pp, pipeline_layer_partition=partition
        )
        kv = load_profile(model, overrides).kv
        assert kv.stage_layers == tuple(int(n) for n in stages.split(" / ")), where
        shown = PER_TOKEN.match(figure)
        assert shown is not None, f"{where}: no figure in {figure!r}"
        assert format_bytes(kv.bytes_per_token) == shown["figure"], where
        if unsplit := UNSPLIT.search(figure):
            whole = load_profile(model, ProfileOverrides()).kv
            assert format_bytes(whole.bytes_per_token) == unsplit["figure"], where


def test_alerts_table_is_every_alert_of_the_rules_file_with_its_severity() -> None:
    rules = yaml.safe_load((ROOT / "dashboards/rules/vlm-sidecar.rules.yml").read_text())
    alerts = {
        rule["alert"]: rule["labels"]["severity"]
        for group in rules["groups"]
        for rule in group["rules"]
        if "alert" in rule
    }
    ((_, rows),) = marked_tables("alerts")
    shown = {row[0].strip("`"): row[-1] for row in rows}
    assert shown == alerts


def test_chart_values_table_is_every_setting_the_chart_derives_from_vllms_values() -> None:
    configuration = (DOCS / "configuration.md").read_text(encoding="utf-8")
    derived = {
        value: variable
        for variable, value in re.findall(
            r"^\| `(SIDECAR_[A-Z0-9_]+)` \| [^|]* \| `([^`]+)` \|", configuration, re.M
        )
        if value.startswith(("model.", "images.", "vllm."))
    }
    ((_, rows),) = marked_tables("chart-vllm-values")
    shown = {row[0].strip("`"): row[2].strip("`") for row in rows}
    missing = {value: derived[value] for value in derived.keys() - shown.keys()}
    assert missing == {}, f"add these rows to docs/deploy/helm.md's table: {missing}"
    assert shown == derived, "docs/deploy/helm.md's table must follow docs/configuration.md"
