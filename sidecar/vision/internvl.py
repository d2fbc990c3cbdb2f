"""InternVL (-hf checkpoints): GotOcr2 ``crop_to_patches`` into a grid of tiles plus a thumbnail.

The processor picks the grid of ``min_patches..max_patches`` tiles whose aspect ratio is
closest to the image's, favouring more tiles on a tie while the image's area exceeds half of
the grid's; it resizes the image onto that grid (distorting it to the grid's aspect ratio)
and adds a thumbnail tile when there is more than one tile. Each tile costs
``image_seq_length`` ``<IMG_CONTEXT>`` tokens, and ``<img>``/``</img>`` wrap them all:
``tokens = 2 + image_seq_length * tiles``. ``InternVLProcessor`` always crops
(``crop_to_patches=True`` in its images kwargs), whatever the image processor's file says.

The grid search is ``get_optimal_tiled_canvas`` line for line, float comparisons included.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from sidecar.vision import ImageTokens
from sidecar.vision.tiling import Size, TiledDownscale

Grid = tuple[int, int]  # (columns, rows)
BOUNDARY_TOKENS = 2  # <img> and </img>, emitted by the processor around each image


def tile_arrangements(min_tiles: int, max_tiles: int) -> list[Grid]:
    """``get_all_supported_aspect_ratios``: every grid of min..max tiles, fewest tiles first."""
    grids = [
        (columns, rows)
        for columns in range(1, max_tiles + 1)
        for rows in range(1, max_tiles + 1)
        if min_tiles <= columns * rows <= max_tiles
    ]
    return sorted(grids, key=lambda grid: grid[0] * grid[1])


def optimal_grid(width_px: int, height_px: int, tile: Size, min_tiles: int, max_tiles: int) -> Grid:
    """``get_optimal_tiled_canvas``: the grid the processor resizes the image onto."""
    aspect_ratio = width_px / height_px
    area = width_px * height_px
    best_ratio_diff = math.inf
    best = (1, 1)
    for grid in tile_arrangements(min_tiles, max_tiles):
        ratio_diff = abs(aspect_ratio - grid[0] / grid[1])
        if ratio_diff < best_ratio_diff:
            best_ratio_diff, best = ratio_diff, grid
        elif ratio_diff == best_ratio_diff and area > 0.5 * tile[1] * tile[0] * grid[0] * grid[1]:
            best = grid
    return best


@dataclass(frozen=True, slots=True)
class InternVLRule(TiledDownscale):
    """``2 + image_seq_length * (grid tiles + thumbnail)``."""

    family: str
    tile_width_px: int
    tile_height_px: int
    min_patches: int
    max_patches: int
    tokens_per_tile: int
    wrapper_tokens: int = 0  # the template's "<image>\n": the newline merges with text

    @classmethod
    def from_configs(
        cls, family: str, config: dict[str, Any], preprocessor: dict[str, Any]
    ) -> InternVLRule:
        """Build from ``config.json`` and the (pre)processor config values."""
        vision = config.get("vision_config") or {}
        image_size = _pair(vision.get("image_size") or 448)
        size = preprocessor.get("size") or {}
        tile_height = int(size.get("height") or image_size[0])
        tile_width = int(size.get("width") or image_size[1])
        tokens = preprocessor.get("image_seq_length") or config.get("image_seq_length")
        if tokens is None:
            patch = _pair(vision.get("patch_size") or 14)[0]
            ratio = float(config.get("downsample_ratio") or 0.5)
            tokens = int((image_size[0] // patch) ** 2 * ratio**2)
        return cls(
            family,
            tile_width,
            tile_height,
            int(preprocessor.get("min_patches", 1)),
            int(preprocessor.get("max_patches", 12)),
            int(tokens),
        )

    def tiles(self, width_px: int, height_px: int) -> int:
        """Tiles the processor emits: the grid, plus a thumbnail when the grid has several."""
        if self.max_patches <= 1:
            return 1
        columns, rows = optimal_grid(
            width_px,
            height_px,
            (self.tile_width_px, self.tile_height_px),
            self.min_patches,
            self.max_patches,
        )
        return columns * rows + 1 if columns * rows > 1 else 1

    def image_tokens(self, width_px: int, height_px: int) -> ImageTokens:
        return ImageTokens(
            tokens=BOUNDARY_TOKENS + self.tokens_per_tile * self.tiles(width_px, height_px),
            wrapper_tokens=self.wrapper_tokens,
        )

    def max_image_tokens(self) -> ImageTokens:
        most = self.max_patches + 1 if self.max_patches > 1 else 1
        return ImageTokens(
            tokens=BOUNDARY_TOKENS + self.tokens_per_tile * most,
            wrapper_tokens=self.wrapper_tokens,
        )

    def downscale_candidates(self, width_px: int, height_px: int) -> list[Size]:
        """The image cut to each grid's shape, at a few scales of tile."""
        # The grid follows the aspect ratio, so shrinking alone rarely lowers the cost. The
        # candidates land exactly on each smaller grid: the processor resizes the image to that
        # grid's shape anyway, so the tiles it sees are the ones it would cut from the original.
        candidates: list[Size] = []
        for columns, rows in tile_arrangements(self.min_patches, self.max_patches):
            largest = min(width_px // columns, height_px // rows)
            # Past sqrt(2) tiles' area per cell the tie rule moves to the grid twice as fine.
            steady = math.isqrt(2 * self.tile_width_px * self.tile_height_px)
            for scale in {largest, min(largest, self.tile_width_px), min(largest, steady)}:
                if scale >= 1:
                    candidates.append((columns * scale, rows * scale))
        return candidates

    def describe(self) -> str:
        return (
            f"{self.min_patches}-{self.max_patches} tiles of {self.tile_width_px}x"
            f"{self.tile_height_px} px + thumbnail; tokens = {BOUNDARY_TOKENS} + "
            f"{self.tokens_per_tile} per tile, up to {self.max_image_tokens().tokens:,}"
        )


def _pair(value: Any) -> tuple[int, int]:
    if isinstance(value, list | tuple):
        return int(value[0]), int(value[-1])
    return int(value), int(value)
