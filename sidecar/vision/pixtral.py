"""Pixtral and Mistral Small 3.1: rows of patch tokens, each row closed by a break token.

``PixtralImageProcessor`` shrinks an image whose longer side exceeds ``longest_edge``
(``ratio = max(h / L, w / L)``, each side floored after dividing by the ratio, not rounded),
then stretches each side up to a whole number of token cells of ``patch_size x
spatial_merge_size`` pixels. ``PixtralProcessor`` replaces ``[IMG]`` with ``cols x [IMG]`` and
an ``[IMG_BREAK]`` per row, the last break becoming ``[IMG_END]``: ``rows x (cols + 1)``.

Two edges follow the processor run on real images, not transformers' size-only count
(``PixtralProcessor._get_num_multimodal_tokens``):

- an image 1 or 3 px tall: the count builds an (h, w, 3) array and takes its first axis for
  channels, swapping the sides; the processor reads Pillow images the right way round;
- a side that the shrink floors to 0 px (e.g. 2000 x 1 with L = 1024): the processor refuses
  the image (an empty target size), while the count reports 0 tokens.

LightOnOCR (``from_lightonocr_configs``) is the same grid as vLLM 0.33 counts it for that model:
fitted into ``vision_config.image_size``, ``rows x cols`` tokens with no break or end tokens.

vLLM with ``--tokenizer-mode mistral`` counts with mistral_common instead, which rounds the
shrunken sides; the rule follows the Hugging Face processor (``--tokenizer-mode auto/hf``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from sidecar.errors import UnsupportedImageSizeError
from sidecar.search import largest_that_fits
from sidecar.vision import ImageTokens, NoPixelRange
from sidecar.vision.tiling import already_fits, within_caps


@dataclass(frozen=True, slots=True)
class PixtralRule(NoPixelRange):
    """Row-major patch tokens: ``rows x (cols + 1)`` for the resized image."""

    family: str
    patch_size: int
    merge_size: int
    longest_edge_px: int
    wrapper_tokens: int = 0  # the template's [IMG] is replaced, not wrapped
    row_breaks: bool = True  # False: LightOnOCR's rows x cols, no [IMG_BREAK] / [IMG_END]

    @classmethod
    def from_configs(
        cls, family: str, config: dict[str, Any], preprocessor: dict[str, Any]
    ) -> PixtralRule:
        """Build from ``config.json`` and the (pre)processor config values.

        ``patch_size`` is a dict in ``preprocessor_config.json`` and an int in
        ``processor_config.json``; ``spatial_merge_size`` is the processor's (default 1), or
        the model's ``config.json`` value when the processor file omits it.
        """
        vision = config.get("vision_config") or {}
        patch = preprocessor.get("patch_size") or vision.get("patch_size")
        if isinstance(patch, dict):
            patch = patch.get("height")
        merge = preprocessor.get("spatial_merge_size") or config.get("spatial_merge_size") or 1
        longest = (preprocessor.get("size") or {}).get("longest_edge") or vision.get("image_size")
        if patch is None or longest is None:
            raise ValueError("Pixtral config has no patch_size or longest_edge")
        return cls(family, int(patch), int(merge), int(longest))

    @classmethod
    def from_lightonocr_configs(
        cls, family: str, config: dict[str, Any], preprocessor: dict[str, Any]
    ) -> PixtralRule:
        """LightOnOCR, as vLLM 0.33's ``LightOnOCRProcessingInfo`` counts it: Pixtral's grid
        fitted into ``vision_config.image_size`` (not the processor's ``longest_edge``), cells of
        ``patch_size x spatial_merge_size``, one token a cell and no break or end tokens."""
        vision = config["vision_config"]
        merge = config.get("spatial_merge_size") or 1
        return cls(
            family,
            int(vision["patch_size"]),
            int(merge),
            int(vision["image_size"]),
            row_breaks=False,
        )

    @property
    def cell_px(self) -> int:
        """Side in pixels of the square one image token covers."""
        return self.patch_size * self.merge_size

    def grid(self, width_px: int, height_px: int) -> tuple[int, int]:
        """(cols, rows) of tokens; transformers' ``get_resize_output_image_size``."""
        height, width = height_px, width_px
        ratio = max(height / self.longest_edge_px, width / self.longest_edge_px)
        if ratio > 1:
            height = math.floor(height / ratio)
            width = math.floor(width / ratio)
        return (width - 1) // self.cell_px + 1, (height - 1) // self.cell_px + 1

    def image_tokens(self, width_px: int, height_px: int) -> ImageTokens:
        cols, rows = self.grid(width_px, height_px)
        if cols < 1 or rows < 1:
            raise UnsupportedImageSizeError(
                f"image {width_px}x{height_px} shrinks to zero pixels on one side when fitted "
                f"into {self.longest_edge_px} px; the model's processor refuses it"
            )
        tokens = rows * (cols + 1) if self.row_breaks else rows * cols
        return ImageTokens(tokens=tokens, wrapper_tokens=self.wrapper_tokens)

    def max_image_tokens(self) -> ImageTokens:
        # A longest_edge square keeps its size and fills the most rows and columns.
        return self.image_tokens(self.longest_edge_px, self.longest_edge_px)

    def downscale_size(
        self, width_px: int, height_px: int, *, max_tokens: int | None, max_pixels: int | None
    ) -> tuple[int, int]:
        if already_fits(self, width_px, height_px, max_tokens=max_tokens, max_pixels=max_pixels):
            return width_px, height_px
        # Candidates keep the aspect ratio and stay within longest_edge, so the processor does
        # not resize them; there tokens and pixels only grow with the longer side, and a binary
        # search finds the largest that fits both caps.
        long_side, short_side = max(width_px, height_px), min(width_px, height_px)

        def size(long_px: int) -> tuple[int, int]:
            short_px = max(1, short_side * long_px // long_side)
            return (long_px, short_px) if width_px >= height_px else (short_px, long_px)

        def fits(long_px: int) -> bool:
            width, height = size(long_px)
            cost = self.image_tokens(width, height).tokens
            return within_caps(cost, width, height, max_tokens=max_tokens, max_pixels=max_pixels)

        long_px = largest_that_fits(1, min(long_side, self.longest_edge_px), fits)
        if long_px is None:
            raise UnsupportedImageSizeError(
                f"image {width_px}x{height_px} cannot be downscaled to {max_tokens} tokens: "
                f"the smallest image costs {self.image_tokens(1, 1).tokens}"
            )
        return size(long_px)

    def describe(self) -> str:
        count = "rows x (cols + 1), one break per row" if self.row_breaks else "rows x cols"
        return f"fit into {self.longest_edge_px} px, cells of {self.cell_px} px; tokens = {count}"
