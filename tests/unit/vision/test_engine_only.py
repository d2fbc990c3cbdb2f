"""vision.engine_only: the stand-in for a rule where a family has none: it prices nothing
itself, bounds an image of unknown cost by the context, and refuses to downscale."""

from __future__ import annotations

import pytest

from sidecar.errors import UnsupportedImageSizeError
from sidecar.vision import ImageTokens, PixelLimited, family_rule
from sidecar.vision.engine_only import EngineOnlyRule

RULE = EngineOnlyRule("gemma4_mm", context_tokens=32_768)


def test_no_size_is_priced_without_the_engine() -> None:
    with pytest.raises(UnsupportedImageSizeError, match="priced only through vLLM"):
        RULE.image_tokens(640, 480)


def test_an_image_of_unknown_cost_is_bounded_by_the_context() -> None:
    assert RULE.max_image_tokens() == ImageTokens(tokens=32_768, wrapper_tokens=0)


def test_downscaling_needs_a_native_rule() -> None:
    with pytest.raises(UnsupportedImageSizeError, match="no native rule to downscale"):
        RULE.downscale_size(4032, 3024, max_tokens=256, max_pixels=None)


def test_the_pixel_range_changes_nothing_and_the_rule_says_what_it_is() -> None:
    assert RULE.with_pixel_range(1, 10) is RULE
    assert "vLLM's /tokenize" in RULE.describe()


def test_it_is_found_behind_the_decode_limit() -> None:
    limited = PixelLimited(RULE)
    assert family_rule(limited) is RULE
    assert "every size priced by vLLM" in limited.describe()
