"""Phi-3-Vision / Phi-3.5-Vision: a global 336 px view and HD crops of 336 px, 144 tokens each.

vLLM 0.33 does not count these images itself: ``phi3v.py``'s
``Phi3VProcessingInfo.get_num_image_tokens`` returns the checkpoint's remote processor's
``calc_num_image_tokens_from_image_size`` (``processing_phi3_v.py``), and its prompt update
puts that many placeholder ids in place of ``<|image_N|>``. That count is the HD transform's:
the image turned so its longer side is its width, the longest side scaled to 336 px x the
largest ``scale`` with ``scale x ceil(scale / ratio) <= num_crops`` (``ratio`` the longer side
over the shorter), the shorter side by the aspect ratio (truncated) and padded to a multiple of
336 px; over the padded ``rows x columns`` crops of 336 px, each 12 x 12 tokens with a newline
a row, the global view's 144 tokens with its 12 newlines, and one separator:
``tokens = (rows x columns + 1) x 144 + 1 + (rows + 1) x 12``.

The remote processor resizes each image to that size before vLLM prices it, and torchvision
refuses a side of 0 px: an image whose shorter side scales to under 1 px (1 x 16,384 at 16
crops) is refused here as vLLM's processing refuses it, though the count alone would give it a
price. That processor is remote code, absent here; the renderer tier proves the rule against
vLLM's own count over a stand-in for it written from its public source
(``tests/support/family_dirs.py``).

``num_crops`` is the one knob: the image processor's attribute the count reads, set from
preprocessor_config.json (4 for Phi-3.5-vision-instruct, 16 for Phi-3-vision-128k-instruct)
or from ``--mm-processor-kwargs`` at the top level, which vLLM hands to the processor's
``from_pretrained``. Every kwarg reaches that remote processor, so any other is refused, and
``num_crops`` under ``images_kwargs`` too (vLLM drops it there: the count keeps the file's).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from sidecar.errors import UnsupportedImageSizeError
from sidecar.vision import ImageTokens
from sidecar.vision.phi4mm import grid_shaped_candidates, hd_grids
from sidecar.vision.tiling import Size, TiledDownscale

PROCESSOR_KNOBS = frozenset({"num_crops"})
CROP_PX = 336  # CLIP ViT-L/14 at 336 px
CROP_TOKENS = 144  # 24 x 24 patches merged 2 x 2
CROP_SIDE_TOKENS = 12  # a newline a row of 12 tokens
SEPARATOR_TOKENS = 1


@dataclass(frozen=True, slots=True)
class Phi3VRule(TiledDownscale):
    """``(rows x columns + 1) x 144 + 1 + (rows + 1) x 12`` over the padded HD transform."""

    family: str
    num_crops: int
    wrapper_tokens: int = 0  # the template's <|image_N|> is replaced

    @classmethod
    def from_configs(
        cls, family: str, config: dict[str, Any], preprocessor: dict[str, Any]
    ) -> Phi3VRule:
        """``num_crops`` from the knobs or preprocessor_config.json (the remote image
        processor's own default, 1, where the file sets none)."""
        del config  # vLLM's tower is fixed (CLIP ViT-L/14 at 336 px); the count ignores it
        num_crops = preprocessor.get("num_crops", 1)
        if isinstance(num_crops, bool) or not isinstance(num_crops, int) or num_crops < 1:
            # At 0 every image resizes to 0 px and vLLM's processing fails.
            raise ValueError(f"Phi-3-Vision num_crops must be a positive integer: {num_crops!r}")
        return cls(family, num_crops)

    def hd_size(self, width_px: int, height_px: int) -> tuple[int, int]:
        """``calc_hd_transform_size``: the resized and padded (width, height), float for float;
        raises where the resize leaves a side of 0 px."""
        transposed = width_px < height_px
        long_px, short_px = (height_px, width_px) if transposed else (width_px, height_px)
        ratio = long_px / short_px
        scale = 1
        while scale * math.ceil(scale / ratio) <= self.num_crops:
            scale += 1
        scale -= 1
        new_long = int(scale * CROP_PX)
        new_short = int(new_long / ratio)
        if new_short == 0:
            raise UnsupportedImageSizeError(
                f"image {width_px}x{height_px} resizes to {new_long}x0 px at {self.num_crops} "
                f"crops: Phi-3-Vision's processor refuses it (height and width must be > 0)"
            )
        padded_short = int(math.ceil(new_short / CROP_PX) * CROP_PX)
        return (padded_short, new_long) if transposed else (new_long, padded_short)

    def image_tokens(self, width_px: int, height_px: int) -> ImageTokens:
        new_width, new_height = self.hd_size(width_px, height_px)
        return ImageTokens(
            tokens=self.grid_tokens(new_width // CROP_PX, new_height // CROP_PX),
            wrapper_tokens=self.wrapper_tokens,
        )

    @staticmethod
    def grid_tokens(columns: int, rows: int) -> int:
        return (rows * columns + 1) * CROP_TOKENS + SEPARATOR_TOKENS + (rows + 1) * CROP_SIDE_TOKENS

    def max_image_tokens(self) -> ImageTokens:
        # The HD transform never makes more than num_crops crops; a tall image's column of
        # them has the most rows, so the most newlines.
        most = max(self.grid_tokens(c, r) for c, r in hd_grids(self.num_crops))
        return ImageTokens(tokens=most, wrapper_tokens=self.wrapper_tokens)

    def downscale_candidates(self, width_px: int, height_px: int) -> list[Size]:
        # The count follows the aspect ratio alone: only a size of another shape costs less.
        return grid_shaped_candidates(width_px, height_px, hd_grids(self.num_crops), CROP_PX, 1)

    def describe(self) -> str:
        return (
            f"a global 336 px view + up to {self.num_crops} HD crops of 336 px, 144 tokens "
            f"each; up to {self.max_image_tokens().tokens:,} tokens"
        )
