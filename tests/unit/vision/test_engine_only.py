"""vision.engine_only: a family without a native rule prices nothing itself; vLLM does, and
an image whose count is not known in time is bounded by the context."""

from __future__ import annotations

import pytest

from sidecar.errors import UnsupportedImageSizeError
from sidecar.vision import PixelLimited, family_rule
from sidecar.vision.engine_only import EngineOnlyRule

RULE = EngineOnlyRule("kimi_vl", context_tokens=32_768)


def test_a_size_is_never_priced_by_the_rule_itself() -> None:
    with pytest.raises(UnsupportedImageSizeError, match="priced only through vLLM"):
        RULE.image_tokens(1920, 1080)


def test_the_bound_for_an_unknown_size_is_the_whole_context() -> None:
    bound = RULE.max_image_tokens()
    assert (bound.tokens, bound.wrapper_tokens) == (32_768, 0)


def test_it_cannot_downscale_and_says_why() -> None:
    with pytest.raises(UnsupportedImageSizeError, match="no native rule to downscale 4032x3024"):
        RULE.downscale_size(4032, 3024, max_tokens=1_000, max_pixels=None)


def test_it_is_found_behind_the_decode_limit() -> None:
    limited = PixelLimited(RULE)
    assert family_rule(limited) is RULE
    assert "every size priced by vLLM" in limited.describe()
