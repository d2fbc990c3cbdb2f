"""vision (the package): what one image costs in the prompt, and rules without a pixel range."""

from __future__ import annotations

from sidecar.profiles import load_profile
from sidecar.vision import ImageTokens, NoPixelRange

LLAVA_NEXT = "llava-hf/llava-v1.6-mistral-7b-hf"


def test_image_tokens_in_the_prompt_are_the_tokens_and_their_wrappers() -> None:
    assert ImageTokens(tokens=391, wrapper_tokens=2).prompt_tokens == 393
    assert ImageTokens(
        tokens=1601, wrapper_tokens=0, cross_attention_tokens=6404
    ).prompt_tokens == (1601)  # cross-attention states are held outside the prompt


def test_a_rule_without_a_pixel_range_ignores_vllms_pixel_bounds() -> None:
    rule = load_profile(LLAVA_NEXT).vision.rule  # the family's, behind vLLM's decode limit
    assert isinstance(rule, NoPixelRange)
    assert rule.with_pixel_range(1, 10) is rule
    assert rule.with_pixel_range(1, 10).image_tokens(640, 480) == rule.image_tokens(640, 480)
