"""GLM-4.1V: Qwen-style ``smart_resize`` with GLM's own variant of the arithmetic.

``Glm4vImageProcessor`` resizes to multiples of ``factor = patch_size x merge_size`` (28 px)
and emits ``(h / 28) x (w / 28)`` tokens, like Qwen2-VL, but its ``smart_resize`` differs:

- an image is priced as ``temporal_patch_size`` (2) frames, so the pixel bounds compare
  against ``2 x h x w``: the effective range is half of ``[shortest_edge, longest_edge]``
  (checkpoint 12,544 .. 9,633,792 px, so 6,272 .. 4,816,896 px: 8 .. 6,144 tokens);
- a side below ``factor`` first scales the image up (``int()``-truncated) until it is not,
  and the aspect-ratio limit of 200 is checked after that.

The chat template wraps each image in ``<|begin_of_image|>`` and ``<|end_of_image|>``.
The rule subclasses Qwen's for its grid search: a size whose sides are multiples of ``factor``
with ``2 x h x w`` inside the bounds is left as it is by both processors, so Qwen's legal-grid
helpers apply once the grid cap and the smallest grid account for the frames.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from sidecar.errors import UnsupportedImageSizeError
from sidecar.vision import ImageTokens
from sidecar.vision.qwen import MAX_ASPECT_RATIO, QwenSmartResizeRule


def glm_smart_resize(
    height_px: int,
    width_px: int,
    *,
    factor: int,
    temporal_factor: int,
    min_pixels: int,
    max_pixels: int,
) -> tuple[int, int]:
    """transformers' GLM-4.1V ``smart_resize`` for one image (``num_frames = temporal_factor``)."""
    num_frames = temporal_factor
    height, width = height_px, width_px
    if height < factor or width < factor:
        scale = max(factor / height, factor / width)
        height = int(height * scale)
        width = int(width * scale)
    if max(height, width) / min(height, width) > MAX_ASPECT_RATIO:
        ratio = max(height, width) / min(height, width)
        raise UnsupportedImageSizeError(
            f"image {width_px}x{height_px} has an aspect ratio of {ratio:.1f}; "
            f"the model's processor refuses ratios above {MAX_ASPECT_RATIO}"
        )
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    t_bar = round(num_frames / temporal_factor) * temporal_factor
    if t_bar * h_bar * w_bar > max_pixels:
        beta = math.sqrt((num_frames * height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif t_bar * h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (num_frames * height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


@dataclass(frozen=True, slots=True)
class Glm4vSmartResizeRule(QwenSmartResizeRule):
    """GLM-4.1V: tokens = resized_h x resized_w / factor**2, pixel bounds per two frames."""

    temporal_patch_size: int = 2

    @classmethod
    def from_configs(
        cls, family: str, config: dict[str, Any], preprocessor: dict[str, Any]
    ) -> Glm4vSmartResizeRule:
        """Build from ``config.json`` and ``preprocessor_config.json`` values."""
        qwen = QwenSmartResizeRule.from_configs(family, config, preprocessor)
        vision = config.get("vision_config") or {}
        temporal = preprocessor.get("temporal_patch_size") or vision.get("temporal_patch_size")
        if temporal is None:
            raise ValueError("GLM-4.1V config has no temporal_patch_size")
        return cls(
            family,
            qwen.patch_size,
            qwen.merge_size,
            qwen.min_pixels,
            qwen.max_pixels,
            temporal_patch_size=int(temporal),
        )

    def resized_size(self, width_px: int, height_px: int) -> tuple[int, int]:
        h, w = glm_smart_resize(
            height_px,
            width_px,
            factor=self.factor,
            temporal_factor=self.temporal_patch_size,
            min_pixels=self.min_pixels,
            max_pixels=self.max_pixels,
        )
        return w, h

    @property
    def _cell_pixels(self) -> int:
        """Pixels one token costs against the bounds: a factor x factor cell in every frame."""
        return self.temporal_patch_size * self.factor**2

    @property
    def _min_grid(self) -> int:
        return -(-self.min_pixels // self._cell_pixels)

    def max_image_tokens(self) -> ImageTokens:
        return ImageTokens(
            tokens=self.max_pixels // self._cell_pixels, wrapper_tokens=self.wrapper_tokens
        )

    def downscale_size(
        self, width_px: int, height_px: int, *, max_tokens: int | None, max_pixels: int | None
    ) -> tuple[int, int]:
        # image_tokens raises first for a size the processor refuses, whatever the caps.
        tokens = self.image_tokens(width_px, height_px).tokens
        if (max_tokens is None or tokens <= max_tokens) and (
            max_pixels is None or width_px * height_px <= max_pixels
        ):
            return width_px, height_px
        grid_cap = self.max_pixels // self._cell_pixels
        if max_tokens is not None:
            grid_cap = min(grid_cap, max_tokens)
        if max_pixels is not None:
            grid_cap = min(grid_cap, max_pixels // self.factor**2)
        grid: tuple[int, int] | None = None
        if grid_cap >= max(1, self._min_grid):
            grid = self._scaled_grid(width_px, height_px, grid_cap)
            if not self._is_legal_grid(*grid):
                grid = self._closest_legal_grid(width_px, height_px, grid_cap)
        if grid is None:
            raise UnsupportedImageSizeError(
                f"image {width_px}x{height_px} cannot be downscaled to {grid_cap:,} tokens: "
                f"the model's processor enlarges images below {self._min_grid:,} tokens "
                f"and refuses aspect ratios above {MAX_ASPECT_RATIO}"
            )
        return grid[0] * self.factor, grid[1] * self.factor

    def describe(self) -> str:
        low, high = self._min_grid * self.factor**2, self.max_pixels // self.temporal_patch_size
        return (
            f"GLM smart_resize to multiples of {self.factor} px within [{low:,}, {high:,}] px "
            f"(processor bounds / {self.temporal_patch_size} frames); "
            f"tokens = h*w/{self.factor**2} + {self.wrapper_tokens} wrapper"
        )
