"""admission.downscale: plans that shrink images (or cap vLLM's max_pixels) until a request
fits, exactly; through ``decide``, which calls the plan when a budget asks for a downscale."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from sidecar.admission.budgets import Budgets
from sidecar.admission.decision import Downscale, Reason, Reject
from sidecar.profiles import load_profile
from tests.support.family_dirs import write_minicpmv4_6_dir
from tests.support.predictions import (
    FRAME_4K,
    HD,
    ICON,
    LLAVA_PROFILE,
    PHONE,
    QWEN_PROFILE,
    decide_for,
    predict,
)


def test_decide_downscales_each_image_over_the_per_image_cap_exactly() -> None:
    prediction = predict([ICON, PHONE, FRAME_4K])
    decision = decide_for(prediction, Budgets(max_image_tokens=4096, downscale=True))
    assert isinstance(decision, Downscale)
    assert decision.reason is Reason.MAX_IMAGE_TOKENS
    assert [r.index for r in decision.resizes] == [1, 2]
    for resize in decision.resizes:
        assert resize.tokens_after <= 4096
        assert QWEN_PROFILE.vision.image_tokens(*resize.to_size).tokens == resize.tokens_after
        assert resize.to_size[0] <= resize.from_size[0]
        assert resize.to_size[1] <= resize.from_size[1]
    assert decision.prediction.images[0] == prediction.images[0]


def test_decide_water_fills_the_request_budget_shrinking_the_largest_images_first() -> None:
    prediction = predict([ICON, PHONE, HD])
    decision = decide_for(prediction, Budgets(max_request_visual_tokens=6000, downscale=True))
    assert isinstance(decision, Downscale)
    assert decision.prediction.visual_tokens <= 6000
    assert {r.index for r in decision.resizes} == {1}
    assert decision.prediction.images[2] == prediction.images[2]


@pytest.mark.parametrize(
    "budgets",
    [
        Budgets(max_request_prompt_tokens=8000, downscale=True),
        Budgets(max_request_kv_bytes=400 * 2**20, downscale=True),
    ],
    ids=["prompt", "kv"],
)
def test_decide_downscales_to_fit_request_budgets(budgets: Budgets) -> None:
    decision = decide_for(predict([PHONE, PHONE]), budgets)
    assert isinstance(decision, Downscale)
    assert decision.prediction.prompt_tokens <= (budgets.max_request_prompt_tokens or 10**9)
    assert decision.prediction.kv_bytes <= (budgets.max_request_kv_bytes or 2**62)


def test_decide_rejects_when_only_url_images_break_the_budget() -> None:
    prediction = predict([PHONE], sources=["url"])
    decision = decide_for(prediction, Budgets(max_image_tokens=4096, downscale=True))
    assert isinstance(decision, Reject)
    assert "cannot be rewritten" in decision.message


def test_decide_rejects_fixed_token_models_whose_cost_no_resize_lowers() -> None:
    prediction = predict([PHONE, PHONE], profile=LLAVA_PROFILE)
    decision = decide_for(prediction, Budgets(max_image_tokens=500, downscale=True), LLAVA_PROFILE)
    assert isinstance(decision, Reject)
    assert "no smaller size" in decision.message


def test_decide_downscales_fixed_token_models_for_the_pixel_cap() -> None:
    prediction = predict([PHONE], profile=LLAVA_PROFILE)
    decision = decide_for(
        prediction, Budgets(max_image_pixels=1_000_000, downscale=True), LLAVA_PROFILE
    )
    assert isinstance(decision, Downscale)
    width, height = decision.resizes[0].to_size
    assert width * height <= 1_000_000


def test_decide_with_processor_kwargs_picks_the_largest_max_pixels_that_fits() -> None:
    prediction = predict([PHONE, HD])
    budgets = Budgets(max_image_tokens=1280, downscale=True, downscale_with_processor_kwargs=True)
    decision = decide_for(prediction, budgets)
    assert isinstance(decision, Downscale)
    assert decision.resizes == ()
    max_pixels = decision.processor_max_pixels
    assert max_pixels is not None
    rule = QWEN_PROFILE.vision.with_pixel_range(None, max_pixels)
    assert [i.tokens for i in decision.prediction.images] == [
        rule.image_tokens(*PHONE),
        rule.image_tokens(*HD),
    ]
    assert max(i.tokens.tokens for i in decision.prediction.images) <= 1280
    bigger = QWEN_PROFILE.vision.with_pixel_range(None, max_pixels + 1)
    assert max(bigger.image_tokens(*PHONE).tokens, bigger.image_tokens(*HD).tokens) > 1280


def test_decide_with_processor_kwargs_refuses_the_pixel_cap() -> None:
    budgets = Budgets(max_image_pixels=10**6, downscale=True, downscale_with_processor_kwargs=True)
    decision = decide_for(predict([PHONE]), budgets)
    assert isinstance(decision, Reject)
    assert "SIDECAR_DOWNSCALE_METHOD=resize" in decision.message


def test_downscaled_prediction_recomputes_kv_bytes() -> None:
    prediction = predict([PHONE])
    decision = decide_for(prediction, Budgets(max_image_tokens=1000, downscale=True))
    assert isinstance(decision, Downscale)
    expected = QWEN_PROFILE.kv.request_kv_bytes(decision.prediction.prompt_tokens + 100)
    assert decision.prediction.kv_bytes == expected < prediction.kv_bytes
    assert decision.original == prediction
    assert replace(decision.prediction, images=prediction.images).text_tokens == 100


def test_a_downscale_leaves_room_for_what_an_images_place_adds(tmp_path: Path) -> None:
    # MiniCPM-V 4.6's 11th image spells a two-digit <image_id>: its size must fit one less.
    minicpm = load_profile(str(write_minicpmv4_6_dir(tmp_path)))
    prediction = predict([PHONE] * 11, profile=minicpm)
    decision = decide_for(prediction, Budgets(max_image_tokens=212, downscale=True), minicpm)
    assert isinstance(decision, Downscale)
    last = decision.resizes[-1]
    assert last.index == 10
    assert last.tokens_after == minicpm.vision.image_tokens(*last.to_size).tokens + 1
    assert max(resize.tokens_after for resize in decision.resizes) <= 212
