"""Predictions built from image sizes, and the admission decision on them, for the pure tests of
``admission.decision`` and ``admission.downscale``."""

from __future__ import annotations

from sidecar.admission.budgets import Budgets
from sidecar.admission.decision import decide
from sidecar.cost.prediction import ImageCost, RequestPrediction, predict_request
from sidecar.profiles import ModelProfile, load_profile

QWEN_PROFILE = load_profile("Qwen/Qwen2.5-VL-7B-Instruct")
LLAVA_PROFILE = load_profile("llava-hf/llava-1.5-7b-hf")
PHONE, FRAME_4K, HD, ICON = (4032, 3024), (3840, 2160), (1920, 1080), (64, 64)


def predict(
    sizes: list[tuple[int, int]],
    *,
    profile: ModelProfile = QWEN_PROFILE,
    sources: list[str] | None = None,
    text_tokens: int = 100,
    output_tokens: int = 100,
) -> RequestPrediction:
    """The prediction for JPEG images of ``sizes`` (by default inline) plus some text."""
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


def decide_for(
    prediction: RequestPrediction, budgets: Budgets, profile: ModelProfile = QWEN_PROFILE, **kw: int
) -> object:
    """``decide`` with ``profile``'s vision rule and KV geometry."""
    return decide(prediction, budgets, vision=profile.vision, kv=profile.kv, **kw)
