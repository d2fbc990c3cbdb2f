"""Fixed-resolution encoders: every image costs the same, whatever its size.

LLaVA-1.5 resizes and centre-crops to 336x336; CLIP-L/14 yields 24 x 24 = 576 patch
features (its CLS token is dropped by the "default" feature-select strategy). Only the
pixel cap can make a downscale worthwhile; it never changes the token count.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from sidecar.vision import ImageTokens


@dataclass(frozen=True, slots=True)
class FixedTokensRule:
    """A constant number of tokens per image."""

    family: str
    tokens_per_image: int
    wrapper_tokens: int = 0

    @classmethod
    def from_llava_configs(
        cls, family: str, config: dict[str, Any], preprocessor: dict[str, Any]
    ) -> FixedTokensRule:
        """LLaVA-1.5: (image_size / patch)**2, plus CLS unless the strategy drops it."""
        vision = config.get("vision_config", {})
        image_size = int(vision.get("image_size") or _crop_side(preprocessor) or 336)
        patch = int(vision.get("patch_size") or preprocessor.get("patch_size") or 14)
        tokens = (image_size // patch) ** 2
        if config.get("vision_feature_select_strategy", "default") == "full":
            tokens += 1
        return cls(family, tokens)

    def image_tokens(self, width_px: int, height_px: int) -> ImageTokens:
        return ImageTokens(tokens=self.tokens_per_image, wrapper_tokens=self.wrapper_tokens)

    def max_image_tokens(self) -> ImageTokens:
        return ImageTokens(tokens=self.tokens_per_image, wrapper_tokens=self.wrapper_tokens)

    def downscale_size(
        self, width_px: int, height_px: int, *, max_tokens: int | None, max_pixels: int | None
    ) -> tuple[int, int]:
        if max_pixels is None or width_px * height_px <= max_pixels:
            return width_px, height_px
        scale = math.sqrt(max_pixels / (width_px * height_px))
        width = max(1, math.floor(width_px * scale))
        height = max(1, math.floor(height_px * scale))
        # A side clamped up to 1 px, or a float rounding up, can overshoot: trim the other side.
        if width * height > max_pixels:
            if width >= height:
                width = max(1, max_pixels // height)
            else:
                height = max(1, max_pixels // width)
        return width, height

    def with_pixel_range(self, min_pixels: int | None, max_pixels: int | None) -> FixedTokensRule:
        return self

    def describe(self) -> str:
        return f"fixed {self.tokens_per_image} tokens per image"


def _crop_side(preprocessor: dict[str, Any]) -> int | None:
    crop = preprocessor.get("crop_size")
    if isinstance(crop, dict):
        value = crop.get("height") or crop.get("shortest_edge")
        return int(value) if value else None
    return int(crop) if crop else None
