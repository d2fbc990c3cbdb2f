"""vision (the package): what one image costs in the prompt, and rules without a pixel range."""

from __future__ import annotations

from pathlib import Path

from sidecar.engine.measured import MeasuredRule
from sidecar.profiles import load_profile
from sidecar.vision import ImageTokens, NoPixelRange, at_index, image_index_tokens
from tests.support.family_dirs import write_minicpmv4_6_dir

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


def test_only_a_rule_that_numbers_its_images_charges_for_their_place(tmp_path: Path) -> None:
    # Through the decode limit's wrapper, and through a wrapper holding its rule as ``rule``.
    minicpm = load_profile(str(write_minicpmv4_6_dir(tmp_path))).vision
    assert [image_index_tokens(minicpm, i) for i in (0, 9, 10, 1000)] == [0, 0, 1, 3]
    assert image_index_tokens(MeasuredRule(minicpm, {}, "http://engine"), 10) == 1
    qwen = load_profile("Qwen/Qwen2-VL-7B-Instruct").vision
    assert image_index_tokens(qwen, 1000) == 0
    assert at_index(qwen.image_tokens(640, 480), qwen, 1000) == qwen.image_tokens(640, 480)
