"""The stand-in's ``/metrics``: a few vLLM series, named and labelled as vLLM names them (§4).

A custom collector reads the live config and counters at every scrape, so a changed pool size or
load shows up at once and no ``_created`` series appear.  ``vllm:cache_config_info`` carries
``engine`` but no ``model_name``; every other series carries both.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from sidecar.standin.config import StandinConfig

ENGINE = "0"
_LABELS = ["model_name", "engine"]


@dataclass
class EngineCounters:
    """What the stand-in has served so far."""

    in_flight: int = 0
    preemptions: int = 0
    prompt_tokens: Counter[int] = field(default_factory=Counter)
    """Requests seen per prompt length, so buckets can follow a changed ``max_model_len``."""
    generation_tokens: Counter[int] = field(default_factory=Counter)

    def observe(self, prompt_tokens: int, generation_tokens: int) -> None:
        self.prompt_tokens[prompt_tokens] += 1
        self.generation_tokens[generation_tokens] += 1


def build_1_2_5_buckets(max_value: int) -> list[int]:
    """vLLM's token-count buckets: 1, 2, 5, 10, 20, 50, ... up to ``max_value``."""
    buckets: list[int] = []
    exponent = 0
    while True:
        for mantissa in (1, 2, 5):
            value = mantissa * 10**exponent
            if value > max_value:
                return buckets
            buckets.append(value)
        exponent += 1


def cache_config_labels(config: StandinConfig) -> dict[str, str]:
    """The labels of ``vllm:cache_config_info``: ``str()`` of each field, as vLLM does."""
    size_tokens = config.num_gpu_blocks * config.block_size
    values: dict[str, object] = {
        "block_size": config.block_size,
        "cache_dtype": config.cache_dtype,
        "enable_prefix_caching": config.enable_prefix_caching,
        "gpu_memory_utilization": config.gpu_memory_utilization,
        "kv_cache_max_concurrency": size_tokens / config.max_model_len,
        "kv_cache_memory_bytes": None,
        "kv_cache_size_tokens": size_tokens,
        "num_cpu_blocks": None,
        "num_gpu_blocks": config.num_gpu_blocks,
        "num_gpu_blocks_override": None,
        "prefix_caching_hash_algo": "sha256",
        "sliding_window": None,
        "engine": ENGINE,
    }
    return {key: str(value) for key, value in values.items()}


def _gauge(name: str, documentation: str, labels: list[str], value: float) -> Metric:
    family = GaugeMetricFamily(name, documentation, labels=_LABELS)
    family.add_metric(labels, value)
    return family


def _counter(name: str, documentation: str, labels: list[str], value: float) -> Metric:
    family = CounterMetricFamily(name, documentation, labels=_LABELS)
    family.add_metric(labels, value)
    return family


def _histogram(
    name: str, documentation: str, labels: list[str], seen: Counter[int], max_value: int
) -> Metric:
    buckets = [
        (f"{float(bound)}", float(sum(n for value, n in seen.items() if value <= bound)))
        for bound in build_1_2_5_buckets(max_value)
    ]
    buckets.append(("+Inf", float(seen.total())))
    total = float(sum(value * n for value, n in seen.items()))
    family = HistogramMetricFamily(name, documentation, labels=_LABELS)
    family.add_metric(labels, buckets, total)
    return family


class StandinCollector:
    """Yields the stand-in's series from the current config and counters."""

    def __init__(self, config: Callable[[], StandinConfig], counters: EngineCounters) -> None:
        self._config = config
        self._counters = counters

    def collect(self) -> Iterator[Metric]:
        config, counters = self._config(), self._counters
        info = cache_config_labels(config)
        cache = GaugeMetricFamily(
            "vllm:cache_config_info", "Information of the LLMEngine CacheConfig", labels=list(info)
        )
        cache.add_metric(list(info.values()), 1.0)
        yield cache
        labels = [config.served_model_name, ENGINE]
        usage_doc = "KV-cache usage. 1 means 100 percent usage."
        yield _gauge("vllm:kv_cache_usage_perc", usage_doc, labels, config.kv_cache_usage_perc)
        running = config.num_requests_running + counters.in_flight
        yield _gauge("vllm:num_requests_running", "Requests in execution.", labels, running)
        waiting = config.num_requests_waiting
        yield _gauge("vllm:num_requests_waiting", "Requests waiting.", labels, waiting)
        preempted = counters.preemptions
        yield _counter("vllm:num_preemptions", "Cumulative preemptions.", labels, preempted)
        prompt = float(sum(value * n for value, n in counters.prompt_tokens.items()))
        yield _counter("vllm:prompt_tokens", "Prefill tokens processed.", labels, prompt)
        generated = float(sum(value * n for value, n in counters.generation_tokens.items()))
        yield _counter("vllm:generation_tokens", "Generation tokens processed.", labels, generated)
        for name, seen in (
            ("vllm:request_prompt_tokens", counters.prompt_tokens),
            ("vllm:request_generation_tokens", counters.generation_tokens),
        ):
            doc = "Number of tokens per request."
            yield _histogram(name, doc, labels, seen, config.max_model_len)


def make_registry(
    config: Callable[[], StandinConfig], counters: EngineCounters
) -> CollectorRegistry:
    """A private registry holding only the stand-in's collector."""
    registry = CollectorRegistry()
    registry.register(StandinCollector(config, counters))
    return registry
