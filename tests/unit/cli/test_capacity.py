"""cli.capacity: the capacity worksheet, reproducing every worked number of the design brief.

The brief's other numbers live with their modules: image tokens in ``unit/vision/test_qwen.py``
and ``unit/vision/test_fixed.py``, KV bytes in ``unit/profiles/test_kv_geometry.py``, weights in
``unit/profiles/test_profiles.py``.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from sidecar.cli.capacity import Hardware, Workload, make_plan
from sidecar.profiles import load_profile
from sidecar.units import format_bytes
from tests.support.hybrid_models import QWEN3_5_27B, hybrid_geometry

QWEN25_VL_7B = "Qwen/Qwen2.5-VL-7B-Instruct"
QWEN25_VL_72B = "Qwen/Qwen2.5-VL-72B-Instruct"


@pytest.mark.parametrize(
    ("label", "tokens_per_request", "in_flight_tokens", "kv_in_flight"),
    [
        ("phones uncapped", 63_016, 2_016_512, "107.7 GiB"),
        ("phones capped", 5_728, 183_296, "9.8 GiB"),
    ],
    ids=["uncapped", "capped"],
)
def test_worksheet_reproduces_the_brief_for_four_phone_photos(
    label: str, tokens_per_request: int, in_flight_tokens: int, kv_in_flight: str
) -> None:
    workload = Workload(4, 4032, 3024, text_tokens=300, output_tokens=500, concurrency=32)
    plan = make_plan(load_profile(QWEN25_VL_7B), [("phones", workload)], Hardware(80))
    row = next(r for r in plan.rows if r.label == label)
    assert row.tokens_per_request == tokens_per_request
    assert row.kv_tokens_in_flight == in_flight_tokens
    assert format_bytes(row.kv_bytes_in_flight) == kv_in_flight


def test_worksheet_warns_past_the_validated_context_only_when_uncapped() -> None:
    workload = Workload(4, 4032, 3024, text_tokens=300, output_tokens=500, concurrency=32)
    plan = make_plan(load_profile(QWEN25_VL_7B), [("phones", workload)], Hardware(80))
    uncapped, capped = plan.rows
    assert any("32,768" in w for w in uncapped.warnings)
    assert capped.warnings == ()


def test_kv_pool_is_5_1_gib_for_qwen25_vl_7b_on_a_24_gib_gpu() -> None:
    workload = Workload(1, 1920, 1080, text_tokens=300, output_tokens=500, concurrency=1)
    plan = make_plan(load_profile(QWEN25_VL_7B), [("chat", workload)], Hardware(24))
    assert format_bytes(plan.weights_bytes_per_gpu) == "15.4 GiB"
    assert format_bytes(plan.kv_pool_bytes_per_gpu) == "5.1 GiB"


def test_encoder_cache_is_112_mib_for_uncapped_qwen25_vl_7b() -> None:
    workload = Workload(1, 1920, 1080, text_tokens=300, output_tokens=500, concurrency=1)
    plan = make_plan(load_profile(QWEN25_VL_7B), [("chat", workload)], Hardware(24))
    assert plan.encoder_cache_bytes == 16_384 * 3_584 * 2
    assert format_bytes(plan.encoder_cache_bytes) == "112 MiB"


def test_72b_on_two_80_gib_gpus_fits_about_two_uncapped_4k_requests() -> None:
    workload = Workload(1, 3840, 2160, text_tokens=300, output_tokens=500, concurrency=1)
    plan = make_plan(load_profile(QWEN25_VL_72B), [("4k", workload)], Hardware(80, gpu_count=2))
    assert format_bytes(plan.weights_bytes_per_gpu) == "68.4 GiB"
    assert plan.rows[0].max_concurrency == 2


def test_a_hybrid_plan_counts_whole_blocks_and_the_recurrent_groups() -> None:
    # Qwen3.5-27B's language model (54 GB of bf16 weights) under a Qwen-VL vision rule, on
    # one 141 GiB GPU: blocks of 784 tokens, 49 MiB each; a request of 8,192 tokens (one
    # 1024x1024 image, the rest text and output) holds 11 attention blocks and 2 per GDN group.
    profile = replace(load_profile("Qwen/Qwen2.5-VL-7B-Instruct"), kv=hybrid_geometry(QWEN3_5_27B))
    hardware = Hardware(gpu_memory_gib=141, weights_gib=50.3)
    image_tokens = profile.vision.image_tokens(1024, 1024).prompt_tokens
    workload = Workload(1, 1024, 1024, 8192 - 500 - image_tokens, 500, concurrency=10)
    plan = make_plan(profile, [("one", workload)], hardware)
    row = plan.rows[0]
    assert (plan.kv_block_tokens, plan.kv_bytes_per_block) == (784, 51_380_224)
    assert row.tokens_per_request == 8192
    assert row.kv_bytes_per_request == 17 * 51_380_224
    pool_blocks = plan.kv_pool_bytes_per_gpu // plan.kv_bytes_per_block
    assert plan.kv_pool_bytes_per_gpu == pool_blocks * plan.kv_bytes_per_block  # whole blocks
    assert row.max_concurrency == pool_blocks // 17
    assert plan.auto_kv_budget_bytes == plan.kv_pool_bytes_per_gpu
