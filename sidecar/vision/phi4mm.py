"""Phi-4-multimodal: a global 448 px view and dynamic HD crops of 448 px, padding left out.

vLLM 0.33 counts each image itself (``phi4mm.py``, ``Phi4MMProcessingInfo``
``_compute_num_image_tokens``): the HD grid is ``ceil(w / 448) x ceil(h / 448)`` crops, or,
when that exceeds ``dynamic_hd`` crops, InternVL's closest aspect-ratio grid of 1 to
``dynamic_hd`` crops. The image is fitted into the grid and padded; a padding of a 14 px
patch or more is left out of the feature map, which SigLIP's 14 px patches and a 2 x 2
compression (rounded up) turn into ``feat_w x feat_h`` tokens, a newline per feature row, the
global view's 16 x 16 tokens with its 16 newlines, and one separator:
``tokens = 256 + 16 + 1 + feat_w x feat_h + feat_h``.

vLLM reads ``dynamic_hd`` and the grid's tie rule (``find_closest_aspect_ratio``) off the
checkpoint's remote processor (``processing_phi4mm.py``), which also resizes the image into
the grid and refuses one whose fitted side falls under 10 px ("the aspect ratio is very
extreme"): refused here as well. That processor is remote code, absent here; the renderer
tier proves the rule against vLLM's own count over a stand-in for it
(``tests/support/family_dirs.py``). Audio is not counted here: it keeps the per-item allowance.

``dynamic_hd`` is the one knob: from ``--mm-processor-kwargs`` it reaches the remote image
processor's attribute that vLLM reads (transformers applies it at load); every kwarg reaches
that remote processor, so any other is refused, and ``dynamic_hd`` under ``images_kwargs``
too (vLLM's count reads the attribute, not the call's kwargs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from sidecar.errors import UnsupportedImageSizeError
from sidecar.vision import ImageTokens
from sidecar.vision.internvl_chat import Grid, closest_grid
from sidecar.vision.tiling import Size, TiledDownscale

PROCESSOR_KNOBS = frozenset({"dynamic_hd"})
# phi4mm.py VISION_ENCODER_TO_PROCESSING_CONFIG: the only encoder vLLM knows.
SIGLIP_NAME = "siglip-so400m-patch14-448"
VIT_IMAGE_PX = 448
VIT_PATCH_PX = 14
TOKEN_COMPRESSION = 2
SEPARATOR_TOKENS = 1
# The remote processor's dynamic_preprocess refuses a fitted side under this.
MIN_FITTED_SIDE_PX = 10


def hd_grids(max_crops: int) -> list[Grid]:
    """``_find_target_aspect_ratio``'s candidates: every grid of 1..max_crops, by crop count."""
    ratios = {
        (i, j)
        for i in range(1, max_crops + 1)
        for j in range(1, max_crops + 1)
        if 1 <= i * j <= max_crops
    }
    return sorted(ratios, key=lambda x: x[0] * x[1])


def grid_shaped_candidates(
    width_px: int, height_px: int, grids: list[Grid], crop_px: int, min_scale_px: int
) -> list[Size]:
    """The image cut to each grid's shape, at whole crops and at the image's own scale: an HD
    transform that fits the image to a grid by its aspect ratio charges it that grid's crops."""
    candidates: list[Size] = []
    for columns, rows in grids:
        largest = min(width_px // columns, height_px // rows)
        for scale in {largest, min(largest, crop_px)}:
            if scale >= min_scale_px:
                candidates.append((columns * scale, rows * scale))
    return candidates


@dataclass(frozen=True, slots=True)
class Phi4MMRule(TiledDownscale):
    """``256 + 16 + 1 + feat_w x feat_h + feat_h`` over the unpadded HD feature map."""

    family: str
    dynamic_hd: int
    wrapper_tokens: int = 0  # the template's <|image_N|> is replaced

    @classmethod
    def from_configs(
        cls, family: str, config: dict[str, Any], preprocessor: dict[str, Any]
    ) -> Phi4MMRule:
        """``dynamic_hd`` from the knobs or preprocessor_config.json (36 for the checkpoint)."""
        encoder = config.get("img_processor")
        if encoder is not None and encoder != SIGLIP_NAME:
            raise ValueError(f"Phi-4-multimodal img_processor {encoder!r}: vLLM knows only SigLIP")
        dynamic_hd = preprocessor.get("dynamic_hd")
        if isinstance(dynamic_hd, bool) or not isinstance(dynamic_hd, int) or dynamic_hd < 1:
            raise ValueError(
                f"Phi-4-multimodal dynamic_hd must be a positive integer: {dynamic_hd!r}"
            )
        return cls(family, dynamic_hd)

    def grid(self, width_px: int, height_px: int) -> Grid:
        """``_find_target_aspect_ratio``: (columns, rows) of 448 px crops."""
        columns = math.ceil(width_px / float(VIT_IMAGE_PX))
        rows = math.ceil(height_px / float(VIT_IMAGE_PX))
        if columns * rows <= self.dynamic_hd:
            return columns, rows
        return closest_grid(width_px, height_px, hd_grids(self.dynamic_hd), VIT_IMAGE_PX)

    def image_tokens(self, width_px: int, height_px: int) -> ImageTokens:
        columns, rows = self.grid(width_px, height_px)
        target_w, target_h = VIT_IMAGE_PX * columns, VIT_IMAGE_PX * rows
        ratio_w, ratio_h = target_w / width_px, target_h / height_px
        # _get_padding_size and the remote processor's resize, float for float.
        if ratio_w < ratio_h:
            fitted = (target_w, int(height_px * ratio_w))
            pad_w, pad_h = 0, target_h - fitted[1]
        else:
            fitted = (int(width_px * ratio_h), target_h)
            pad_w, pad_h = target_w - fitted[0], 0
        if min(fitted) < MIN_FITTED_SIDE_PX:
            raise UnsupportedImageSizeError(
                f"image {width_px}x{height_px} fits its {columns}x{rows} crops at "
                f"{fitted[0]}x{fitted[1]} px: Phi-4-multimodal's processor refuses a side "
                f"under {MIN_FITTED_SIDE_PX} px (the aspect ratio is very extreme)"
            )
        feat_w, feat_h = target_w // VIT_PATCH_PX, target_h // VIT_PATCH_PX
        if pad_w >= VIT_PATCH_PX:
            feat_w -= pad_w // VIT_PATCH_PX
        elif pad_h >= VIT_PATCH_PX:
            feat_h -= pad_h // VIT_PATCH_PX
        hd_w, hd_h = -(-feat_w // TOKEN_COMPRESSION), -(-feat_h // TOKEN_COMPRESSION)
        return ImageTokens(
            tokens=self.global_tokens() + SEPARATOR_TOKENS + hd_w * hd_h + hd_h,
            wrapper_tokens=self.wrapper_tokens,
        )

    @staticmethod
    def global_tokens() -> int:
        """The global view's 16 x 16 tokens and its 16 newlines."""
        side = VIT_IMAGE_PX // VIT_PATCH_PX // TOKEN_COMPRESSION
        return side * side + side

    def max_image_tokens(self) -> ImageTokens:
        # An unpadded grid costs the most: 16 x 16 per crop and 16 newlines per row.
        side = VIT_IMAGE_PX // VIT_PATCH_PX // TOKEN_COMPRESSION
        most = max(side * side * c * r + side * r for c, r in hd_grids(self.dynamic_hd))
        return ImageTokens(
            tokens=self.global_tokens() + SEPARATOR_TOKENS + most,
            wrapper_tokens=self.wrapper_tokens,
        )

    def downscale_candidates(self, width_px: int, height_px: int) -> list[Size]:
        # A smaller crop side is refused.
        return grid_shaped_candidates(
            width_px, height_px, hd_grids(self.dynamic_hd), VIT_IMAGE_PX, MIN_FITTED_SIDE_PX
        )

    def describe(self) -> str:
        return (
            f"a global 448 px view + 1 to {self.dynamic_hd} HD crops of 448 px, padding left "
            f"out; up to {self.max_image_tokens().tokens:,} tokens"
        )
