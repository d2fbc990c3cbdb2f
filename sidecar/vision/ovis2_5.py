"""Ovis 2.5 / 2.6: native resolution, resized by the processor's own ``smart_resize``.

vLLM 0.33 serves Ovis 2.5 with its own processor (``transformers_utils/processors/ovis2_5.py``)
and takes each image's count from the grid that processor makes (``ovis2_5.py``
``_get_prompt_updates``): ``smart_resize`` to multiples of ``patch_size x hidden_stride``
(16 x 2 = 32 px) within ``[448², 1792²]`` px (the module's constants; the processor takes no
pixel kwargs: vLLM's server kwargs are ignored by it), then one ``<|image_pad|>`` per
``hidden_stride²`` patches, framed by two more (the image start and end indicators):
``tokens = 2 + h x w / (patch x stride)²``.

This ``smart_resize`` differs from Qwen's: an image with a side under 32 px has its shorter
side enlarged to 32 px and the other scaled to match (rounded), and that image skips the
aspect-ratio check; any other image over 200:1 has its long side cut to 200 times the short
one instead of being refused. The floor under ``max_pixels`` is not raised back to one factor:
an extreme image (1 x 4,000) resizes to no columns at all, which vLLM counts as 2 tokens but
its processor then fails on; the sidecar refuses it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sidecar.errors import UnsupportedImageSizeError
from sidecar.vision import ImageTokens, NoPixelRange
from sidecar.vision.qwen import QwenSmartResizeRule
from sidecar.vision.smart_resize import scale_into_range
from sidecar.vision.tiling import already_fits

OVIS_MIN_PIXELS = 448 * 448  # transformers_utils/processors/ovis2_5.py MIN_PIXELS
OVIS_MAX_PIXELS = 1792 * 1792  # MAX_PIXELS
OVIS_FRAME_TOKENS = 2  # the image start and end indicators, each one <|image_pad|>
OVIS_MAX_ASPECT_RATIO = 200


def ovis_smart_resize(
    height_px: int, width_px: int, *, factor: int, min_pixels: int, max_pixels: int
) -> tuple[int, int]:
    """``Ovis2_5Processor.smart_resize``, line for line."""
    height, width = height_px, width_px
    if height < factor or width < factor:
        if height < width:
            width = round(factor / height * width)
            height = factor
        else:
            height = round(factor / width * height)
            width = factor
    elif max(height, width) / min(height, width) > OVIS_MAX_ASPECT_RATIO:
        if height > width:
            height = OVIS_MAX_ASPECT_RATIO * width
        else:
            width = OVIS_MAX_ASPECT_RATIO * height
    return scale_into_range(
        1, height, width, temporal_factor=1, factor=factor,
        min_pixels=min_pixels, max_pixels=max_pixels, keep_one_factor=False,
    )  # fmt: skip


@dataclass(frozen=True, slots=True)
class Ovis2_5Rule(NoPixelRange, QwenSmartResizeRule):
    """``2 + resized h x w / (patch x hidden_stride)²``."""

    wrapper_tokens: int = 0  # the template's <image> is replaced

    @classmethod
    def from_configs(
        cls, family: str, config: dict[str, Any], preprocessor: dict[str, Any]
    ) -> Ovis2_5Rule:
        """Build from ``config.json``'s ``vit_config``: the bounds are the processor's own."""
        vit = config.get("vit_config") or {}
        if int(vit.get("temporal_patch_size") or 1) != 1:
            raise ValueError("Ovis 2.5 with temporal_patch_size other than 1 is not priced")
        return cls(
            family,
            int(vit.get("patch_size") or 16),
            int(vit.get("hidden_stride") or 2),
            OVIS_MIN_PIXELS,
            OVIS_MAX_PIXELS,
        )

    def resized_size(self, width_px: int, height_px: int) -> tuple[int, int]:
        h, w = ovis_smart_resize(
            height_px,
            width_px,
            factor=self.factor,
            min_pixels=min(self.max_pixels, self.min_pixels),
            max_pixels=self.max_pixels,
        )
        return w, h

    def image_tokens(self, width_px: int, height_px: int) -> ImageTokens:
        w, h = self.resized_size(width_px, height_px)
        if w == 0 or h == 0:
            # vLLM counts 2 here, but the processor cannot make an image with no patches:
            # the request fails ("Failed to apply Ovis2_5Processor").
            raise UnsupportedImageSizeError(
                f"image {width_px}x{height_px} resizes to {w}x{h} px: Ovis 2.5's processor "
                "fails on it"
            )
        grid = (h // self.patch_size) * (w // self.patch_size)
        return ImageTokens(
            tokens=OVIS_FRAME_TOKENS + grid // self.merge_size**2,
            wrapper_tokens=self.wrapper_tokens,
        )

    def downscale_size(
        self, width_px: int, height_px: int, *, max_tokens: int | None, max_pixels: int | None
    ) -> tuple[int, int]:
        # Qwen's grid search, for the cells left once the two frame tokens are paid.
        if already_fits(self, width_px, height_px, max_tokens=max_tokens, max_pixels=max_pixels):
            return width_px, height_px
        cells = None if max_tokens is None else max(0, max_tokens - OVIS_FRAME_TOKENS)
        return QwenSmartResizeRule.downscale_size(
            self, width_px, height_px, max_tokens=cells, max_pixels=max_pixels
        )

    def max_image_tokens(self) -> ImageTokens:
        return ImageTokens(
            tokens=OVIS_FRAME_TOKENS + self.max_pixels // self.factor**2,
            wrapper_tokens=self.wrapper_tokens,
        )
