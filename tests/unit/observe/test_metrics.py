"""observe.metrics: budgets read at scrape time, and series created on first use."""

from __future__ import annotations

from dataclasses import replace

from prometheus_client import CollectorRegistry

from sidecar.admission.budgets import Budgets
from sidecar.admission.decision import Decision, Reason
from sidecar.observe.metrics import Metrics


def test_metrics_budgets_are_read_at_scrape_time_and_zero_when_unlimited() -> None:
    registry = CollectorRegistry()
    metrics = Metrics(registry, model="m")
    budgets = Budgets(max_image_tokens=4096, kv_budget_bytes=2**30)
    metrics.watch_budgets(lambda: budgets, queue_timeout_seconds=30, max_queue_depth=8)

    def value(name: str) -> float | None:
        return registry.get_sample_value(name, {"model": "m"})

    assert value("vlm_sidecar_budget_max_image_tokens") == 4096
    assert value("vlm_sidecar_budget_max_image_pixels") == 0
    assert value("vlm_sidecar_kv_budget_bytes") == 2**30
    assert value("vlm_sidecar_queue_timeout_seconds") == 30
    assert value("vlm_sidecar_queue_max_depth") == 8
    budgets = replace(budgets, kv_budget_bytes=3 * 2**30, max_request_prompt_tokens=32_768)
    assert value("vlm_sidecar_kv_budget_bytes") == 3 * 2**30
    assert value("vlm_sidecar_budget_max_request_prompt_tokens") == 32_768


def test_metrics_create_the_series_of_an_unlisted_outcome_on_first_use() -> None:
    registry = CollectorRegistry()
    metrics = Metrics(registry, model="m")
    labels = {"model": "m", "route": "custom", "decision": "wait", "reason": "queue_full"}
    assert registry.get_sample_value("vlm_sidecar_requests_total", labels) is None
    series = metrics.for_route("custom")
    series.request(Decision.WAIT, Reason.QUEUE_FULL).inc()
    assert metrics.for_route("custom") is series
    assert registry.get_sample_value("vlm_sidecar_requests_total", labels) == 1
    metrics.image_counter("jpeg", "elsewhere").inc()
    metrics.upstream_error_counter("dns").inc()
    errors = {"model": "m", "kind": "dns"}
    assert registry.get_sample_value("vlm_sidecar_upstream_errors_total", errors) == 1
