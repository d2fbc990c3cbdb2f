"""DeepSeek-OCR and DeepSeek-OCR-2: a padded global view plus, for a large image, tiles.

vLLM 0.33 counts these images itself (``deepseek_ocr.py`` / ``deepseek_ocr2.py``,
``*ProcessingInfo.get_num_image_tokens``) from its own module constants, never from the
model directory or the server's kwargs: the "Gundam" mode, a global view of ``BASE_SIZE``
(1,024 px) padded square, and, when either side exceeds the tile side (``IMAGE_SIZE``: 640 px
for OCR, 768 px for OCR-2), a grid of tiles of that side, 2 to ``MAX_CROPS`` (6) of them,
whose aspect ratio is closest to the image's (InternVL's ``find_closest_aspect_ratio``, ties
to more tiles while the image's area exceeds half of the grid's). Each view yields
``ceil(side / 16 / 4)`` cells a side:

* OCR (``strategy="v1"``): the global view's 16 rows end in a newline each (16 x 17), the
  tiles' rows too (``rows x 10`` rows of ``columns x 10 + 1``);
* OCR-2 (``"v2"``): no newlines (16 x 16, then ``rows x 12`` by ``columns x 12``);

plus one view separator: ``tokens = global + local + 1``. The template's ``<image>`` is
replaced by that run. The count depends on the image's own size only, whatever else the
request holds (vLLM passes its constant ``CROP_MODE`` for every image).

Knobs: vLLM's own ``image_size``/``base_size``/``strategy`` override the server's, so those
change nothing. ``crop_mode`` and ``max_crops`` do reach the HF processor, but not vLLM's
count: with ``crop_mode`` false or another ``max_crops`` the processor makes other tiles than
the placeholders vLLM counted, and the model's embeddings no longer fill them; the sidecar
refuses those values at start-up (their default values pass).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from sidecar.vision import SERVER_KWARGS, ImageTokens
from sidecar.vision.internvl_chat import closest_grid, target_ratios
from sidecar.vision.tiling import Size, TiledDownscale, fit_inside

# transformers_utils/processors/deepseek_ocr.py: BASE_SIZE, CROP_MODE, MIN_CROPS, MAX_CROPS;
# deepseek_ocr.py IMAGE_SIZE 640, deepseek_ocr2.py IMAGE_SIZE 768; the patch and downsample
# sizes hard-coded in both get_num_image_tokens.
BASE_SIZE_PX = 1024
OCR_TILE_SIZE_PX = 640
OCR2_TILE_SIZE_PX = 768
MIN_CROPS = 2
MAX_CROPS = 6
PATCH_SIZE_PX = 16
DOWNSAMPLE_RATIO = 4
SEPARATOR_TOKENS = 1  # the view separator after the views
# The server kwargs that reach vLLM's DeepSeek-OCR processor at all; only their defaults keep
# the processor's tiles equal to vLLM's count.
PROCESSOR_KNOBS = frozenset({"crop_mode", "max_crops", "image_size", "base_size", "strategy"})
_PRICED_ONLY_AT: dict[str, bool | int] = {"crop_mode": True, "max_crops": MAX_CROPS}


def view_cells(side_px: int) -> int:
    """Cells a side of one view: ``ceil((side // patch) / downsample)``."""
    return math.ceil((side_px // PATCH_SIZE_PX) / DOWNSAMPLE_RATIO)


@dataclass(frozen=True, slots=True)
class DeepseekOCRRule(TiledDownscale):
    """``global + local + 1``: the global view, the tile grid (if any), the separator."""

    family: str
    tile_size_px: int
    row_newlines: bool  # v1 (OCR): every row of cells ends in a newline token
    base_size_px: int = BASE_SIZE_PX
    wrapper_tokens: int = 0  # the template's <image> is replaced

    @classmethod
    def from_configs(
        cls, family: str, config: dict[str, Any], preprocessor: dict[str, Any]
    ) -> DeepseekOCRRule:
        """DeepSeek-OCR: 640 px tiles, newlines (``strategy="v1"``)."""
        _refuse_unpriced_knobs(preprocessor)
        return cls(family, OCR_TILE_SIZE_PX, row_newlines=True)

    @classmethod
    def from_ocr2_configs(
        cls, family: str, config: dict[str, Any], preprocessor: dict[str, Any]
    ) -> DeepseekOCRRule:
        """DeepSeek-OCR-2: 768 px tiles, no newlines (``strategy="v2"``)."""
        _refuse_unpriced_knobs(preprocessor)
        return cls(family, OCR2_TILE_SIZE_PX, row_newlines=False)

    def grid(self, width_px: int, height_px: int) -> tuple[int, int]:
        """(columns, rows) of tiles; (1, 1): no tiles, the global view alone."""
        if width_px <= self.tile_size_px and height_px <= self.tile_size_px:
            return 1, 1
        ratios = target_ratios(MIN_CROPS, MAX_CROPS)
        return closest_grid(width_px, height_px, ratios, self.tile_size_px)

    def tokens_for_grid(self, columns: int, rows: int) -> int:
        base = view_cells(self.base_size_px)
        cell = view_cells(self.tile_size_px)
        newline = 1 if self.row_newlines else 0
        global_view = base * (base + newline)
        local = 0 if columns * rows == 1 else (rows * cell) * (columns * cell + newline)
        return global_view + local + SEPARATOR_TOKENS

    def image_tokens(self, width_px: int, height_px: int) -> ImageTokens:
        return ImageTokens(
            tokens=self.tokens_for_grid(*self.grid(width_px, height_px)),
            wrapper_tokens=self.wrapper_tokens,
        )

    def max_image_tokens(self) -> ImageTokens:
        most = max(self.tokens_for_grid(c, r) for c, r in target_ratios(MIN_CROPS, MAX_CROPS))
        return ImageTokens(tokens=most, wrapper_tokens=self.wrapper_tokens)

    def downscale_candidates(self, width_px: int, height_px: int) -> list[Size]:
        """Untiled (within one tile), and each grid's shape at the tile side and below."""
        side = self.tile_size_px
        candidates = [fit_inside(width_px, height_px, side, side)]
        for columns, rows in target_ratios(MIN_CROPS, MAX_CROPS):
            largest = min(width_px // columns, height_px // rows)
            # Past one tile a side the grid stays; at the image's own scale it is the least
            # distorted one.
            for scale in {largest, min(largest, side)}:
                if scale >= 1:
                    candidates.append((columns * scale, rows * scale))
        return candidates

    def describe(self) -> str:
        lines = "with" if self.row_newlines else "without"
        return (
            f"global {self.base_size_px} px view + {MIN_CROPS}-{MAX_CROPS} tiles of "
            f"{self.tile_size_px} px past {self.tile_size_px} px a side, {lines} row "
            f"newlines, + separator; up to {self.max_image_tokens().tokens:,}"
        )


def _refuse_unpriced_knobs(preprocessor: dict[str, Any]) -> None:
    """Refuse a ``crop_mode`` or ``max_crops`` that makes vLLM's processor disagree with its
    own count (the other knobs are overridden by vLLM's values and change nothing)."""
    server = preprocessor.get(SERVER_KWARGS) or {}
    for name, priced in _PRICED_ONLY_AT.items():
        value = server.get(name, priced)
        if type(value) is not type(priced) or value != priced:
            raise ValueError(
                f"{name}={value!r}: vLLM 0.33 counts DeepSeek-OCR images with "
                f"{name}={priced!r} whatever the kwargs, while its processor tiles with this "
                "value: the model's embeddings would not fill the placeholders. Not priced"
            )
