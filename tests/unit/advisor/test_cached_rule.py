"""advisor.cached_rule: the cached rule and KV geometry answer exactly as the ones they wrap,
refusals included, and ask each question of them once."""

from __future__ import annotations

from typing import Any

import pytest

from sidecar.advisor.cached_rule import CachedKv, CachedRule
from sidecar.errors import UnsupportedImageSizeError
from sidecar.profiles import load_profile
from sidecar.vision import ImageTokens, VisionRule
from tests.support.sidecars import QWEN

PROFILE = load_profile(QWEN)
SIZES = [(1, 1), (28, 28), (640, 480), (4032, 3024), (1000, 10), (10, 1000)]


class Counting:
    """A rule that counts the questions it is asked."""

    def __init__(self, rule: VisionRule) -> None:
        self.rule, self.asked = rule, 0

    def image_tokens(self, width_px: int, height_px: int) -> ImageTokens:
        self.asked += 1
        return self.rule.image_tokens(width_px, height_px)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.rule, name)


def _answer(rule: Any, width: int, height: int) -> ImageTokens | type[Exception]:
    try:
        return rule.image_tokens(width, height)  # type: ignore[no-any-return]
    except UnsupportedImageSizeError as exc:
        return type(exc)


@pytest.mark.parametrize(("width", "height"), SIZES, ids=lambda v: str(v))
def test_cached_rule_answers_as_the_rule_it_wraps(width: int, height: int) -> None:
    cached = CachedRule(PROFILE.vision)
    for _ in range(2):
        assert _answer(cached, width, height) == _answer(PROFILE.vision, width, height)


def test_cached_rule_raises_a_refusal_again_each_time_it_is_asked() -> None:
    cached = CachedRule(PROFILE.vision)
    for _ in range(2):
        with pytest.raises(UnsupportedImageSizeError, match="aspect ratio"):
            cached.image_tokens(4000, 10)


def test_cached_rule_asks_the_rule_once_per_size() -> None:
    counting = Counting(PROFILE.vision)
    cached = CachedRule(counting)  # type: ignore[arg-type]
    for _ in range(3):
        for width, height in [(640, 480), (800, 600)]:
            cached.image_tokens(width, height)
    assert counting.asked == 2


def test_cached_rule_plans_downscales_and_pixel_ranges_as_the_rule_does() -> None:
    cached, rule = CachedRule(PROFILE.vision), PROFILE.vision
    plan = {"max_tokens": 256, "max_pixels": None}
    assert cached.downscale_size(4032, 3024, **plan) == rule.downscale_size(4032, 3024, **plan)
    narrowed = cached.with_pixel_range(None, 200_000)
    assert narrowed.image_tokens(1280, 960) == rule.with_pixel_range(None, 200_000).image_tokens(
        1280, 960
    )
    assert cached.max_image_tokens() == rule.max_image_tokens()
    assert (cached.family, cached.describe()) == (rule.family, rule.describe())
    assert cached.max_pixels == rule.max_pixels  # type: ignore[attr-defined]


@pytest.mark.parametrize("tokens", [0, 1, 15, 16, 17, 4096, 100_000])
def test_cached_kv_answers_as_the_geometry_it_copies(tokens: int) -> None:
    cached = CachedKv.of(PROFILE.kv)
    assert cached.request_kv_bytes(tokens) == PROFILE.kv.request_kv_bytes(tokens)
    assert cached.request_kv_bytes(tokens) == PROFILE.kv.request_kv_bytes(tokens)
    assert cached.bytes_per_token == PROFILE.kv.bytes_per_token
