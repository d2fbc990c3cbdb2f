"""The Prometheus rules: promtool accepts them and their unit tests pass, every alert is tested
firing and quiet, and the PrometheusRule carries exactly the plain file's groups."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from dashboards import generate, rules
from tests.support.paths import ROOT
from tests.support.prometheus_tools import promtool, selected_series, sidecar_series

RULES_FILE = ROOT / generate.RULES
RULES_DOC: dict[str, Any] = yaml.safe_load(RULES_FILE.read_text())
TESTS_DOC: dict[str, Any] = yaml.safe_load((ROOT / generate.RULES_TEST).read_text())
ALERTS = [rule for group in RULES_DOC["groups"] for rule in group["rules"] if "alert" in rule]
RECORDS = [rule for group in RULES_DOC["groups"] for rule in group["rules"] if "record" in rule]
ALERT_NAMES = [alert["alert"] for alert in ALERTS]


async def test_rules_pass_promtool_check_rules() -> None:
    output = await promtool("check", "rules", str(RULES_FILE))
    assert f"SUCCESS: {len(ALERTS) + len(RECORDS)} rules found" in output


async def test_prometheus_rule_groups_pass_promtool_check_rules(tmp_path: Path) -> None:
    manifest = yaml.safe_load((ROOT / generate.PROMETHEUS_RULE).read_text())
    assert manifest["kind"] == "PrometheusRule"
    assert manifest["spec"] == RULES_DOC
    spec = tmp_path / "spec.rules.yml"
    spec.write_text(yaml.safe_dump(manifest["spec"]))
    await promtool("check", "rules", str(spec))


async def test_alert_unit_tests_pass_promtool_test_rules() -> None:
    output = await promtool("test", "rules", generate.RULES_TEST.name, cwd=RULES_FILE.parent)
    assert "SUCCESS" in output


@pytest.mark.parametrize(
    "name",
    [
        "VlmSidecarHighRejectionRatio",
        "VlmSidecarKvBudgetSaturated",
        "VlmSidecarQueueWaitHigh",
        "VlmSidecarPromptTokensUnderPredicted",
        "VlmSidecarPromptTokensOverPredicted",
        "VlmSidecarUpstreamErrors",
    ],
)
def test_alert_the_issue_asks_for_exists(name: str) -> None:
    assert name in ALERT_NAMES


@pytest.mark.parametrize("alert", ALERTS, ids=ALERT_NAMES)
def test_alert_has_a_firing_and_a_quiet_unit_test(alert: dict[str, Any]) -> None:
    cases = [
        case
        for group in TESTS_DOC["tests"]
        for case in group.get("alert_rule_test", [])
        if case["alertname"] == alert["alert"]
    ]
    assert any(case["exp_alerts"] for case in cases), "no test sees it fire"
    assert any(not case["exp_alerts"] for case in cases), "no test sees it stay quiet"


@pytest.mark.parametrize("alert", ALERTS, ids=ALERT_NAMES)
def test_alert_has_severity_for_summary_and_description(alert: dict[str, Any]) -> None:
    assert alert["labels"]["severity"] in {"info", "warning", "critical"}
    assert alert["for"]
    assert "{{ $value" in alert["annotations"]["summary"]
    assert len(alert["annotations"]["description"]) > 100


@pytest.mark.parametrize("alert", rules.ALERTS, ids=[a.name for a in rules.ALERTS])
def test_alert_signal_is_the_left_side_of_its_expression(alert: rules.Alert) -> None:
    assert alert.expr.startswith(alert.signal)
    assert alert.op in {">", "<"}


def test_rules_select_only_sidecar_metrics_and_recorded_series() -> None:
    known = sidecar_series() | {record["record"] for record in RECORDS}
    for rule in (*RECORDS, *ALERTS):
        unknown = set(selected_series(rule["expr"])) - known
        assert not unknown, f"{rule.get('alert') or rule['record']}: {sorted(unknown)}"


def test_recording_rule_names_follow_level_metric_operations() -> None:
    for record in RECORDS:
        level, metric, operations = record["record"].split(":")
        assert level.startswith("namespace_")
        assert metric.startswith("vlm_sidecar_")
        assert operations
