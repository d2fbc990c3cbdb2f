"""engine.rule_check: the rule against vLLM's count on sizes chosen to exercise it, and the
likely cause of a disagreement in words."""

from __future__ import annotations

from sidecar.cost.engine_prices import EngineCount
from sidecar.engine.rule_check import Count, check_sizes, likely_cause, run_rule_check
from sidecar.errors import ImageError
from sidecar.profiles import load_profile
from sidecar.vision import VisionRule, family_rule
from sidecar.vision.qwen import QwenSmartResizeRule
from tests.support.sidecars import QWEN

_VISION = family_rule(load_profile(QWEN).vision)
assert isinstance(_VISION, QwenSmartResizeRule)
RULE: QwenSmartResizeRule = _VISION


def engine_counting_as(rule: VisionRule, *, extra_tokens: int = 0) -> Count:
    async def count(width: int, height: int) -> EngineCount:
        try:
            return EngineCount(rule.image_tokens(width, height).prompt_tokens + extra_tokens)
        except ImageError as exc:
            return EngineCount(None, exc.message)

    return count


def test_the_sizes_cover_both_pixel_bounds_aspect_and_a_phone_photo() -> None:
    sizes = {label: (w, h) for label, w, h in check_sizes(RULE)}
    assert {"tiny", "wide", "tall", "phone photo", "below min_pixels", "under max_pixels",
            "over max_pixels"} <= set(sizes)  # fmt: skip
    over, under = sizes["over max_pixels"], sizes["under max_pixels"]
    assert over[0] * over[1] > RULE.max_pixels > under[0] * under[1]
    below = sizes["below min_pixels"]
    assert below[0] * below[1] < RULE.min_pixels


async def test_an_engine_configured_as_the_rule_agrees_everywhere() -> None:
    check = await run_rule_check(RULE, engine_counting_as(RULE))
    assert check.mismatches == ()
    assert check.largest_engine_tokens == RULE.max_image_tokens().prompt_tokens


async def test_a_larger_max_pixels_on_vllm_is_caught_and_named() -> None:
    small = RULE.with_pixel_range(None, 1_003_520)  # the sidecar caps at 1 MP ...
    vllm = RULE.with_pixel_range(None, 4_014_080)  # ... and vLLM at 4 MP
    check = await run_rule_check(small, engine_counting_as(vllm))
    labels = {size.label for size in check.mismatches}
    assert "over max_pixels" in labels
    assert "phone photo" in labels
    assert "tiny" not in labels
    cause = likely_cause(check, check.mismatches[0], small)
    assert "vLLM's max_pixels is above the sidecar's" in cause
    assert "SIDECAR_MAX_PIXELS" in cause


async def test_a_smaller_max_pixels_on_vllm_is_named_below() -> None:
    vllm = RULE.with_pixel_range(None, 200_704)
    check = await run_rule_check(RULE, engine_counting_as(vllm))
    assert check.mismatches
    assert all(
        "vLLM's max_pixels is below the sidecar's" in likely_cause(check, size, RULE)
        for size in check.mismatches
    )


async def test_a_constant_offset_is_the_chat_templates() -> None:
    check = await run_rule_check(RULE, engine_counting_as(RULE, extra_tokens=3))
    assert len(check.mismatches) == len(check.sizes)
    assert "every size differs by +3 tokens" in likely_cause(check, check.mismatches[0], RULE)


async def test_a_refusal_on_one_side_only_is_named() -> None:
    async def refusing(width: int, height: int) -> EngineCount:
        if width > 1000:
            return EngineCount(None, "image too large")
        return EngineCount(RULE.image_tokens(width, height).prompt_tokens)

    check = await run_rule_check(RULE, refusing)
    phone = next(s for s in check.mismatches if s.label == "phone photo")
    assert "vLLM refuses the size (image too large)" in likely_cause(check, phone, RULE)
    assert phone.describe().endswith("vLLM refuses")
