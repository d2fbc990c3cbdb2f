"""standin.metrics: vLLM's ``/metrics`` as the stand-in serves it, scraped over HTTP."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from sidecar.standin import StandinServer
from tests.support.proxy_helpers import CHAT, fault, post_json
from tests.support.standin_helpers import BODIES, CONFIG, PROMPT_TOKENS
from tests.support.waiting import eventually


async def scrape(session: aiohttp.ClientSession, server: StandinServer) -> dict[str, Any]:
    """Every sample on ``/metrics``, keyed by name and sorted labels."""
    async with session.get(f"{server.url}/metrics") as response:
        text = await response.text()
    return {
        sample.name + str(sorted(sample.labels.items())): sample
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def scraped_value(samples: dict[str, Any], name: str, **labels: str) -> float:
    labels = {"engine": "0", "model_name": CONFIG.served_model_name} | labels
    value: float = samples[name + str(sorted(labels.items()))].value
    return value


async def test_standin_metrics_show_the_cache_config_without_a_model_name(
    standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    samples = await scrape(session, standin)
    (info,) = [s for s in samples.values() if s.name == "vllm:cache_config_info"]
    assert info.value == 1.0
    assert "model_name" not in info.labels
    assert {
        key: info.labels[key]
        for key in (
            "block_size",
            "num_gpu_blocks",
            "cache_dtype",
            "gpu_memory_utilization",
            "enable_prefix_caching",
            "engine",
        )
    } == {
        "block_size": "16",
        "num_gpu_blocks": "8192",
        "cache_dtype": "auto",
        "gpu_memory_utilization": "0.92",
        "enable_prefix_caching": "True",
        "engine": "0",
    }


async def test_standin_metrics_reflect_changes_made_at_run_time(
    standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    standin.set_cache_config(num_gpu_blocks=1000, block_size=32)
    standin.set_load(kv_cache_usage_perc=0.75, num_requests_waiting=3, num_requests_running=2)
    standin.add_preemptions(5)
    samples = await scrape(session, standin)
    (info,) = [s for s in samples.values() if s.name == "vllm:cache_config_info"]
    assert (info.labels["num_gpu_blocks"], info.labels["block_size"]) == ("1000", "32")
    assert info.labels["kv_cache_size_tokens"] == "32000"
    assert scraped_value(samples, "vllm:kv_cache_usage_perc") == 0.75
    assert scraped_value(samples, "vllm:num_requests_waiting") == 3
    assert scraped_value(samples, "vllm:num_requests_running") == 2
    assert scraped_value(samples, "vllm:num_preemptions_total") == 5


async def test_standin_metrics_histogram_counts_the_prompt_tokens_it_served(
    standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    for _ in range(3):
        await post_json(session, standin.url + CHAT, BODIES[CHAT])
    samples = await scrape(session, standin)
    name = "vllm:request_prompt_tokens"
    assert scraped_value(samples, f"{name}_count") == 3
    assert scraped_value(samples, f"{name}_sum") == 3 * PROMPT_TOKENS
    assert scraped_value(samples, f"{name}_bucket", le="200.0") == 0
    assert scraped_value(samples, f"{name}_bucket", le="500.0") == 3
    assert scraped_value(samples, f"{name}_bucket", le="+Inf") == 3
    assert f"{name}_bucket" + str(sorted({"engine": "0", "le": "5000.0"}.items())) not in samples


async def test_standin_metrics_count_requests_in_flight_as_running(
    standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    hung = asyncio.create_task(
        post_json(session, standin.url + CHAT, BODIES[CHAT], headers=fault("hang"))
    )
    await eventually(lambda: standin.counters.in_flight == 1, timeout_seconds=1)
    samples = await scrape(session, standin)
    hung.cancel()
    with pytest.raises(asyncio.CancelledError):
        await hung
    assert scraped_value(samples, "vllm:num_requests_running") == 1
