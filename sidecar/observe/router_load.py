"""The load an endpoint picker should see for this pod: vLLM's own, plus what waits in front.

vLLM's ``vllm:num_requests_waiting`` and ``vllm:kv_cache_usage_perc`` cannot see the requests
the sidecar holds (waiting for KV budget, or for vLLM's saturation to clear), nor the KV those
it has forwarded are about to take. A picker scoring pods on vLLM's numbers alone keeps sending
work to a pod whose sidecar is queueing. These two gauges are the router contract:

- ``vlm_sidecar_effective_requests_waiting``: vLLM's waiting requests at the last poll plus
  the sidecar's own waiters (the KV-budget queue and the saturation hold);
- ``vlm_sidecar_effective_kv_usage``, in [0, 1]: the larger of vLLM's KV usage at the last
  poll and the predicted in-flight KV over the KV budget.

They carry ``model`` (the sidecar's label) and ``model_name`` (vLLM's served model name once
read, as on vLLM's own series), one series each, so a picker's metric specification
(``vlm_sidecar_effective_requests_waiting`` or ``...{model_name="..."}``) matches exactly one.
The serving shell exports them on the metrics port and appends them, and only them, to vLLM's
exposition on the traffic port's ``/metrics``, where a picker scrapes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics
from prometheus_client.registry import Collector

from sidecar.engine import EngineFacts
from sidecar.observe.labels import PREFIX

REQUESTS_WAITING = PREFIX + "effective_requests_waiting"
KV_USAGE = PREFIX + "effective_kv_usage"
LABELS = ("model", "model_name")


@dataclass(frozen=True, slots=True)
class RouterLoad:
    """One pod's load as a picker should score it."""

    requests_waiting: float
    kv_usage: float


def effective_load(
    facts: EngineFacts | None,
    *,
    sidecar_waiting: int,
    inflight_kv_bytes: int,
    kv_budget_bytes: int,
) -> RouterLoad:
    """vLLM's waiting plus the sidecar's; the larger of vLLM's KV usage and the budget used."""
    engine_waiting = (facts.num_requests_waiting or 0.0) if facts is not None else 0.0
    engine_usage = (facts.kv_cache_usage_perc or 0.0) if facts is not None else 0.0
    budget_used = inflight_kv_bytes / kv_budget_bytes if kv_budget_bytes > 0 else 0.0
    usage = min(1.0, max(0.0, engine_usage, budget_used))
    return RouterLoad(requests_waiting=engine_waiting + sidecar_waiting, kv_usage=usage)


class RouterLoadCollector(Collector):
    """Yields the two gauges from ``read()`` at every scrape; ``model_name`` from ``name()``."""

    def __init__(
        self, model: str, read: Callable[[], RouterLoad], name: Callable[[], str | None]
    ) -> None:
        self._model = model
        self._read = read
        self._name = name

    def collect(self) -> Iterator[Metric]:
        load = self._read()
        labels = [self._model, self._name() or self._model]
        waiting = GaugeMetricFamily(
            REQUESTS_WAITING,
            "Requests waiting for this pod: vLLM's num_requests_waiting at the last poll plus "
            "the sidecar's own queue (KV budget and saturation hold).",
            labels=LABELS,
        )
        waiting.add_metric(labels, load.requests_waiting)
        yield waiting
        usage = GaugeMetricFamily(
            KV_USAGE,
            "KV cache used, 0 to 1: the larger of vLLM's kv_cache_usage_perc at the last poll "
            "and the predicted in-flight KV over the KV budget.",
            labels=LABELS,
        )
        usage.add_metric(labels, load.kv_usage)
        yield usage


class RouterLoadExposition:
    """The two gauges alone, rendered for appending to vLLM's ``/metrics``."""

    def __init__(self, collector: RouterLoadCollector) -> None:
        self._registry = CollectorRegistry(auto_describe=False)
        self._registry.register(collector)

    def text(self) -> bytes:
        """Prometheus text format 0.0.4."""
        return generate_latest(self._registry)

    def openmetrics(self) -> bytes:
        """OpenMetrics families, without the closing ``# EOF``."""
        text: bytes = generate_openmetrics(self._registry)  # type: ignore[no-untyped-call]  # prometheus_client's openmetrics module is untyped
        return text.removesuffix(b"# EOF\n")


def append_to_exposition(upstream: bytes, content_type: str, load: RouterLoadExposition) -> bytes:
    """vLLM's exposition with the two gauges added, its own bytes unchanged.

    OpenMetrics must end with ``# EOF``, so the gauges go in before it; the text format takes
    them at the end (after a newline if vLLM's text lacks its last one).
    """
    if content_type.startswith("application/openmetrics-text"):
        body, eof, rest = upstream.rpartition(b"# EOF")
        if eof and not rest.strip():
            return body + load.openmetrics() + eof + rest
        return upstream  # not a complete OpenMetrics exposition: leave it as vLLM sent it
    separator = b"" if not upstream or upstream.endswith(b"\n") else b"\n"
    return upstream + separator + load.text()
