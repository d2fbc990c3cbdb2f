"""The pure admission decision: every budget, every outcome, and exact downscale plans."""

from __future__ import annotations

from dataclasses import replace

import pytest

from sidecar.admission.budgets import Budgets
from sidecar.admission.decision import Admit, Downscale, Reason, Reject, Wait, decide
from sidecar.cost.prediction import ImageCost, RequestPrediction, predict_request
from sidecar.profiles import ModelProfile, load_profile

QWEN = load_profile("Qwen/Qwen2.5-VL-7B-Instruct")
LLAVA = load_profile("llava-hf/llava-1.5-7b-hf")
PHONE, FRAME_4K, HD, ICON = (4032, 3024), (3840, 2160), (1920, 1080), (64, 64)


def _predict(
    sizes: list[tuple[int, int]],
    *,
    profile: ModelProfile = QWEN,
    sources: list[str] | None = None,
    text_tokens: int = 100,
    output_tokens: int = 100,
) -> RequestPrediction:
    images = [
        ImageCost(
            index=i,
            source=(sources or ["data"] * len(sizes))[i],
            width_px=w,
            height_px=h,
            format="JPEG",
            tokens=profile.vision.image_tokens(w, h),
        )
        for i, (w, h) in enumerate(sizes)
    ]
    return predict_request(
        images, kv=profile.kv, text_tokens=text_tokens, media_tokens=0,
        output_tokens=output_tokens, n=1,
    )  # fmt: skip


def _decide(
    prediction: RequestPrediction, budgets: Budgets, profile: ModelProfile = QWEN, **kw: int
) -> object:
    return decide(prediction, budgets, vision=profile.vision, kv=profile.kv, **kw)


def test_decide_admits_a_request_within_every_budget() -> None:
    prediction = _predict([HD])
    budgets = Budgets(max_image_tokens=4096, max_request_prompt_tokens=32768, kv_budget_bytes=2**34)
    assert _decide(prediction, budgets) == Admit(prediction)


@pytest.mark.parametrize(
    ("budgets", "reason", "message"),
    [
        (
            Budgets(max_images_per_request=3),
            Reason.MAX_IMAGES_PER_REQUEST,
            "request carries 4 images; SIDECAR_MAX_IMAGES_PER_REQUEST is 3",
        ),
        (
            Budgets(max_image_tokens=4096),
            Reason.MAX_IMAGE_TOKENS,
            "image 2 of 4 (4032x3024) costs 15,552 tokens; SIDECAR_MAX_IMAGE_TOKENS is 4,096",
        ),
        (
            Budgets(max_image_pixels=4_000_000),
            Reason.MAX_IMAGE_PIXELS,
            "image 2 of 4 (4032x3024) has 12,192,768 pixels; SIDECAR_MAX_IMAGE_PIXELS is 4,000,000",
        ),
        (
            Budgets(max_request_visual_tokens=18_000),
            Reason.MAX_REQUEST_VISUAL_TOKENS,
            "request costs 18,251 visual tokens; SIDECAR_MAX_REQUEST_VISUAL_TOKENS is 18,000",
        ),
        (
            Budgets(max_request_prompt_tokens=18_300),
            Reason.MAX_REQUEST_PROMPT_TOKENS,
            "request costs 18,359 prompt tokens; SIDECAR_MAX_REQUEST_PROMPT_TOKENS is 18,300",
        ),
        (
            Budgets(max_request_kv_bytes=2**29),
            Reason.MAX_REQUEST_KV_BYTES,
            "request needs 1,009.8 MiB of KV cache (1,058,799,616 bytes); "
            "SIDECAR_MAX_REQUEST_KV_BYTES is 512 MiB",
        ),
    ],
    ids=["images", "image-tokens", "image-pixels", "visual", "prompt", "kv"],
)
def test_decide_rejects_with_a_message_naming_budget_value_and_limit(
    budgets: Budgets, reason: Reason, message: str
) -> None:
    decision = _decide(_predict([ICON, PHONE, HD, ICON]), budgets)
    assert isinstance(decision, Reject)
    assert (decision.reason, decision.message, decision.status) == (reason, message, 400)


def test_decide_downscales_each_image_over_the_per_image_cap_exactly() -> None:
    prediction = _predict([ICON, PHONE, FRAME_4K])
    decision = _decide(prediction, Budgets(max_image_tokens=4096, downscale=True))
    assert isinstance(decision, Downscale)
    assert decision.reason is Reason.MAX_IMAGE_TOKENS
    assert [r.index for r in decision.resizes] == [1, 2]
    for resize in decision.resizes:
        assert resize.tokens_after <= 4096
        assert QWEN.vision.image_tokens(*resize.to_size).tokens == resize.tokens_after
        assert resize.to_size[0] <= resize.from_size[0]
        assert resize.to_size[1] <= resize.from_size[1]
    assert decision.prediction.images[0] == prediction.images[0]


def test_decide_water_fills_the_request_budget_shrinking_the_largest_images_first() -> None:
    prediction = _predict([ICON, PHONE, HD])
    decision = _decide(prediction, Budgets(max_request_visual_tokens=6000, downscale=True))
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
    decision = _decide(_predict([PHONE, PHONE]), budgets)
    assert isinstance(decision, Downscale)
    assert decision.prediction.prompt_tokens <= (budgets.max_request_prompt_tokens or 10**9)
    assert decision.prediction.kv_bytes <= (budgets.max_request_kv_bytes or 2**62)


def test_decide_rejects_when_only_url_images_break_the_budget() -> None:
    prediction = _predict([PHONE], sources=["url"])
    decision = _decide(prediction, Budgets(max_image_tokens=4096, downscale=True))
    assert isinstance(decision, Reject)
    assert "cannot be rewritten" in decision.message


def test_decide_rejects_fixed_token_models_whose_cost_no_resize_lowers() -> None:
    prediction = _predict([PHONE, PHONE], profile=LLAVA)
    decision = _decide(prediction, Budgets(max_image_tokens=500, downscale=True), LLAVA)
    assert isinstance(decision, Reject)
    assert "no smaller size" in decision.message


def test_decide_downscales_fixed_token_models_for_the_pixel_cap() -> None:
    prediction = _predict([PHONE], profile=LLAVA)
    decision = _decide(prediction, Budgets(max_image_pixels=1_000_000, downscale=True), LLAVA)
    assert isinstance(decision, Downscale)
    width, height = decision.resizes[0].to_size
    assert width * height <= 1_000_000


def test_decide_with_processor_kwargs_picks_the_largest_max_pixels_that_fits() -> None:
    prediction = _predict([PHONE, HD])
    budgets = Budgets(max_image_tokens=1280, downscale=True, downscale_with_processor_kwargs=True)
    decision = _decide(prediction, budgets)
    assert isinstance(decision, Downscale)
    assert decision.resizes == ()
    max_pixels = decision.processor_max_pixels
    assert max_pixels is not None
    rule = QWEN.vision.with_pixel_range(None, max_pixels)
    assert [i.tokens for i in decision.prediction.images] == [
        rule.image_tokens(*PHONE),
        rule.image_tokens(*HD),
    ]
    assert max(i.tokens.tokens for i in decision.prediction.images) <= 1280
    bigger = QWEN.vision.with_pixel_range(None, max_pixels + 1)
    assert max(bigger.image_tokens(*PHONE).tokens, bigger.image_tokens(*HD).tokens) > 1280


def test_decide_with_processor_kwargs_refuses_the_pixel_cap() -> None:
    budgets = Budgets(max_image_pixels=10**6, downscale=True, downscale_with_processor_kwargs=True)
    decision = _decide(_predict([PHONE]), budgets)
    assert isinstance(decision, Reject)
    assert "SIDECAR_DOWNSCALE_METHOD=resize" in decision.message


def test_decide_rejects_a_request_larger_than_the_whole_kv_budget_with_429() -> None:
    decision = _decide(_predict([PHONE]), Budgets(kv_budget_bytes=100 * 2**20))
    assert isinstance(decision, Reject)
    assert decision.status == 429
    assert decision.retry_after_seconds is not None
    assert decision.reason is Reason.LARGER_THAN_KV_BUDGET


def test_decide_waits_when_the_in_flight_budget_is_full() -> None:
    prediction = _predict([HD])
    budgets = Budgets(kv_budget_bytes=2**30)
    assert _decide(prediction, budgets, inflight_kv_bytes=2**30 - 1) == Wait(prediction)
    assert _decide(prediction, budgets, inflight_kv_bytes=0) == Admit(prediction)


def test_decide_ignores_in_flight_bytes_when_the_budget_is_off() -> None:
    prediction = _predict([PHONE])
    assert _decide(prediction, Budgets(), inflight_kv_bytes=2**50) == Admit(prediction)


def test_downscaled_prediction_recomputes_kv_bytes() -> None:
    prediction = _predict([PHONE])
    decision = _decide(prediction, Budgets(max_image_tokens=1000, downscale=True))
    assert isinstance(decision, Downscale)
    expected = QWEN.kv.request_kv_bytes(decision.prediction.prompt_tokens + 100)
    assert decision.prediction.kv_bytes == expected < prediction.kv_bytes
    assert decision.original == prediction
    assert replace(decision.prediction, images=prediction.images).text_tokens == 100
