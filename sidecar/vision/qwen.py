"""Qwen2-VL, Qwen2.5-VL and Qwen3-VL: ``smart_resize`` to multiples of patch x merge.

The processor rounds each side to a multiple of ``factor = patch_size * merge_size``,
then scales the image into ``[min_pixels, max_pixels]`` keeping the aspect ratio, and
emits ``(h / patch) * (w / patch) / merge**2`` tokens. The resize is transformers'
``smart_resize`` line for line (``sidecar.vision.smart_resize``, re-exported here); this module
adds the rule and its downscale: a grid search over sizes that the resize leaves unchanged.
Subclasses (GLM-4.1V) change what one token costs against the bounds (``_cell_pixels``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from sidecar.errors import UnsupportedImageSizeError
from sidecar.vision import ImageTokens
from sidecar.vision.smart_resize import MAX_ASPECT_RATIO as MAX_ASPECT_RATIO
from sidecar.vision.smart_resize import smart_resize as smart_resize
from sidecar.vision.tiling import already_fits

QWEN_WRAPPER_TOKENS = 2  # <|vision_start|> and <|vision_end|> around each image
# vLLM 0.33's Alpamayo2SuperConfig defaults: the reference implementation's per-image pixel
# budget, which the checkpoint's preprocessor config does not carry.
ALPAMAYO2_SUPER_MIN_PIXELS = 163_840
ALPAMAYO2_SUPER_MAX_PIXELS = 196_608


@dataclass(frozen=True, slots=True)
class QwenSmartResizeRule:
    """Dynamic resolution: tokens = resized_h * resized_w / (patch * merge)**2."""

    family: str
    patch_size: int
    merge_size: int
    min_pixels: int
    max_pixels: int
    wrapper_tokens: int = QWEN_WRAPPER_TOKENS

    @classmethod
    def from_configs(
        cls, family: str, config: dict[str, Any], preprocessor: dict[str, Any]
    ) -> QwenSmartResizeRule:
        """Build from ``config.json`` and ``preprocessor_config.json`` values."""
        vision = config.get("vision_config", {})
        size = preprocessor.get("size") or {}
        patch = int(preprocessor.get("patch_size") or vision.get("patch_size") or 14)
        merge = int(preprocessor.get("merge_size") or vision.get("spatial_merge_size") or 2)
        min_pixels = preprocessor.get("min_pixels") or size.get("shortest_edge")
        max_pixels = preprocessor.get("max_pixels") or size.get("longest_edge")
        if min_pixels is None or max_pixels is None:
            raise ValueError("preprocessor config has no min_pixels/max_pixels or size edges")
        return cls(family, patch, merge, int(min_pixels), int(max_pixels))

    @classmethod
    def from_alpamayo2_super_configs(
        cls, family: str, config: dict[str, Any], preprocessor: dict[str, Any]
    ) -> QwenSmartResizeRule:
        """Qwen3-VL's rule over the bounds Alpamayo2SuperProcessingInfo.get_hf_processor sets:
        ``config.json``'s ``min_pixels`` / ``max_pixels`` (the config class's defaults where
        absent) become the image processor's size when both are set; a null keeps the
        processor's own. ``config`` is the one vLLM's config class exposes, ``vlm_config``'s
        towers lifted to the top (``Architecture.lifted_key``)."""
        min_pixels = config.get("min_pixels", ALPAMAYO2_SUPER_MIN_PIXELS)
        max_pixels = config.get("max_pixels", ALPAMAYO2_SUPER_MAX_PIXELS)
        if min_pixels is not None and max_pixels is not None:
            preprocessor = {**preprocessor, "min_pixels": min_pixels, "max_pixels": max_pixels}
        return cls.from_configs(family, config, preprocessor)

    @property
    def factor(self) -> int:
        """Side length in pixels that one merged token covers."""
        return self.patch_size * self.merge_size

    def resized_size(self, width_px: int, height_px: int) -> tuple[int, int]:
        """(width, height) after the processor's resize."""
        h, w = smart_resize(
            height_px,
            width_px,
            factor=self.factor,
            min_pixels=self.min_pixels,
            max_pixels=self.max_pixels,
        )
        return w, h

    def image_tokens(self, width_px: int, height_px: int) -> ImageTokens:
        w, h = self.resized_size(width_px, height_px)
        return ImageTokens(
            tokens=(h // self.factor) * (w // self.factor), wrapper_tokens=self.wrapper_tokens
        )

    def max_image_tokens(self) -> ImageTokens:
        # vLLM profiles with max_pixels // cell tokens, factorised into a legal grid.
        return ImageTokens(
            tokens=self.max_pixels // self._cell_pixels, wrapper_tokens=self.wrapper_tokens
        )

    def downscale_size(
        self, width_px: int, height_px: int, *, max_tokens: int | None, max_pixels: int | None
    ) -> tuple[int, int]:
        if already_fits(self, width_px, height_px, max_tokens=max_tokens, max_pixels=max_pixels):
            return width_px, height_px
        # Target sides are multiples of the factor inside [min_pixels, max_pixels], with an
        # aspect ratio the processor accepts: smart_resize leaves such a size unchanged, so the
        # re-probed cost is exactly the grid chosen here.
        grid_cap = self.max_pixels // self._cell_pixels
        if max_tokens is not None:
            grid_cap = min(grid_cap, max_tokens)
        if max_pixels is not None:
            grid_cap = min(grid_cap, max_pixels // self.factor**2)
        grid: tuple[int, int] | None = None
        if grid_cap >= max(1, self._min_grid):
            grid = self._scaled_grid(width_px, height_px, grid_cap)
            if not self._is_legal_grid(*grid):
                # Flooring an elongated image can leave it under min_pixels or over the aspect
                # limit; then take the legal grid closest to the original's aspect ratio.
                grid = self._closest_legal_grid(width_px, height_px, grid_cap)
        if grid is None:
            raise UnsupportedImageSizeError(
                f"image {width_px}x{height_px} cannot be downscaled to {grid_cap:,} tokens: "
                f"the model's processor enlarges images below {self._enlarged_below} "
                f"and refuses aspect ratios above {MAX_ASPECT_RATIO}"
            )
        return grid[0] * self.factor, grid[1] * self.factor

    @property
    def _cell_pixels(self) -> int:
        """Pixels one token costs against ``[min_pixels, max_pixels]``: one factor x factor cell."""
        return self.factor**2

    @property
    def _enlarged_below(self) -> str:
        """The smallest size smart_resize leaves unenlarged, in the refusal's words."""
        return f"{self.min_pixels:,} pixels"

    @property
    def _min_grid(self) -> int:
        """Fewest grid cells smart_resize leaves unenlarged."""
        return -(-self.min_pixels // self._cell_pixels)

    def _is_legal_grid(self, grid_w: int, grid_h: int) -> bool:
        """Whether smart_resize keeps this grid's size as it is, neither enlarged nor refused."""
        long_side, short_side = max(grid_w, grid_h), min(grid_w, grid_h)
        return grid_w * grid_h >= self._min_grid and long_side <= MAX_ASPECT_RATIO * short_side

    def _scaled_grid(self, width_px: int, height_px: int, grid_cap: int) -> tuple[int, int]:
        """(columns, rows) of the original scaled to ``grid_cap`` cells, not above its sides.

        Flooring both sides can waste almost a row and a column, so whole cells are added
        back while they fit, to the side further below its ideal first.
        """
        scale = min(1.0, math.sqrt(grid_cap * self.factor**2 / (width_px * height_px)))
        ideal_w, ideal_h = width_px * scale / self.factor, height_px * scale / self.factor
        limit_w, limit_h = max(1, width_px // self.factor), max(1, height_px // self.factor)
        grid_w = max(1, min(math.floor(ideal_w), limit_w))
        grid_h = max(1, min(math.floor(ideal_h), limit_h, grid_cap // grid_w))
        grid_w = max(1, min(grid_w, grid_cap // grid_h))
        while True:
            can_grow_w = grid_w < limit_w and (grid_w + 1) * grid_h <= grid_cap
            can_grow_h = grid_h < limit_h and grid_w * (grid_h + 1) <= grid_cap
            if can_grow_w and (not can_grow_h or grid_w / ideal_w <= grid_h / ideal_h):
                grid_w += 1
            elif can_grow_h:
                grid_h += 1
            else:
                return grid_w, grid_h

    def _closest_legal_grid(
        self, width_px: int, height_px: int, grid_cap: int
    ) -> tuple[int, int] | None:
        """The legal grid within the original's sides whose aspect ratio is nearest its own."""
        limit_w, limit_h = max(1, width_px // self.factor), max(1, height_px // self.factor)
        best: tuple[float, int, int, int] | None = None
        for grid_h in range(1, limit_h + 1):
            low = max(1, -(-self._min_grid // grid_h), -(-grid_h // MAX_ASPECT_RATIO))
            high = min(limit_w, grid_cap // grid_h, MAX_ASPECT_RATIO * grid_h)
            if low > high:
                continue
            grid_w = min(high, max(low, round(grid_h * width_px / height_px)))
            distortion = abs(math.log(grid_w * height_px / (grid_h * width_px)))
            candidate = (distortion, -grid_w * grid_h, grid_w, grid_h)
            best = candidate if best is None else min(best, candidate)
        return None if best is None else (best[2], best[3])

    def with_pixel_range(
        self, min_pixels: int | None, max_pixels: int | None
    ) -> QwenSmartResizeRule:
        return replace(
            self,
            min_pixels=self.min_pixels if min_pixels is None else min_pixels,
            max_pixels=self.max_pixels if max_pixels is None else max_pixels,
        )

    def describe(self) -> str:
        return (
            f"smart_resize to multiples of {self.factor} px within "
            f"[{self.min_pixels:,}, {self.max_pixels:,}] px; tokens = h*w/{self.factor**2} "
            f"+ {self.wrapper_tokens} wrapper"
        )
