"""Every worked number of the design brief, reproduced by the prediction core."""

from __future__ import annotations

import pytest

from sidecar.cli.capacity import Hardware, Workload, make_plan
from sidecar.profiles import ProfileOverrides, load_profile
from sidecar.units import format_bytes

QWEN2_VL_7B = "Qwen/Qwen2-VL-7B-Instruct"
QWEN25_VL_7B = "Qwen/Qwen2.5-VL-7B-Instruct"
QWEN25_VL_72B = "Qwen/Qwen2.5-VL-72B-Instruct"
LLAVA_15_7B = "llava-hf/llava-1.5-7b-hf"
CAPPED = ProfileOverrides(max_pixels=1_003_520)


def test_qwen2_vl_costs_66_prompt_tokens_for_224_square_image() -> None:
    cost = load_profile(QWEN2_VL_7B).vision.image_tokens(224, 224)
    assert (cost.tokens, cost.prompt_tokens) == (64, 66)


@pytest.mark.parametrize("size", [(1, 1), (336, 336), (4032, 3024), (100, 9000)], ids=str)
def test_llava_15_costs_576_tokens_for_any_image_size(size: tuple[int, int]) -> None:
    assert load_profile(LLAVA_15_7B).vision.image_tokens(*size).tokens == 576


@pytest.mark.parametrize(
    ("size", "overrides", "tokens"),
    [
        ((1024, 1024), ProfileOverrides(), 1_369),
        ((3840, 2160), ProfileOverrides(), 10_549),
        ((4032, 3024), ProfileOverrides(), 15_552),
        ((1920, 1080), ProfileOverrides(), 2_691),
        ((4032, 3024), CAPPED, 1_230),
        ((1920, 1080), CAPPED, 1_222),
        ((512, 512), CAPPED, 324),
    ],
    ids=["1024sq", "4k", "12mp", "1080p", "12mp-capped", "1080p-capped", "512sq-capped"],
)
def test_qwen25_vl_tokens_match_the_brief_table(
    size: tuple[int, int], overrides: ProfileOverrides, tokens: int
) -> None:
    assert load_profile(QWEN25_VL_7B, overrides).vision.image_tokens(*size).tokens == tokens


@pytest.mark.parametrize(
    ("model", "per_token"),
    [(QWEN25_VL_7B, "56 KiB"), (QWEN25_VL_72B, "320 KiB"), (LLAVA_15_7B, "512 KiB")],
    ids=["qwen7b", "qwen72b", "llava7b"],
)
def test_kv_bytes_per_token_match_the_brief(model: str, per_token: str) -> None:
    assert format_bytes(load_profile(model).kv.bytes_per_token) == per_token


@pytest.mark.parametrize(
    ("model", "size", "kv"),
    [
        (LLAVA_15_7B, (1024, 1024), "288 MiB"),
        (QWEN25_VL_7B, (1024, 1024), "74.9 MiB"),
        (QWEN25_VL_7B, (3840, 2160), "576.9 MiB"),
        (QWEN25_VL_72B, (3840, 2160), "3.2 GiB"),
    ],
    ids=["llava", "qwen7b-1024", "qwen7b-4k", "qwen72b-4k"],
)
def test_kv_bytes_per_image_match_the_brief(model: str, size: tuple[int, int], kv: str) -> None:
    profile = load_profile(model)
    tokens = profile.vision.image_tokens(*size).tokens
    assert format_bytes(tokens * profile.kv.bytes_per_token) == kv


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


@pytest.mark.parametrize(
    ("model", "weights_gib"), [(QWEN25_VL_7B, 15.4), (QWEN25_VL_72B, 136.7)], ids=["7b", "72b"]
)
def test_bf16_weights_match_the_brief(model: str, weights_gib: float) -> None:
    parameters = load_profile(model).parameter_count
    assert parameters is not None
    assert round(parameters * 2 / 2**30, 1) == weights_gib
