"""vision.PixelLimited: every profile's rule refuses an image vLLM will not load, in vLLM's
words, and prices one a pixel under the limit."""

from __future__ import annotations

import pytest

from sidecar.errors import UnsupportedImageSizeError
from sidecar.profiles import ProfileOverrides, builtin_model_names, load_profile
from sidecar.settings import VLLM_MAX_IMAGE_PIXELS

# vllm/envs.py VLLM_MAX_IMAGE_PIXELS default; vllm/multimodal/media/image.py's message.
VLLM_REFUSAL = (
    "Image dimensions {w}x{h} ({pixels} pixels) exceed the maximum of 178956970 pixels. "
    "Set VLLM_MAX_IMAGE_PIXELS to increase this limit."
)


@pytest.mark.parametrize("model", builtin_model_names())
def test_every_builtin_rule_refuses_above_vllms_pixel_limit(model: str) -> None:
    rule = load_profile(model).vision
    with pytest.raises(UnsupportedImageSizeError) as refused:
        rule.image_tokens(15000, 12000)
    assert refused.value.message == VLLM_REFUSAL.format(w=15000, h=12000, pixels=180_000_000)
    # vLLM refuses w x h > 178,956,970 only: 13,377 x 13,377 loads, 13,377 x 13,379 does not.
    assert 13_377 * 13_377 <= VLLM_MAX_IMAGE_PIXELS < 13_377 * 13_379
    assert rule.image_tokens(13_377, 13_377).prompt_tokens > 0
    with pytest.raises(UnsupportedImageSizeError, match="exceed the maximum"):
        rule.image_tokens(13_377, 13_379)


def test_the_limit_survives_vllms_pixel_bounds() -> None:
    rule = load_profile("Qwen/Qwen2.5-VL-7B-Instruct", ProfileOverrides(max_pixels=10**6)).vision
    with pytest.raises(UnsupportedImageSizeError, match="exceed the maximum of 178956970"):
        rule.image_tokens(15000, 12000)
    assert rule.image_tokens(13000, 13000).tokens <= 10**6 // 784
