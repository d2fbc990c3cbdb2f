"""What the sidecar learns from the running engine, against what vLLM itself reports.

The ``auto`` KV budget must be vLLM's KV pool in bytes, the block size vLLM's own (128 on
CPU, not the sidecar's old default of 16), the context vLLM's ``max_model_len``; and every
POST route vLLM's ``/openapi.json`` lists must be one the sidecar's route table knows.
"""

from __future__ import annotations

import json

from prometheus_client.parser import text_string_to_metric_families

from sidecar.routes import PathKind, match_path
from tests.real_vllm.client import get_text
from tests.real_vllm.conftest import Stack
from tests.real_vllm.engine import VllmServer


def _samples(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return out


def _cache_config(engine: VllmServer) -> dict[str, str]:
    ((labels, _),) = _samples(get_text(engine.base_url + "/metrics"))["vllm:cache_config_info"]
    return labels


def test_auto_kv_budget_and_block_size_are_vllms(stack: Stack) -> None:
    cache = _cache_config(stack.vllm)
    ours = {
        name: samples[0][1]
        for name, samples in _samples(get_text(stack.metrics_url)).items()
        if name.startswith("vlm_sidecar_") and len(samples) == 1
    }
    block_size, blocks = int(cache["block_size"]), int(cache["num_gpu_blocks"])
    assert ours["vlm_sidecar_kv_block_size_tokens"] == block_size == 128
    assert ours["vlm_sidecar_engine_kv_capacity_tokens"] == blocks * block_size
    assert ours["vlm_sidecar_engine_kv_capacity_tokens"] == int(cache["kv_cache_size_tokens"])
    # vLLM 0.32 reports the pool's bytes (VLLM_CPU_KVCACHE_SPACE=1: 1 GiB) beside its tokens.
    assert ours["vlm_sidecar_kv_budget_bytes"] == int(cache["kv_cache_memory_bytes"])
    per_token = ours["vlm_sidecar_model_kv_bytes_per_token"]
    assert ours["vlm_sidecar_kv_budget_bytes"] == blocks * block_size * per_token
    models = json.loads(get_text(stack.vllm.base_url + "/v1/models"))
    assert ours["vlm_sidecar_engine_max_model_len"] == models["data"][0]["max_model_len"]


def test_every_post_route_vllm_lists_is_in_the_route_table(stack: Stack) -> None:
    spec = json.loads(get_text(stack.vllm.base_url + "/openapi.json"))
    posts = sorted(path for path, operations in spec["paths"].items() if "post" in operations)
    assert "/v1/chat/completions" in posts
    assert "/v1/chat/completions/render" in posts  # --enable-scale-out lists them
    unknown = [path for path in posts if match_path(path) is PathKind.UNKNOWN]
    assert not unknown, f"vLLM serves POST routes the sidecar does not know: {unknown}"
