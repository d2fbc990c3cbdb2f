"""Prometheus helpers for the tests: finding its binaries, running promtool, and the names
and Grafana variables a dashboard or rule expression may use.

``make test`` installs Debian's ``prometheus`` package (prometheus and promtool). Outside CI a
missing binary skips the test with the reason; in CI (``CI`` set and not false) it fails, so
a broken install can never pass as skipped tests.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
from pathlib import Path

import promql_parser
import pytest
from prometheus_client import CollectorRegistry

from sidecar.observe.metrics import Metrics

INSTALL_HINT = "make test installs it (Debian package prometheus, --no-install-recommends)"


def in_ci() -> bool:
    """Whether this run is CI, where every tool must be present."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def require_binary(name: str) -> str:
    """The binary's path; skip (or fail in CI) when it is not installed."""
    path = shutil.which(name)
    if path is not None:
        return path
    message = f"{name} is not on PATH; {INSTALL_HINT}"
    if in_ci():
        pytest.fail(f"{message} (CI is set, so this is a failure, not a skip)")
    pytest.skip(message)


async def promtool(*args: str, stdin: bytes | None = None, cwd: Path | None = None) -> str:
    """Run promtool; fail the test with its output when it exits non-zero."""
    process = await asyncio.create_subprocess_exec(
        require_binary("promtool"),
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        cwd=cwd,
    )
    output, _ = await process.communicate(stdin)
    text = output.decode()
    if process.returncode != 0:
        pytest.fail(f"promtool {' '.join(args)} exited {process.returncode}:\n{text}")
    return text


# vLLM's series as vLLM 0.33's PrometheusStatLogger defines them, named as Prometheus stores them.
_VLLM_GAUGES = (
    "cache_config_info",
    "kv_cache_usage_perc",
    "num_requests_running",
    "num_requests_waiting",
    "num_requests_waiting_by_reason",
    "engine_sleep_state",
)
_VLLM_COUNTERS = (
    "num_preemptions",
    "prompt_tokens",
    "prompt_tokens_by_source",
    "prompt_tokens_cached",
    "prompt_tokens_cached_by_source",
    "generation_tokens",
    "request_success",
    "prefix_cache_queries",
    "prefix_cache_hits",
    "external_prefix_cache_queries",
    "external_prefix_cache_hits",
    "mm_cache_queries",
    "mm_cache_hits",
    "admission_rejections",
)
_VLLM_HISTOGRAMS = (
    "request_prompt_tokens", "request_generation_tokens", "iteration_tokens_total",
    "request_max_num_generation_tokens", "request_params_n", "request_params_max_tokens",
    "time_to_first_token_seconds", "inter_token_latency_seconds",
    "request_time_per_output_token_seconds", "e2e_request_latency_seconds",
    "request_queue_time_seconds", "request_inference_time_seconds",
    "request_prefill_time_seconds", "request_decode_time_seconds", "request_num_preemptions",
    "request_prefill_kv_computed_tokens",
)  # fmt: skip
VLLM_SERIES = frozenset(
    {f"vllm:{name}" for name in _VLLM_GAUGES}
    | {f"vllm:{name}_total" for name in _VLLM_COUNTERS}
    | {
        f"vllm:{name}{suffix}"
        for name in _VLLM_HISTOGRAMS
        for suffix in ("_bucket", "_sum", "_count")
    }
)

GRAFANA_DEFAULTS = {"namespace": ".*", "pod": ".*", "model": ".*"}


def sidecar_series() -> frozenset[str]:
    """Every series name the sidecar exposes (``_total``, ``_bucket``... included)."""
    registry = CollectorRegistry()
    Metrics(registry, model="m")
    return frozenset(sample.name for family in registry.collect() for sample in family.samples)


def substitute_grafana(
    expr: str, variables: dict[str, str] | None = None, rate_interval: str = "1m"
) -> str:
    """PromQL with Grafana's macros and dashboard variables replaced by values."""
    values = {**GRAFANA_DEFAULTS, **(variables or {})}
    expr = expr.replace("$__rate_interval", rate_interval).replace("$__interval", rate_interval)
    return re.sub(r"\$\{?(\w+)\}?", lambda match: values[match.group(1)], expr)


def selected_series(expr: str) -> list[str]:
    """The metric names an expression selects (parsed by promql-parser)."""
    names: list[str] = []

    def visit(node: object) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            assert node.name, f"selector without a metric name in {expr}"
            names.append(node.name)

    promql_parser.walk(promql_parser.parse(expr), pre_visit=visit)
    return names
