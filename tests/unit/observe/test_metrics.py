"""observe.metrics: budgets read at scrape time, and series created on first use."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from prometheus_client import CollectorRegistry, Histogram

from sidecar.admission.budgets import Budgets
from sidecar.admission.decision import Decision, Reason
from sidecar.admission.discipline import PriorityPolicy, QueueClass
from sidecar.admission.ledger import KvLedger
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


async def test_metrics_bands_exist_at_zero_and_read_the_ledger_per_band_at_scrape_time() -> None:
    registry = CollectorRegistry()
    metrics = Metrics(registry, model="m")
    policy = PriorityPolicy(objective_priorities={"chat": 10, "batch": -1})
    ledger = KvLedger(10)
    metrics.watch_bands(ledger, policy)

    def value(name: str, band: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, {"model": "m", "band": band, **labels})

    for band in ("10", "0", "-1", "other"):
        assert value("vlm_sidecar_band_queue_depth", band) == 0
        assert value("vlm_sidecar_band_refusals_total", band, reason="shed") == 0
        assert value("vlm_sidecar_band_queue_wait_seconds_count", band) == 0
    holder = await ledger.acquire(10, timeout_seconds=5)
    tasks = [
        asyncio.create_task(ledger.acquire(1, 5, QueueClass(priority, tenant=tenant)))
        for priority, tenant in ((10, "a"), (10, "b"), (0, "a"), (-7, ""), (3, ""))
    ]
    await asyncio.sleep(0.01)
    assert value("vlm_sidecar_band_queue_depth", "10") == 2
    assert value("vlm_sidecar_band_queue_depth", "0") == 1
    assert value("vlm_sidecar_band_queue_depth", "other") == 2  # -7 and 3 add up
    assert value("vlm_sidecar_band_oldest_wait_seconds", "10") > 0  # type: ignore[operator]
    assert registry.get_sample_value("vlm_sidecar_fairness_tenants_waiting", {"model": "m"}) == 5
    holder.release()
    for reservation in await asyncio.gather(*tasks):
        reservation.release()
    assert value("vlm_sidecar_band_queue_depth", "10") == 0
    assert value("vlm_sidecar_band_oldest_wait_seconds", "10") == 0


def test_every_declared_metric_labelled_by_model_alone_exists_at_zero_from_start_up() -> None:
    registry = CollectorRegistry()
    Metrics(registry, model="m")
    model_only = [spec for spec in Metrics.specs() if spec.labels == ("model",)]
    assert len(model_only) > 20
    for spec in model_only:
        sample = "vlm_sidecar_" + spec.name + ("_count" if spec.kind is Histogram else "")
        assert registry.get_sample_value(sample, {"model": "m"}) == 0, spec.name


def test_every_route_series_field_is_filled_by_the_metric_declared_for_it() -> None:
    registry = CollectorRegistry()
    series = Metrics(registry, model="m").for_route("chat")
    series.kv_bytes.observe(4096)
    series.request_duration_seconds.observe(0.5)
    labels = {"model": "m", "route": "chat"}
    assert registry.get_sample_value("vlm_sidecar_request_kv_bytes_sum", labels) == 4096
    assert registry.get_sample_value("vlm_sidecar_request_duration_seconds_sum", labels) == 0.5
