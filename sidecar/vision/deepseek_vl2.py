"""DeepSeek-VL2: a padded global view plus the local views of its best candidate resolution.

vLLM 0.33 counts DeepSeek-VL2's images itself (``deepseek_vl2.py``,
``DeepseekVL2ProcessingInfo.get_num_image_tokens``) with its own processor
(``transformers_utils/processors/deepseek_vl2.py``), whose values are the checkpoint's
``processor_config.json`` (``candidate_resolutions``, ``patch_size``, ``downsample_ratio``).
The tile side is the first candidate's width. A view of that side yields
``h = ceil((side // patch) / downsample)`` cells a side, each row ending in a newline: the
global view ``h x (h + 1)``, one separator, and the local views of the candidate
``select_best_resolution`` picks (the most effective resolution, then the least waste),
``(rows x h) x (columns x h + 1)``.

The count depends on the rest of the prompt: vLLM crops (``cropping=len(images) <= 2``) only
when the prompt holds at most two images; with three or more every image gets one local view
(``1 x 1``). The rule cannot see the request, so it prices every image as cropped, the larger
count: exact for a prompt of one or two images, above vLLM's for each image of a prompt with
three or more (by the cropped count less ``2 x h x (h + 1) + 1``), never below it.

No ``--mm-processor-kwargs`` knob is priced (the count-neutral ones pass): vLLM fails every
image given ``candidate_resolutions`` (its processor cache cannot hash the nested list), and a
``patch_size`` or ``downsample_ratio`` moves vLLM's count but not the vision tower's
embeddings, which ``config.json`` shapes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sidecar.vision import ImageTokens
from sidecar.vision.tiling import Size, TiledDownscale, fit_inside

Resolution = tuple[int, int]  # (width, height) in px, as the processor iterates them
SEPARATOR_TOKENS = 1  # between the global and the local views


def select_best_resolution(width_px: int, height_px: int, candidates: Sequence[Resolution]) -> Size:
    """``DeepseekVLV2Processor.select_best_resolution``, float for float."""
    best_fit = candidates[0]
    max_effective_resolution = 0
    min_wasted_resolution = float("inf")
    for width, height in candidates:
        scale = min(width / width_px, height / height_px)
        downscaled_width, downscaled_height = int(width_px * scale), int(height_px * scale)
        effective_resolution = min(downscaled_width * downscaled_height, width_px * height_px)
        wasted_resolution = (width * height) - effective_resolution
        if effective_resolution > max_effective_resolution or (
            effective_resolution == max_effective_resolution
            and wasted_resolution < min_wasted_resolution
        ):
            max_effective_resolution = effective_resolution
            min_wasted_resolution = wasted_resolution
            best_fit = (width, height)
    return best_fit


@dataclass(frozen=True, slots=True)
class DeepseekVL2Rule(TiledDownscale):
    """``h (h + 1) + 1 + (rows h) (columns h + 1)`` for the best candidate's tiles."""

    family: str
    candidate_resolutions: tuple[Resolution, ...]
    cells_per_side: int  # h: ceil((tile side // patch) / downsample)
    wrapper_tokens: int = 0  # the template's <image> is replaced

    @classmethod
    def from_configs(
        cls, family: str, config: dict[str, Any], preprocessor: dict[str, Any]
    ) -> DeepseekVL2Rule:
        """Build from ``processor_config.json``'s values."""
        raw = preprocessor.get("candidate_resolutions")
        if not raw:
            raise ValueError("DeepSeek-VL2 processor config has no candidate_resolutions")
        candidates = tuple((int(w), int(h)) for w, h in raw)
        patch = int(preprocessor.get("patch_size") or 0)
        downsample = int(preprocessor.get("downsample_ratio") or 0)
        if patch < 1 or downsample < 1:
            raise ValueError("DeepSeek-VL2 processor config has no patch_size/downsample_ratio")
        side = candidates[0][0]
        if any(w < side or h < side for w, h in candidates):
            # A candidate under one tile a side would make the uncropped count the larger.
            raise ValueError(f"DeepSeek-VL2 candidate resolutions under {side} px not priced")
        return cls(family, candidates, math.ceil((side // patch) / downsample))

    @property
    def tile_size_px(self) -> int:
        return self.candidate_resolutions[0][0]

    def grid(self, width_px: int, height_px: int) -> tuple[int, int]:
        """(columns, rows) of local views, as cropped (a prompt of at most two images)."""
        best_width, best_height = select_best_resolution(
            width_px, height_px, self.candidate_resolutions
        )
        return best_width // self.tile_size_px, best_height // self.tile_size_px

    def tokens_for_grid(self, columns: int, rows: int) -> int:
        h = self.cells_per_side
        return h * (h + 1) + SEPARATOR_TOKENS + (rows * h) * (columns * h + 1)

    def uncropped_tokens(self) -> int:
        """vLLM's count for every image of a prompt with three or more images."""
        return self.tokens_for_grid(1, 1)

    def image_tokens(self, width_px: int, height_px: int) -> ImageTokens:
        return ImageTokens(
            tokens=self.tokens_for_grid(*self.grid(width_px, height_px)),
            wrapper_tokens=self.wrapper_tokens,
        )

    def max_image_tokens(self) -> ImageTokens:
        side = self.tile_size_px
        grids = [(w // side, h // side) for w, h in self.candidate_resolutions]
        most = max(self.tokens_for_grid(columns, rows) for columns, rows in grids)
        return ImageTokens(tokens=most, wrapper_tokens=self.wrapper_tokens)

    def downscale_candidates(self, width_px: int, height_px: int) -> list[Size]:
        """The image fitted inside each candidate resolution: each lands on that candidate."""
        return [fit_inside(width_px, height_px, w, h) for w, h in self.candidate_resolutions]

    def describe(self) -> str:
        return (
            f"global {self.tile_size_px} px view + local views of the best of "
            f"{len(self.candidate_resolutions)} candidate resolutions ({self.cells_per_side} "
            f"cells a tile side, row newlines) + separator, priced as cropped; up to "
            f"{self.max_image_tokens().tokens:,}"
        )
